"""``TripleStore``: a SQLite cache of extracted triples, and the source that reads it first.

A passage is extracted once per (text, extractor, version): the key is the sha256 of the
text the extractor reads (title line + whitespace-normalized text), so the same passage
in another corpus, under another id, is found again. A passage that yielded no triples is
stored too (as "done, none"), so re-runs never retry it.

Since schema 2 the store also maps the ids of the user's documents to the content hashes
they were stored under (the ``documents`` table), so a document can be deleted by its id
(:meth:`TripleStore.delete`), and a store can be moved between machines as JSON lines
(:meth:`TripleStore.export_jsonl`, :meth:`TripleStore.import_jsonl`).

This module is the store itself (opening, transactions, reads, writes, delete). Its parts
live beside it and are re-exported here, so ``from neocorrag_core.triples.store import ...``
reaches all of them: the keys (:mod:`~neocorrag_core.triples.keys`), the tables and their
migrations (:mod:`~neocorrag_core.triples.store_schema`), the export format
(:mod:`~neocorrag_core.triples.store_jsonl`), the indexer lock
(:mod:`~neocorrag_core.triples.indexer_lock`) and the source that reads the store first
(:mod:`~neocorrag_core.triples.cached`).
"""

from __future__ import annotations

import logging
import os
import shlex
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence, Sized
from contextlib import contextmanager, nullcontext, suppress
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, TextIO

import numpy as np

from neocorrag_core.chains.graph import normalize_entity
from neocorrag_core.errors import ConfigError, InputError, StoreError
from neocorrag_core.os_errors import disk_is_full
from neocorrag_core.triples import store_jsonl
from neocorrag_core.triples.cached import CachedTripleSource as CachedTripleSource
from neocorrag_core.triples.cached import CacheStats as CacheStats
from neocorrag_core.triples.extractor import clean_triples
from neocorrag_core.triples.indexer_lock import hold_indexer_lock
from neocorrag_core.triples.keys import ExtractorKey as ExtractorKey
from neocorrag_core.triples.keys import text_sha256 as text_sha256
from neocorrag_core.triples.store_jsonl import ImportReport as ImportReport
from neocorrag_core.triples.store_schema import SCHEMA_VERSION as SCHEMA_VERSION
from neocorrag_core.triples.store_schema import (
    SQLITE_MAGIC,
    can_upgrade,
    create_tables,
    insert_entry,
    key_filter,
    stored_version,
    table_names,
    upgrade,
)
from neocorrag_core.types import Passage, Triple
from neocorrag_core.validation import clean_text

logger = logging.getLogger(__name__)


def default_store_path() -> Path:
    """``$NEOCORRAG_TRIPLE_STORE`` (a file) if set, else ``$NEOCORRAG_CACHE/triples.sqlite``,
    else ``~/.cache/neocorrag/triples.sqlite``."""
    explicit = os.environ.get("NEOCORRAG_TRIPLE_STORE", "").strip()
    if explicit:
        return Path(explicit).expanduser()
    root = os.environ.get("NEOCORRAG_CACHE")
    base = Path(root).expanduser() if root else Path.home() / ".cache" / "neocorrag"
    return base / "triples.sqlite"


