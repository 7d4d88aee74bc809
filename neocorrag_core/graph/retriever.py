"""Graph retrieval on its own: the user's search for candidates, then the corpus graph
chooses the ``k`` handed on (HippoRAG-style retrieval, without EviReform and without an
LLM).

:class:`GraphRetriever` asks ``search(question, candidates)`` once, seeds the walk from the
question and what came back, and returns the ``k`` passages the walk ranks best; with a
``fetch`` it may return a stored passage the search did not (fetched by id from the user's
vector store: :func:`fetch_by_document_ids`).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from neocorrag_core.errors import ConfigError
from neocorrag_core.graph.consolidation import FetchFn, GraphConsolidator, GraphSelection
from neocorrag_core.graph.corpus_graph import CorpusGraph, CorpusGraphCache
from neocorrag_core.graph.selection import GraphSettings
from neocorrag_core.search_calls import AsyncSearchFn, SearchFn, acall_search, call_search
from neocorrag_core.triples.keys import ExtractorKey, text_sha256
from neocorrag_core.types import Passage

DEFAULT_CANDIDATES = 20
"""Passages the search is asked for: the walk's seeds and first candidates."""


def graph_of(triple_source: Any) -> CorpusGraphCache:
    """The corpus graph of the store behind ``triple_source`` (a
    :class:`~neocorrag_core.triples.default.DefaultTripleSource` or a
    :class:`~neocorrag_core.triples.cached.CachedTripleSource`), for its extractor's triples.

    Raises :class:`~neocorrag_core.errors.ConfigError` when the source reads no store (the
    graph is the store's: index the corpus into one first).
    """
    from neocorrag_core.triples.cached import CachedTripleSource
    from neocorrag_core.triples.default import DefaultTripleSource

    if isinstance(triple_source, CachedTripleSource):
        store: Any = triple_source.store
        key = triple_source.key
    elif isinstance(triple_source, DefaultTripleSource):
        store = triple_source.vectors.store
        key = ExtractorKey.of(triple_source.extractor)
    else:
        raise ConfigError(
            "graph retrieval reads the corpus graph from a triple store: give a "
            "DefaultTripleSource(store=...) or a CachedTripleSource, got "
            f"{type(triple_source).__name__}"
        )
    inner = getattr(store, "store", store)  # a ResilientStore's open file
    if inner is None:
        raise ConfigError(
            f"graph retrieval: the triple store {getattr(store, 'path', store)} cannot be "
            "opened (see the warning above); index the corpus into a writable store first"
        )
    return CorpusGraphCache(inner, key)


def fetch_by_document_ids(get: Callable[[list[str]], Sequence[Passage]]) -> FetchFn:
    """A ``fetch`` for :class:`GraphRetriever` from ``get(ids) -> passages``, a vector store's
    read by document id (LangChain ``vectorstore.get_by_ids``, Chroma ``collection.get``).

    The graph knows a stored passage's document ids when it was ingested with them (the
    ingestion transforms and ``neocorrag index`` on a corpus with ids link them); a passage
    whose fetched text no longer hashes to the stored one (edited since) is skipped.
    """

    def fetch(hashes: Sequence[str], graph: CorpusGraph) -> Mapping[str, Passage]:
        ids = [linked[0] for h in hashes if (linked := graph.documents.get(h))]
        if not ids:
            return {}
        wanted = set(hashes)
        found: dict[str, Passage] = {}
        for passage in get(ids):
            digest = text_sha256(passage)
            if digest in wanted:
                found.setdefault(digest, passage)
        return found

    return fetch


class GraphRetriever:
    """The search's candidates, chosen and completed on the corpus graph.

    Args:
        triple_source: the store the graph is read from (default: the adapters' default,
            :class:`~neocorrag_core.triples.default.DefaultTripleSource`).
        embedder: spec or object of the embedder the facts are compared with (default: the
            bundled MiniLM); loaded on first use.
        candidates: how many passages the search is asked for.
        settings: the walk's settings (:class:`~neocorrag_core.graph.selection.GraphSettings`).

    Examples
    --------
    >>> retriever = GraphRetriever(candidates=20)   # doctest: +SKIP
    >>> retriever.retrieve("Who directed the film?", search, k=5).passages  # doctest: +SKIP
    """

    def __init__(
        self,
        *,
        triple_source: Any = None,
        embedder: Any = None,
        candidates: int = DEFAULT_CANDIDATES,
        settings: GraphSettings | None = None,
    ) -> None:
        if isinstance(candidates, bool) or not isinstance(candidates, int) or candidates < 1:
            raise ConfigError(
                f"GraphRetriever: candidates must be an integer >= 1, got {candidates!r}"
            )
        from neocorrag_core.models.lazy import LazyModels
        from neocorrag_core.triples.default import DefaultTripleSource

        self.triple_source = triple_source or DefaultTripleSource()
        self.models = LazyModels(embedder)
        self.candidates = candidates
        self.consolidator = GraphConsolidator(
            graph_of(self.triple_source),
            triple_source=self.triple_source,
            embedder=lambda: self.models.embedder,
            vectors=getattr(self.triple_source, "vectors", None),
            settings=settings,
        )

    def retrieve(
        self, question: str, search: SearchFn, k: int = 5, *, fetch: FetchFn | None = None
    ) -> GraphSelection:
        """The ``k`` passages the graph chooses for ``question`` from ``search``'s candidates
        (and, with ``fetch``, from the store's other passages)."""
        from neocorrag_core.evireform.reformulator import check_call

        question = check_call(question, k)
        started = time.perf_counter()
        returned = call_search(search, question, max(self.candidates, k))
        searched = time.perf_counter() - started
        selection = self.consolidator.select(question, returned, k, fetch=fetch)
        selection.timings.update(search=searched, total=time.perf_counter() - started)
        return selection

    async def aretrieve(
        self, question: str, search: AsyncSearchFn, k: int = 5, *, fetch: FetchFn | None = None
    ) -> GraphSelection:
        """Async :meth:`retrieve`: the search awaited, the walk in a worker thread."""
        from neocorrag_core.evireform.reformulator import check_call

        question = check_call(question, k)
        started = time.perf_counter()
        returned = await acall_search(search, question, max(self.candidates, k))
        searched = time.perf_counter() - started
        selection = await asyncio.to_thread(
            self.consolidator.select, question, returned, k, fetch=fetch
        )
        selection.timings.update(search=searched, total=time.perf_counter() - started)
        return selection


__all__ = ["DEFAULT_CANDIDATES", "GraphRetriever", "fetch_by_document_ids", "graph_of"]
