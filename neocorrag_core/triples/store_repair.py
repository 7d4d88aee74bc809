"""Check a triple store for damage, and salvage a damaged one into a new store.

The CLI's ``neocorrag store check`` and ``neocorrag store repair`` call these two functions:

* :func:`check_store` opens the file read-only (it never writes it, never creates it),
  checks it is an SQLite database holding a neocorrag store of a schema this version reads
  (what :class:`~neocorrag_core.triples.store.TripleStore` checks when it opens one), runs
  SQLite's ``PRAGMA integrity_check`` over every page, and returns one verdict
  (:class:`StoreCheck`) with the cause and the fix.
* :func:`repair_store` copies every entry (a passages row, its triples and the document ids
  linked to it) and every vector that can still be read into a fresh store written beside
  the damaged one, then moves the damaged file aside (``<name>.damaged-<time>``, with its
  ``-wal``/``-shm`` files, bytes untouched) and the new store into its place.

Why salvage rather than delete: a store is a cache, so deleting it is always safe, but it
may hold hours of LLM extraction; damage is usually a few pages. Reads go key by key where
a table scan fails, so one damaged page costs the entries on that page, not the store.

``integrity_check`` rather than ``quick_check``: both read every page and find damaged
pages, but only ``integrity_check`` also checks that each index agrees with its table. The
store answers its queries through those indexes (passages and triples by key, triples by
entity), so an index that lost rows would silently drop triples from answers. It costs
more: on a 290 MB store (50,000 passages, 500,000 triples, 100,000 384-d vectors) 0.9 s
against 0.2 s for ``quick_check`` (this 2-core machine, warm file cache); ``quick=True``
(``neocorrag store check --quick``) runs ``quick_check`` for very large stores.
"""

from __future__ import annotations

import errno
import logging
import os
import shlex
import sqlite3
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import closing, suppress
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from neocorrag_core.errors import StoreError
from neocorrag_core.os_errors import describe_os_error, disk_is_full
from neocorrag_core.triples.indexer_lock import hold_indexer_lock
from neocorrag_core.triples.store import (
    VECTOR_ROW_OVERHEAD,
    TripleStore,
    _cannot_share_wal_index,
    default_store_path,
)
from neocorrag_core.triples.store_schema import (
    SCHEMA_VERSION,
    SQLITE_MAGIC,
    can_upgrade,
    stored_version,
    table_names,
)

# Records go to the store's logger: the name users configure for everything the store does.
logger = logging.getLogger("neocorrag_core.triples.store")

OK = "ok"
DAMAGED = "damaged"
NOT_A_STORE = "not-a-store"
OTHER_SCHEMA = "other-schema"
MISSING = "missing"

COMPANIONS = ("-wal", "-shm", "-journal")
"""The files SQLite keeps beside a database, which belong to it (and move with it)."""

_MAX_PROBLEMS = 20
"""How many problems ``integrity_check`` lists at most (it stops counting there)."""

_CHUNK = 500
"""Keys per lookup query: below SQLite's bound-parameter limit, and small enough that a
chunk that fails is retried key by key without much repeated work."""

_REQUIRED_TABLES = {1: {"meta", "passages", "triples"}, 2: {"documents"}, 3: {"vectors"}}
"""The tables each schema adds; a store of schema N has those of 1..N."""


@dataclass(frozen=True)
class StoreCheck:
    """The verdict of :func:`check_store` on one file.

    ``status`` is one of ``"ok"``, ``"damaged"`` (damaged pages, or a store whose tables or
    schema record cannot be read: :func:`repair_store` salvages what is left), ``"not-a-store"``
    (not an SQLite database, or another program's database: left alone), ``"other-schema"``
    (a neocorrag store this version cannot read) or ``"missing"`` (no file at ``path``).
    """

    path: str
    status: str
    cause: str = ""
    """What is wrong, in words (empty when ``ok``)."""
    fix: str = ""
    """What to do about it, with the exact command (empty when ``ok``)."""
    check: str = ""
    """The SQLite check that ran (``integrity_check`` or ``quick_check``); empty if the file
    was refused before SQLite read its pages."""
    problems: tuple[str, ...] = ()
    """The first problems SQLite's check reported (at most 20)."""
    schema: int | None = None
    """The store's schema version, where it could be read."""
    summary: dict[str, Any] | None = None
    """What a healthy store holds (:meth:`TripleStore.summary`, as a dict)."""
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        """Whether the store passed every check."""
        return self.status == OK

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready copy (``ok`` included)."""
        return {**asdict(self), "ok": self.ok}


@dataclass(frozen=True)
class RepairReport:
    """What :func:`repair_store` salvaged from a damaged store, and what was lost."""

    path: str
    """The store, now the new file."""
    old_file: str
    """Where the damaged file was moved, its ``-wal``/``-shm`` files beside it:
    ``<name>.damaged-<YYYYmmdd-HHMMSS>`` (``.replaced-`` for a healthy store rebuilt with
    ``force``)."""
    entries_salvaged: int
    """Stored entries (one per passage text and extractor) copied whole."""
    entries_lost: int
    """Entries whose key was listed but whose row or triples could not be read whole."""
    triples_salvaged: int
    links_salvaged: int
    """Document id links copied."""
    vectors_salvaged: int
    vectors_lost: int
    entries_listed: bool
    """Whether the list of entries could be read whole; if not, ``entries_lost`` counts only
    the entries that were listed, and more were lost uncounted."""
    vectors_listed: bool
    """The same for the vectors."""
    check: StoreCheck
    """The verdict on the file before the repair."""
    seconds: float = 0.0
    notes: tuple[str, ...] = field(default=())
    """What could not be read at all (a table, a listing), in words."""

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready copy."""
        return asdict(self)