class StoreSchemaError(StoreError, ValueError):
    """The store file was written by another neocorrag store schema.

    Also a ``ValueError``, what this case raised before the :mod:`~neocorrag_core.errors`
    family existed.
    """

    def __init__(self, *args: object) -> None:
        super().__init__(*args, kind="schema")

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), self.args)


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
                head = fh.read(len(SQLITE_MAGIC))
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
        if head and head != SQLITE_MAGIC:
            raise StoreError(self._damaged("it is not an SQLite database"), kind="damaged")

    def _set_wal(self) -> None:
        """``PRAGMA journal_mode=WAL``, retried within the timeout while the file is locked:
        SQLite answers "database is locked" at once, without waiting, when another process
        is creating the same new store (two ingestion workers opening it together)."""
        deadline = time.monotonic() + self.timeout
        while True:
            try:
                self._conn().execute("PRAGMA journal_mode=WAL")
                return
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) or time.monotonic() >= deadline:
                    raise
                time.sleep(0.05)

    def _create_schema(self) -> None:
        with self._transaction(write=False, action="open") as conn:
            tables = table_names(conn)
            found = stored_version(conn) if "meta" in tables else None
        if tables and "meta" not in tables:
            # Someone else's SQLite database: refuse it rather than adding our tables to it.
            raise StoreError(self._foreign(tables), kind="foreign")
        if not self._memory:
            with self._guard("open"):
                # Persistent in the file, so later connections (other threads) need not set
                # it; a no-op (no write) when the store is in WAL mode already.
                self._set_wal()
        if {"meta", "passages", "triples"} <= tables:  # the usual case: only check
            version = self._known_version(found, tables)
            if version < SCHEMA_VERSION:
                self._migrate()
            self.schema_version = SCHEMA_VERSION
            return
        # One transaction: a concurrent opener sees either no schema or all of it.
        with self._transaction(action="create the tables of") as conn:
            found = create_tables(conn)
            if found is not None:  # a concurrent opener made them first
                upgrade(conn, self._known_version(found, table_names(conn)))
        self.schema_version = SCHEMA_VERSION

    def _migrate(self) -> None:
        """Bring an older store up to :data:`SCHEMA_VERSION`, in one ``BEGIN IMMEDIATE``.

        The version is read again inside the write transaction: of two processes opening
        the same old file at once, the second waits for the first's transaction, then finds
        the store migrated and does nothing.
        """
        with self._transaction(action="migrate") as conn:
            version = self._known_version(stored_version(conn), table_names(conn))
            migrated = upgrade(conn, version)
        if migrated:
            logger.info(
                "migrated the triple store %s from schema %d to %d",
                self.path,
                version,
                SCHEMA_VERSION,
            )

    def _check_schema(self) -> None:
        with self._transaction(write=False, action="open") as conn:
            tables = table_names(conn)
            if tables and "meta" not in tables:
                raise StoreError(self._foreign(tables), kind="foreign")
            if not {"meta", "passages", "triples"} <= tables:
                found = f"tables {', '.join(sorted(tables))}" if tables else "no tables"
                raise StoreError(
                    self._damaged(f"it has {found}, and it is open read-only"), kind="damaged"
                )
            self.schema_version = self._known_version(stored_version(conn), tables)
        if self.schema_version < SCHEMA_VERSION:
            logger.info(
                "%s is a schema %d store open read-only: its triples are read as usual; "
                "document ids need schema %d (open it writable once to migrate it)",
                self.path,
                self.schema_version,
                SCHEMA_VERSION,
            )

    def _known_version(self, found: str | None, tables: set[str]) -> int:
        """The store's schema as a number this code reads (as is, or after migrating);
        otherwise :class:`StoreSchemaError`. A table the version needs is missing: damaged."""
        version = int(found) if found is not None and found.isdigit() else None
        if version is None or not can_upgrade(version):
            what = "no schema version" if found is None else f"schema {found}"
            fix = "use a new --store path (or NEOCORRAG_CACHE)"
            if version is not None and version > SCHEMA_VERSION:
                fix = f"upgrade neocorrag to read it, or {fix}"
            raise StoreSchemaError(
                f"{self.path} was written by another neocorrag store schema ({what}, this "
                f"version reads {SCHEMA_VERSION}); {fix}"
            )
        if version >= 2 and "documents" not in tables:
            raise StoreError(
                self._damaged(f"schema {version} without its documents table"), kind="damaged"
            )
        if version >= 3 and "vectors" not in tables:
            raise StoreError(
                self._damaged(f"schema {version} without its vectors table"), kind="damaged"
            )
        return version

    def _require_documents(self, action: str) -> None:
        """Document-id features need schema 2; only a read-only old store lacks it."""
        if self.schema_version < 2:
            raise StoreError(
                f"cannot {action} the triple store {self.path}: it is a schema "
                f"{self.schema_version} store open read-only, and document ids need schema "
                f"{SCHEMA_VERSION}; open it writable once (TripleStore(path) with write access "
                "to the file and its folder) to migrate it, or use a migrated copy"
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
                self._check_same_file(action)
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

    def _check_same_file(self, action: str) -> None:
        """Raise :class:`StoreError` when the file at :attr:`path` is no longer the one this
        store opened (deleted, or replaced by another file): SQLite would go on writing to
        the unlinked file, and every write would be lost without a word."""
        try:
            st = os.stat(self._file)
        except FileNotFoundError:
            if self._file_id is None:
                return  # not created yet: the first connection creates it
            st = None
        except OSError:
            return  # unreadable folder: SQLite reports its own error
        if st is not None and self._file_id is None:
            self._file_id = (st.st_dev, st.st_ino)
            return
        if st is None or (st.st_dev, st.st_ino) != self._file_id:
            what = "was deleted" if st is None else "was replaced by another file"
            self.close()
            raise StoreError(
                f"cannot {action} the triple store {self.path}: the file {what} while it was "
                "open; open the store again (a new TripleStore, or the next process) to use "
                "the file now at that path",
                kind="removed",
            )

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
            return StoreError(self._damaged(cause), kind="damaged")
        if code.startswith("SQLITE_READONLY") or "readonly" in low:
            kind = "read-only"
            fix = (
                "the file or its folder is not writable: open it with read_only=True to read "
                "it, or point NEOCORRAG_CACHE / --store at a writable file"
            )
        elif code.startswith("SQLITE_BUSY") or "locked" in low:
            kind = "busy"
            fix = (
                f"another process held it for longer than the {self.timeout:g} s timeout; "
                "retry, or pass a longer timeout"
            )
        elif code.startswith("SQLITE_FULL") or "full" in low:
            kind = "full"
            fix = "free some disk space, or point NEOCORRAG_CACHE / --store at another disk"
        elif (code.startswith("SQLITE_IOERR") or "disk i/o error" in low) and not self._memory:
            # SQLite says "disk I/O error", not "full", when a full disk stops it growing
            # its -shm file: tell the two apart by the room left on the disk.
            if disk_is_full(self._file):
                kind = "full"
                fix = (
                    f"the disk holding {self._file.parent} is full: free some disk space, or "
                    "point NEOCORRAG_CACHE / --store at another disk"
                )
            else:
                kind = "other"
                fix = (
                    "the disk reported an I/O error: check the disk (the system log names the "
                    f"fault), then run `neocorrag store check --store {shlex.quote(self.path)}`"
                )
        else:
            kind = "other"
            fix = (
                "check that the file and its folder exist and are readable (writable to add "
                "triples), or point NEOCORRAG_CACHE / --store elsewhere"
            )
        return StoreError(
            f"cannot {action} the triple store {self.path}: {cause}; {fix}", kind=kind
        )

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
        self._require_documents("read the document ids of")
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
        ids = _unique_strings(document_ids, "document id")
        explicit = _unique_strings(hashes, "hash")
        if not ids and not explicit:
            return DeleteReport()
        wanted, explicit_set = set(ids), set(explicit)
        key_sql, key_params = key_filter(key, "AND")
        with self._transaction(action="delete from") as conn:
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
                    "SELECT doc_id, text_sha256 FROM documents "
                    f"WHERE text_sha256 IN ({_marks(chunk)})",
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
        if self.schema_version < 3 or not keys:
            return {}
        today = _today()
        found: dict[bytes, np.ndarray] = {}
        stale: list[bytes] = []
        unique = list(dict.fromkeys(keys))
        with self._transaction(write=False, action="read vectors from") as conn:
            for start in range(0, len(unique), 500):
                chunk = unique[start : start + 500]
                for key, blob, used in conn.execute(
                    "SELECT text_key, vector, used FROM vectors WHERE embedder = ? "
                    f"AND text_key IN ({_marks(chunk)})",
                    (embedder_id, *chunk),
                ):
                    found[bytes(key)] = np.frombuffer(blob, dtype=VECTOR_DTYPE).astype(np.float32)
                    if used < today:
                        stale.append(bytes(key))
        if stale and not self.read_only:
            self._touch_vectors(embedder_id, stale, today)
        return found

    def _touch_vectors(self, embedder_id: str, keys: list[bytes], today: int) -> None:
        with suppress(StoreError), self._transaction(action="refresh vectors in", wait=False) as c:
            for start in range(0, len(keys), 500):
                chunk = keys[start : start + 500]
                c.execute(
                    f"UPDATE vectors SET used = ? WHERE embedder = ? AND text_key IN "
                    f"({_marks(chunk)})",
                    (today, embedder_id, *chunk),
                )

    def put_vectors(self, embedder_id: str, vectors: Mapping[bytes, np.ndarray]) -> None:
        """Store ``vectors`` (text key -> vector) under ``embedder_id``; a key stored
        already is left as it is. On a read-only store this does nothing (it is a cache).

        When the vectors' bytes pass :attr:`max_vector_bytes`, the least recently used go
        until a tenth of the bound is free again.
        """
        if not vectors or self.read_only or self.schema_version < 3:
            return
        today = _today()
        rows = [
            (embedder_id, key, np.asarray(vec, dtype=VECTOR_DTYPE).tobytes(), today)
            for key, vec in vectors.items()
        ]
        row_bytes = sum(len(r[2]) + VECTOR_ROW_OVERHEAD for r in rows) // len(rows)
        with self._transaction(action="write vectors to") as conn:
            added = conn.executemany(
                "INSERT OR IGNORE INTO vectors VALUES (?, ?, ?, ?)", rows
            ).rowcount
            total = _vector_bytes(conn) + max(added, 0) * row_bytes
            if total > self.max_vector_bytes:
                total -= _evict_vectors(conn, total - (self.max_vector_bytes * 9) // 10)
            conn.execute(
                "INSERT OR REPLACE INTO meta VALUES ('vector_bytes', ?)", (str(max(total, 0)),)
            )

    def vector_summary(self) -> dict[str, dict[str, int]]:
        """Vectors stored per embedder identity: ``{"vectors": n, "bytes": b}``."""
        if self.schema_version < 3:
            return {}
        with self._transaction(write=False, action="count the vectors of") as conn:
            return _vector_stats(conn)

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
        with self._transaction(write=False, action="count the triples of") as conn:
            extractors = _stats(conn)
            documents: int | None = None
            if self.schema_version >= 2:
                documents = int(
                    conn.execute("SELECT COUNT(DISTINCT doc_id) FROM documents").fetchone()[0]
                )
            vectors = _vector_stats(conn) if self.schema_version >= 3 else {}
        size = 0
        if not self._memory:
            for part in (self._file, Path(f"{self._file}-wal")):
                with suppress(OSError):
                    size += part.stat().st_size
        return StoreSummary(
            path=self.path,
            schema=self.schema_version,
            file_bytes=size,
            passages=sum(v["passages"] for v in extractors.values()),
            triples=sum(v["triples"] for v in extractors.values()),
            documents=documents,
            extractors=extractors,
            vectors=vectors,
        )

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


VECTOR_DTYPE = "<f2"
"""How vectors are stored: float16, little-endian (half the bytes of float32; the embedder
rounds what it computes to float16, so nothing is lost by storing it)."""

VECTOR_ROW_OVERHEAD = 96
"""Bytes a stored vector costs beyond its own (key, embedder name, use day, b-tree slack);
what the byte bound counts, so the file grows by about the bound at most."""

DEFAULT_MAX_VECTOR_BYTES = 4 * 2**30
"""Default bound of a store's vectors: 4 GiB, about 5 million float16 MiniLM vectors
(~220,000 passages of spaCy triples). ``NEOCORRAG_MAX_VECTOR_BYTES`` or
``max_vector_bytes`` move it."""


def _vector_bound(value: int | None) -> int:
    if value is None:
        raw = os.environ.get("NEOCORRAG_MAX_VECTOR_BYTES", "").strip()
        if not raw:
            return DEFAULT_MAX_VECTOR_BYTES
        try:
            value = int(raw)
        except ValueError:
            raise ConfigError(
                f"NEOCORRAG_MAX_VECTOR_BYTES must be a whole number of bytes, got {raw!r}"
            ) from None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ConfigError(f"TripleStore.max_vector_bytes must be an int >= 0, got {value!r}")
    return value


def _today() -> int:
    return int(time.time() // 86400)


def _vector_bytes(conn: sqlite3.Connection) -> int:
    row = conn.execute("SELECT value FROM meta WHERE key = 'vector_bytes'").fetchone()
    return int(row[0]) if row is not None and str(row[0]).isdigit() else 0


def _evict_vectors(conn: sqlite3.Connection, at_least: int) -> int:
    """Delete the least recently used vectors until ``at_least`` bytes are freed; returns the
    bytes freed (as the bound counts them)."""
    freed = 0
    while freed < at_least:
        candidates = conn.execute(
            "SELECT embedder, text_key, length(vector) FROM vectors ORDER BY used LIMIT 1000"
        ).fetchall()
        if not candidates:
            break
        victims = []
        for embedder, key, size in candidates:
            victims.append((embedder, key))
            freed += size + VECTOR_ROW_OVERHEAD
            if freed >= at_least:
                break
        conn.executemany("DELETE FROM vectors WHERE embedder = ? AND text_key = ?", victims)
    return freed


def _vector_stats(conn: sqlite3.Connection) -> dict[str, dict[str, int]]:
    rows = conn.execute(
        "SELECT embedder, COUNT(*), SUM(length(vector)) FROM vectors GROUP BY embedder"
    ).fetchall()
    return {e: {"vectors": n, "bytes": int(b or 0)} for e, n, b in rows}


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


def _marks(chunk: Sized) -> str:
    return ",".join("?" * len(chunk))


def _decide_read_only(file: Path) -> bool:
    """Whether a store must be opened read-only: its file, or the folder its -wal and -shm
    files go in, exists and is not writable (a missing file is created, so not read-only)."""
    if file.exists():
        return not (os.access(file, os.W_OK) and os.access(file.parent, os.W_OK))
    return False


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
