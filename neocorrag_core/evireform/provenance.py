"""What EviReform knows about each passage it returns, for the refinement that follows it.

EviReform searches again for the hop the first retrieval missed: a residual query names a
bridge entity ("Mountrail County capital"), and its top results are that hop. A refiner
that sees only the passages would judge such a passage by its links to the others and may
drop it as unlinked; handed this provenance, it keeps what was searched for on purpose
(:class:`~neocorrag_core.types.KeepReason` ``FOUND_HOP``) and what holds the facts
EviReform selected as evidence (``EVIDENCE``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from neocorrag_core.evireform.types import ReformulationResult
from neocorrag_core.types import Passage, Provenance

PROVENANCE_KEY = "neocorrag_provenance"
"""The metadata key under which EviReform's retrievers write a passage's provenance
(``{"bridge": str, "evidence": bool}``), so a refiner later in the same pipeline (a
``ContextualCompressionRetriever``, a LlamaIndex postprocessor) reads it back."""

HOP_DEPTH = 1
"""How many of a residual query's top results count as found on purpose: its first. A
residual query asks for one page ("<bridge> <relation>"); what comes after it is the
search's noise as much as for any query."""


def provenance_of(
    result: ReformulationResult, *, hop_depth: int = HOP_DEPTH
) -> dict[str, Provenance]:
    """Passage id -> :class:`~neocorrag_core.types.Provenance` for the passages of
    ``result``'s final ranking that a residual query returned among its first ``hop_depth``
    results (with that query's bridge entity), or that hold a selected evidence fact.
    Passages neither applies to are absent."""
    final = {r.passage.id for r in result.passages}
    bridges: dict[str, str] = {}
    for index, query in enumerate(result.queries):
        if index == 0 or query.kind in ("original", "repeat"):
            continue
        ids = result.query_results[index] if index < len(result.query_results) else []
        for pid in ids[:hop_depth]:
            if pid in final:
                bridges.setdefault(pid, query.bridge or query.text)
    evidence = {pid for prop in result.evidence for pid in prop.passage_ids if pid in final}
    return {
        pid: Provenance(bridge=bridges.get(pid, ""), evidence=pid in evidence)
        for pid in sorted(final & (set(bridges) | evidence))
    }


def provenance_metadata(found: Provenance) -> dict[str, Any]:
    """``found`` as the plain dict written under :data:`PROVENANCE_KEY`."""
    return {"bridge": found.bridge, "evidence": found.evidence}


def provenance_in_metadata(passages: Sequence[Passage]) -> dict[str, Provenance]:
    """Passage id -> :class:`~neocorrag_core.types.Provenance` read from each passage's
    ``metadata[PROVENANCE_KEY]`` (what an EviReform retriever earlier in the pipeline wrote).
    A value that is not such a dict is ignored: it only ever adds keep reasons, so a bad one
    must not fail the call."""
    found: dict[str, Provenance] = {}
    for passage in passages:
        value = passage.metadata.get(PROVENANCE_KEY)
        if not isinstance(value, Mapping):
            continue
        bridge, evidence = value.get("bridge", ""), value.get("evidence", False)
        if isinstance(bridge, str) and isinstance(evidence, bool) and (bridge or evidence):
            found[passage.id] = Provenance(bridge=bridge, evidence=evidence)
    return found


__all__ = [
    "HOP_DEPTH",
    "PROVENANCE_KEY",
    "provenance_in_metadata",
    "provenance_metadata",
    "provenance_of",
]
