"""Looking after what a triple store holds: what it counts, and deleting from it.

The bodies of :meth:`TripleStore.summary <neocorrag_core.triples.store.TripleStore.summary>`
(passages, triples, document ids and vectors, per extractor, and the file's size) and
:meth:`TripleStore.delete <neocorrag_core.triples.store.TripleStore.delete>` (documents by
the ids they were stored under, passages by content hash), their reports
(:class:`StoreSummary`, :class:`DeleteReport`), and the checks of the ids and hashes a
caller passes. Each runs in one transaction of the store.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Iterator, Sequence
from contextlib import suppress
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from neocorrag_core.errors import InputError
from neocorrag_core.triples.keys import ExtractorKey
from neocorrag_core.triples.store_schema import _marks, key_filter
from neocorrag_core.triples.store_vectors import _vector_stats
from neocorrag_core.validation import clean_text

if TYPE_CHECKING:
    from neocorrag_core.triples.store import TripleStore


@dataclass(frozen=True)
class DeleteReport:
    """What :meth:`TripleStore.delete` removed, and what it did not find."""

    documents_found: int = 0
    """Requested document ids that were linked to a passage."""
    documents_not_found: int = 0
    hashes_not_found: int = 0
    """Requested hashes with neither stored rows (for the key) nor links."""
    links_removed: int = 0
    passages_deleted: int = 0
    """Stored entries removed: one per (hash, extractor, version)."""
    triples_deleted: int = 0
    kept_shared: int = 0
    """Passages kept because a document id that was not deleted still links them."""


@dataclass(frozen=True)
class StoreSummary:
    """What a store holds (:meth:`TripleStore.summary`)."""

    path: str
    schema: int
    file_bytes: int
    """The database file and its write-ahead log."""
    passages: int
    """Stored entries over all extractors (as :meth:`TripleStore.count` without a key)."""
    triples: int
    documents: int | None
    """Distinct document ids; ``None`` for a read-only schema 1 store (it has none)."""
    extractors: dict[str, dict[str, int]]
    """``extractor@version`` -> ``{"passages": n, "triples": m}`` (:meth:`TripleStore.stats`)."""
    vectors: dict[str, dict[str, int]] = field(default_factory=dict)
    """Embedder identity -> ``{"vectors": n, "bytes": b}`` (:meth:`TripleStore.vector_summary`)."""

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready copy."""
        return asdict(self)


def summary(store: TripleStore) -> StoreSummary:
    """:meth:`TripleStore.summary <neocorrag_core.triples.store.TripleStore.summary>`: what
    the store holds, read in one transaction, and the bytes of its file and write-ahead log."""
    with store._transaction(write=False, action="count the triples of") as conn:
        extractors = _stats(conn)
        documents: int | None = None
        if store.schema_version >= 2:
            documents = int(
                conn.execute("SELECT COUNT(DISTINCT doc_id) FROM documents").fetchone()[0]
            )
        vectors = _vector_stats(conn) if store.schema_version >= 3 else {}
    size = 0
    if not store._memory:
        for part in (store._file, Path(f"{store._file}-wal")):
            with suppress(OSError):
                size += part.stat().st_size
    return StoreSummary(
        path=store.path,
        schema=store.schema_version,
        file_bytes=size,
        passages=sum(v["passages"] for v in extractors.values()),
        triples=sum(v["triples"] for v in extractors.values()),
        documents=documents,
        extractors=extractors,
        vectors=vectors,
    )


