"""``TripleStore``: a SQLite cache of extracted triples, and the source that reads it first.

A passage is extracted once per (text, extractor, version): the key is the sha256 of the
text the extractor reads (title line + whitespace-normalized text), so the same passage
in another corpus, under another id, is found again. A passage that yielded no triples is
stored too (as "done, none"), so re-runs never retry it.
"""

from __future__ import annotations

import hashlib
import logging
import os
import sqlite3
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from neocorrag_core.graph import normalize_entity
from neocorrag_core.triples.extractor import TripleExtractor, clean_triples, passage_document
from neocorrag_core.types import Passage, Triple

logger = logging.getLogger(__name__)

SCHEMA_VERSION = 1

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS passages (
    text_sha256 TEXT NOT NULL,
    extractor TEXT NOT NULL,
    version TEXT NOT NULL,
    num_triples INTEGER NOT NULL,
    created REAL NOT NULL,
    PRIMARY KEY (text_sha256, extractor, version)
);
CREATE TABLE IF NOT EXISTS triples (
    text_sha256 TEXT NOT NULL,
    extractor TEXT NOT NULL,
    version TEXT NOT NULL,
    position INTEGER NOT NULL,
    subject TEXT NOT NULL,
    relation TEXT NOT NULL,
    object TEXT NOT NULL,
    subject_key TEXT NOT NULL,
    object_key TEXT NOT NULL,
    PRIMARY KEY (text_sha256, extractor, version, position)
);
CREATE INDEX IF NOT EXISTS triples_by_subject ON triples (subject_key);
CREATE INDEX IF NOT EXISTS triples_by_object ON triples (object_key);
"""


def default_store_path() -> Path:
    """``$NEOCORRAG_CACHE/triples.sqlite``, else ``~/.cache/neocorrag/triples.sqlite``."""
    root = os.environ.get("NEOCORRAG_CACHE")
    base = Path(root).expanduser() if root else Path.home() / ".cache" / "neocorrag"
    return base / "triples.sqlite"


def text_sha256(passage: Passage) -> str:
    """Store key of a passage: sha256 of :func:`passage_document` (title line + text)."""
    return hashlib.sha256(passage_document(passage).encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class ExtractorKey:
    """Which extractor made the stored triples; part of every store key."""

    extractor_id: str
    version: str

    @classmethod
    def of(cls, extractor: Any) -> ExtractorKey:
        """The key of an extractor object (its ``extractor_id`` and ``version``)."""
        try:
            return cls(str(extractor.extractor_id), str(extractor.version))
        except AttributeError:
            raise TypeError(
                f"{type(extractor).__name__} is not a triple extractor: it needs "
                "'extractor_id' and 'version' attributes (see TripleExtractor)"
            ) from None


class TripleStore:
    """SQLite store of triples per (passage text sha256, extractor id, version).

    Safe for concurrent use: each thread gets its own connection, the database runs in
    WAL mode (readers never block the writer) with a busy timeout, and each write is one
    ``BEGIN IMMEDIATE`` transaction; the first writer of a key wins and later writes of
    the same key are ignored, so two processes indexing the same corpus never duplicate.
    Use ``":memory:"`` for a private, non-persistent store (one connection, locked).
    """

    def __init__(self, path: str | os.PathLike[str] | None = None, *, timeout: float = 60.0):
        self.path = str(path) if path is not None else str(default_store_path())
        self.timeout = timeout
        self._memory = self.path == ":memory:"
        self._local = threading.local()
        self._memory_lock = threading.RLock()
        self._shared_conn: sqlite3.Connection | None = None
        if not self._memory:
            parent = Path(self.path).expanduser().parent
            try:
                parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise OSError(f"cannot create the triple store folder {parent}: {exc}") from None
        with self._memory_lock:
            # executescript manages its own transaction; CREATE ... IF NOT EXISTS is idempotent.
            self._conn().executescript(_SCHEMA)
        with self._transaction() as conn:
            row = conn.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone()
            if row is None:
                conn.execute(
                    "INSERT OR IGNORE INTO meta VALUES ('schema', ?)", (str(SCHEMA_VERSION),)
                )
            elif row[0] != str(SCHEMA_VERSION):
                raise ValueError(
                    f"{self.path} was written by another neocorrag store schema ({row[0]}, "
                    f"this version reads {SCHEMA_VERSION}); use a new --store path"
                )

    def __repr__(self) -> str:
        return f"TripleStore({self.path!r})"

    def __getstate__(self) -> dict[str, Any]:
        if self._memory:
            raise TypeError("an in-memory TripleStore cannot be pickled; use a file path")
        return {"path": self.path, "timeout": self.timeout}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["path"], timeout=state["timeout"])  # type: ignore[misc]

    # -- connections ---------------------------------------------------------------------

    def _connect(self) -> sqlite3.Connection:
        try:
            conn = sqlite3.connect(
                os.path.expanduser(self.path),
                timeout=self.timeout,
                isolation_level=None,  # we issue BEGIN ourselves
                check_same_thread=not self._memory,
            )
        except sqlite3.Error as exc:
            raise OSError(f"cannot open the triple store {self.path}: {exc}") from None
        if not self._memory:
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
        return conn

    def _conn(self) -> sqlite3.Connection:
        if self._memory:
            if self._shared_conn is None:
                self._shared_conn = self._connect()
            return self._shared_conn
        conn = getattr(self._local, "conn", None)
        # A connection must not cross a fork: a child process opens its own.
        if conn is None or getattr(self._local, "pid", None) != os.getpid():
            conn = self._connect()
            self._local.conn, self._local.pid = conn, os.getpid()
        return conn

    @contextmanager
    def _transaction(self, *, write: bool = True) -> Iterator[sqlite3.Connection]:
        with self._memory_lock if self._memory else _nullcontext():
            conn = self._conn()
            conn.execute("BEGIN IMMEDIATE" if write else "BEGIN")
            try:
                yield conn
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")

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
        with self._transaction(write=False) as conn:
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

    def put_many(self, items: Sequence[tuple[Passage, Sequence[Triple]]], key: ExtractorKey) -> int:
        """Store each passage's triples (cleaned, de-duplicated); returns triples written.

        A key that is already stored is left as it is (the first writer wins).
        """
        written = 0
        now = time.time()
        with self._transaction() as conn:
            for passage, triples in items:
                digest = text_sha256(passage)
                cleaned = clean_triples(triples, passage.id)
                cur = conn.execute(
                    "INSERT OR IGNORE INTO passages VALUES (?, ?, ?, ?, ?)",
                    (digest, key.extractor_id, key.version, len(cleaned), now),
                )
                if cur.rowcount == 0:
                    continue
                conn.executemany(
                    "INSERT INTO triples VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    [
                        (
                            digest,
                            key.extractor_id,
                            key.version,
                            i,
                            t.subject,
                            t.relation,
                            t.object,
                            normalize_entity(t.subject),
                            normalize_entity(t.object),
                        )
                        for i, t in enumerate(cleaned)
                    ],
                )
                written += len(cleaned)
        return written

    def contains(self, passages: Sequence[Passage], key: ExtractorKey) -> list[bool]:
        """Whether each passage is stored for this extractor (no triples are read)."""
        hashes = [text_sha256(p) for p in passages]
        unique = sorted(set(hashes))
        present: set[str] = set()
        with self._transaction(write=False) as conn:
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
        norm = normalize_entity(name)
        sql = (
            "SELECT subject, relation, object FROM triples "
            "WHERE (subject_key = ? OR object_key = ?)"
        )
        params: tuple[Any, ...] = (norm, norm)
        if key is not None:
            sql += " AND extractor = ? AND version = ?"
            params += (key.extractor_id, key.version)
        with self._transaction(write=False) as conn:
            rows = conn.execute(sql, params).fetchall()
        return [Triple(s, r, o) for s, r, o in dict.fromkeys(rows)]

    def stats(self) -> dict[str, dict[str, int]]:
        """Passages and triples stored per ``extractor@version``."""
        with self._transaction(write=False) as conn:
            rows = conn.execute(
                "SELECT extractor, version, COUNT(*), SUM(num_triples) FROM passages "
                "GROUP BY extractor, version"
            ).fetchall()
        return {f"{e}@{v}": {"passages": n, "triples": int(t or 0)} for e, v, n, t in rows}


@contextmanager
def _nullcontext() -> Iterator[None]:
    yield


@dataclass
class CacheStats:
    """What a :class:`CachedTripleSource` did: passages served from the store or extracted."""

    hits: int = 0
    extracted: int = 0
    triples_written: int = 0


class CachedTripleSource:
    """A ``TripleSource`` that reads the store first, extracts only what is missing, stores it.

    Identical passages in one call are extracted once. ``stats`` counts hits and
    extractions over the life of the source (the CLI and tests read it).
    """

    def __init__(
        self,
        store: TripleStore,
        extractor: TripleExtractor,
        *,
        batch_size: int = 32,
    ) -> None:
        if batch_size < 1:
            raise ValueError("batch_size must be at least 1")
        self.store = store
        self.extractor = extractor
        self.key = ExtractorKey.of(extractor)
        self.batch_size = batch_size
        self.stats = CacheStats()
        self._lock = threading.Lock()

    def triples_for(self, passages: Sequence[Passage]) -> list[list[Triple]]:
        """Stored triples per passage; missing passages are extracted and written back."""
        passages = list(passages)
        stored = self.store.get_many(passages, self.key)
        missing: dict[str, list[int]] = {}
        for i, found in enumerate(stored):
            if found is None:
                missing.setdefault(text_sha256(passages[i]), []).append(i)
        result: list[list[Triple]] = [found or [] for found in stored]
        with self._lock:
            self.stats.hits += len(passages) - sum(len(v) for v in missing.values())
        todo = [idxs[0] for idxs in missing.values()]
        for start in range(0, len(todo), self.batch_size):
            batch = [passages[i] for i in todo[start : start + self.batch_size]]
            self.extract_and_store(batch)
        if todo:
            # Read back, so every passage gets exactly the stored (cleaned) form.
            again = self.store.get_many(
                [passages[i] for idxs in missing.values() for i in idxs], self.key
            )
            flat = [i for idxs in missing.values() for i in idxs]
            for i, found in zip(flat, again, strict=True):
                result[i] = found or []
        return result

    def extract_and_store(self, batch: Sequence[Passage]) -> int:
        """Extract one batch and write it; returns the number of triples written."""
        extracted = self.extractor.extract(batch)
        if len(extracted) != len(batch):
            raise RuntimeError(
                f"{type(self.extractor).__name__}.extract returned {len(extracted)} lists for "
                f"{len(batch)} passages"
            )
        written = self.store.put_many(list(zip(batch, extracted, strict=True)), self.key)
        with self._lock:
            self.stats.extracted += len(batch)
            self.stats.triples_written += written
        return written
