"""The three systems as one retrieval step: the user's search, EviReform for the missing hop,
the refiner for the noise, on one engine (one load of each model, one triple source).

A retriever hands back five passages; often a hop of the evidence is missing and most of
what came back is noise. :class:`EvidencePipeline` asks the user's ``search`` as EviReform
does (the question, then residual queries for the bridge entities its evidence names),
then refines EviReform's top-k with the miner, telling it what EviReform knows about each
passage (:func:`~neocorrag_core.evireform.provenance.provenance_of`), so a hop found on
purpose is not dropped as unlinked. Its :meth:`EvidencePipeline.search` is itself a
``search(query, k)``: BeliefRAG's controller can take it as the retrieval it decides over.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from neocorrag_core.chains.miner import EvidenceChainMiner
from neocorrag_core.errors import ConfigError
from neocorrag_core.evireform.provenance import provenance_of
from neocorrag_core.evireform.reformulator import EvidenceReformulator, check_call
from neocorrag_core.evireform.types import ReformulationResult
from neocorrag_core.search_calls import AsyncSearchFn, SearchFn, acall_search, call_search
from neocorrag_core.types import MiningResult, Passage, Provenance


@dataclass
class PipelineResult:
    """What one :meth:`EvidencePipeline.retrieve` call found, kept and why."""

    question: str
    passages: list[Passage]
    """What the reader gets, best first: the refined passages (cut to their evidence
    sentences by default), or the retrieved ones when refinement is off."""
    retrieved: list[Passage]
    """The passages before refinement: EviReform's top-k, or the search's."""
    reformulation: ReformulationResult | None = None
    """EviReform's result (queries, evidence, ranking), ``None`` when it is off."""
    mining: MiningResult | None = None
    """The refiner's result (kept and dropped with reasons, chains), ``None`` when off."""
    provenance: dict[str, Provenance] = field(default_factory=dict)
    """What the refiner was told about the retrieved passages."""
    timings: dict[str, float] = field(default_factory=dict)
    """Seconds per stage: ``search`` (the user's search, all its calls), ``reformulate``
    (EviReform's own work), ``refine``, ``total``."""


class EvidencePipeline:
    """``search`` -> EviReform -> refiner, on one engine.

    Args:
        miner: the refiner (default: a miner over the adapters' default triple source:
            metadata triples, else the store, else spaCy; with the store's vectors).
        reformulator: EviReform (default: one on the miner's models and triple source).
        reformulate: search again for the missing hop (``False``: one search).
        refine: refine what the search returned (``False``: hand it on whole).

    Thread-safe as its engines are. Pass ``miner=`` to share an engine with an adapter.
    """

    def __init__(
        self,
        miner: EvidenceChainMiner | None = None,
        reformulator: EvidenceReformulator | None = None,
        *,
        reformulate: bool = True,
        refine: bool = True,
    ) -> None:
        if miner is not None and not isinstance(miner, EvidenceChainMiner):
            raise ConfigError(
                f"EvidencePipeline: miner must be an EvidenceChainMiner, got {type(miner).__name__}"
            )
        if reformulator is not None and not isinstance(reformulator, EvidenceReformulator):
            raise ConfigError(
                "EvidencePipeline: reformulator must be an EvidenceReformulator, got "
                f"{type(reformulator).__name__}"
            )
        if miner is None:
            from neocorrag_core.triples.default import DefaultTripleSource

            miner = EvidenceChainMiner(triple_source=DefaultTripleSource())
        self.miner = miner
        self.reformulator = reformulator or EvidenceReformulator(
            models=miner.models, triple_source=miner.triple_source, vectors=miner.vectors
        )
        self.reformulate = bool(reformulate)
        self.refine = bool(refine)

    def retrieve(self, question: str, search: SearchFn, k: int = 5) -> PipelineResult:
        """The refined top-``k`` for ``question`` over ``search(query, n)``.

        Raises :class:`~neocorrag_core.errors.InputError` for a question that is not a
        non-empty string or a ``k`` that is not a positive integer (lone surrogates in the
        question are replaced by U+FFFD first), and
        :class:`~neocorrag_core.errors.RetrievalError` when ``search`` fails.
        """
        question = check_call(question, k)
        started = time.perf_counter()
        if self.reformulate:
            found = self.reformulator.retrieve(question, search, k)
            return self._refined(question, found, None, started)
        before = time.perf_counter()
        passages = call_search(search, question, k)
        return self._refined(question, None, (passages, time.perf_counter() - before), started)

    async def aretrieve(self, question: str, search: AsyncSearchFn, k: int = 5) -> PipelineResult:
        """Async :meth:`retrieve`: searches awaited, the engines' work in worker threads."""
        question = check_call(question, k)
        started = time.perf_counter()
        if self.reformulate:
            found = await self.reformulator.aretrieve(question, search, k)
            return await asyncio.to_thread(self._refined, question, found, None, started)
        before = time.perf_counter()
        passages = await acall_search(search, question, k)
        searched = (passages, time.perf_counter() - before)
        return await asyncio.to_thread(self._refined, question, None, searched, started)

    def search(self, base: SearchFn) -> Callable[[str, int], list[Passage]]:
        """This pipeline as a ``search(query, k)`` over ``base``: what BeliefRAG's controller
        (or anything that takes a search) can decide over."""

        def refined(query: str, k: int) -> list[Passage]:
            return self.retrieve(query, base, k).passages

        return refined

    def _refined(
        self,
        question: str,
        found: ReformulationResult | None,
        searched: tuple[Sequence[Passage], float] | None,
        started: float,
    ) -> PipelineResult:
        timings: dict[str, float] = {}
        if found is not None:
            retrieved = [r.passage for r in found.passages]
            provenance = provenance_of(found)
            timings["search"] = found.timings.get("search", 0.0)
            timings["reformulate"] = found.timings.get("total", 0.0) - timings["search"]
        else:
            assert searched is not None
            retrieved, timings["search"] = list(searched[0]), searched[1]
            provenance = {}
        mining: MiningResult | None = None
        passages = list(retrieved)
        if self.refine and retrieved:
            before = time.perf_counter()
            mining = self.miner.mine(question, retrieved, provenance=provenance)
            passages = mining.passages
            timings["refine"] = time.perf_counter() - before
        timings["total"] = time.perf_counter() - started
        return PipelineResult(
            question=question,
            passages=passages,
            retrieved=retrieved,
            reformulation=found,
            mining=mining,
            provenance=provenance,
            timings=timings,
        )


__all__ = ["EvidencePipeline", "PipelineResult"]