class RepairRefused(StoreError):
    """:func:`repair_store` would not start: the store is healthy, not a store, in use by an
    indexer, or its folder is not writable. Nothing was changed; the message says why."""

    def __init__(self, *args: object, kind: str = "other") -> None:
        super().__init__(*args, kind=kind)

    def __reduce__(self) -> tuple[object, ...]:
        return (_refused, (self.args, self.kind))


def _refused(args: tuple[object, ...], kind: str) -> RepairRefused:
    """Rebuild a pickled :class:`RepairRefused` with its ``kind``."""
    return RepairRefused(*args, kind=kind)


# -- check -------------------------------------------------------------------------------


def repair_command(path: str | os.PathLike[str]) -> str:
    """The shell command that repairs ``path`` (quoted for a POSIX shell)."""
    return f"neocorrag store repair --store {_quote(path)}"


def check_command(path: str | os.PathLike[str]) -> str:
    """The shell command that checks ``path`` (quoted for a POSIX shell)."""
    return f"neocorrag store check --store {_quote(path)}"


def _quote(path: str | os.PathLike[str]) -> str:
    """``path`` as one shell word, so a printed command can be pasted as it is."""
    return shlex.quote(os.fspath(path))


def _damaged_fix(path: str) -> str:
    """The fix of a damaged store: the repair command, or deleting it (it is a cache)."""
    return (
        f"run `{repair_command(path)}` to copy what can still be read into a new store (the "
        f"damaged file is kept beside it, as {Path(path).name}.damaged-<time>), or delete "
        f"{path} and its -wal/-shm files: a store is a cache, its triples and vectors are "
        "extracted again as they are needed"
    )


def check_store(path: str | os.PathLike[str] | None = None, *, quick: bool = False) -> StoreCheck:
    """Check the store at ``path`` (default: :func:`default_store_path`) without writing it.

    In order: the file exists; it starts with the SQLite header; SQLite can read its table
    list; the tables are a neocorrag store's (another program's database is refused, as
    :class:`TripleStore` refuses it); its schema version is one this version reads, with the
    tables that version needs; SQLite's ``PRAGMA integrity_check`` (``quick_check`` with
    ``quick=True``) finds no problem. The first check that fails gives the verdict.

    The file is opened read-only (``mode=ro``, ``query_only``): its bytes are never changed
    and a missing file is never created (SQLite may add its ``-wal``/``-shm`` files beside a
    WAL-mode database, as any reader does). A file that cannot be read at all (permissions)
    raises :class:`StoreError`.
    """
    file = Path(os.path.expanduser(os.fspath(path))) if path is not None else default_store_path()
    return _check(file, "quick_check" if quick else "integrity_check")


def _check(file: Path, pragma: str | None) -> StoreCheck:
    """:func:`check_store`; without ``pragma``, only what the file is (no page is checked,
    and an ``ok`` verdict has no summary): what repair checks before it takes the lock."""
    start = time.monotonic()
    name = str(file)

    def verdict(status: str, cause: str = "", fix: str = "", **more: Any) -> StoreCheck:
        return StoreCheck(
            name, status, cause, fix, seconds=round(time.monotonic() - start, 3), **more
        )

    if not file.exists():
        return verdict(
            MISSING,
            f"there is no file at {name}",
            f"pass the path of the store with --store (the default is {default_store_path()})",
        )
    if not file.is_file():
        return verdict(
            NOT_A_STORE,
            f"{name} is a folder or another special file, not a store file",
            "pass the path of the store file with --store",
        )
    try:
        with open(file, "rb") as fh:
            head = fh.read(len(SQLITE_MAGIC))
    except OSError as exc:
        raise StoreError(f"cannot read {name}: {describe_os_error(exc, name)}") from None
    if not head:
        return verdict(
            DAMAGED,
            "the file is empty (0 bytes): no store was written to it, or it was cut off",
            _damaged_fix(name),
        )
    if head != SQLITE_MAGIC:
        return verdict(
            NOT_A_STORE,
            "it does not start with the SQLite header: it is not a database, or its first "
            "bytes were overwritten (then nothing in it can be read)",
            f"if {name} is your triple store, delete it (a store is a cache: its triples and "
            "vectors are extracted again as they are needed); if it is another file, pass "
            "the store's path with --store",
        )
    with closing(_open_read_only(file)) as conn:
        try:
            tables = table_names(conn)
        except sqlite3.Error as exc:
            return verdict(
                DAMAGED,
                f"SQLite cannot read its list of tables ({_cause(exc)})",
                _damaged_fix(name),
            )
        if tables and "meta" not in tables:
            return verdict(
                NOT_A_STORE,
                "it is an SQLite database of another program (it holds the tables "
                f"{', '.join(sorted(tables)[:6])})",
                "leave it as it is (it may be someone's data) and pass the triple store's "
                "path with --store, or point NEOCORRAG_CACHE at it",
            )
        if not tables:
            return verdict(
                DAMAGED, "it is an SQLite database without any table", _damaged_fix(name)
            )
        try:
            found = stored_version(conn)
        except sqlite3.Error as exc:
            return verdict(
                DAMAGED, f"its schema version cannot be read ({_cause(exc)})", _damaged_fix(name)
            )
        version = int(found) if found is not None and found.isdigit() else None
        if version is None or not can_upgrade(version):
            what = "no schema version" if found is None else f"schema {found}"
            newer = version is not None and version > SCHEMA_VERSION
            return verdict(
                OTHER_SCHEMA,
                f"it was written by another neocorrag store schema ({what}; this version "
                f"reads {SCHEMA_VERSION})",
                ("upgrade neocorrag to read it, or " if newer else "")
                + "pass another --store (or point NEOCORRAG_CACHE elsewhere)",
                schema=version,
            )
        needed = set().union(*(_REQUIRED_TABLES.get(v, set()) for v in range(1, version + 1)))
        missing = sorted(needed - tables)
        if missing:
            return verdict(
                DAMAGED,
                f"it is a schema {version} store without its {', '.join(missing)} table(s)",
                _damaged_fix(name),
                schema=version,
            )
        if pragma is None:
            return verdict(OK, schema=version)
        try:
            rows = conn.execute(f"PRAGMA {pragma}({_MAX_PROBLEMS})").fetchall()
            # One problem a line (some SQLite versions put several in one row), without
            # the "*** in database main ***" headings.
            lines = (line.strip() for row in rows for line in str(row[0]).splitlines())
            problems = tuple(x for x in lines if x and x != "ok" and not x.startswith("***"))
        except sqlite3.Error as exc:  # SQLite may give up on a page it cannot parse at all
            problems = (_cause(exc),)
    if problems:
        many = "at least " if len(problems) >= _MAX_PROBLEMS else ""
        return verdict(
            DAMAGED,
            f"SQLite's {pragma} found {many}{len(problems)} problem(s), the first: {problems[0]}",
            _damaged_fix(name),
            check=pragma,
            problems=problems,
            schema=version,
        )
    try:
        with TripleStore(file, read_only=True) as store:
            summary = store.summary().to_dict()
    except StoreError as err:  # e.g. written by another process since the check
        if err.kind not in ("damaged", "foreign", "schema"):
            raise
        return verdict(DAMAGED, str(err), _damaged_fix(name), check=pragma, schema=version)
    return verdict(OK, check=pragma, schema=version, summary=summary)


