"""The methods that refine the shared top-k with the miner (registered in ``registry``).

* ``none``: the retrieved passages unchanged (the baseline every report compares with).
* ``neocorrag-recall`` / ``-balanced`` / ``-precise`` / ``-paper``: the miner at each
  setting of the recall/noise dial (``MinerConfig.keep``; ``neocorrag-recall`` is the
  default), everything else at the run's settings (``--miner KEY=VALUE``).

Every miner method is a :class:`NeocorragMethod`: the run's miner with a few config
overrides. The development lab (``benchmarks/neocorrag_lab``, not installed with the
package) builds its paper variants and Table 2 ablations from the same class and the
same version rule (:func:`miner_version`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from neocorrag_core.chains.config import KEEP_MODES, miner_settings
from neocorrag_core.chains.focus import CUT_REASONS, FOCUS_RULES
from neocorrag_core.chains.keep import passthrough
from neocorrag_core.chains.miner import EvidenceChainMiner
from neocorrag_core.eval.protocol import BuildContext, MethodInput, MethodOutput
from neocorrag_core.rendering import chain_text
from neocorrag_core.types import MiningResult, Passage
from neocorrag_core.validation import clean_text

NEOCORRAG_METHODS: dict[str, dict[str, Any]] = {
    f"neocorrag-{mode}": {"keep": mode} for mode in KEEP_MODES
}
"""The product's miner methods (the keep dial) and their config overrides."""


MINER_OUTPUT_VERSION = "miner-8"
"""Bumped when a default of the miner changes what it hands the reader (a keep rule, the
chain block, the passage cut), so the cached records of every miner method rerun; a new
setting that is off by default needs no bump."""


def miner_version(overrides: Mapping[str, Any]) -> str:
    """What a cached record of a miner method with config ``overrides`` depends on beyond
    the run settings: :data:`MINER_OUTPUT_VERSION`, the overrides and, when the method cuts
    passages, the sentence rules (:data:`~neocorrag_core.chains.focus.FOCUS_RULES`)."""
    version = f"{MINER_OUTPUT_VERSION} {json.dumps(dict(overrides), sort_keys=True)}"
    if miner_settings(changes=overrides)[0].passage_focus in CUT_REASONS:
        return f"{version} {FOCUS_RULES}"
    return version


def method_version(name: str) -> str:
    """The version of the miner method ``name`` (:data:`NEOCORRAG_METHODS`, see
    :func:`miner_version`)."""
    return miner_version(NEOCORRAG_METHODS[name])


class NoRefinement:
    """The baseline: the retrieved passages go to the reader unchanged."""

    name = "none"

    def refine(self, call: MethodInput) -> MethodOutput:
        """Pass everything through."""
        return MethodOutput(list(call.passages))


def mining_info(result: MiningResult) -> dict[str, Any]:
    """What a record keeps of a mining result: fallbacks, counts, and per passage why it
    was kept or where it was lost (the runner's loss diagnosis reads these)."""
    return {
        "fallback": result.fallback,
        "seed_fallback": result.seed_fallback,
        "num_candidates": result.num_candidates,
        "num_chains": len(result.chains),
        "dropped": len(result.dropped),
        # Per passage: why it was kept, and where the chain pipeline lost a dropped one
        # (the runner turns these into the loss diagnosis of the gold passages).
        "keep_reasons": {k.passage.id: k.reason.value for k in result.kept},
        "drop_stages": {
            d.passage.id: d.stage.value if d.stage is not None else "unknown"
            for d in result.dropped
        },
    }


_BLOCK = ("chain_format", "max_chain_lines")
"""The config fields that only change how the chain block is written (``MiningResult``
carries both), not what is mined."""


class NeocorragMethod:
    """The miner with per-method config overrides (a keep mode; in the lab also a decoding
    mode, a chain format or an ablation switch).

    Methods built together share ``memo``: the last mining result per question and
    config. ``filter_passages`` only changes stage c and ``chain_format`` and
    ``max_chain_lines`` only the chain block, so the lab's ``ablation-no-filter`` reuses
    the chains ``neocorrag-beam`` mined for the same question, and its
    ``neocorrag-recall-full-chains`` those of ``neocorrag-recall`` (decoding is
    deterministic, so they are the chains it would mine itself); each reports that call's
    tokens and timings as its own cost.
    """

    def __init__(
        self,
        name: str,
        miner: EvidenceChainMiner,
        memo: dict[Any, MiningResult] | None = None,
        **overrides: Any,
    ) -> None:
        self.name = name
        self.miner = miner
        self.overrides = overrides
        self.memo = memo if memo is not None else {}

    def _mine(self, question: str, passages: list[Passage]) -> MiningResult:
        # None of these switches changes the mining: stage c's ablation and the chain
        # block's format and line cap are applied to the shared result.
        shared = {**self.overrides, "filter_passages": True}
        block = {name: shared.pop(name, getattr(self.miner.config, name)) for name in _BLOCK}
        key = (question, tuple(p.id for p in passages), tuple(sorted(shared.items())))
        if any(old[0] != question for old in self.memo):
            self.memo.clear()  # the runner goes question by question: keep memory flat
        result = self.memo.get(key)
        if result is None:
            # The lab's switches name research fields too: the settings are built here, as a
            # miner constructed with them would hold them, not passed as per-call overrides.
            config, tuning = miner_settings(self.miner.config, self.miner.tuning, shared)
            asked = clean_text(question)  # as mine() reads it
            result = self.miner.mine_unchecked(asked, passages, config, tuning, diagnose=True)
            self.memo[key] = result
            return replace(result, **block)
        # A reused result: its recorded timings, not this call's ~0 s, are the method's cost.
        timings = {**result.timings, "reused": 1.0}
        return replace(result, timings=timings, **block)

    def refine(self, call: MethodInput) -> MethodOutput:
        """Mine chains; the kept passages and the chain block go to the reader."""
        passages = list(call.passages)
        result = self._mine(call.question, passages)
        reused = result.timings.pop("reused", None) is not None
        if not self.overrides.get("filter_passages", True):
            # The ablation hands the reader every passage, with or without a chain.
            result = replace(result, kept=passthrough(passages), dropped=[])
        info = {**mining_info(result), "reused_chains": reused}
        return MethodOutput(
            passages=result.passages,
            chain_text=chain_text(result),
            prompt_tokens=result.prompt_tokens,
            generated_tokens=result.generated_tokens,
            timings=dict(result.timings),
            info=info,
        )


def build_none(name: str, context: BuildContext) -> NoRefinement:
    """Factory of ``none``."""
    return NoRefinement()


def shared_memo(context: BuildContext) -> dict[Any, MiningResult]:
    """The mining memo every miner method of one run shares (the lab's variants too)."""
    memo: dict[Any, MiningResult] = context.shared.setdefault("mining_memo", {})
    return memo


def build_miner(name: str, context: BuildContext) -> NeocorragMethod:
    """Factory of the miner methods (:data:`NEOCORRAG_METHODS`); they share one memo."""
    return NeocorragMethod(name, context.miner, shared_memo(context), **NEOCORRAG_METHODS[name])


__all__ = [
    "MINER_OUTPUT_VERSION",
    "NEOCORRAG_METHODS",
    "NeocorragMethod",
    "NoRefinement",
    "build_miner",
    "build_none",
    "method_version",
    "miner_version",
    "mining_info",
    "shared_memo",
]
