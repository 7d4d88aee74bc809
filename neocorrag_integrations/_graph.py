"""One graph retrieval over a framework's documents: what both graph retrievers share.

The framework's documents become passages (:func:`~neocorrag_integrations._common.to_passages`),
the core chooses (:class:`~neocorrag_core.graph.GraphRetriever`'s consolidator), and the
chosen documents come back as copies with :func:`~neocorrag_core.records.graph.graph_records`
in their metadata. Documents the graph reached that no search returned are read by id
through the caller's ``get_by_ids``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Generic, TypeVar

from neocorrag_core.graph import CorpusGraph, GraphRetriever, GraphSelection, fetch_by_document_ids
from neocorrag_core.records.graph import graph_records
from neocorrag_core.types import Passage
from neocorrag_integrations._common import Fields, read_fields, to_passages

T = TypeVar("T")
Reader = Callable[[int, Any], Fields]
Copy = Callable[[T, float, dict[str, Any]], T]


class GraphCall(Generic[T]):
    """The documents of one call and their passages (ids unique within the call)."""

    def __init__(self, read: Reader, get_by_ids: Callable[[list[str]], Sequence[T]] | None):
        self.read = read
        self.get_by_ids = get_by_ids
        self.originals: dict[str, T] = {}

    def passages(self, documents: Sequence[T]) -> list[Passage]:
        """Passages of ``documents`` (their originals remembered by passage id)."""
        fields = [read_fields(i, self.read(i, d)) for i, d in enumerate(documents)]
        out = to_passages(fields)
        for p, document in zip(out, documents, strict=True):
            self.originals.setdefault(p.id, document)
        return out

    def fetch(self, hashes: Sequence[str], graph: CorpusGraph) -> Mapping[str, Passage]:
        """The stored passages of ``hashes`` read through ``get_by_ids`` (none without it)."""
        if self.get_by_ids is None:
            return {}
        get_by_ids = self.get_by_ids
        return fetch_by_document_ids(lambda ids: self.passages(list(get_by_ids(ids))))(
            hashes, graph
        )

    def outputs(self, selection: GraphSelection, copy: Copy[T]) -> list[T]:
        """Copies of the chosen documents, best first, with the graph's metadata."""
        records = graph_records(selection)
        return [
            copy(self.originals[p.id], pick.score, record)
            for p, pick, record in zip(selection.passages, selection.picks, records, strict=True)
        ]


def select(
    engine: GraphRetriever,
    query: str,
    documents: Sequence[T],
    k: int,
    *,
    read: Reader,
    copy: Copy[T],
    get_by_ids: Callable[[list[str]], Sequence[T]] | None,
) -> list[T]:
    """The ``k`` documents the graph chooses from ``documents`` (and the store)."""
    call: GraphCall[T] = GraphCall(read, get_by_ids)
    passages = call.passages(documents)
    selection = engine.consolidator.select(query, passages, k, fetch=call.fetch)
    return call.outputs(selection, copy)


__all__ = ["GraphCall", "select"]