def _cause(exc: BaseException) -> str:
    """An exception as one line of text (SQLite messages may hold newlines)."""
    return " ".join(str(exc).split()) or type(exc).__name__


def _open_read_only(file: Path) -> sqlite3.Connection:
    """A read-only connection that never writes ``file`` (as a read-only TripleStore opens it:
    ``mode=ro``, and ``immutable`` in a read-only folder without a ``-wal`` file)."""
    uri = f"{file.absolute().as_uri()}?mode=ro"
    conn = sqlite3.connect(uri, uri=True, isolation_level=None, timeout=30.0)
    try:
        conn.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()
    except sqlite3.OperationalError as exc:
        if not _cannot_share_wal_index(exc) or Path(f"{file}-wal").exists():
            conn.execute("PRAGMA query_only=ON")
            return conn  # the checks that follow report what is wrong
        # A read-only folder: SQLite cannot make the -shm file, and no -wal file means no
        # process has the store open for writing, so the main file holds everything.
        conn.close()
        conn = sqlite3.connect(f"{uri}&immutable=1", uri=True, isolation_level=None)
    except sqlite3.Error:
        pass  # damaged: the checks that follow report it
    conn.execute("PRAGMA query_only=ON")
    return conn


# -- repair ------------------------------------------------------------------------------


def repair_store(
    path: str | os.PathLike[str] | None = None, *, force: bool = False
) -> RepairReport:
    """Salvage what can be read from the damaged store at ``path`` into a new store there.

    Steps: :func:`check_store`; refuse (:class:`RepairRefused`, nothing changed) a healthy
    store unless ``force``, a file that is not a neocorrag store or is of another schema, a
    store whose indexer lock another process holds (a ``neocorrag index`` run), and a
    store whose folder is not writable. Then, holding the indexer lock: copy every entry
    (passages row, all its triples, its document id links) and every vector that can be
    read into ``.<name>.repair-<pid>.tmp`` beside it; check the copy; move the damaged file
    and its ``-wal``/``-shm``/``-journal`` files aside as ``<name>.damaged-<YYYYmmdd-HHMMSS>``
    (renamed, never written: their bytes stay as they were) and the copy into place.

    Entries are read key by key where a scan fails: the keys are listed from the table and,
    if that scan stops at a damaged page, from its index too; each chunk of keys is read
    in one query, or key by key if that query fails. An entry whose triples cannot all be
    read (or do not match its recorded count) is left out rather than copied in part, so
    the new store never serves a passage with triples missing: it is extracted again when
    next seen. If not even a list of keys can be read, nothing is salvaged and the new
    store starts empty.

    Other processes that have the store open keep the damaged file until they open it
    again: a ``TripleStore`` notices the file was replaced on its next call, and the
    query-time store (:class:`~neocorrag_core.triples.resilient.ResilientStore`) reopens
    it after its retry delay, unless it found it damaged (then it leaves the store alone
    until the process restarts).
    """
    start = time.monotonic()
    file = Path(os.path.expanduser(os.fspath(path))) if path is not None else default_store_path()
    # What the file is, before the lock: no lock file beside a file that is no store.
    _refuse_unrepairable(_check(file, None), force=True)
    folder = file.parent
    if not os.access(folder, os.W_OK | os.X_OK):
        raise RepairRefused(
            f"cannot repair {file}: its folder {folder} is not writable (the new store is "
            "written beside the damaged one, which is kept); run it as a user who can write "
            "there, or copy the store to a writable folder and repair the copy",
            kind="read-only",
        )

    def busy(holder: int | None) -> None:
        raise RepairRefused(
            f"cannot repair {file}: another process (pid {holder or '?'}) is indexing into it "
            f"(it holds {file}.lock); wait until it ends, or stop it, then repair again",
            kind="busy",
        )

    tmp = file.with_name(f".{file.name}.repair-{os.getpid()}.tmp")
    # Held throughout: no indexer writes into the damaged file while it is read, or starts
    # on it between the copy and the swap.
    with hold_indexer_lock(Path(f"{file}.lock"), str(file), on_wait=busy):
        verdict = check_store(file, quick=force)
        _refuse_unrepairable(verdict, force=force)
        _remove_files(tmp)
        try:
            salvage = _copy(file, tmp)
            aside = _swap(file, tmp, "replaced" if verdict.ok else "damaged")
        except BaseException:
            _remove_files(tmp)
            raise
    report = RepairReport(
        path=str(file),
        old_file=str(aside),
        check=verdict,
        seconds=round(time.monotonic() - start, 3),
        **salvage,
    )
    logger.info("repaired the triple store %s: %s", file, report)
    return report


