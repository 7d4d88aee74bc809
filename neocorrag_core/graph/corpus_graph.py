"""The corpus evidence graph: every stored passage, the entities its triples name, and the
facts between those entities, as sparse matrices.

Nodes are entities (keyed by :func:`~neocorrag_core.text.entities.normalize_entity`, as the
miner keys them) and passages (keyed by their content hash, as the triple store keys
them). Edges: a fact edge between the subject and object of every stored triple (weight:
how many triples state a fact between the two), and a context edge between a passage and
each entity its triples name. The graph is read from the store in one scan
(:func:`build_corpus_graph`), and :class:`CorpusGraphCache` rebuilds it when the store
changes, so a deleted or re-ingested passage never leaves a stale edge behind.

Why a graph of the whole corpus: the documents a query returns are often missing a hop that
another stored passage holds, linked to the returned ones only through a shared entity.
Propagation over this graph (:mod:`neocorrag_core.graph.propagation`) reaches such a
passage although no query returned it (HippoRAG 2's idea, here without an LLM: the triples
are the store's, spaCy's by default).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

import numpy as np
from scipy import sparse

from neocorrag_core.text.entities import normalization_memo, normalize_entity
from neocorrag_core.triples.keys import ExtractorKey


@dataclass(frozen=True)
class CorpusGraph:
    """Entities, passages and their edges (read-only once built).

    Node order in :attr:`transition`: the entities (``0 .. E-1``), then the passages
    (``E .. E+P-1``).
    """

    passages: tuple[str, ...]
    """Passage content hashes (:func:`~neocorrag_core.triples.keys.text_sha256`)."""
    entities: tuple[str, ...]
    """Entity keys (:func:`~neocorrag_core.text.entities.normalize_entity`)."""
    names: tuple[str, ...]
    """A surface name per entity (the first seen), for reasons and paths."""
    passage_entities: sparse.csr_matrix
    """``P x E``: 1 where a passage's triples name the entity."""
    entity_links: sparse.csr_matrix
    """``E x E``, symmetric: how many stored triples join the two entities."""
    documents: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    """Passage hash -> the document ids linked to it in the store (may be empty)."""
    signature: object = None
    """The store state the graph was read from
    (:func:`~neocorrag_core.triples.store_graph.graph_signature`)."""
    passage_index: dict[str, int] = field(init=False, repr=False, compare=False)
    entity_index: dict[str, int] = field(init=False, repr=False, compare=False)
    transition: sparse.csc_matrix = field(init=False, repr=False, compare=False)
    """Column-stochastic ``(E+P) x (E+P)`` matrix of the graph's random walk, stored by
    columns: the local walk (:func:`~neocorrag_core.graph.propagation.local_pagerank`)
    reads only the columns of the nodes it pushes from."""
    entity_passage_counts: np.ndarray = field(init=False, repr=False, compare=False)
    """How many passages name each entity (a common entity seeds less: HippoRAG 2's node
    specificity)."""

    def __post_init__(self) -> None:
        set_ = object.__setattr__
        set_(self, "passage_index", {h: i for i, h in enumerate(self.passages)})
        set_(self, "entity_index", {k: i for i, k in enumerate(self.entities)})
        incidence = self.passage_entities
        adjacency = sparse.bmat(
            [[self.entity_links, incidence.T], [incidence, None]], format="csr", dtype=np.float64
        )
        degree = np.asarray(adjacency.sum(axis=0)).ravel()
        inverse = np.divide(1.0, degree, out=np.zeros_like(degree), where=degree > 0)
        set_(self, "transition", (adjacency @ sparse.diags(inverse)).tocsc())
        counts = np.asarray(incidence.sum(axis=0)).ravel()
        set_(self, "entity_passage_counts", counts)

    @property
    def num_nodes(self) -> int:
        """Entities plus passages."""
        return len(self.entities) + len(self.passages)

    def nbytes(self) -> int:
        """Bytes held by the sparse matrices (the index dicts and strings come on top)."""
        total = 0
        for matrix in (self.passage_entities, self.entity_links, self.transition):
            total += matrix.data.nbytes + matrix.indices.nbytes + matrix.indptr.nbytes
        return total


