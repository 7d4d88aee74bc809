"""EviReform in the benchmark: methods that search again instead of refining the top-k.

* ``evireform``: the reformulation loop's top-k (default :class:`ReformulationConfig`).
* ``evireform-lm``: the LM selects the evidence (trie-constrained beams) and writes the
  residual queries (bridge entities fill the free slots), beside the LM-free default.
* ``evireform-rounds2``: up to two rounds, the second only while the question's relation
  words stay open (``adaptive_rounds``).
* ``evireform-repeat``: the paper's matched-query control: a second round that asks the
  original question again (no LM).
* ``evireform-rerank``: the paper's rerank control: the residual queries ``evireform``
  wrote re-score the *first* pool; nothing new is retrieved.
* ``evireform-neocorrag``: ``evireform``'s top-k refined by the miner (beam decoding).

They all see the same ``search`` the shared retrieval step uses (per-question or
corpus pool). Methods built together share one memo, so the loop runs once per
question; a method that reuses it reports the loop's tokens and seconds as its cost.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from typing import Any

from neocorrag_core.chains.focus import FOCUS_RULES
from neocorrag_core.chains.miner import EvidenceChainMiner
from neocorrag_core.eval.protocol import BuildContext, MethodInput, MethodOutput
from neocorrag_core.eval.refiners import MINER_OUTPUT_VERSION
from neocorrag_core.evireform import (
    EvidenceReformulator,
    ReformulationConfig,
    ReformulationResult,
    SearchFn,
)
from neocorrag_core.types import Passage

EVIREFORM_METHODS = (
    "evireform",
    "evireform-lm",
    "evireform-rounds2",
    "evireform-repeat",
    "evireform-rerank",
    "evireform-neocorrag",
)
# Variants that run their own loop: the default configuration with these fields changed.
VARIANTS: dict[str, dict[str, Any]] = {
    "evireform-lm": {"selection": "beam", "residual_queries": "lm"},
    "evireform-rounds2": {"rounds": 2, "adaptive_rounds": True},
    "evireform-repeat": {"residual_queries": "repeat"},
}


def _loop_info(result: ReformulationResult, reused: bool) -> dict[str, Any]:
    return {
        "first_pool_ids": [p.id for p in result.first_pool],
        "pool_ids": [p.id for p in result.pool],
        "queries": [[q.text, q.kind, q.round, q.bridge] for q in result.queries],
        "query_results": [list(ids) for ids in result.query_results],
        "rounds": result.rounds,
        "evidence": [p.text for p in result.evidence],
        "found_by": [r.found_by for r in result.passages],
        "sufficient": result.sufficient,
        "notes": list(result.notes),
        "reused": reused,
    }


class EviReformMethod:
    """One of :data:`EVIREFORM_METHODS`; searches again with the call's ``search``."""

    def __init__(
        self,
        name: str,
        reformulator: EvidenceReformulator,
        memo: dict[Any, ReformulationResult],
        miner: EvidenceChainMiner | None = None,
    ) -> None:
        if name not in EVIREFORM_METHODS:
            raise ValueError(f"unknown EviReform method {name!r}")
        self.name = name
        self.reformulator = reformulator
        self.memo = memo
        self.miner = miner

    def _loop(
        self, question: str, passages: Sequence[Passage], search: SearchFn, k: int
    ) -> tuple[ReformulationResult, bool]:
        """The default loop's result for this question (run once, then reused). The shared
        top-k ids are part of the key: two examples may ask the same question over
        different per-question pools."""
        key = (question, k, tuple(p.id for p in passages))
        found = self.memo.get(key)
        if found is not None:
            return found, True
        self.memo.clear()  # the runner goes question by question
        result = self.reformulator.retrieve(question, search, k)
        self.memo[key] = result
        return result, False

    def refine(self, call: MethodInput) -> MethodOutput:
        """Retrieve again with ``call.search`` and return this method's top-``k`` context."""
        question, passages, search = call.question, call.passages, call.search
        k = call.k or len(passages) or 5
        if self.name in VARIANTS:
            result = self.reformulator.retrieve(question, search, k, **VARIANTS[self.name])
            return _output([r.passage for r in result.passages], result, _loop_info(result, False))
        result, reused = self._loop(question, passages, search, k)
        info = _loop_info(result, reused)
        if self.name == "evireform":
            return _output([r.passage for r in result.passages], result, info)
        if self.name == "evireform-rerank":
            ranked = self.reformulator.rerank(question, result.queries, result.first_pool, k)
            info["pool_ids"] = info["first_pool_ids"]
            # its residual queries only re-score: they retrieved nothing
            info["query_results"] = info["query_results"][:1] + [[] for _ in result.queries[1:]]
            info["found_by"] = [r.found_by for r in ranked]
            return _output([r.passage for r in ranked], result, info)
        if self.miner is None:
            raise ValueError("evireform-neocorrag needs a miner")
        mined = self.miner.mine(question, [r.passage for r in result.passages], decoding="beam")
        timings = {**{f"evireform.{s}": v for s, v in result.timings.items()}, **mined.timings}
        timings["total"] = result.timings.get("total", 0.0) + mined.timings.get("total", 0.0)
        found_by = {r.passage.id: r.found_by for r in result.passages}
        info.update(
            fallback=mined.fallback,
            num_chains=len(mined.chains),
            found_by=[found_by[p.id] for p in mined.passages],
        )
        return MethodOutput(
            passages=mined.passages,
            chain_text=mined.chain_text,
            prompt_tokens=result.prompt_tokens + mined.prompt_tokens,
            generated_tokens=result.generated_tokens + mined.generated_tokens,
            timings=timings,
            info={**info, "reused": True},  # its cost is the loop's plus the mining's
        )


