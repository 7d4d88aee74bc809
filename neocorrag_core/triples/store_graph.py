"""The triple store read as a corpus graph: every stored passage's entity pairs, in one scan.

What :mod:`neocorrag_core.graph.corpus_graph` builds the corpus evidence graph from. Two
reads: :func:`graph_signature` (cheap: how many passages are stored for an extractor and
when the last one was written; it changes whenever a passage is added, re-ingested or
deleted) and :func:`graph_rows` (every stored triple's passage hash, subject and object).
Both run in the store's own read transactions, so a writer in another process never
blocks them (WAL) and they see one consistent state each.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from neocorrag_core.triples.keys import ExtractorKey

if TYPE_CHECKING:
    from neocorrag_core.triples.store import TripleStore

GraphSignature = tuple[int, float, int]
"""``(passages stored, newest write time, document links)`` for one extractor."""


def graph_signature(store: TripleStore, key: ExtractorKey) -> GraphSignature:
    """What changes whenever the passages stored for ``key`` change (added, deleted or
    re-ingested) or a document id is linked or unlinked."""
    with store._transaction(write=False, action="read the graph of") as conn:
        count, newest = conn.execute(
            "SELECT COUNT(*), COALESCE(MAX(created), 0) FROM passages "
            "WHERE extractor = ? AND version = ?",
            (key.extractor_id, key.version),
        ).fetchone()
        links = 0
        if store.schema_version >= 2:
            links = int(conn.execute("SELECT COUNT(*) FROM documents").fetchone()[0])
    return int(count), float(newest), links


def graph_rows(store: TripleStore, key: ExtractorKey) -> Iterator[tuple[str, str, str]]:
    """``(passage hash, subject, object)`` of every triple stored for ``key``, and
    ``(hash, "", "")`` once for each stored passage without triples (so the graph knows it).

    Read in one transaction and yielded as read (a large store is never held in memory
    twice).
    """
    params = (key.extractor_id, key.version)
    with store._transaction(write=False, action="read the graph of") as conn:
        yield from conn.execute(
            "SELECT text_sha256, subject, object FROM triples "
            "WHERE extractor = ? AND version = ? ORDER BY text_sha256, position",
            params,
        )
        yield from (
            (digest, "", "")
            for (digest,) in conn.execute(
                "SELECT text_sha256 FROM passages WHERE extractor = ? AND version = ? "
                "AND num_triples = 0",
                params,
            )
        )


def document_links(store: TripleStore) -> Iterator[tuple[str, str]]:
    """``(passage hash, document id)`` of every linked document (schema 2 and later)."""
    if store.schema_version < 2:
        return
    with store._transaction(write=False, action="read the document ids of") as conn:
        yield from conn.execute("SELECT text_sha256, doc_id FROM documents")


__all__ = ["GraphSignature", "document_links", "graph_rows", "graph_signature"]