def delete(
    store: TripleStore,
    *,
    document_ids: Iterable[str] = (),
    hashes: Iterable[str] = (),
    key: ExtractorKey | None = None,
) -> DeleteReport:
    """:meth:`TripleStore.delete <neocorrag_core.triples.store.TripleStore.delete>`: drop the
    links of ``document_ids`` and the passages left unlinked, and ``hashes``; one transaction."""
    ids = _unique_strings(document_ids, "document id")
    explicit = _unique_strings(hashes, "hash")
    if not ids and not explicit:
        return DeleteReport()
    wanted, explicit_set = set(ids), set(explicit)
    key_sql, key_params = key_filter(key, "AND")
    with store._transaction(action="delete from") as conn:
        linked: dict[str, set[str]] = {}  # hash -> the requested ids linked to it
        for chunk in _chunks(ids):
            for doc_id, digest in conn.execute(
                f"SELECT doc_id, text_sha256 FROM documents WHERE doc_id IN ({_marks(chunk)})",
                chunk,
            ):
                linked.setdefault(digest, set()).add(doc_id)
        found_ids = set().union(*linked.values()) if linked else set()
        shared: set[str] = set()  # linked by a document id that is not being deleted
        has_links: set[str] = set()  # of the explicit hashes
        for chunk in _chunks(sorted(set(linked) | explicit_set)):
            for doc_id, digest in conn.execute(
                f"SELECT doc_id, text_sha256 FROM documents WHERE text_sha256 IN ({_marks(chunk)})",
                chunk,
            ):
                has_links.add(digest)
                if digest in linked and doc_id not in wanted:
                    shared.add(digest)
        drop = sorted((set(linked) - shared) | explicit_set)
        stored: set[str] = set()
        triples_deleted = passages_deleted = 0
        for chunk in _chunks(drop):
            marks, params = _marks(chunk), (*chunk, *key_params)
            stored.update(
                d
                for (d,) in conn.execute(
                    f"SELECT DISTINCT text_sha256 FROM passages WHERE text_sha256 IN ({marks}) "
                    f"{key_sql}",
                    params,
                )
            )
            triples_deleted += conn.execute(
                f"DELETE FROM triples WHERE text_sha256 IN ({marks}) {key_sql}", params
            ).rowcount
            passages_deleted += conn.execute(
                f"DELETE FROM passages WHERE text_sha256 IN ({marks}) {key_sql}", params
            ).rowcount
        touched = sorted(set(linked) | explicit_set)
        unlink = set(touched)
        if key is not None:
            for chunk in _chunks(touched):
                unlink.difference_update(
                    d
                    for (d,) in conn.execute(
                        "SELECT DISTINCT text_sha256 FROM passages "
                        f"WHERE text_sha256 IN ({_marks(chunk)})",
                        chunk,
                    )
                )
        links_removed = 0
        for chunk in _chunks(sorted(unlink & explicit_set)):
            links_removed += conn.execute(
                f"DELETE FROM documents WHERE text_sha256 IN ({_marks(chunk)})", chunk
            ).rowcount
        pairs = [
            (doc_id, digest)
            for digest, doc_ids in linked.items()
            if digest in unlink and digest not in explicit_set
            for doc_id in doc_ids
        ]
        if pairs:
            links_removed += conn.executemany(
                "DELETE FROM documents WHERE doc_id = ? AND text_sha256 = ?", pairs
            ).rowcount
    return DeleteReport(
        documents_found=len(found_ids),
        documents_not_found=len(ids) - len(found_ids),
        hashes_not_found=len(explicit_set - stored - has_links),
        links_removed=links_removed,
        passages_deleted=passages_deleted,
        triples_deleted=triples_deleted,
        kept_shared=len(shared - explicit_set),
    )


def _stats(conn: sqlite3.Connection) -> dict[str, dict[str, int]]:
    rows = conn.execute(
        "SELECT extractor, version, COUNT(*), SUM(num_triples) FROM passages "
        "GROUP BY extractor, version"
    ).fetchall()
    return {f"{e}@{v}": {"passages": n, "triples": int(t or 0)} for e, v, n, t in rows}


def _unique_strings(values: Iterable[str], what: str) -> list[str]:
    if isinstance(values, str):  # a lone id would be read as its characters
        raise InputError(f"pass a list of {what}s, not one string ({values!r})")
    out = list(dict.fromkeys(values))
    for value in out:
        if not isinstance(value, str) or not value:
            raise InputError(f"a {what} must be a non-empty string, got {value!r}")
    # Stored ids have U+FFFD where lone surrogates were; SQLite cannot take those.
    return list(dict.fromkeys(clean_text(value) for value in out))


def _chunks(values: Sequence[str], size: int = 500) -> Iterator[list[str]]:
    # SQLite limits bound parameters per statement; 500 keys per query stays well below.
    for start in range(0, len(values), size):
        yield list(values[start : start + size])


__all__ = ["DeleteReport", "StoreSummary", "delete", "summary"]