def _refuse_unrepairable(verdict: StoreCheck, *, force: bool) -> None:
    """Raise :class:`RepairRefused` unless ``verdict`` is of a store repair can work on."""
    path = verdict.path
    if verdict.status == MISSING:
        raise RepairRefused(f"there is no triple store at {path}: nothing to repair; {verdict.fix}")
    if verdict.status == OK and not force:
        raise RepairRefused(
            f"the triple store {path} passed SQLite's {verdict.check} and the schema check: "
            "nothing to repair (--force rebuilds it anyway)"
        )
    if verdict.status == NOT_A_STORE:
        raise RepairRefused(
            f"{path} is not a neocorrag triple store ({verdict.cause}): repair leaves it as "
            f"it is; {verdict.fix}",
            kind="foreign",
        )
    if verdict.status == OTHER_SCHEMA:
        raise RepairRefused(
            f"{path} cannot be repaired by this version: {verdict.cause}; {verdict.fix}",
            kind="schema",
        )


def _copy(file: Path, tmp: Path) -> dict[str, Any]:
    """Write what can be read of ``file`` into a new store at ``tmp``, checked and flushed
    to disk (:func:`_salvage`, :func:`_finish_copy`); the counts.

    Any OS or SQLite error while writing the copy (a full disk, permissions, an I/O error)
    becomes one :class:`StoreError` that names the store and the fix and says the store was
    not changed: it is only read (read-only), and the caller removes the partial copy.
    """
    try:
        salvage = _salvage(file, tmp)
        verdict = _finish_copy(tmp)
    except (OSError, sqlite3.Error) as exc:  # StoreError included: it is an OSError
        raise _copy_failed(file, tmp, exc) from exc
    if not verdict.ok:
        raise StoreError(
            f"the repaired copy {tmp} failed its own check ({verdict.cause}); the damaged "
            "store was not changed. Report this as a bug; meanwhile delete the store (its "
            "triples are extracted again as they are needed)"
        )
    return salvage


def _copy_failed(file: Path, tmp: Path, exc: OSError | sqlite3.Error) -> StoreError:
    """The error of a repair whose copy could not be written: the store, the cause, the fix,
    and that the store was not changed."""
    unchanged = f"{file} was not changed, and the partial copy was removed"
    if _disk_full(exc, tmp):
        size = sum(
            Path(f"{file}{suffix}").stat().st_size
            for suffix in ("", "-wal")
            if Path(f"{file}{suffix}").exists()
        )
        return StoreError(
            f"cannot repair {file}: no space left on the device holding {file.parent} for "
            f"the repaired copy (it needs up to {size / 2**20:.1f} MiB free, the store's "
            f"size); free disk space there and repair again; {unchanged}",
            kind="full",
        )
    if isinstance(exc, OSError) and not isinstance(exc, StoreError) and exc.errno is not None:
        cause = describe_os_error(exc, tmp)
    else:
        # A store error's own fix is about a store in use, not this copy: its SQLite cause.
        inner = exc.__cause__ if isinstance(exc.__cause__, sqlite3.Error) else exc
        cause = (
            f"{_cause(inner)}; check the disk and the permissions of {file.parent}, and "
            "repair again"
        )
    return StoreError(
        f"cannot repair {file}: writing the repaired copy failed: {cause}; {unchanged}"
    )


def _disk_full(exc: OSError | sqlite3.Error, tmp: Path) -> bool:
    """Whether ``exc`` means the disk is full: it says so (``ENOSPC``, ``SQLITE_FULL``, a
    store error of kind ``full``), or it is an I/O error on a disk with no room left
    (SQLite's error when it cannot grow its ``-shm`` file)."""
    if isinstance(exc, StoreError):
        if exc.kind == "full":
            return True
    elif isinstance(exc, OSError):
        if exc.errno in (errno.ENOSPC, getattr(errno, "EDQUOT", None)):
            return True
    elif str(getattr(exc, "sqlite_errorname", "")).startswith("SQLITE_FULL"):
        return True
    return "full" in str(exc).lower() or disk_is_full(tmp.parent)


def _salvage(source: Path, tmp: Path) -> dict[str, Any]:
    """Copy what can be read of ``source`` into a new store at ``tmp``; the counts."""
    TripleStore(tmp).close()  # the tables, schema record and WAL mode of this version
    notes: list[str] = []
    with closing(_open_read_only(source)) as src, closing(_open_writable(tmp)) as dst:
        entries = _copy_entries(src, dst, notes)
        links = _copy_links(src, dst, notes)
        vectors = _copy_vectors(src, dst, notes)
        _write(
            dst,
            [
                (
                    "INSERT OR REPLACE INTO meta VALUES ('vector_bytes', (SELECT "
                    "COALESCE(SUM(length(vector)), 0) + COUNT(*) * ? FROM vectors))",
                    [(VECTOR_ROW_OVERHEAD,)],
                )
            ],
        )
    return {**entries, "links_salvaged": links, **vectors, "notes": tuple(notes)}


def _open_writable(file: Path) -> sqlite3.Connection:
    """A connection that writes the new store (our own file: no other process knows it)."""
    conn = sqlite3.connect(file, isolation_level=None, timeout=30.0)
    conn.execute("PRAGMA synchronous=NORMAL")
    return conn


