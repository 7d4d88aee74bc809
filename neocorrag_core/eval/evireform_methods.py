"""EviReform in the benchmark: the method that searches again instead of refining the top-k.

* ``evireform``: the reformulation loop's top-k (default :class:`ReformulationConfig`,
  changed by ``--evireform KEY=VALUE``); it sees the same ``search`` the shared retrieval
  step uses (per-question or corpus pool).

The loop runs once per question and is kept in a memo that methods built together share:
the development lab's variants and controls (``benchmarks/neocorrag_lab``: the LM
variant, a second round, the paper's repeat and rerank controls, EviReform then the
miner) reuse it through :class:`EviReformMethod` and :func:`shared_loop`; a method that
reuses it reports the loop's tokens and seconds as its cost.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any

from neocorrag_core.chains.focus import FOCUS_RULES
from neocorrag_core.chains.miner import EvidenceChainMiner
from neocorrag_core.eval.protocol import BuildContext, MethodInput, MethodOutput
from neocorrag_core.eval.refiners import MINER_OUTPUT_VERSION
from neocorrag_core.evireform import (
    EvidenceReformulator,
    ReformulationResult,
    SearchFn,
)
from neocorrag_core.evireform.config import reformulation_settings
from neocorrag_core.rendering import chain_text
from neocorrag_core.types import MiningResult, Passage

EVIREFORM_METHODS = ("evireform",)
"""The product's EviReform methods."""


def loop_info(result: ReformulationResult, reused: bool) -> dict[str, Any]:
    """What a record keeps of a loop's result: pools, queries and what each found, rounds,
    evidence, and which query found each passage (the report's pool and source tables)."""
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


def loop_output(
    passages: list[Passage], result: ReformulationResult, info: dict[str, Any]
) -> MethodOutput:
    """A method output whose context is ``passages`` and whose cost is the loop's."""
    return MethodOutput(
        passages=passages,
        prompt_tokens=result.prompt_tokens,
        generated_tokens=result.generated_tokens,
        timings=dict(result.timings),
        info=info,
    )


def mined_output(
    result: ReformulationResult, mined: MiningResult, info: dict[str, Any]
) -> MethodOutput:
    """A method output whose context is the miner's refinement ``mined`` of the loop's top-k
    and whose cost is the loop's plus the mining's (``info`` gets the mining's fallback,
    chain count and which query found each kept passage)."""
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
        chain_text=chain_text(mined),
        prompt_tokens=result.prompt_tokens + mined.prompt_tokens,
        generated_tokens=result.generated_tokens + mined.generated_tokens,
        timings=timings,
        info={**info, "reused": True},  # its cost is the loop's plus the mining's
    )


class EviReformMethod:
    """``evireform``: the loop's top-``k``, searched again with the call's ``search``."""

    def __init__(
        self,
        name: str,
        reformulator: EvidenceReformulator,
        memo: dict[Any, ReformulationResult],
        miner: EvidenceChainMiner | None = None,
    ) -> None:
        self.name = name
        self.reformulator = reformulator
        self.memo = memo
        self.miner = miner

    def loop(
        self, question: str, passages: Sequence[Passage], search: SearchFn, k: int
    ) -> tuple[ReformulationResult, bool]:
        """The default loop's result for this question (run once, then reused) and whether
        it was reused. The shared top-k ids are part of the key: two examples may ask the
        same question over different per-question pools."""
        key = (question, k, tuple(p.id for p in passages))
        found = self.memo.get(key)
        if found is not None:
            return found, True
        self.memo.clear()  # the runner goes question by question
        result = self.reformulator.retrieve(question, search, k)
        self.memo[key] = result
        return result, False

    def refine(self, call: MethodInput) -> MethodOutput:
        """Retrieve again with ``call.search`` and return the loop's top-``k`` context."""
        k = call.k or len(call.passages) or 5
        result, reused = self.loop(call.question, call.passages, call.search, k)
        return loop_output([r.passage for r in result.passages], result, loop_info(result, reused))


RULES_VERSION = "chains-9"
"""Bumped when the loop's rules change in a way its configuration does not show, so the
cached records of every EviReform method rerun."""


def config_version(overrides: Mapping[str, Any] | None = None, *, mined: bool = False) -> str:
    """What a cached record of an EviReform method depends on beyond the run settings: the
    rules version and a digest of the default configuration with the method's own
    ``overrides`` (so a changed default reruns the records it changes); with ``mined``
    (a method that hands the reader the miner's kept passages, cut by the sentence rules,
    and its chain block where the chain format writes one) also the miner's output version
    and :data:`~neocorrag_core.chains.focus.FOCUS_RULES`. Only such methods carry them,
    so a miner change does not rerun loops that never read the miner."""
    config, tuning = reformulation_settings(changes=overrides)
    # One digest over both objects' fields as a single mapping: the digest of a record
    # cached when they were one object stays valid.
    fields = {**config.to_dict(), **tuning.to_dict()}
    digest = hashlib.sha256(json.dumps(fields, sort_keys=True).encode()).hexdigest()
    if mined:
        return f"{RULES_VERSION} {MINER_OUTPUT_VERSION} {FOCUS_RULES} config {digest[:12]}"
    return f"{RULES_VERSION} config {digest[:12]}"


def method_version(name: str) -> str:
    """The version of ``evireform``'s records (:func:`config_version` of the default)."""
    return config_version()


def shared_loop(context: BuildContext) -> tuple[EvidenceReformulator, dict[Any, Any]]:
    """The reformulator (the miner's models and triple source) and the loop memo that every
    EviReform method of one run shares, made by the first one built."""
    shared = context.shared.get("evireform")
    if shared is None:
        config, tuning = reformulation_settings(changes=context.evireform_overrides)
        miner = context.miner
        reformulator = EvidenceReformulator(
            config, tuning=tuning, models=miner.models, triple_source=miner.triple_source
        )
        shared = context.shared["evireform"] = (reformulator, {})
    reformulator, memo = shared
    return reformulator, memo


def build(name: str, context: BuildContext) -> EviReformMethod:
    """Factory of ``evireform``: it shares the run's reformulator and loop memo
    (:func:`shared_loop`)."""
    reformulator, memo = shared_loop(context)
    return EviReformMethod(name, reformulator, memo, context.miner)


__all__ = [
    "EVIREFORM_METHODS",
    "RULES_VERSION",
    "EviReformMethod",
    "build",
    "config_version",
    "loop_info",
    "loop_output",
    "method_version",
    "mined_output",
    "shared_loop",
]
