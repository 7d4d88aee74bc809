"""Putting a repaired copy in place: finish it on disk, then swap it with the damaged store.

:func:`_finish_copy` folds the copy's write-ahead log into its file, checks it and
flushes it to disk; :func:`_swap` moves the damaged file and its SQLite companions
(:data:`COMPANIONS`) aside as ``<name>.damaged-<time>`` by renames only (their bytes are
never rewritten) and the copy into its place, putting everything back if a rename fails;
:func:`_remove_files` deletes a temporary copy. The last steps of
:func:`~neocorrag_core.triples.store_repair.repair_store`.
"""

from __future__ import annotations

import os
import time
from contextlib import closing, suppress
from pathlib import Path

from neocorrag_core.errors import StoreError
from neocorrag_core.os_errors import describe_os_error
from neocorrag_core.triples.repair_check import check_store
from neocorrag_core.triples.repair_copy import _open_writable
from neocorrag_core.triples.repair_report import StoreCheck

COMPANIONS = ("-wal", "-shm", "-journal")
"""The files SQLite keeps beside a database, which belong to it (and move with it)."""


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