def _write(dst: sqlite3.Connection, statements: Sequence[tuple[str, Sequence[Any]]]) -> None:
    """Run ``executemany`` statements in one transaction of the new store (whose failure,
    e.g. a full disk, fails the repair: the new store must be whole; :func:`_copy` says
    so)."""
    try:
        dst.execute("BEGIN IMMEDIATE")
        for sql, rows in statements:
            if rows:
                dst.executemany(sql, rows)
        dst.execute("COMMIT")
    except sqlite3.Error as exc:
        with suppress(sqlite3.Error):
            dst.execute("ROLLBACK")
        # A StoreError, not the sqlite3 error itself: the salvage's readers take SQLite
        # errors for damaged pages of the old file, and this one must stop the repair.
        full = str(getattr(exc, "sqlite_errorname", "")).startswith("SQLITE_FULL")
        raise StoreError(_cause(exc), kind="full" if full else "other") from exc


_READ_ERRORS = (sqlite3.Error, UnicodeDecodeError, ValueError, OverflowError)
"""What reading a damaged page can raise: SQLite's errors, and text that is not UTF-8."""


def _scan(
    conn: sqlite3.Connection, sql: str, params: Sequence[Any] = ()
) -> tuple[Iterator[tuple[Any, ...]], list[bool]]:
    """Rows of ``sql`` until the first read error; the list's one flag says whether the scan
    ran to its end (it is set once the iterator is exhausted)."""
    complete = [False]

    def rows() -> Iterator[tuple[Any, ...]]:
        try:
            cursor = conn.execute(sql, params)
            while True:
                row = cursor.fetchone()
                if row is None:
                    break
                yield tuple(row)
        except _READ_ERRORS as exc:
            logger.info("reading stopped at a damaged page (%s): %s", _cause(exc), sql)
            return
        complete[0] = True

    return rows(), complete


def _scan_rowids(
    conn: sqlite3.Connection, table: str, columns: str
) -> tuple[Iterator[tuple[Any, ...]], list[bool]]:
    """The ``columns`` of every readable row of ``table`` (a rowid table), in rowid order;
    the list's one flag says whether every row was read (set once the iterator ends).
    Resumes past damaged pages (:func:`_scan_past_damage`)."""
    complete = [False]
    rows = _scan_past_damage(
        conn,
        f"SELECT rowid, {columns} FROM {table} WHERE rowid > ? ORDER BY rowid",
        (),
        key_of=lambda row: int(row[0]),
        encode=lambda x: x,
        end=2**63 - 1,
        start=-(2**63),
        complete=complete,
    )
    return (tuple(row[1:]) for row in rows), complete


_MAX_RESUMES = 100_000
"""Damaged stretches one scan steps over at most (each costs up to ~250 lookups)."""


def _scan_past_damage(
    conn: sqlite3.Connection,
    sql: str,
    params: tuple[Any, ...],
    *,
    key_of: Callable[[tuple[Any, ...]], int],
    encode: Callable[[int], Any],
    end: int,
    start: int,
    complete: list[bool],
) -> Iterator[tuple[Any, ...]]:
    """Rows of ``sql`` (which ends ``... key > ? ORDER BY key``, after ``params``), in key
    order, resuming past the rows that cannot be read.

    Keys are numbers (``key_of`` reads one from a row, ``encode`` makes the parameter): when
    the scan fails, the next key whose row reads is found by probing 1, 2, 4, ... keys
    ahead with the same query and ``LIMIT 1`` (so a row whose own overflow page is damaged
    is stepped over too), then bisecting back; the scan goes on from there. So a damaged
    page costs the rows on it, not the rest of the table. ``complete[0]`` is set once the
    scan ends having read every row."""
    last, skipped = start, False
    probe = f"{sql} LIMIT 1"

    def next_row(after: int) -> tuple[Any, ...] | None:  # raises on a damaged page
        row = conn.execute(probe, (*params, encode(after))).fetchone()
        return None if row is None else tuple(row)

    for _ in range(_MAX_RESUMES):
        try:
            for row in conn.execute(sql, (*params, encode(last))):
                last = key_of(row)
                yield tuple(row)
        except _READ_ERRORS as exc:
            logger.info("reading stopped at a damaged page (%s): %s", _cause(exc), sql)
            skipped = True
        else:
            complete[0] = not skipped
            return
        # Python's sqlite3 drops the row it holds when the step past it fails, so the next
        # row is read on its own first; if it is the damaged one, probe past it.
        try:
            row = next_row(last)
        except _READ_ERRORS:
            resume = _probe_past(lambda x: _reads(conn, probe, (*params, encode(x))), last, end)
            if resume is None:
                return
            try:
                row = next_row(resume)
            except _READ_ERRORS:  # pragma: no cover - it was just read
                return
        if row is None:
            return
        last = key_of(row)
        yield row


def _reads(conn: sqlite3.Connection, sql: str, params: Sequence[Any]) -> bool:
    """Whether ``sql`` (a one-row lookup) can be read."""
    try:
        conn.execute(sql, params).fetchone()
    except _READ_ERRORS:
        return False
    return True


def _probe_past(readable: Callable[[int], bool], last: int, end: int) -> int | None:
    """The smallest ``x`` in ``(last, end)`` bisection finds with ``readable(x)``, probing
    1, 2, 4, ... keys ahead first; ``None`` if none is readable."""
    bad, step = last, 1
    while True:
        good = bad + step
        if good >= end:
            return None
        if readable(good):
            break
        bad, step = good, step * 2
    while good - bad > 1:  # the first readable start is in (bad, good]
        mid = (bad + good) // 2
        if readable(mid):
            good = mid
        else:
            bad = mid
    return good