def _output(
    passages: list[Passage], result: ReformulationResult, info: dict[str, Any]
) -> MethodOutput:
    return MethodOutput(
        passages=passages,
        prompt_tokens=result.prompt_tokens,
        generated_tokens=result.generated_tokens,
        timings=dict(result.timings),
        info=info,
    )


RULES_VERSION = "chains-9"
"""Bumped when the loop's rules change in a way its configuration does not show (relation
words, relation-first evidence, the chain-aware top-k were ``chains-1``; the question's
anchors in that top-k, ``chains-2``; one anchor per title, ``chains-3``; title pointers
that need the name as written, ``chains-4``; a search for a name of the question the
first search found nothing about, and the chain it starts, with shared names and a cap
per page in the top-k, ``chains-5``; fixes from review: names with a repeated word,
names of relation sentences in reading order, a lower-case question's anchors,
``chains-6``; the first hop's facts after the relation-stating ones, ``chains-7``; later
rounds' links only continue a chain, from the facts their queries were written from,
``chains-8``; a name inside a sentence covers a relation word only by its own letters,
and "older"/"younger" are answered by "born" but do not answer it, ``chains-9``)."""


def method_version(name: str) -> str:
    """What a cached record of ``name`` depends on beyond the run settings: the rules
    version and a digest of the default configuration with the method's own changes (so a
    changed default reruns the records it changes); for ``evireform-neocorrag``, which
    hands the reader the miner's kept passages (cut by the sentence rules) and its chain
    block where the chain format writes one, also the miner's output version and
    :data:`~neocorrag_core.chains.focus.FOCUS_RULES`. (Before ``miner-8`` every EviReform method
    carried them, so a miner change reran loops that never read the miner.)"""
    config = ReformulationConfig().with_overrides(**VARIANTS.get(name, {}))
    digest = hashlib.sha256(json.dumps(config.to_dict(), sort_keys=True).encode()).hexdigest()
    if name == "evireform-neocorrag":
        return f"{RULES_VERSION} {MINER_OUTPUT_VERSION} {FOCUS_RULES} config {digest[:12]}"
    return f"{RULES_VERSION} config {digest[:12]}"


def build(name: str, context: BuildContext) -> EviReformMethod:
    """Factory of the :data:`EVIREFORM_METHODS`: built together, they share one reformulator
    (the miner's models and triple source) and one loop memo."""
    shared = context.shared.get("evireform")
    if shared is None:
        config = ReformulationConfig().with_overrides(**context.evireform_overrides)
        miner = context.miner
        reformulator = EvidenceReformulator(
            config, models=miner.models, triple_source=miner.triple_source
        )
        shared = context.shared["evireform"] = (reformulator, {})
    reformulator, memo = shared
    return EviReformMethod(name, reformulator, memo, context.miner)


__all__ = [
    "EVIREFORM_METHODS",
    "RULES_VERSION",
    "VARIANTS",
    "EviReformMethod",
    "build",
    "method_version",
]
