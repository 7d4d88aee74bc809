"""A reformulation's records: the ids that keep one document one passage across the
queries of a call, and what each returned document says about how EviReform found it.

The reformulating retrievers of both adapters hand EviReform a search over the user's
retriever; every document a query returns becomes a passage under a :class:`PassageIds` id,
and :func:`reformulation_records` becomes the metadata of each output copy. The framework's
part is reading its documents and copying them.
"""

from __future__ import annotations

import hashlib
import threading
from dataclasses import dataclass
from typing import Any

from neocorrag_core.evireform.provenance import provenance_metadata, provenance_of
from neocorrag_core.evireform.types import ReformulationResult
from neocorrag_core.records.keys import (
    EVIREFORM_EVIDENCE,
    EVIREFORM_NOTES,
    EVIREFORM_RANK,
    EVIREFORM_SCORE,
    FOUND_BY_KIND,
    FOUND_BY_QUERY,
    PROVENANCE,
    QUERY_RANKS,
    RESIDUAL_QUERIES,
)


def content_id(text: str, title: str = "") -> str:
    """A stable id for a document without one: a digest of its title and text."""
    digest = hashlib.sha256(f"{title}\n{text}".encode()).hexdigest()[:32]
    return f"sha256:{digest}"


class PassageIds:
    """The passage id of each document one call's queries return, stable across them.

    A document keeps its own id; one without gets :func:`content_id`, so the same document
    returned by two queries is merged even when the retriever builds fresh objects. A title
    and text seen before under another id keep the first id (LlamaIndex gives a node
    without an id a random one on every retrieval); a *different* text under an id seen
    before gets ``<id>#<digest>``. One instance per call; thread-safe (a round's searches
    register what they found concurrently, in the order they finish).
    """

    def __init__(self) -> None:
        self._first_id: dict[str, str] = {}  # content fingerprint -> the id it came with first
        self._fingerprints: dict[str, str] = {}
        self._lock = threading.Lock()

    def id_for(self, doc_id: Any, text: str, title: str) -> str:
        """The passage id of a document with ``doc_id`` (anything; a non-empty string is
        its own id), ``text`` and ``title``."""
        fingerprint = content_id(text, title)
        with self._lock:
            if fingerprint in self._first_id:  # the same document, dropped once, stays so
                return self._first_id[fingerprint]
            pid = doc_id if isinstance(doc_id, str) and doc_id else fingerprint
            while pid in self._fingerprints and self._fingerprints[pid] != fingerprint:
                pid = f"{pid}#{fingerprint.removeprefix('sha256:')[:12]}"
            self._fingerprints[pid] = fingerprint
            self._first_id[fingerprint] = pid
            return pid


@dataclass(frozen=True)
class RankedRecord:
    """One document of EviReform's ranking: its passage id, the query that credits it (the
    one whose results first held it), its score and the metadata of its output copy."""

    passage_id: str
    found_by: str
    score: float
    metadata: dict[str, Any]


def reformulation_records(result: ReformulationResult) -> list[RankedRecord]:
    """The records of EviReform's ranking, best first: rank, score, the crediting query and
    every query that retrieved the document, the residual queries and the evidence (the
    same on each), provenance where a refiner later in the pipeline reads it, and the
    engine's notes when it has any."""
    residual = [{"text": q.text, "kind": q.kind, "round": q.round} for q in result.queries[1:]]
    evidence = [p.text for p in result.evidence]
    provenance = provenance_of(result)
    out = []
    for rank, ranked in enumerate(result.passages, start=1):
        found = result.queries[ranked.found_by]
        pid = ranked.passage.id
        metadata: dict[str, Any] = {
            EVIREFORM_RANK: rank,
            EVIREFORM_SCORE: float(ranked.score),
            FOUND_BY_QUERY: found.text,
            FOUND_BY_KIND: found.kind,
            QUERY_RANKS: [
                {"query": result.queries[i].text, "kind": result.queries[i].kind, "rank": r + 1}
                for i, r in ranked.retrieval_ranks
            ],
            RESIDUAL_QUERIES: [dict(q) for q in residual],
            EVIREFORM_EVIDENCE: list(evidence),
        }
        if pid in provenance:  # read back by a refiner later in the pipeline
            metadata[PROVENANCE] = provenance_metadata(provenance[pid])
        if result.notes:
            metadata[EVIREFORM_NOTES] = list(result.notes)
        out.append(RankedRecord(pid, found.text, float(ranked.score), metadata))
    return out


__all__ = ["PassageIds", "RankedRecord", "content_id", "reformulation_records"]