def _batches(
    rows: Iterable[tuple[Any, ...]], size: int = _CHUNK
) -> Iterator[list[tuple[Any, ...]]]:
    """``rows`` in lists of ``size`` (one write transaction each)."""
    batch: list[tuple[Any, ...]] = []
    for row in rows:
        batch.append(row)
        if len(batch) >= size:
            yield batch
            batch = []
    if batch:
        yield batch


def _each(
    read: Callable[[Sequence[Any]], list[tuple[Any, ...]]], keys: Sequence[Any]
) -> tuple[list[tuple[Any, ...]], list[Any]]:
    """``read(keys)`` in one go, or key by key if that fails: the rows, and the keys whose
    own read failed."""
    try:
        return read(keys), []
    except _READ_ERRORS:
        pass
    rows: list[tuple[Any, ...]] = []
    failed: list[Any] = []
    for key in keys:
        try:
            rows.extend(read([key]))
        except _READ_ERRORS:
            failed.append(key)
    return rows, failed


def _marks(n: int) -> str:
    """``n`` SQL parameter marks."""
    return ",".join("?" * n)


_PASSAGE_COLUMNS = "text_sha256, extractor, version, num_triples, created"
_TRIPLE_COLUMNS = (
    "text_sha256, extractor, version, position, subject, relation, object, subject_key, object_key"
)


def _copy_entries(
    src: sqlite3.Connection, dst: sqlite3.Connection, notes: list[str]
) -> dict[str, Any]:
    """Copy every whole entry.

    The passages rows come from a scan of their table (resumed past damaged pages); if it
    skipped any, the keys it missed are listed from the table's index and their rows read
    one chunk (or one key) at a time. Each entry's triples are read by key through the
    triples index; the entries whose triples cannot be read that way are looked for in one
    last scan of the triples table itself, in case only the index was damaged."""
    pending: dict[tuple[str, str, str], tuple[Any, ...]] = {}  # row read, triples not whole
    unreadable: set[tuple[str, str, str]] = set()  # listed, row not readable
    table, table_whole = _scan_rowids(src, "passages", _PASSAGE_COLUMNS)
    for batch in _batches(table):
        _copy_entry_rows(dst, batch, pending, lambda keys: _triple_rows(src, keys))
    listed = table_whole[0]
    if not listed:
        keys, index_whole = _scan(
            src,
            "SELECT text_sha256, extractor, version FROM passages "
            "ORDER BY text_sha256, extractor, version",
        )
        for batch in _batches(keys):
            listed_keys = [(str(h), str(e), str(v)) for h, e, v in batch]
            wanted = [k for k in _not_copied(dst, listed_keys) if k not in pending]
            rows, failed = _each(lambda chunk: _passage_rows(src, chunk), wanted)
            unreadable.update(failed)
            _copy_entry_rows(dst, rows, pending, lambda keys: _triple_rows(src, keys))
        listed = index_whole[0]
        if not listed:
            notes.append(
                "the list of entries could not be read whole (the passages table and its "
                "index are both damaged there): the entries on those pages were lost uncounted"
            )
    if pending:
        _rescue_from_triples_table(src, dst, pending)
    salvaged, triples = dst.execute(
        "SELECT COUNT(*), COALESCE(SUM(num_triples), 0) FROM passages"
    ).fetchone()
    lost = (unreadable | set(pending)) - _stored(dst, sorted(unreadable | set(pending)))
    return {
        "entries_salvaged": int(salvaged),
        "entries_lost": len(lost),
        "triples_salvaged": int(triples),
        "entries_listed": listed,
    }


def _rescue_from_triples_table(
    src: sqlite3.Connection,
    dst: sqlite3.Connection,
    pending: dict[tuple[str, str, str], tuple[Any, ...]],
) -> None:
    """Read the triples of the ``pending`` entries from a scan of the triples table (past
    damaged pages), for entries whose triples only the index could not reach; copy those
    now whole. What stays in ``pending`` is lost. Memory holds only those entries' rows."""
    found: dict[tuple[str, str, str], list[tuple[Any, ...]]] = {}
    rows, _ = _scan_rowids(src, "triples", _TRIPLE_COLUMNS)
    for row in rows:
        key = (row[0], row[1], row[2])
        if key in pending:
            found.setdefault(key, []).append(row)
    for rows_of in found.values():
        rows_of.sort(key=lambda r: r[3] if isinstance(r[3], int) else -1)
    waiting = dict(pending)
    pending.clear()
    for batch in _batches(list(waiting.values())):
        _copy_entry_rows(
            dst, batch, pending, lambda keys: [r for k in keys for r in found.get(k, [])]
        )


def _passage_rows(
    src: sqlite3.Connection, keys: Sequence[tuple[str, str, str]]
) -> list[tuple[Any, ...]]:
    """The passages rows of ``keys`` (raises on a damaged page: the caller retries)."""
    wanted = set(keys)
    hashes = sorted({h for h, _, _ in keys})
    rows = src.execute(
        f"SELECT {_PASSAGE_COLUMNS} FROM passages WHERE text_sha256 IN ({_marks(len(hashes))})",
        hashes,
    ).fetchall()
    return [tuple(r) for r in rows if (r[0], r[1], r[2]) in wanted]


def _triple_rows(
    src: sqlite3.Connection, keys: Sequence[tuple[str, str, str]]
) -> list[tuple[Any, ...]]:
    """The triples rows of ``keys``, in position order (raises on a damaged page)."""
    wanted = set(keys)
    hashes = sorted({h for h, _, _ in keys})
    rows = src.execute(
        f"SELECT {_TRIPLE_COLUMNS} FROM triples WHERE text_sha256 IN ({_marks(len(hashes))}) "
        "ORDER BY text_sha256, extractor, version, position",
        hashes,
    ).fetchall()
    return [tuple(r) for r in rows if (r[0], r[1], r[2]) in wanted]


