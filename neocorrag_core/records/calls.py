"""One adapter call's documents: read into passages, remembered by passage id, and handed
back as copies carrying the core's records.

A retriever that searches for the engine (EviReform's reformulating retriever, BeliefRAG,
the corpus-graph retriever) reads the framework documents each search returns into
passages (:class:`DocumentCall`), lets the engine decide over them, and returns copies of
the original objects the engine chose, with the core's records as their metadata
(:func:`~neocorrag_core.records.reformulation.reformulation_records`,
:func:`~neocorrag_core.records.graph.graph_records`). The framework's part is its
:data:`~neocorrag_core.records.documents.Reader` and its :data:`Copy`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Generic, TypeVar

from neocorrag_core.evireform.types import ReformulationResult
from neocorrag_core.graph import GraphRetriever, GraphSelection, fetch_by_document_ids
from neocorrag_core.graph.consolidation import FetchFn
from neocorrag_core.records.documents import Reader, passage, read_fields, read_passages
from neocorrag_core.records.graph import graph_records
from neocorrag_core.records.reformulation import PassageIds, reformulation_records
from neocorrag_core.types import Passage

T = TypeVar("T")
Copy = Callable[[T, float, dict[str, Any]], T]
"""An adapter's copy of an original object, with its score and the metadata to add."""


class DocumentCall(Generic[T]):
    """The framework documents of one call as engine passages, and the originals the
    output copies are made of.

    With ``stable_ids`` (the default, for a call that sends several queries) a document
    keeps one passage id across the queries
    (:class:`~neocorrag_core.records.reformulation.PassageIds`), so the engine merges its
    pool by id; without, each batch gets the ids
    :func:`~neocorrag_core.records.documents.to_passages` gives (unique within the batch).
    The first original seen under an id is the one copied, except that a ranked passage is
    copied from the object its crediting query returned. One instance per call; a round's
    searches may register concurrently (worker threads for a sync retriever, tasks for an
    async one).
    """

    def __init__(self, read: Reader, *, stable_ids: bool = True) -> None:
        self._read = read
        self._ids = PassageIds() if stable_ids else None
        self._originals: dict[str, T] = {}
        self._by_query: dict[tuple[str, str], T] = {}

    def register(self, documents: Sequence[T], query: str = "") -> list[Passage]:
        """Passages for ``documents`` (in order), remembering the originals (and which
        ``query`` returned each)."""
        passages = (
            read_passages(documents, self._read)
            if self._ids is None
            else [self._stable_passage(i, d) for i, d in enumerate(documents)]
        )
        for p, original in zip(passages, documents, strict=True):
            self._originals.setdefault(p.id, original)  # dict.setdefault: atomic
            self._by_query.setdefault((query, p.id), original)
        return passages

    def _stable_passage(self, position: int, document: T) -> Passage:
        assert self._ids is not None
        fields = read_fields(position, self._read(position, document))
        title = fields[2].get("title")
        pid = self._ids.id_for(fields[0], fields[1], title if isinstance(title, str) else "")
        return passage(pid, fields)

    def search_with(
        self, fetch: Callable[[str], Sequence[T]]
    ) -> Callable[[str, int], list[Passage]]:
        """The engine's ``search(query, k)``: the first ``k`` documents ``fetch`` returns."""
        return lambda query, k: self.register(_first(fetch(query), k), query)

    def asearch_with(
        self, afetch: Callable[[str], Awaitable[Sequence[T]]]
    ) -> Callable[[str, int], Awaitable[list[Passage]]]:
        """The engine's async ``search(query, k)`` over ``afetch``."""

        async def search(query: str, k: int) -> list[Passage]:
            return self.register(_first(await afetch(query), k), query)

        return search

    def fetch_with(self, get_by_ids: Callable[[list[str]], Sequence[T]]) -> FetchFn:
        """The graph's ``fetch``: stored documents read by id through ``get_by_ids``
        (:func:`~neocorrag_core.graph.fetch_by_document_ids`), registered as originals."""
        return fetch_by_document_ids(lambda ids: self.register(list(get_by_ids(ids))))

    def originals(self, passage_ids: Sequence[str]) -> list[T]:
        """The objects the retriever returned for ``passage_ids``, in that order."""
        return [self._originals[pid] for pid in passage_ids]

    def outputs(self, result: ReformulationResult | GraphSelection, copy: Copy[T]) -> list[T]:
        """The engine's choice as copies of the original objects, best first, with the
        core's records: EviReform's ranking (each copy made of the original its crediting
        query returned) or the graph's selection."""
        if isinstance(result, GraphSelection):
            return [
                copy(self._originals[p.id], pick.score, record)
                for p, pick, record in zip(
                    result.passages, result.picks, graph_records(result), strict=True
                )
            ]
        return [
            copy(
                self._by_query.get((r.found_by, r.passage_id), self._originals[r.passage_id]),
                r.score,
                r.metadata,
            )
            for r in reformulation_records(result)
        ]


def _first(documents: Any, k: int) -> list[Any]:
    if isinstance(documents, (str, bytes, Mapping)) or not isinstance(documents, Sequence):
        raise TypeError(
            f"the wrapped retriever returned a {type(documents).__name__}; "
            "it must return a list of documents"
        )
    return list(documents)[:k]


def select_by_graph(
    engine: GraphRetriever,
    query: str,
    documents: Sequence[T],
    k: int,
    *,
    read: Reader,
    copy: Copy[T],
    get_by_ids: Callable[[list[str]], Sequence[T]] | None = None,
) -> list[T]:
    """Copies of the ``k`` documents the corpus graph chooses for ``query`` from
    ``documents`` (a search's results) and, with ``get_by_ids`` (a vector store's read by
    id), from the store's other documents."""
    call: DocumentCall[T] = DocumentCall(read, stable_ids=False)
    passages = call.register(documents)
    fetch = call.fetch_with(get_by_ids) if get_by_ids is not None else None
    return call.outputs(engine.consolidator.select(query, passages, k, fetch=fetch), copy)


__all__ = ["Copy", "DocumentCall", "select_by_graph"]
