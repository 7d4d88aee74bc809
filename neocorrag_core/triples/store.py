"""``TripleStore``: a SQLite cache of extracted triples, and the source that reads it first.

A passage is extracted once per (text, extractor, version): the key is the sha256 of the
text the extractor reads (title line + whitespace-normalized text), so the same passage
in another corpus, under another id, is found again. A passage that yielded no triples is
stored too (as "done, none"), so re-runs never retry it.

Since schema 2 the store also maps the ids of the user's documents to the content hashes
they were stored under (the ``documents`` table), so a document can be deleted by its id
(:meth:`TripleStore.delete`), and a store can be moved between machines as JSON lines
(:meth:`TripleStore.export_jsonl`, :meth:`TripleStore.import_jsonl`).

This module is the store itself: its state, connections and transactions, and its reads
and writes of triples and document ids. Its parts live beside it and are re-exported here,
so ``from neocorrag_core.triples.store import ...`` reaches all of them: the keys
(:mod:`~neocorrag_core.triples.keys`), opening the file
(:mod:`~neocorrag_core.triples.store_open`), its errors
(:mod:`~neocorrag_core.triples.store_errors`), the tables and their migrations
(:mod:`~neocorrag_core.triples.store_schema`, :mod:`~neocorrag_core.triples.store_migrate`),
the vector cache (:mod:`~neocorrag_core.triples.store_vectors`), summary and delete
(:mod:`~neocorrag_core.triples.store_maintenance`), the export format
(:mod:`~neocorrag_core.triples.store_jsonl`), the indexer lock
(:mod:`~neocorrag_core.triples.indexer_lock`) and the source that reads the store first
(:mod:`~neocorrag_core.triples.cached`).
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager, nullcontext, suppress
from pathlib import Path
from typing import Any, TextIO

import numpy as np

from neocorrag_core.errors import ConfigError, InputError, StoreError
from neocorrag_core.text.entities import normalize_entity
from neocorrag_core.triples import store_jsonl, store_maintenance, store_vectors
from neocorrag_core.triples.cached import CachedTripleSource as CachedTripleSource
from neocorrag_core.triples.cached import CacheStats as CacheStats
from neocorrag_core.triples.extractor import clean_triples
from neocorrag_core.triples.indexer_lock import hold_indexer_lock
from neocorrag_core.triples.keys import ExtractorKey as ExtractorKey
from neocorrag_core.triples.keys import text_sha256 as text_sha256
from neocorrag_core.triples.store_errors import StoreSchemaError, sqlite_error
from neocorrag_core.triples.store_jsonl import ImportReport as ImportReport
from neocorrag_core.triples.store_maintenance import (
    DeleteReport,
    StoreSummary,
    _chunks,
    _stats,
    _unique_strings,
)
from neocorrag_core.triples.store_migrate import check_schema, create_schema, require_documents
from neocorrag_core.triples.store_open import _cannot_share_wal_index as _cannot_share_wal_index
from neocorrag_core.triples.store_open import (
    _decide_read_only,
    check_same_file,
    connect,
    default_store_path,
    prepare_file,
)
from neocorrag_core.triples.store_schema import SCHEMA_VERSION as SCHEMA_VERSION
from neocorrag_core.triples.store_schema import _marks, insert_entry, key_filter
from neocorrag_core.triples.store_vectors import (
    DEFAULT_MAX_VECTOR_BYTES,
    VECTOR_DTYPE,
    VECTOR_ROW_OVERHEAD,
    _vector_bound,
)
from neocorrag_core.types import Passage, Triple
from neocorrag_core.validation import clean_text


class TripleStore:
    """SQLite store of triples per (passage text sha256, extractor id, version).

    Safe for concurrent use: each thread gets its own connection, the database runs in
    WAL mode (readers never block the writer) with a busy timeout, and each write is one
    ``BEGIN IMMEDIATE`` transaction; the first writer of a key wins and later writes of
    the same key are ignored, so two processes indexing the same corpus never store a
    passage twice (:meth:`indexer_lock` keeps them from extracting it twice).
    Use ``":memory:"`` for a private, non-persistent store (one connection, locked).

    Args:
        path: the SQLite file (default :func:`default_store_path`); created if missing.
        timeout: seconds a write waits for another writer before failing.
        read_only: open without ever writing (``mode=ro``, ``PRAGMA query_only``), e.g. a
            pre-built shared cache; writes then raise :class:`StoreError`. ``None`` (the
            default) opens read-only exactly when the file or its folder is not writable.
        max_vector_bytes: bound of the vectors it keeps (:meth:`put_vectors`); ``None``:
            ``NEOCORRAG_MAX_VECTOR_BYTES``, else :data:`DEFAULT_MAX_VECTOR_BYTES`.

    A schema 1 store (before document ids) is migrated when opened writable; open
    read-only it is read as it is (``schema_version`` says which), and only the
    document-id reads raise :class:`StoreError`.

    Every failure to open, read or write raises :class:`~neocorrag_core.errors.StoreError`
    naming the file, the cause and the fix. A file that is not a neocorrag store (not
    SQLite, truncated, garbled, another program's database) is refused and left byte for
    byte as it is: never repaired, overwritten or recreated.
    """

    def __init__(
        self,
        path: str | os.PathLike[str] | None = None,
        *,
        timeout: float = 60.0,
        read_only: bool | None = None,
        max_vector_bytes: int | None = None,
    ) -> None:
        self.path = str(path) if path is not None else str(default_store_path())
        self.max_vector_bytes = _vector_bound(max_vector_bytes)
        self.timeout = timeout
        self._memory = self.path == ":memory:"
        self._local = threading.local()
        self._memory_lock = threading.RLock()
        self._shared_conn: sqlite3.Connection | None = None
        self._immutable = False  # set when a read-only store must be read as immutable
        self._file_id: tuple[int, int] | None = None  # (device, inode) of the file opened
        self.schema_version = SCHEMA_VERSION  # an old store open read-only says its own
        self._read_only_asked = read_only  # pickled: an unpickled copy detects again
        self._file = Path(os.path.expanduser(self.path))
        if self._memory:
            if read_only:
                raise ConfigError("an in-memory TripleStore cannot be read-only (it starts empty)")
            self.read_only = False
        else:
            self.read_only = _decide_read_only(self._file) if read_only is None else read_only
            prepare_file(self)
        if self.read_only:
            check_schema(self)
        else:
            create_schema(self)

    def __repr__(self) -> str:
        flag = ", read_only=True" if self.read_only else ""
        return f"TripleStore({self.path!r}{flag})"

    def __getstate__(self) -> dict[str, Any]:
        if self._memory:
            raise TypeError("an in-memory TripleStore cannot be pickled; use a file path")
        return {
            "path": self.path,
            "timeout": self.timeout,
            "read_only": self._read_only_asked,
            "max_vector_bytes": self.max_vector_bytes,
        }

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(  # type: ignore[misc]
            state["path"],
            timeout=state["timeout"],
            read_only=state.get("read_only"),
            max_vector_bytes=state.get("max_vector_bytes"),
        )

    # -- connections ---------------------------------------------------------------------

    def _conn(self) -> sqlite3.Connection:
        if self._memory:
            if self._shared_conn is None:
                self._shared_conn = connect(self)
            return self._shared_conn
        conn = getattr(self._local, "conn", None)
        # A connection must not cross a fork: a child process opens its own.
        if conn is None or getattr(self._local, "pid", None) != os.getpid():
            conn = connect(self)
            self._local.conn, self._local.pid = conn, os.getpid()
        return conn

    @contextmanager
    def _guard(self, action: str) -> Iterator[None]:
        """Turn any SQLite failure into a :class:`StoreError` naming file, cause and fix."""
        try:
            yield
        except sqlite3.Error as exc:
            raise self._error(action, exc) from exc

    @contextmanager
    def _transaction(
        self, *, write: bool = True, action: str = "read", wait: bool = True
    ) -> Iterator[sqlite3.Connection]:
        if write and self.read_only:
            raise StoreError(
                f"cannot {action} the triple store {self.path}: it is open read-only (the file "
                "or its folder is not writable, or read_only=True); write to a writable "
                "copy, or point NEOCORRAG_CACHE / --store at a writable file"
            )
        with self._memory_lock if self._memory else nullcontext(), self._guard(action):
            if not self._memory:
                check_same_file(self, action)
            conn = self._conn()
            if not wait:  # a best-effort write: give up at once if another process writes
                conn.execute("PRAGMA busy_timeout = 0")
            try:
                conn.execute("BEGIN IMMEDIATE" if write else "BEGIN")
            finally:
                if not wait:
                    conn.execute(f"PRAGMA busy_timeout = {int(self.timeout * 1000)}")
            try:
                yield conn
                conn.execute("COMMIT")
            except BaseException:
                _rollback(conn)
                raise

    def _error(self, action: str, exc: sqlite3.Error) -> StoreError:
        """``exc`` as a :class:`StoreError` naming the file, the cause and the fix
        (:func:`~neocorrag_core.triples.store_errors.sqlite_error`)."""
        return sqlite_error(self, action, exc)

    def close(self) -> None:
        """Close this thread's connection (others close when their thread ends)."""
        conn = self._shared_conn if self._memory else getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
        self._shared_conn = None
        self._local = threading.local()

    def __enter__(self) -> TripleStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- one indexer at a time -----------------------------------------------------------

    @contextmanager
    def indexer_lock(self, on_wait: Callable[[int | None], None] | None = None) -> Iterator[None]:
        """Hold the store's indexer lock while extracting into it; wait if another run holds it.

        The lock is an OS advisory lock (``flock``) on ``<store>.lock``: it is released when
        its holder ends, even by ``kill -9``, so a stale lock cannot exist, and the file is
        deleted when the lock is let go, however the block ends. A second run
        blocks here until the first is done (``on_wait`` is called once with the holder's
        pid, if known; otherwise a warning is logged), then finds the first run's passages
        stored and extracts only what is left: no passage is extracted twice. Where file
        locks are unsupported the run proceeds unlocked (the store's first-writer-wins
        writes keep it correct; only the extraction work may be repeated).
        """
        if self._memory:
            yield
            return
        with hold_indexer_lock(Path(f"{self._file}.lock"), self.path, on_wait):
            yield

    # -- reads and writes ----------------------------------------------------------------

    def get_many(self, passages: Sequence[Passage], key: ExtractorKey) -> list[list[Triple] | None]:
        """Stored triples per passage (``source_ids`` = the passage's id); ``None``: not stored."""
        hashes = [text_sha256(p) for p in passages]
        found = self._read(sorted(set(hashes)), key)
        out: list[list[Triple] | None] = []
        for passage, digest in zip(passages, hashes, strict=True):
            rows = found.get(digest)
            if rows is None:
                out.append(None)
            else:
                out.append([Triple(s, r, o, (passage.id,)) for s, r, o in rows])
        return out

    def _read(self, hashes: list[str], key: ExtractorKey) -> dict[str, list[tuple[str, str, str]]]:
        found: dict[str, list[tuple[str, str, str]]] = {}
        # SQLite limits bound parameters per statement; 500 keys per query stays well below.
        with self._transaction(write=False, action="read triples from") as conn:
            for start in range(0, len(hashes), 500):
                chunk = hashes[start : start + 500]
                marks = ",".join("?" * len(chunk))
                params = (key.extractor_id, key.version, *chunk)
                for (digest,) in conn.execute(
                    "SELECT text_sha256 FROM passages WHERE extractor = ? AND version = ? "
                    f"AND text_sha256 IN ({marks})",
                    params,
                ):
                    found[digest] = []
                for digest, s, r, o in conn.execute(
                    "SELECT text_sha256, subject, relation, object FROM triples "
                    f"WHERE extractor = ? AND version = ? AND text_sha256 IN ({marks}) "
                    "ORDER BY text_sha256, position",
                    params,
                ):
                    found[digest].append((s, r, o))
        return found

    def put_many(
        self,
        items: Sequence[tuple[Passage, Sequence[Triple]]],
        key: ExtractorKey,
        *,
        link_ids: bool = False,
    ) -> int:
        """Store each passage's triples (cleaned, de-duplicated); returns triples written.

        A key that is already stored is left as it is (the first writer wins). With
        ``link_ids``, each passage's ``id`` is also linked to its content hash (also when
        the content was stored already), so that :meth:`delete` finds it by that id.

        Off by default: ids made up on the way (a query's ``#1``, a corpus loader's content
        hash) are not document ids, and a made-up link would keep a passage alive after
        the user deleted the document it came from. Ingestion links the ids it knows
        explicitly (:meth:`link_documents`).
        """
        written = 0
        now = time.time()
        with self._transaction(action="write triples to") as conn:
            for passage, triples in items:
                digest = text_sha256(passage)
                if link_ids:
                    conn.execute(
                        "INSERT OR IGNORE INTO documents VALUES (?, ?)", (passage.id, digest)
                    )
                cleaned = clean_triples(triples, passage.id)
                if insert_entry(conn, digest, key.extractor_id, key.version, cleaned, now):
                    written += len(cleaned)
        return written

    def link_documents(self, pairs: Sequence[tuple[str, Passage]]) -> int:
        """Link more document ids to passages' content hashes; returns the new links made.

        For ids the store does not see through :meth:`put_many` (e.g. the id of the source
        document a LlamaIndex node was split from), so that deleting that id finds the
        passage. Links already present are left alone; the passage need not be stored yet.
        """
        rows = []
        for doc_id, passage in pairs:
            if not isinstance(doc_id, str) or not doc_id:
                raise InputError(f"a document id must be a non-empty string, got {doc_id!r}")
            rows.append((clean_text(doc_id), text_sha256(passage)))
        if not rows:
            return 0
        with self._transaction(action="link document ids in") as conn:
            return int(
                conn.executemany("INSERT OR IGNORE INTO documents VALUES (?, ?)", rows).rowcount
            )

    def document_hashes(self, document_ids: Iterable[str]) -> dict[str, list[str]]:
        """The content hashes each known document id is linked to (unknown ids are absent)."""
        require_documents(self, "read the document ids of")
        ids = _unique_strings(document_ids, "document id")
        found: dict[str, list[str]] = {}
        with self._transaction(write=False, action="read the document ids of") as conn:
            for chunk in _chunks(ids):
                for doc_id, digest in conn.execute(
                    f"SELECT doc_id, text_sha256 FROM documents WHERE doc_id IN ({_marks(chunk)}) "
                    "ORDER BY doc_id, text_sha256",
                    chunk,
                ):
                    found.setdefault(doc_id, []).append(digest)
        return found

    def delete(
        self,
        *,
        document_ids: Iterable[str] = (),
        hashes: Iterable[str] = (),
        key: ExtractorKey | None = None,
    ) -> DeleteReport:
        """Remove documents (by the ids they were stored under) and passages (by hash).

        The links of ``document_ids`` are dropped; every passage that was linked to them and
        is now linked to no other document id loses its stored triples, and so do the given
        ``hashes`` (which also lose all their links). A passage another document id still
        links is kept (``kept_shared``). With ``key``, only that extractor's rows go, and a
        link goes only once no extractor's rows are left for its passage (so the other
        extractors' triples stay deletable by document id). Ids and hashes that match
        nothing are counted as not found, not raised. All of it is one transaction.
        """
        return store_maintenance.delete(self, document_ids=document_ids, hashes=hashes, key=key)

    def contains(self, passages: Sequence[Passage], key: ExtractorKey) -> list[bool]:
        """Whether each passage is stored for this extractor (no triples are read)."""
        hashes = [text_sha256(p) for p in passages]
        unique = sorted(set(hashes))
        present: set[str] = set()
        with self._transaction(write=False, action="read") as conn:
            for start in range(0, len(unique), 500):
                chunk = unique[start : start + 500]
                marks = ",".join("?" * len(chunk))
                present.update(
                    d
                    for (d,) in conn.execute(
                        "SELECT text_sha256 FROM passages WHERE extractor = ? AND version = ? "
                        f"AND text_sha256 IN ({marks})",
                        (key.extractor_id, key.version, *chunk),
                    )
                )
        return [h in present for h in hashes]

    def find_entity(self, name: str, key: ExtractorKey | None = None) -> list[Triple]:
        """Every stored triple whose subject or object normalizes to ``name`` (case-folded)."""
        # the stored keys' form; stored text has U+FFFD where lone surrogates were
        norm = normalize_entity(clean_text(name), fold_accents=False)
        sql = (
            "SELECT subject, relation, object FROM triples "
            "WHERE (subject_key = ? OR object_key = ?)"
        )
        params: tuple[Any, ...] = (norm, norm)
        if key is not None:
            sql += " AND extractor = ? AND version = ?"
            params += (key.extractor_id, key.version)
        with self._transaction(write=False, action="search") as conn:
            rows = conn.execute(sql, params).fetchall()
        return [Triple(s, r, o) for s, r, o in dict.fromkeys(rows)]

    # -- vectors (the embedder cache) ----------------------------------------------------

    def get_vectors(self, embedder_id: str, keys: Sequence[bytes]) -> dict[bytes, np.ndarray]:
        """The stored vectors of ``keys`` (text keys, :func:`~neocorrag_core.models.text_key`)
        under ``embedder_id``; keys without a vector are absent.

        Rows read on a later day than they were last used get their use day refreshed (for
        least-recently-used eviction), at most once a day each and never waiting for
        another writer: a busy store just skips the refresh.
        """
        return store_vectors.get_vectors(self, embedder_id, keys)

    def put_vectors(self, embedder_id: str, vectors: Mapping[bytes, np.ndarray]) -> None:
        """Store ``vectors`` (text key -> vector) under ``embedder_id``; a key stored
        already is left as it is. On a read-only store this does nothing (it is a cache).

        When the vectors' bytes pass :attr:`max_vector_bytes`, the least recently used go
        until a tenth of the bound is free again.
        """
        store_vectors.put_vectors(self, embedder_id, vectors)

    def vector_summary(self) -> dict[str, dict[str, int]]:
        """Vectors stored per embedder identity: ``{"vectors": n, "bytes": b}``."""
        return store_vectors.vector_summary(self)

    def evicted_vectors(self) -> int:
        """How many vectors the byte bound (:attr:`max_vector_bytes`) has evicted from this
        store since it was made, in every process that wrote to it. A count that grows while
        a corpus is indexed means the store cannot hold the corpus's vectors: queries over
        the evicted passages embed those texts again (``neocorrag index`` warns)."""
        return store_vectors.evicted_vectors(self)

    def stats(self) -> dict[str, dict[str, int]]:
        """Passages and triples stored per ``extractor@version``."""
        with self._transaction(write=False, action="count the triples of") as conn:
            return _stats(conn)

    def count(self, key: ExtractorKey | None = None) -> int:
        """Passages stored for ``key``; without one, stored entries over all extractors (a
        text stored by two extractors counts twice, as in :meth:`stats`)."""
        where, params = key_filter(key, "WHERE")
        with self._transaction(write=False, action="count the passages of") as conn:
            return int(conn.execute(f"SELECT COUNT(*) FROM passages {where}", params).fetchone()[0])

    def summary(self) -> StoreSummary:
        """What the store holds (passages, triples, document ids, per extractor) and its size.

        Read in one transaction, so the numbers agree with each other while a writer runs.
        """
        return store_maintenance.summary(self)

    # -- export and import ---------------------------------------------------------------

    def export_jsonl(
        self,
        dest: str | os.PathLike[str] | TextIO,
        *,
        key: ExtractorKey | None = None,
        show_progress: bool = False,
    ) -> int:
        """Write the store (or one extractor's part) as JSON lines; returns the entries written.

        A header line ``{"neocorrag_triple_store_export": 1, "schema": 3}``, then one line
        per stored (hash, extractor, version): ``{"text_sha256", "extractor", "version",
        "triples": [[s, r, o], ...], "document_ids": [...]}``, and last an end marker
        ``{"neocorrag_triple_store_export_end": N, "sha256": "<hex>"}`` (N entries; the
        sha256 of the lines before it), without which an import refuses the file as cut
        short, and whose checksum an import verifies. Streamed from one read
        transaction (a consistent snapshot, even while a writer runs): neither the store nor
        the file is held in memory. A path is written to a temporary file first and renamed
        over ``dest`` at the end, so a failed export never leaves a truncated file. Document
        ids linked to a passage that has no stored triples have no line to go on and are
        not exported. A read-only schema 1 store exports with empty ``document_ids``.
        """
        return store_jsonl.export_jsonl(self, dest, key=key, show_progress=show_progress)

    def import_jsonl(
        self,
        src: str | os.PathLike[str] | TextIO,
        *,
        batch_size: int = 500,
        show_progress: bool = False,
        allow_truncated: bool = False,
        verify: bool = True,
    ) -> ImportReport:
        """Add the entries of an :meth:`export_jsonl` file; returns what was imported.

        Read line by line and written ``batch_size`` lines per transaction. The first writer
        wins: an entry already stored is skipped (counted), but its document ids are still
        linked. Triples are cleaned as :meth:`put_many` cleans them. A line that is not a
        valid entry is skipped; one warning names the skipped line numbers. The whole file
        is checked first: one without the export header, or without the end marker that
        closes every export (or whose count does not match), raises
        :class:`~neocorrag_core.errors.InputError` before anything is written; with
        ``allow_truncated=True`` the entries of such a file are imported and the report's
        ``complete`` is ``False``. A file whose header names a store schema this version
        does not know is refused the same way, and so is one whose lines do not match the
        sha256 in its end marker (edited or damaged since it was exported) unless
        ``verify=False`` (for a file edited on purpose). An export of an older neocorrag,
        whose end marker has no checksum, is imported with a warning that it could not be
        verified. Lone surrogates (``"\\ud800"`` escapes) become U+FFFD.
        """
        return store_jsonl.import_jsonl(
            self,
            src,
            batch_size=batch_size,
            show_progress=show_progress,
            allow_truncated=allow_truncated,
            verify=verify,
        )


def _rollback(conn: sqlite3.Connection) -> None:
    # SQLite may have rolled back already (e.g. on a full disk); a failing ROLLBACK must not
    # hide the error that caused it.
    if conn.in_transaction:
        with suppress(sqlite3.Error):
            conn.execute("ROLLBACK")


__all__ = [
    "DEFAULT_MAX_VECTOR_BYTES",
    "SCHEMA_VERSION",
    "VECTOR_DTYPE",
    "VECTOR_ROW_OVERHEAD",
    "CacheStats",
    "CachedTripleSource",
    "DeleteReport",
    "ExtractorKey",
    "ImportReport",
    "StoreSchemaError",
    "StoreSummary",
    "TripleStore",
    "default_store_path",
    "text_sha256",
]
