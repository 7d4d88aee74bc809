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
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, nullcontext, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from neocorrag_core.errors import ConfigError, StoreError
from neocorrag_core.graph import normalize_entity
from neocorrag_core.triples.extractor import TripleExtractor, clean_triples, passage_document
from neocorrag_core.types import Passage, Triple

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: indexing runs without the indexer lock
    fcntl = None  # type: ignore[assignment]

logger = logging.getLogger(__name__)

SCHEMA_VERSION = 1
_SQLITE_MAGIC = b"SQLite format 3\x00"  # the first 16 bytes of every SQLite 3 database

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


class StoreSchemaError(StoreError, ValueError):
    """The store file was written by another neocorrag store schema.

    Also a ``ValueError``, what this case raised before the :mod:`~neocorrag_core.errors`
    family existed.
    """


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
    ) -> None:
        self.path = str(path) if path is not None else str(default_store_path())
        self.timeout = timeout
        self._memory = self.path == ":memory:"
        self._local = threading.local()
        self._memory_lock = threading.RLock()
        self._shared_conn: sqlite3.Connection | None = None
        self._immutable = False  # set when a read-only store must be read as immutable
        self._read_only_asked = read_only  # pickled: an unpickled copy detects again
        self._file = Path(os.path.expanduser(self.path))
        if self._memory:
            if read_only:
                raise ConfigError("an in-memory TripleStore cannot be read-only (it starts empty)")
            self.read_only = False
        else:
            self.read_only = _decide_read_only(self._file) if read_only is None else read_only
            self._prepare_file()
        if self.read_only:
            self._check_schema()
        else:
            self._create_schema()

    def __repr__(self) -> str:
        flag = ", read_only=True" if self.read_only else ""
        return f"TripleStore({self.path!r}{flag})"

    def __getstate__(self) -> dict[str, Any]:
        if self._memory:
            raise TypeError("an in-memory TripleStore cannot be pickled; use a file path")
        return {"path": self.path, "timeout": self.timeout, "read_only": self._read_only_asked}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(  # type: ignore[misc]
            state["path"], timeout=state["timeout"], read_only=state.get("read_only")
        )

    # -- opening -------------------------------------------------------------------------

    def _prepare_file(self) -> None:
        """Make the folder of a writable store; refuse a file that is not SQLite at all.

        The header is checked by hand, before SQLite sees the file, so that nothing (not
        even a journal-mode pragma) is ever attempted on a file that is not a database.
        An empty file is accepted: SQLite reads it as a new, empty database.
        """
        if not self.read_only:
            try:
                self._file.parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise StoreError(
                    f"cannot create the triple store folder {self._file.parent}: "
                    f"{exc.strerror or exc}; point NEOCORRAG_CACHE / --store at a writable place"
                ) from None
        try:
            with open(self._file, "rb") as fh:
                head = fh.read(len(_SQLITE_MAGIC))
        except FileNotFoundError:
            if self.read_only:
                raise StoreError(
                    f"there is no triple store at {self.path}: a read-only store is only read, "
                    f"never created; build it first (neocorrag index CORPUS --store {self.path})"
                ) from None
            if not os.access(self._file.parent, os.W_OK):
                raise StoreError(
                    f"cannot create the triple store {self.path}: its folder is not writable; "
                    "point NEOCORRAG_CACHE / --store at a writable place"
                ) from None
            return
        except OSError as exc:
            raise StoreError(
                f"cannot read the triple store {self.path}: {exc.strerror or exc}; check its "
                "permissions, or point NEOCORRAG_CACHE / --store elsewhere"
            ) from None
        if head and head != _SQLITE_MAGIC:
            raise StoreError(self._damaged("it is not an SQLite database"))

    def _create_schema(self) -> None:
        with self._transaction(write=False, action="open") as conn:
            tables = _tables(conn)
        if tables and "meta" not in tables:
            # Someone else's SQLite database: refuse it rather than adding our tables to it.
            raise StoreError(self._foreign(tables))
        if not self._memory:
            with self._guard("open"):
                # Persistent in the file, so later connections (other threads) need not set
                # it; a no-op (no write) when the store is in WAL mode already.
                self._conn().execute("PRAGMA journal_mode=WAL")
        if {"meta", "passages", "triples"} <= tables:  # the usual case: only check
            with self._transaction(write=False, action="open") as conn:
                self._check_version(conn, insert=False)
            return
        # One transaction: a concurrent opener sees either no schema or all of it.
        with self._transaction(action="create the tables of") as conn:
            for statement in _SCHEMA.split(";"):
                if statement.strip():
                    conn.execute(statement)
            self._check_version(conn, insert=True)

    def _check_schema(self) -> None:
        with self._transaction(write=False, action="open") as conn:
            tables = _tables(conn)
            if tables and "meta" not in tables:
                raise StoreError(self._foreign(tables))
            if not {"meta", "passages", "triples"} <= tables:
                found = f"tables {', '.join(sorted(tables))}" if tables else "no tables"
                raise StoreError(self._damaged(f"it has {found}, and it is open read-only"))
            self._check_version(conn, insert=False)

    def _check_version(self, conn: sqlite3.Connection, *, insert: bool) -> None:
        row = conn.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone()
        if row is None and insert:
            conn.execute("INSERT OR IGNORE INTO meta VALUES ('schema', ?)", (str(SCHEMA_VERSION),))
        elif row is None or row[0] != str(SCHEMA_VERSION):
            found = "no schema version" if row is None else f"schema {row[0]}"
            raise StoreSchemaError(
                f"{self.path} was written by another neocorrag store schema ({found}, this "
                f"version reads {SCHEMA_VERSION}); use a new --store path (or NEOCORRAG_CACHE)"
            )

    # -- connections ---------------------------------------------------------------------

    def _open(self, target: str, *, uri: bool = False) -> sqlite3.Connection:
        return sqlite3.connect(
            target,
            timeout=self.timeout,
            isolation_level=None,  # we issue BEGIN ourselves
            check_same_thread=not self._memory,
            uri=uri,
        )

    def _connect(self) -> sqlite3.Connection:
        if self._memory:
            return self._open(":memory:")
        if not self.read_only:
            conn = self._open(str(self._file))
            conn.execute("PRAGMA synchronous=NORMAL")
            return conn
        conn = self._connect_read_only()
        if self._immutable:
            return conn
        try:
            # SQLite opens lazily: read once now to learn whether the WAL index can be shared.
            conn.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()
            return conn
        except sqlite3.OperationalError as exc:
            conn.close()
            wal = Path(f"{self._file}-wal")
            if not _cannot_share_wal_index(exc) or wal.exists():
                raise
        # A read-only folder without the -wal / -shm files: SQLite cannot create the shared
        # WAL index, so it can read the file only as immutable. No -wal file means no process
        # has it open for writing now; such a store must not be rewritten while it is read.
        logger.info("%s is in a read-only folder: reading it as immutable", self.path)
        self._immutable = True
        return self._connect_read_only()

    def _connect_read_only(self) -> sqlite3.Connection:
        uri = f"{self._file.absolute().as_uri()}?mode=ro"
        if self._immutable:
            uri += "&immutable=1"
        conn = self._open(uri, uri=True)
        conn.execute("PRAGMA query_only=ON")  # belt and braces: SQLite refuses every write
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
    def _guard(self, action: str) -> Iterator[None]:
        """Turn any SQLite failure into a :class:`StoreError` naming file, cause and fix."""
        try:
            yield
        except sqlite3.Error as exc:
            raise self._error(action, exc) from exc

    @contextmanager
    def _transaction(
        self, *, write: bool = True, action: str = "read"
    ) -> Iterator[sqlite3.Connection]:
        if write and self.read_only:
            raise StoreError(
                f"cannot {action} the triple store {self.path}: it is open read-only (the file "
                "or its folder is not writable, or read_only=True); write to a writable "
                "copy, or point NEOCORRAG_CACHE / --store at a writable file"
            )
        with self._memory_lock if self._memory else nullcontext(), self._guard(action):
            conn = self._conn()
            conn.execute("BEGIN IMMEDIATE" if write else "BEGIN")
            try:
                yield conn
                conn.execute("COMMIT")
            except BaseException:
                _rollback(conn)
                raise

    def _damaged(self, cause: str) -> str:
        return (
            f"the triple store {self.path} is damaged or is not a neocorrag triple store "
            f"({cause}); it was left as it is: delete it (its triples are extracted again) or "
            "point NEOCORRAG_CACHE / --store at another file"
        )

    def _foreign(self, tables: set[str]) -> str:
        # Not "delete it": this file may be someone's data.
        names = ", ".join(sorted(tables)[:6])
        return (
            f"{self.path} is an SQLite database but not a neocorrag triple store (it holds the "
            f"tables {names}); it was left as it is: point NEOCORRAG_CACHE / --store at "
            "another file"
        )

    def _error(self, action: str, exc: sqlite3.Error) -> StoreError:
        cause = " ".join(str(exc).split()) or type(exc).__name__
        code = str(getattr(exc, "sqlite_errorname", ""))  # Python >= 3.11
        low = cause.lower()
        if code in ("SQLITE_NOTADB", "SQLITE_CORRUPT") or any(
            word in low for word in ("not a database", "malformed", "corrupt")
        ):
            return StoreError(self._damaged(cause))
        if code.startswith("SQLITE_READONLY") or "readonly" in low:
            fix = (
                "the file or its folder is not writable: open it with read_only=True to read "
                "it, or point NEOCORRAG_CACHE / --store at a writable file"
            )
        elif code.startswith("SQLITE_BUSY") or "locked" in low:
            fix = (
                f"another process held it for longer than the {self.timeout:g} s timeout; "
                "retry, or pass a longer timeout"
            )
        elif code.startswith("SQLITE_FULL") or "full" in low:
            fix = "free some disk space, or point NEOCORRAG_CACHE / --store at another disk"
        else:
            fix = (
                "check that the file and its folder exist and are readable (writable to add "
                "triples), or point NEOCORRAG_CACHE / --store elsewhere"
            )
        return StoreError(f"cannot {action} the triple store {self.path}: {cause}; {fix}")

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
        its holder ends, even by ``kill -9``, so a stale lock cannot exist. A second run
        blocks here until the first is done (``on_wait`` is called once with the holder's
        pid, if known; otherwise a warning is logged), then finds the first run's passages
        stored and extracts only what is left: no passage is extracted twice. Where file
        locks are unsupported the run proceeds unlocked (the store's first-writer-wins
        writes keep it correct; only the extraction work may be repeated).
        """
        if self._memory or fcntl is None:
            yield
            return
        lock_path = Path(f"{self._file}.lock")
        try:
            fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o666)
        except OSError as exc:
            raise StoreError(
                f"cannot create the indexer lock {lock_path}: {exc.strerror or exc}; the "
                "store's folder must be writable to index into it"
            ) from None
        # The lock file is never deleted: unlinking it could let two runs lock two different
        # files of the same name. Closing the descriptor releases the lock.
        try:
            if not _lock(fd, lock_path, wait=False):
                holder = _read_pid(fd)
                for _ in range(25):  # the holder writes its pid just after taking the lock
                    if holder is not None:
                        break
                    time.sleep(0.02)
                    holder = _read_pid(fd)
                if on_wait is not None:
                    on_wait(holder)
                else:
                    logger.warning(
                        "waiting for another indexer (pid %s) of %s", holder or "?", self.path
                    )
                _lock(fd, lock_path, wait=True)
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
            try:
                yield
            finally:
                os.ftruncate(fd, 0)
        finally:
            os.close(fd)

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

    def put_many(self, items: Sequence[tuple[Passage, Sequence[Triple]]], key: ExtractorKey) -> int:
        """Store each passage's triples (cleaned, de-duplicated); returns triples written.

        A key that is already stored is left as it is (the first writer wins).
        """
        written = 0
        now = time.time()
        with self._transaction(action="write triples to") as conn:
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
        norm = normalize_entity(name)
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

    def stats(self) -> dict[str, dict[str, int]]:
        """Passages and triples stored per ``extractor@version``."""
        with self._transaction(write=False, action="count the triples of") as conn:
            rows = conn.execute(
                "SELECT extractor, version, COUNT(*), SUM(num_triples) FROM passages "
                "GROUP BY extractor, version"
            ).fetchall()
        return {f"{e}@{v}": {"passages": n, "triples": int(t or 0)} for e, v, n, t in rows}


def _decide_read_only(file: Path) -> bool:
    """Whether a store must be opened read-only: its file, or the folder its -wal and -shm
    files go in, exists and is not writable (a missing file is created, so not read-only)."""
    if file.exists():
        return not (os.access(file, os.W_OK) and os.access(file.parent, os.W_OK))
    return False


def _tables(conn: sqlite3.Connection) -> set[str]:
    return {name for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}


def _rollback(conn: sqlite3.Connection) -> None:
    # SQLite may have rolled back already (e.g. on a full disk); a failing ROLLBACK must not
    # hide the error that caused it.
    if conn.in_transaction:
        with suppress(sqlite3.Error):
            conn.execute("ROLLBACK")


def _cannot_share_wal_index(exc: sqlite3.Error) -> bool:
    """The read-only open failed because SQLite could not create the -shm file."""
    code = str(getattr(exc, "sqlite_errorname", ""))
    text = str(exc).lower()
    return code in ("SQLITE_READONLY_DIRECTORY", "SQLITE_CANTOPEN") or (
        "readonly" in text or "unable to open" in text
    )


def _lock(fd: int, path: Path, *, wait: bool) -> bool:
    """Take the exclusive flock on ``fd``; ``False`` if another holds it and ``wait`` is off."""
    assert fcntl is not None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX if wait else fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    except OSError as exc:  # e.g. a network file system without flock
        logger.warning("cannot lock %s (%s): indexing without the indexer lock", path, exc)
    return True


def _read_pid(fd: int) -> int | None:
    try:
        return int(os.pread(fd, 32, 0).decode("ascii").strip())
    except (OSError, ValueError):
        return None  # the holder has not written it yet


@dataclass
class CacheStats:
    """What a :class:`CachedTripleSource` did: passages served from the store or extracted."""

    hits: int = 0
    extracted: int = 0
    triples_written: int = 0


class CachedTripleSource:
    """A ``TripleSource`` that reads the store first, extracts only what is missing, stores it.

    Identical passages in one call are extracted once. ``stats`` counts hits and
    extractions over the life of the source (the CLI and tests read it). Over a read-only
    store (a shared, pre-built cache) the stored passages are read as usual and the missing
    ones are extracted and returned but not stored, with one warning per source.
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
        self._warned_read_only = False

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
        if todo and self.store.read_only:
            self._extract_without_storing([passages[i] for i in todo], missing, passages, result)
            return result
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

    def _extract_without_storing(
        self,
        todo: list[Passage],
        missing: dict[str, list[int]],
        passages: list[Passage],
        result: list[list[Triple]],
    ) -> None:
        # Reads must keep working on a shared read-only cache, so a miss is not an error:
        # the passage is extracted and cleaned exactly as the store would have cleaned it.
        with self._lock:
            warn, self._warned_read_only = not self._warned_read_only, True
        if warn:
            logger.warning(
                "%s is read-only: %d passage(s) missing from it are extracted now but not "
                "stored, so later runs extract them again (index them into a writable store)",
                self.store.path,
                len(todo),
            )
        for start in range(0, len(todo), self.batch_size):
            batch = todo[start : start + self.batch_size]
            for passage, triples in zip(batch, self._extract(batch), strict=True):
                for i in missing[text_sha256(passage)]:
                    result[i] = clean_triples(triples, passages[i].id)
            with self._lock:
                self.stats.extracted += len(batch)

    def _extract(self, batch: Sequence[Passage]) -> list[list[Triple]]:
        extracted = self.extractor.extract(batch)
        if len(extracted) != len(batch):
            raise RuntimeError(
                f"{type(self.extractor).__name__}.extract returned {len(extracted)} lists for "
                f"{len(batch)} passages"
            )
        return [list(triples) for triples in extracted]

    def extract_and_store(self, batch: Sequence[Passage]) -> int:
        """Extract one batch and write it; returns the number of triples written.

        Raises :class:`~neocorrag_core.errors.StoreError` if the store is read-only.
        """
        extracted = self._extract(batch)
        written = self.store.put_many(list(zip(batch, extracted, strict=True)), self.key)
        with self._lock:
            self.stats.extracted += len(batch)
            self.stats.triples_written += written
        return written
