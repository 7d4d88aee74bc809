"""Opening a triple store's file: where it is, how it is opened, and that it is still there.

The file-level half of :class:`~neocorrag_core.triples.store.TripleStore`: the default
path (:func:`default_store_path`), whether a store opens read-only, the check of the
SQLite header before SQLite ever sees the file (:func:`prepare_file`), WAL mode
(:func:`set_wal`), the connections (read-write; read-only, and immutable in a read-only
folder: :func:`connect`), and noticing that the file was deleted or replaced while it
was open (:func:`check_same_file`). The store calls these; its tables are checked next
(:mod:`~neocorrag_core.triples.store_migrate`).
"""

from __future__ import annotations

import logging
import os
import sqlite3
import time
from pathlib import Path
from typing import TYPE_CHECKING

from neocorrag_core.errors import StoreError
from neocorrag_core.triples.store_errors import damaged_message
from neocorrag_core.triples.store_schema import SQLITE_MAGIC

if TYPE_CHECKING:
    from neocorrag_core.triples.store import TripleStore

# Records go to the store's logger: the name users configure for everything the store does.
logger = logging.getLogger("neocorrag_core.triples.store")


def default_store_path() -> Path:
    """``$NEOCORRAG_TRIPLE_STORE`` (a file) if set, else ``$NEOCORRAG_CACHE/triples.sqlite``,
    else ``~/.cache/neocorrag/triples.sqlite``."""
    explicit = os.environ.get("NEOCORRAG_TRIPLE_STORE", "").strip()
    if explicit:
        return Path(explicit).expanduser()
    root = os.environ.get("NEOCORRAG_CACHE")
    base = Path(root).expanduser() if root else Path.home() / ".cache" / "neocorrag"
    return base / "triples.sqlite"


def _decide_read_only(file: Path) -> bool:
    """Whether a store must be opened read-only: its file, or the folder its -wal and -shm
    files go in, exists and is not writable (a missing file is created, so not read-only)."""
    if file.exists():
        return not (os.access(file, os.W_OK) and os.access(file.parent, os.W_OK))
    return False


def prepare_file(store: TripleStore) -> None:
    """Make the folder of a writable store; refuse a file that is not SQLite at all.

    The header is checked by hand, before SQLite sees the file, so that nothing (not
    even a journal-mode pragma) is ever attempted on a file that is not a database.
    An empty file is accepted: SQLite reads it as a new, empty database.
    """
    if not store.read_only:
        try:
            store._file.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreError(
                f"cannot create the triple store folder {store._file.parent}: "
                f"{exc.strerror or exc}; point NEOCORRAG_CACHE / --store at a writable place"
            ) from None
    try:
        with open(store._file, "rb") as fh:
            head = fh.read(len(SQLITE_MAGIC))
    except FileNotFoundError:
        if store.read_only:
            raise StoreError(
                f"there is no triple store at {store.path}: a read-only store is only read, "
                f"never created; build it first (neocorrag index CORPUS --store {store.path})"
            ) from None
        if not os.access(store._file.parent, os.W_OK):
            raise StoreError(
                f"cannot create the triple store {store.path}: its folder is not writable; "
                "point NEOCORRAG_CACHE / --store at a writable place"
            ) from None
        return
    except OSError as exc:
        raise StoreError(
            f"cannot read the triple store {store.path}: {exc.strerror or exc}; check its "
            "permissions, or point NEOCORRAG_CACHE / --store elsewhere"
        ) from None
    if head and head != SQLITE_MAGIC:
        raise StoreError(
            damaged_message(store.path, "it is not an SQLite database"), kind="damaged"
        )


def set_wal(store: TripleStore) -> None:
    """``PRAGMA journal_mode=WAL``, retried within the timeout while the file is locked:
    SQLite answers "database is locked" at once, without waiting, when another process
    is creating the same new store (two ingestion workers opening it together)."""
    deadline = time.monotonic() + store.timeout
    while True:
        try:
            store._conn().execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() >= deadline:
                raise
            time.sleep(0.05)


# -- connections -------------------------------------------------------------------------


def open_connection(store: TripleStore, target: str, *, uri: bool = False) -> sqlite3.Connection:
    """One SQLite connection to ``target`` with the store's timeout; no implicit BEGIN."""
    return sqlite3.connect(
        target,
        timeout=store.timeout,
        isolation_level=None,  # we issue BEGIN ourselves
        check_same_thread=not store._memory,
        uri=uri,
    )


def connect(store: TripleStore) -> sqlite3.Connection:
    """A new connection to the store: read-write, or read-only (immutable in a read-only
    folder without a ``-wal`` file, where SQLite cannot share its WAL index)."""
    if store._memory:
        return open_connection(store, ":memory:")
    if not store.read_only:
        conn = open_connection(store, str(store._file))
        conn.execute("PRAGMA synchronous=NORMAL")
        return conn
    conn = connect_read_only(store)
    if store._immutable:
        return conn
    try:
        # SQLite opens lazily: read once now to learn whether the WAL index can be shared.
        conn.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()
        return conn
    except sqlite3.OperationalError as exc:
        conn.close()
        wal = Path(f"{store._file}-wal")
        if not _cannot_share_wal_index(exc) or wal.exists():
            raise
    # A read-only folder without the -wal / -shm files: SQLite cannot create the shared
    # WAL index, so it can read the file only as immutable. No -wal file means no process
    # has it open for writing now; such a store must not be rewritten while it is read.
    logger.info("%s is in a read-only folder: reading it as immutable", store.path)
    store._immutable = True
    return connect_read_only(store)


def connect_read_only(store: TripleStore) -> sqlite3.Connection:
    """A connection that SQLite itself keeps from writing (``mode=ro``, ``query_only``)."""
    uri = f"{store._file.absolute().as_uri()}?mode=ro"
    if store._immutable:
        uri += "&immutable=1"
    conn = open_connection(store, uri, uri=True)
    conn.execute("PRAGMA query_only=ON")  # belt and braces: SQLite refuses every write
    return conn


def _cannot_share_wal_index(exc: sqlite3.Error) -> bool:
    """The read-only open failed because SQLite could not create the -shm file."""
    code = str(getattr(exc, "sqlite_errorname", ""))
    text = str(exc).lower()
    return code in ("SQLITE_READONLY_DIRECTORY", "SQLITE_CANTOPEN") or (
        "readonly" in text or "unable to open" in text
    )


def check_same_file(store: TripleStore, action: str) -> None:
    """Raise :class:`StoreError` when the file at :attr:`path` is no longer the one this
    store opened (deleted, or replaced by another file): SQLite would go on writing to
    the unlinked file, and every write would be lost without a word."""
    try:
        st = os.stat(store._file)
    except FileNotFoundError:
        if store._file_id is None:
            return  # not created yet: the first connection creates it
        st = None
    except OSError:
        return  # unreadable folder: SQLite reports its own error
    if st is not None and store._file_id is None:
        store._file_id = (st.st_dev, st.st_ino)
        return
    if st is None or (st.st_dev, st.st_ino) != store._file_id:
        what = "was deleted" if st is None else "was replaced by another file"
        store.close()
        raise StoreError(
            f"cannot {action} the triple store {store.path}: the file {what} while it was "
            "open; open the store again (a new TripleStore, or the next process) to use "
            "the file now at that path",
            kind="removed",
        )


__all__ = [
    "check_same_file",
    "connect",
    "connect_read_only",
    "default_store_path",
    "open_connection",
    "prepare_file",
    "set_wal",
]
