"""NeocorRAG evidence chains as extra evidence for the verifier.

:class:`ChainEvidenceVerifier` wraps any :class:`~neocorrag_core.belief.components.Verifier`:
before each judgment it mines the evidence chains of the current passages with an
:class:`~neocorrag_core.EvidenceChainMiner` and shows them to the wrapped verifier as one
extra document, first, so that a multi-hop link the passages only make implicitly
(``A - located in -> B - capital -> C``) is in front of the model when it judges support
and the missing fact. The chain document is not evidence the workspace holds: its id is
reserved, the wrapper removes it from the reply's ``drop_ids``, and the controller ignores
drop ids that are not in the workspace anyway, so it can never be dropped or answered from.

Its text is part of the wrapped verifier's prompt, so a verifier that counts its prompt
(:class:`~neocorrag_core.belief.LMVerifier` does) counts the chain tokens too; tokens the
miner's own LM spends (``decoding="beam"`` or ``"rank"``) are added to the usage.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any, Literal

from neocorrag_core.chains.miner import EvidenceChainMiner
from neocorrag_core.errors import ConfigError
from neocorrag_core.rendering import CHAIN_BLOCK_HEADER, chain_text
from neocorrag_core.types import CHAIN_FORMATS, ChainFormat, Passage
from neocorrag_core.validation import check_choice, check_instance

from .components import Usage, Verifier, VerifierReply

CHAIN_PASSAGE_ID = "neocorrag:evidence-chains"
"""The id of the chain document (``#2``, ``#3``... appended if a real passage has it)."""
CHAIN_PASSAGE_TITLE = "Evidence chains linking the other documents"
"""Its title: the verifier renders documents as ``[n] title: text``, so the model reads
``[1] Evidence chains linking the other documents: 1. A - r -> B ...``."""

Decoding = Literal["none", "beam", "rank"]


class ChainEvidenceVerifier:
    """A verifier that also shows the NeocorRAG evidence chains of the passages.

    Args:
        verifier: the verifier to wrap (e.g. an :class:`~neocorrag_core.belief.LMVerifier`).
            It sees one document more than the workspace holds: give it room for it
            (``PromptBudget(max_passages=config.max_evidence + 1)``), or its last passage
            is not shown when the workspace is full.
        miner: mines the chains (default: an ``EvidenceChainMiner()``, which reads triples
            from ``metadata["triples"]``; pass one with a
            :class:`~neocorrag_core.triples.DefaultTripleSource` for documents without).
        decoding: how the miner chooses chains (``None`` = its configuration's, by
            default ``"none"``: by search score, no LM).
        chain_format: how the chains are written for the verifier, whatever the miner's
            own setting (which is for a reader): ``"compact"`` by default, every chain
            with each fact once, the format the chain verifier is calibrated for;
            ``"linking"`` shows only the chains that connect
            passages; ``"full"`` every chain whole. The miner's ``max_chain_lines`` (a
            reader's cap) is ignored too: the verifier sees every line.

    When the passages yield no chain (no triples, no path), the wrapped verifier sees the
    passages alone. Thread-safe as far as the wrapped verifier and the miner are.
    """

    def __init__(
        self,
        verifier: Verifier,
        miner: EvidenceChainMiner | None = None,
        *,
        decoding: Decoding | None = None,
        chain_format: ChainFormat = "compact",
    ) -> None:
        check_instance("ChainEvidenceVerifier", "verifier", verifier, Verifier)
        check_instance("ChainEvidenceVerifier", "miner", miner, EvidenceChainMiner, optional=True)
        if decoding is not None and decoding not in ("none", "beam", "rank"):
            raise ConfigError(
                "ChainEvidenceVerifier: decoding must be 'none', 'beam', 'rank' or None, "
                f"got {decoding!r}"
            )
        # "none" would show the verifier nothing: leave the wrapper out instead.
        shown_formats = [f for f in CHAIN_FORMATS if f != "none"]
        check_choice("ChainEvidenceVerifier", "chain_format", chain_format, shown_formats)
        self.verifier = verifier
        self.miner = miner if miner is not None else EvidenceChainMiner()
        self.decoding = decoding
        self.chain_format: ChainFormat = chain_format

    def chain_passage(
        self, question: str, passages: Sequence[Passage]
    ) -> tuple[Passage | None, Usage]:
        """The chain document for ``passages`` (``None`` when no chain was found) and the
        tokens mining spent."""
        overrides: dict[str, Any] = {} if self.decoding is None else {"decoding": self.decoding}
        result = self.miner.mine(question, list(passages), **overrides)
        usage = Usage(int(result.prompt_tokens), int(result.generated_tokens))
        # Every line: the miner's line cap is for a reader, like its format.
        block = chain_text(replace(result, chain_format=self.chain_format, max_chain_lines=None))
        return chain_document(block, passages), usage

    def verify(
        self, question: str, passages: Sequence[Passage], draft_answer: str
    ) -> tuple[VerifierReply, Usage]:
        """The wrapped verifier's judgment of the chain document and ``passages``."""
        chain, mined = self.chain_passage(question, passages)
        shown = list(passages) if chain is None else [chain, *passages]
        reply, usage = self.verifier.verify(question, shown, draft_answer)
        if chain is not None:
            reply = replace(reply, drop_ids=tuple(i for i in reply.drop_ids if i != chain.id))
        return reply, usage + mined


def chain_document(block: str, passages: Sequence[Passage]) -> Passage | None:
    """A rendered chain block as one document to show beside ``passages`` (an id none of
    them has, :data:`CHAIN_PASSAGE_TITLE`); ``None`` for an empty block."""
    if not block:
        return None
    # The title says what the block is; the header would only repeat it.
    body = block.removeprefix(CHAIN_BLOCK_HEADER).strip()
    return Passage(id=_free_id({p.id for p in passages}), text=body, title=CHAIN_PASSAGE_TITLE)


def _free_id(taken: set[str]) -> str:
    candidate, n = CHAIN_PASSAGE_ID, 1
    while candidate in taken:
        n += 1
        candidate = f"{CHAIN_PASSAGE_ID}#{n}"
    return candidate


__all__ = ["CHAIN_PASSAGE_ID", "CHAIN_PASSAGE_TITLE", "ChainEvidenceVerifier", "chain_document"]
