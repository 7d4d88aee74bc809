"""The composed pipeline in the benchmark.

``evireform-refined``: EviReform, then the refiner told what EviReform found on purpose
(:class:`~neocorrag_core.pipeline.EvidencePipeline`). It reuses the run's EviReform loop (one
loop per question, shared with ``evireform``), so the two differ by the refinement alone.
``belief-composed``: BeliefRAG's controller deciding over that pipeline: each of its searches
is EviReform then the refiner, on the run's engines.
"""

from __future__ import annotations

from typing import Any

from neocorrag_core.chains.miner import EvidenceChainMiner
from neocorrag_core.eval.belief_methods import BeliefMethod, controller
from neocorrag_core.eval.belief_methods import method_version as belief_version
from neocorrag_core.eval.evireform_methods import (
    EviReformMethod,
    config_version,
    loop_info,
    mined_output,
    shared_loop,
)
from neocorrag_core.eval.protocol import BuildContext, MethodInput, MethodOutput, SearchFn
from neocorrag_core.evireform.provenance import HOP_DEPTH, provenance_metadata, provenance_of
from neocorrag_core.pipeline import EvidencePipeline

PROVENANCE_VERSION = f"provenance-2,hops{HOP_DEPTH}"
"""Bumped when what the refiner is told about EviReform's passages changes."""


class RefinedEviReform(EviReformMethod):
    """EviReform's top-k, refined by the miner with (or, ``provenance=False``, without)
    EviReform's provenance."""

    def __init__(self, *args: Any, provenance: bool = True, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.provenance = provenance

    def refine(self, call: MethodInput) -> MethodOutput:
        """EviReform's loop (shared with ``evireform``), then the miner over its top-k."""
        if self.miner is None:
            raise ValueError(f"{self.name} needs a miner")
        k = call.k or len(call.passages) or 5
        result, reused = self.loop(call.question, call.passages, call.search, k)
        retrieved = [r.passage for r in result.passages]
        known = provenance_of(result) if self.provenance else {}
        mined = self.miner.mine(call.question, retrieved, provenance=known, diagnose=True)
        info = loop_info(result, reused)
        info.update(
            keep_reasons={k.passage.id: k.reason.value for k in mined.kept},
            provenance={pid: provenance_metadata(p) for pid, p in known.items()},
        )
        return mined_output(result, mined, info)


class ComposedBelief(BeliefMethod):
    """The controller's episode with every search run through ``pipeline``."""

    def __init__(self, name: str, controller: Any, pipeline: EvidencePipeline) -> None:
        super().__init__(name, controller)
        self.pipeline = pipeline

    def search(self, call: MethodInput) -> SearchFn:
        """Each search is EviReform, then the refiner, over ``call.search``."""
        return self.pipeline.search(call.search)


def method_version(name: str, reader: str = "default", belief_overrides: Any = None) -> str:
    """The loop's and the miner's versions, the provenance rule's when it is used, and for
    ``belief-composed`` the controller's."""
    base = config_version(mined=True)
    if name.endswith("-plain"):
        return base
    if name == "belief-composed":
        return f"{base},{PROVENANCE_VERSION},{belief_version('belief', reader, belief_overrides)}"
    return f"{base},{PROVENANCE_VERSION}"


def build(name: str, context: BuildContext) -> RefinedEviReform | ComposedBelief:
    """Factory of ``evireform-refined`` (and the lab's ``-plain`` control, without the
    provenance) and ``belief-composed``: the run's shared loop, miner and controller."""
    reformulator, memo = shared_loop(context)
    miner: EvidenceChainMiner = context.miner
    if name == "belief-composed":
        pipeline = EvidencePipeline(miner, reformulator)
        return ComposedBelief(name, controller(context), pipeline)
    return RefinedEviReform(name, reformulator, memo, miner, provenance=not name.endswith("-plain"))


__all__ = ["PROVENANCE_VERSION", "ComposedBelief", "RefinedEviReform", "build", "method_version"]
