"""The check of a triple store file: is it a store this version reads, and are its pages whole.

:func:`check_store` (``neocorrag store check``) opens the file read-only (it never writes
it, never creates it), checks it is an SQLite database holding a neocorrag store of a
schema this version reads (what :class:`~neocorrag_core.triples.store.TripleStore` checks
when it opens one), runs SQLite's ``PRAGMA integrity_check`` over every page, and returns
one verdict (:class:`~neocorrag_core.triples.repair_report.StoreCheck`) with the cause
and the fix. The repair runs the same check before it starts, and on its copy
(:mod:`~neocorrag_core.triples.store_repair`).

``integrity_check`` rather than ``quick_check``: both read every page and find damaged
pages, but only ``integrity_check`` also checks that each index agrees with its table. The
store answers its queries through those indexes (passages and triples by key, triples by
entity), so an index that lost rows would silently drop triples from answers. It costs
more: on a 290 MB store (50,000 passages, 500,000 triples, 100,000 384-d vectors) 0.9 s
against 0.2 s for ``quick_check`` (this 2-core machine, warm file cache); ``quick=True``
(``neocorrag store check --quick``) runs ``quick_check`` for very large stores.
"""

from __future__ import annotations

import os
import sqlite3
import time
from contextlib import closing
from pathlib import Path
from typing import Any

from neocorrag_core.errors import StoreError
from neocorrag_core.os_errors import describe_os_error
from neocorrag_core.triples.repair_report import (
    DAMAGED,
    MISSING,
    NOT_A_STORE,
    OK,
    OTHER_SCHEMA,
    StoreCheck,
    _cause,
    _damaged_fix,
)
from neocorrag_core.triples.store import TripleStore
from neocorrag_core.triples.store_open import _cannot_share_wal_index, default_store_path
from neocorrag_core.triples.store_schema import (
    SCHEMA_VERSION,
    SQLITE_MAGIC,
    can_upgrade,
    stored_version,
    table_names,
)

_MAX_PROBLEMS = 20
"""How many problems ``integrity_check`` lists at most (it stops counting there)."""

_REQUIRED_TABLES = {1: {"meta", "passages", "triples"}, 2: {"documents"}, 3: {"vectors"}}
"""The tables each schema adds; a store of schema N has those of 1..N."""


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
            f"pass the store's path with --store (or NEOCORRAG_CACHE); {name} is left as it "
            "is, and nothing here suggests it held a store: if you know it was your triple "
            "store, move it aside (a store is a cache: its triples and vectors are made "
            "again as they are needed)",
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


__all__ = ["check_store"]
