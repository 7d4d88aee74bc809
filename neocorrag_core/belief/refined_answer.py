"""NeocorRAG refinement of the evidence the answer generator reads.

:class:`RefinedAnswerGenerator` wraps any
:class:`~neocorrag_core.belief.components.AnswerGenerator`: before each (draft or final)
answer it refines the workspace's passages with an
:class:`~neocorrag_core.EvidenceChainMiner` (keep the passages the miner keeps, cut to
their evidence sentences) and lets the wrapped generator answer from those. The workspace
itself is not touched: the verifier, the query writer and the relevance scorer still see
every passage, a dropped passage is only hidden from this one prompt, and the episode's
evidence is the workspace's. Why: after two searches the workspace holds about eight
passages of which two or three are evidence; the generator answers better, in fewer
tokens, from the refined passages than from all of them.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

from neocorrag_core.chains.miner import EvidenceChainMiner
from neocorrag_core.rendering import chain_text
from neocorrag_core.types import Passage
from neocorrag_core.validation import check_instance

from .chains import chain_document
from .components import AnswerGenerator, DraftAnswer, Usage

# The version of how the answer's evidence is refined, bumped on any change, is the
# eval-cache key REFINED_ANSWER_VERSION in neocorrag_core/eval/belief_methods.py.


def refine_for_answer(
    miner: EvidenceChainMiner,
    question: str,
    passages: Sequence[Passage],
    keep_whole: Collection[str] = (),
) -> tuple[list[Passage], Usage]:
    """The passages an answer generator is shown for ``passages``, and the tokens mining
    spent: what ``miner`` keeps of them (cut to their evidence sentences), its chain block
    (if its format writes one) as one more document after them.

    Passages whose id is in ``keep_whole`` are not mined and are shown whole; the rest are
    refined on their own. Every passage shown keeps its place in ``passages``."""
    whole = set(keep_whole)
    mined = [p for p in passages if p.id not in whole]
    if not mined:
        return list(passages), Usage()
    result = miner.mine(question, mined)
    kept = {p.id: p for p in result.passages}
    shown = [kept.get(p.id, p) for p in passages if p.id in whole or p.id in kept]
    chains = chain_document(chain_text(result), shown)
    if chains is not None:
        # Last, unlike the verifier's: a generator whose prompt holds as many documents as
        # the workspace (the default budget) then cuts the block, never a passage.
        shown.append(chains)
    return shown, Usage(int(result.prompt_tokens), int(result.generated_tokens))


class RefinedAnswerGenerator:
    """An answer generator that reads the NeocorRAG-refined evidence.

    Args:
        generator: the generator to wrap (e.g. an
            :class:`~neocorrag_core.belief.LMAnswerGenerator`).
        miner: refines the passages (default: an ``EvidenceChainMiner()``, which reads
            triples from ``metadata["triples"]``; pass one with a
            :class:`~neocorrag_core.triples.DefaultTripleSource` for documents without).
            Its configuration decides what is kept (``keep``, ``passage_focus``) and
            whether its chain block is shown (``chain_format``, ``"none"`` by default), as
            one more document after the passages (a generator that shows at most the
            workspace's size drops the block when every passage is kept).

    The miner never leaves the generator with nothing: it keeps every passage when it
    would keep none. Tokens the miner's own LM spends (``decoding="beam"`` or ``"rank"``)
    are added to the usage. Thread-safe as far as the wrapped generator and the miner are.
    """

    def __init__(self, generator: AnswerGenerator, miner: EvidenceChainMiner | None = None) -> None:
        check_instance("RefinedAnswerGenerator", "generator", generator, AnswerGenerator)
        check_instance("RefinedAnswerGenerator", "miner", miner, EvidenceChainMiner, optional=True)
        self.generator = generator
        self.miner = miner if miner is not None else EvidenceChainMiner()

    def refined(
        self, question: str, passages: Sequence[Passage], keep_whole: Collection[str] = ()
    ) -> tuple[list[Passage], Usage]:
        """The passages the generator is shown for ``passages``, and the tokens mining
        spent (:func:`refine_for_answer` with this wrapper's miner)."""
        return refine_for_answer(self.miner, question, passages, keep_whole)

    def answer(
        self, question: str, passages: Sequence[Passage], keep_whole: Collection[str] = ()
    ) -> tuple[DraftAnswer, Usage]:
        """The wrapped generator's answer from the refined ``passages`` (``keep_whole``: ids
        shown whole, not mined; see :meth:`refined`)."""
        shown, mined = self.refined(question, passages, keep_whole)
        draft, usage = self.generator.answer(question, shown)
        return draft, usage + mined


__all__ = ["RefinedAnswerGenerator", "refine_for_answer"]
