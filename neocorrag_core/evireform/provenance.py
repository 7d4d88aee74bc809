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

from neocorrag_core.chains.links import mentions
from neocorrag_core.evireform.types import ReformulationResult
from neocorrag_core.rendering import fact_sentences
from neocorrag_core.text.entities import normalize_entity
from neocorrag_core.types import Passage, Provenance

PROVENANCE_KEY = "neocorrag_provenance"
"""The metadata key under which EviReform's retrievers write a passage's provenance
(``{"bridge": str, "evidence": bool}``), so a refiner later in the same pipeline (a
``ContextualCompressionRetriever``, a LlamaIndex postprocessor) reads it back."""

HOP_DEPTH = 1
"""How many of a residual query's top results count as found on purpose: its first. A
residual query asks for one page ("<bridge> <relation>"); what comes after it is the
search's noise as much as for any query."""


def names_bridge(passage: Passage, bridge: str) -> bool:
    """Whether ``passage`` is the page of ``bridge``: its title names the bridge entity as a
    whole phrase ("Fort Davis, Texas" for "Texas"), or, without a title, its first
    sentence does.

    A residual query asks for the bridge entity's page ("<bridge> <relation>"). Its first
    result counts as found on purpose only when it is that page: a first result about
    something else is the search's best guess, kept or dropped by the refiner's own rules:
    the first results titled after the bridge are the ones that hold gold passages.
    """
    key = normalize_entity(bridge)
    if not key:
        return False
    if passage.title.strip():
        where = passage.title
    else:
        sentences = fact_sentences(passage.text[:2000])
        where = sentences[0] if sentences else ""
    return mentions(normalize_entity(where), key)


def provenance_of(
    result: ReformulationResult, *, hop_depth: int = HOP_DEPTH
) -> dict[str, Provenance]:
    """Passage id -> :class:`~neocorrag_core.types.Provenance` for the passages of
    ``result``'s final ranking that a residual query returned among its first ``hop_depth``
    results and that are the bridge entity's page (:func:`names_bridge`; with that query's
    bridge entity), or that hold a selected evidence fact. Passages neither applies to are
    absent."""
    final = {r.passage.id: r.passage for r in result.passages}
    bridges: dict[str, str] = {}
    for index, query in enumerate(result.queries):
        if index == 0 or query.kind in ("original", "repeat"):
            continue
        ids = result.query_results[index] if index < len(result.query_results) else []
        bridge = query.bridge or query.text
        for pid in ids[:hop_depth]:
            if pid in final and names_bridge(final[pid], bridge):
                bridges.setdefault(pid, bridge)
    evidence = {pid for prop in result.evidence for pid in prop.passage_ids if pid in final}
    return {
        pid: Provenance(bridge=bridges.get(pid, ""), evidence=pid in evidence)
        for pid in sorted(final.keys() & (set(bridges) | evidence))
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
    "names_bridge",
    "provenance_in_metadata",
    "provenance_metadata",
    "provenance_of",
]