def _copy_entry_rows(
    dst: sqlite3.Connection,
    passages: Sequence[tuple[Any, ...]],
    pending: dict[tuple[str, str, str], tuple[Any, ...]],
    read_triples: Callable[[Sequence[tuple[str, str, str]]], list[tuple[Any, ...]]],
) -> None:
    """Copy the entries of these passages rows whose triples ``read_triples`` returns whole
    (as many as the row records, positions 0..n-1); the others go to ``pending``."""
    if not passages:
        return
    entries = {(str(r[0]), str(r[1]), str(r[2])): r for r in passages}
    keys = sorted(entries)
    triples, failed = _each(read_triples, keys)
    by_key: dict[tuple[str, str, str], list[tuple[Any, ...]]] = {}
    for row in triples:
        by_key.setdefault((row[0], row[1], row[2]), []).append(row)
    unreadable = set(failed)
    good_passages: list[tuple[Any, ...]] = []
    good_triples: list[tuple[Any, ...]] = []
    for key in keys:
        row = entries[key]
        count = row[3]
        if not isinstance(count, int) or isinstance(count, bool) or count < 0:
            pending[key] = row  # a damaged value: the entry cannot be told whole
            continue
        rows = by_key.get(key, [])
        # A row recording no triples needs none read; any other entry only if all of them
        # were: a part of an entry would be served as all of it.
        if count and (key in unreadable or [r[3] for r in rows] != list(range(count))):
            pending[key] = row
            continue
        pending.pop(key, None)
        good_passages.append(row)
        good_triples.extend(rows if count else [])
    _write(
        dst,
        [
            (
                f"INSERT OR IGNORE INTO passages ({_PASSAGE_COLUMNS}) VALUES (?, ?, ?, ?, ?)",
                good_passages,
            ),
            (
                f"INSERT OR IGNORE INTO triples ({_TRIPLE_COLUMNS}) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                good_triples,
            ),
        ],
    )


def _not_copied(
    dst: sqlite3.Connection, keys: Sequence[tuple[str, str, str]]
) -> list[tuple[str, str, str]]:
    """The keys of ``keys`` the new store does not hold yet."""
    done = _stored(dst, keys)
    return [k for k in keys if k not in done]


def _stored(
    dst: sqlite3.Connection, keys: Sequence[tuple[str, str, str]]
) -> set[tuple[str, str, str]]:
    """Which of ``keys`` the new store holds."""
    found: set[tuple[str, str, str]] = set()
    for start in range(0, len(keys), _CHUNK):
        chunk = keys[start : start + _CHUNK]
        hashes = sorted({h for h, _, _ in chunk})
        found.update(
            (h, e, v)
            for h, e, v in dst.execute(
                "SELECT text_sha256, extractor, version FROM passages "
                f"WHERE text_sha256 IN ({_marks(len(hashes))})",
                hashes,
            )
        )
    return found & set(keys)


def _copy_links(src: sqlite3.Connection, dst: sqlite3.Connection, notes: list[str]) -> int:
    """Copy every readable document id link: from the table, then from its index (which
    holds both columns), so a damaged page of one is read from the other."""
    if "documents" not in _tables(src):
        return 0
    insert = "INSERT OR IGNORE INTO documents (doc_id, text_sha256) VALUES (?, ?)"
    rows, complete = _scan_rowids(src, "documents", "doc_id, text_sha256")
    for batch in _batches(rows, 5000):
        _write(dst, [(insert, batch)])
    whole = complete[0]
    if not whole:  # the index holds both columns: read what the table lost from it
        rows, complete = _scan(
            src, "SELECT doc_id, text_sha256 FROM documents INDEXED BY documents_by_hash"
        )
        for batch in _batches(rows, 5000):
            _write(dst, [(insert, batch)])
        whole = complete[0]
    if not whole:
        notes.append("the document id links could not all be read: some were lost")
    return int(dst.execute("SELECT COUNT(*) FROM documents").fetchone()[0])


def _tables(src: sqlite3.Connection) -> set[str]:
    """The tables of the damaged file, or none if its table list cannot be read."""
    try:
        return table_names(src)
    except _READ_ERRORS:
        return set()


def _copy_vectors(
    src: sqlite3.Connection, dst: sqlite3.Connection, notes: list[str]
) -> dict[str, Any]:
    """Copy every readable vector.

    A scan of the table first. If it stops at a damaged page, the table is read again past
    the damage: by rowid (where the table has rowids), and per embedder by text key (the
    embedders named by the rows read, or by an index), resuming past each damaged page.
    Then the list of keys read from the (embedder, text key) index counts the vectors that
    could not be read."""
    if "vectors" not in _tables(src):
        return {"vectors_salvaged": 0, "vectors_lost": 0, "vectors_listed": True}
    columns = "embedder, text_key, vector, used"
    rows, table_whole = _scan(src, f"SELECT {columns} FROM vectors")
    embedders: set[str] = set()
    for batch in _batches(rows, 2000):
        embedders.update(str(r[0]) for r in batch)
        _write_vectors(dst, batch)
    if table_whole[0]:
        return _vector_counts(dst, listed=True, lost=0)
    if _reads(src, "SELECT rowid FROM vectors LIMIT 1", ()):  # not a WITHOUT ROWID table
        rows, _ = _scan_rowids(src, "vectors", columns)
        for batch in _batches(rows, 2000):
            embedders.update(str(r[0]) for r in batch)
            _write_vectors(dst, batch)
    names, _ = _scan(src, "SELECT DISTINCT embedder FROM vectors ORDER BY embedder")
    embedders.update(str(name) for (name,) in names)
    for embedder in sorted(embedders):
        for batch in _batches(_scan_vectors_of(src, embedder), 2000):
            _write_vectors(dst, batch)
    keys, index_whole = _scan(
        src, "SELECT embedder, text_key FROM vectors ORDER BY embedder, text_key"
    )
    lost = sum(len(_vectors_not_copied(dst, batch)) for batch in _batches(keys))
    if not index_whole[0]:
        notes.append(
            "the list of vectors could not be read whole: vectors on damaged pages were "
            "lost uncounted"
        )
    return _vector_counts(dst, listed=index_whole[0], lost=lost)