def build_corpus_graph(
    rows: Iterable[tuple[str, str, str]],
    *,
    documents: Iterable[tuple[str, str]] = (),
    signature: object = None,
    names_only: bool = False,
) -> CorpusGraph:
    """The graph of ``rows``: ``(passage hash, subject, object)`` per stored triple (a row with
    an empty subject and object names a passage without triples).

    Parameters
    ----------
    rows:
        The store's triples (:func:`~neocorrag_core.triples.store_graph.graph_rows`).
    documents:
        ``(passage hash, document id)`` links (the store's ``documents`` table).
    signature:
        The store state the rows were read in, kept on the graph.
    names_only:
        Keep only entities written as names (a capital letter or a digit): common nouns
        ("population", "area") join thousands of unrelated passages and spread the walk.

    Returns
    -------
    CorpusGraph

    Examples
    --------
    >>> g = build_corpus_graph([("p1", "Ada", "London"), ("p2", "London", "England")])
    >>> g.entities, g.passages
    (('ada', 'london', 'england'), ('p1', 'p2'))
    """
    passages: dict[str, int] = {}
    entities: dict[str, int] = {}
    names: list[str] = []
    context: set[tuple[int, int]] = set()
    facts: dict[tuple[int, int], int] = {}

    def entity(name: str) -> int | None:
        if names_only and not any(c.isupper() or c.isdigit() for c in name):
            return None
        key = normalize_entity(name)
        if not key:
            return None
        index = entities.get(key)
        if index is None:
            index = entities[key] = len(names)
            names.append(name)
        return index

    with normalization_memo():
        for digest, subject, obj in rows:
            p = passages.setdefault(digest, len(passages))
            s = entity(subject) if subject else None
            o = entity(obj) if obj else None
            for e in (s, o):
                if e is not None:
                    context.add((p, e))
            if s is not None and o is not None and s != o:
                pair = (s, o) if s < o else (o, s)
                facts[pair] = facts.get(pair, 0) + 1
    n_p, n_e = len(passages), len(names)
    if context:
        p_idx, e_idx = (np.fromiter(c, dtype=np.int64) for c in zip(*context, strict=True))
    else:
        p_idx = e_idx = np.zeros(0, dtype=np.int64)
    incidence = sparse.csr_matrix(
        (np.ones(len(p_idx), dtype=np.float64), (p_idx, e_idx)), shape=(n_p, n_e)
    )
    if facts:
        a, b = (np.fromiter(c, dtype=np.int64) for c in zip(*facts, strict=True))
        w = np.fromiter(facts.values(), dtype=np.float64)
    else:
        a = b = np.zeros(0, dtype=np.int64)
        w = np.zeros(0, dtype=np.float64)
    links = sparse.csr_matrix(
        (np.concatenate([w, w]), (np.concatenate([a, b]), np.concatenate([b, a]))),
        shape=(n_e, n_e),
    )
    linked: dict[str, list[str]] = {}
    for digest, doc_id in documents:
        if digest in passages:
            linked.setdefault(digest, []).append(doc_id)
    return CorpusGraph(
        passages=tuple(passages),
        entities=tuple(entities),
        names=tuple(names),
        passage_entities=incidence,
        entity_links=links,
        documents={h: tuple(sorted(ids)) for h, ids in linked.items()},
        signature=signature,
    )


class CorpusGraphCache:
    """The corpus graph of one store and extractor, read again whenever the store changed.

    Each :meth:`get` asks the store for its signature (one small query) and rebuilds the
    graph when it differs from the one the graph was built from: a passage added, deleted
    or re-ingested, or a document linked, is in the next call's graph. Thread-safe: one
    build at a time, and callers keep the graph they were handed while a newer one builds.

    Args:
        store: the :class:`~neocorrag_core.triples.store.TripleStore` to read.
        key: the extractor whose triples make the graph.
    """

    def __init__(self, store: object, key: ExtractorKey, *, names_only: bool = False) -> None:
        self.store = store
        self.key = key
        self.names_only = names_only
        self._graph: CorpusGraph | None = None
        self._lock = threading.Lock()

    def get(self) -> CorpusGraph:
        """The graph of the store as it is now."""
        from neocorrag_core.triples.store_graph import (
            document_links,
            graph_rows,
            graph_signature,
        )

        signature = graph_signature(self.store, self.key)  # type: ignore[arg-type]
        graph = self._graph
        if graph is not None and graph.signature == signature:
            return graph
        with self._lock:
            graph = self._graph
            if graph is not None and graph.signature == signature:
                return graph
            graph = build_corpus_graph(
                list(graph_rows(self.store, self.key)),  # type: ignore[arg-type]
                documents=list(document_links(self.store)),  # type: ignore[arg-type]
                signature=signature,
                names_only=self.names_only,
            )
            self._graph = graph
            return graph


__all__ = ["CorpusGraph", "CorpusGraphCache", "build_corpus_graph"]
