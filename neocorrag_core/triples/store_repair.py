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

This module is the repair itself (refuse, lock, salvage into a copy, swap) and the
entry points of both. Its stages live beside it, each re-exported here where it is
public: the check (:mod:`~neocorrag_core.triples.repair_check`), the verdict and report
types and their messages (:mod:`~neocorrag_core.triples.repair_report`), reading past
damaged pages (:mod:`~neocorrag_core.triples.repair_scan`), the copy of entries, links
and vectors (:mod:`~neocorrag_core.triples.repair_copy`) and putting the copy in place
(:mod:`~neocorrag_core.triples.repair_swap`).
"""

from __future__ import annotations

import errno
import logging
import os
import sqlite3
import time
from contextlib import closing
from pathlib import Path
from typing import Any

from neocorrag_core.errors import StoreError
from neocorrag_core.os_errors import describe_os_error, disk_is_full
from neocorrag_core.triples.indexer_lock import hold_indexer_lock
from neocorrag_core.triples.repair_check import _check, _open_read_only, check_store
from neocorrag_core.triples.repair_copy import (
    _copy_entries,
    _copy_links,
    _copy_vectors,
    _open_writable,
    _write,
)
from neocorrag_core.triples.repair_report import (
    DAMAGED,
    MISSING,
    NOT_A_STORE,
    OK,
    OTHER_SCHEMA,
    RepairRefused,
    RepairReport,
    StoreCheck,
    _cause,
    check_command,
    repair_command,
)
from neocorrag_core.triples.repair_swap import COMPANIONS as COMPANIONS
from neocorrag_core.triples.repair_swap import _finish_copy, _remove_files, _swap
from neocorrag_core.triples.store import TripleStore
from neocorrag_core.triples.store_open import default_store_path
from neocorrag_core.triples.store_vectors import VECTOR_ROW_OVERHEAD

# Records go to the store's logger: the name users configure for everything the store does.
logger = logging.getLogger("neocorrag_core.triples.store")


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