def _vector_counts(dst: sqlite3.Connection, *, listed: bool, lost: int) -> dict[str, Any]:
    """The vector fields of the :class:`RepairReport`."""
    salvaged = int(dst.execute("SELECT COUNT(*) FROM vectors").fetchone()[0])
    return {"vectors_salvaged": salvaged, "vectors_lost": lost, "vectors_listed": listed}


def _write_vectors(dst: sqlite3.Connection, rows: Sequence[tuple[Any, ...]]) -> None:
    """Copy these vector rows (those whose vector is readable) into the new store."""
    good = [r for r in rows if _is_vector(r)]
    sql = "INSERT OR IGNORE INTO vectors (embedder, text_key, vector, used) VALUES (?, ?, ?, ?)"
    _write(dst, [(sql, good)])


_KEY_BYTES = 16
"""Bytes of a text key (:func:`~neocorrag_core.models.text_key`): keys are probed as
numbers of this width, big-endian, which is SQLite's order of equal-length blobs."""


def _scan_vectors_of(src: sqlite3.Connection, embedder: str) -> Iterator[tuple[Any, ...]]:
    """Every readable vector row of ``embedder``, in key order, resuming past damaged pages
    (:func:`_scan_past_damage`, with the text key read as a number)."""
    return _scan_past_damage(
        src,
        "SELECT embedder, text_key, vector, used FROM vectors WHERE embedder = ? "
        "AND text_key > ? ORDER BY text_key",
        (embedder,),
        key_of=lambda row: int.from_bytes(
            bytes(row[1])[:_KEY_BYTES].ljust(_KEY_BYTES, b"\0"), "big"
        ),
        encode=lambda x: x.to_bytes(_KEY_BYTES, "big") if x >= 0 else b"",  # b"": before all
        end=2 ** (8 * _KEY_BYTES) - 1,
        start=-1,
        complete=[False],
    )


def _is_vector(row: tuple[Any, ...]) -> bool:
    """A row whose vector is a non-empty blob (anything else is a damaged value)."""
    blob = row[2]
    return isinstance(blob, bytes) and len(blob) > 0


def _vectors_not_copied(
    dst: sqlite3.Connection, keys: Sequence[tuple[Any, ...]]
) -> list[tuple[Any, Any]]:
    """The (embedder, text key) pairs of ``keys`` the new store lacks."""
    return [
        (embedder, text_key)
        for embedder, text_key in keys
        if dst.execute(
            "SELECT 1 FROM vectors WHERE embedder = ? AND text_key = ?", (embedder, text_key)
        ).fetchone()
        is None
    ]


def _finish_copy(tmp: Path) -> StoreCheck:
    """Fold the new store's WAL into its file, check it, and (if it passed) flush it to
    disk; the check's verdict."""
    with closing(_open_writable(tmp)) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    verdict = check_store(tmp, quick=True)
    # The check's read-only connection may have made empty -wal/-shm files; the copy is
    # this process's own, so they go before it moves.
    for suffix in ("-wal", "-shm"):
        Path(f"{tmp}{suffix}").unlink(missing_ok=True)
    if verdict.ok:
        fd = os.open(tmp, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    return verdict


def _swap(file: Path, tmp: Path, label: str) -> Path:
    """Move ``file`` (and its SQLite companions) aside as ``<name>.<label>-<time>`` and
    ``tmp`` into its place; the file's new name. Renames only: its bytes are never
    rewritten, and SQLite finds its -wal file under the new name (nothing is lost)."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    aside = file.with_name(f"{file.name}.{label}-{stamp}")
    n = 1
    while any(Path(f"{aside}{s}").exists() for s in ("", *COMPANIONS)):
        n += 1
        aside = file.with_name(f"{file.name}.{label}-{stamp}-{n}")
    moved: list[tuple[Path, Path]] = []
    try:
        for suffix in ("", *COMPANIONS):
            old = Path(f"{file}{suffix}")
            if suffix and not old.exists():
                continue
            new = Path(f"{aside}{suffix}")
            os.rename(old, new)
            moved.append((old, new))
        os.replace(tmp, file)
    except OSError as exc:
        for old, new in reversed(moved):  # put the damaged store back as it was
            with suppress(OSError):
                os.rename(new, old)
        raise StoreError(
            f"cannot move the repaired store into place at {file}: "
            f"{describe_os_error(exc, file)}; the old store was put back as it was, and the "
            "repaired copy removed"
        ) from None
    _sync_folder(file.parent)
    return aside


def _sync_folder(folder: Path) -> None:
    """Flush the folder's entries (the renames) to disk, where the OS allows it."""
    with suppress(OSError, AttributeError):
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _remove_files(file: Path) -> None:
    """Delete ``file`` and its SQLite companions (the temporary copy, never the store)."""
    for suffix in ("", *COMPANIONS):
        Path(f"{file}{suffix}").unlink(missing_ok=True)


__all__ = [
    "DAMAGED",
    "MISSING",
    "NOT_A_STORE",
    "OK",
    "OTHER_SCHEMA",
    "RepairRefused",
    "RepairReport",
    "StoreCheck",
    "check_command",
    "check_store",
    "repair_command",
    "repair_store",
]
