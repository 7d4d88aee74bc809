"""The controller's four model-backed components, built together on shared models.

:func:`default_components` builds the verifier, the answer generator, the query writer and
the relevance scorer on one :class:`~neocorrag_core.models.LazyModels`, so the LM and the
embedder load once, on first use, and can be shared with the miner or the reformulator
(``models=miner.models``). A chat model (:class:`~neocorrag_core.lm.chat.ChatModel`: a
LangChain or LlamaIndex LLM wrapped by its adapter's ``as_chat_model``, or your own) serves
the three LM components; relevance always runs on the local embedder.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from neocorrag_core.chains.config import MinerConfig
from neocorrag_core.chains.miner import EvidenceChainMiner
from neocorrag_core.lm.chat import chat_model_or_none
from neocorrag_core.models import LazyModels
from neocorrag_core.triples import DefaultTripleSource, TripleSource

from .answer import LMAnswerGenerator
from .chains import ChainEvidenceVerifier, Decoding
from .components import AnswerGenerator, QueryWriter, RelevanceScorer, Verifier
from .config import BeliefConfig
from .relevance import EmbeddingRelevance
from .verifier import LMVerifier, PromptBudget
from .writer import LMQueryWriter


@dataclass(frozen=True)
class BeliefComponents:
    """The four components :class:`~neocorrag_core.belief.BeliefController` takes."""

    verifier: Verifier
    generator: AnswerGenerator
    writer: QueryWriter
    relevance: RelevanceScorer

    def as_kwargs(self) -> dict[str, Any]:
        """The components as the controller's keyword arguments."""
        return {
            "verifier": self.verifier,
            "generator": self.generator,
            "writer": self.writer,
            "relevance": self.relevance,
        }


def shared_models(
    lm: Any = None, embedder: Any = None, *, show_progress: bool = False
) -> LazyModels:
    """The lazily loaded models the components share: the embedder, and ``lm`` unless it is
    a chat model (which the components ask directly); anything that is neither a local LM
    spec nor a :class:`~neocorrag_core.lm.chat.ChatModel` is a
    :class:`~neocorrag_core.errors.ConfigError` naming the fix."""
    local = None if chat_model_or_none("shared_models", lm) is not None else lm
    return LazyModels(embedder=embedder, lm=local, show_progress=show_progress)


def answer_miner(
    models: LazyModels,
    triple_source: TripleSource | None = None,
    config: MinerConfig | None = None,
) -> EvidenceChainMiner:
    """The miner that refines the answer's evidence (``BeliefConfig.refine_answer``), on the
    components' models: ``triple_source``, or by default passage metadata, else the triple
    store, else extraction (:class:`~neocorrag_core.triples.DefaultTripleSource`);
    ``config`` (default: the miner's defaults) decides what is kept."""
    source = DefaultTripleSource() if triple_source is None else triple_source
    miner = EvidenceChainMiner(config, triple_source=source)
    miner.models = models  # the miner reads its models only here: one load of each
    return miner


def default_components(
    lm: Any = None,
    embedder: Any = None,
    *,
    models: LazyModels | None = None,
    config: BeliefConfig | None = None,
    budget: PromptBudget | None = None,
    triple_source: TripleSource | None = None,
    show_progress: bool = False,
    verifier_chains: EvidenceChainMiner | None = None,
    chains_decoding: Decoding | None = None,
) -> BeliefComponents:
    """Verifier, answer generator, query writer and relevance scorer on shared models.

    Args:
        lm: a local LM spec for :func:`~neocorrag_core.models.resolve_lm` (``None`` = the
            bundled default) or a :class:`~neocorrag_core.lm.chat.ChatModel` (wrap a
            LangChain or LlamaIndex LLM with its adapter's ``as_chat_model``); anything
            else is a :class:`~neocorrag_core.errors.ConfigError` naming that fix.
        embedder: anything :func:`~neocorrag_core.models.resolve_embedder` accepts
            (``None`` = the bundled default), for relevance.
        models: share the lazily loaded models of another engine; its LM serves the LM
            components unless ``lm`` is a chat model, and its embedder serves relevance
            (``embedder`` and a local ``lm`` are then ignored).
        config: the controller's settings; the prompts show at most ``config.max_evidence``
            passages (the workspace's capacity) unless ``budget`` says otherwise.
        budget: passages shown and token budgets of every prompt.
        triple_source: where the writer finds the passages' triples for bridge entities
            (default: passage metadata).
        show_progress: progress bars while the models load the first time.
        verifier_chains: show the verifier this miner's evidence chains of the passages as
            one extra document (:class:`~neocorrag_core.belief.ChainEvidenceVerifier`, with
            room for that document beside a full workspace).
        chains_decoding: how ``verifier_chains`` chooses them (``None``: the miner's own).

    Nothing is loaded here: each model loads on the first call that needs it.
    """
    chat = chat_model_or_none("default_components", lm)
    if models is None:
        models = shared_models(lm, embedder, show_progress=show_progress)
    if budget is None:
        budget = PromptBudget(max_passages=(config or BeliefConfig()).max_evidence)
    verifier: Verifier = LMVerifier(chat, models=models, budget=budget)
    if verifier_chains is not None:
        roomy = replace(budget, max_passages=budget.max_passages + 1)
        inner = LMVerifier(chat, models=models, budget=roomy)
        verifier = ChainEvidenceVerifier(inner, verifier_chains, decoding=chains_decoding)
    return BeliefComponents(
        verifier=verifier,
        generator=LMAnswerGenerator(chat, models=models, budget=budget),
        writer=LMQueryWriter(chat, models=models, budget=budget, triple_source=triple_source),
        relevance=EmbeddingRelevance(models=models),
    )


__all__ = ["BeliefComponents", "answer_miner", "default_components", "shared_models"]
