"""One indexer at a time per store: the ``flock`` behind ``TripleStore.indexer_lock``.

An OS advisory lock on a file next to the store (``<store>.lock``), so it is released when
its holder ends, even by ``kill -9``: a stale lock cannot exist. The holder writes its pid
into the file, so a run that has to wait can say for whom, and deletes the file when it
ends, on every path (a failure included), so no lock file is left beside the store.

Deleting a lock file is safe because every run checks, once it holds the lock, that the
file it locked is still the one at the path: a run that waited on a file its holder then
deleted finds it gone and locks the file now at the path instead, so two runs never hold
two files of one name. (``kill -9`` leaves the file; the next run takes it over.)
"""

from __future__ import annotations

import errno
import logging
import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

from neocorrag_core.errors import StoreError
from neocorrag_core.os_errors import describe_os_error

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: indexing runs without the indexer lock
    fcntl = None  # type: ignore[assignment]

# Records go to the store's logger: the name users configure for everything the store does.
logger = logging.getLogger("neocorrag_core.triples.store")


@contextmanager
def hold_indexer_lock(
    lock_path: Path, store_name: str, on_wait: Callable[[int | None], None] | None = None
) -> Iterator[None]:
    """Hold the exclusive lock on ``lock_path``, waiting while another process holds it.

    ``on_wait`` is called with the holder's pid (if known) before each wait; without it a
    warning naming ``store_name`` is logged. Where file locks are unsupported this
    proceeds unlocked. The lock file is deleted when the lock is let go, however the
    block ends. See :meth:`~neocorrag_core.triples.store.TripleStore.indexer_lock`.
    """
    if fcntl is None:
        yield
        return
    fd = _locked_file(lock_path, store_name, on_wait)
    try:
        _write_pid(fd, lock_path)
        yield
    finally:
        _remove_lock_file(fd, lock_path)  # still locked: no other run is using the file
        os.close(fd)  # closing the descriptor releases the lock


def _locked_file(
    lock_path: Path, store_name: str, on_wait: Callable[[int | None], None] | None
) -> int:
    """A descriptor of the lock file at ``lock_path``, locked by this process: waits while
    another holds it, and starts over when the file it locked was deleted meanwhile."""
    while True:
        fd = _open_lock_file(lock_path)
        try:
            if not _lock(fd, lock_path, wait=False):
                _report_wait(fd, store_name, on_wait)
                _lock(fd, lock_path, wait=True)
            if _is_at_path(fd, lock_path):
                return fd
        except BaseException:
            os.close(fd)
            raise
        os.close(fd)  # its holder deleted the file as it ended: lock the one at the path now


def _open_lock_file(lock_path: Path) -> int:
    """Open (or create) the lock file; a :class:`StoreError` naming it and the fix."""
    try:
        return os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o666)
    except OSError as exc:
        raise StoreError(
            f"cannot create the indexer lock {lock_path}: {describe_os_error(exc, lock_path)} "
            "(the store's folder must be writable to index into or repair it)",
            kind="full" if exc.errno == errno.ENOSPC else "other",
        ) from None


def _report_wait(fd: int, store_name: str, on_wait: Callable[[int | None], None] | None) -> None:
    """Say who holds the lock (``on_wait``, or a warning) before waiting for it."""
    holder = _read_pid(fd)
    for _ in range(25):  # the holder writes its pid just after taking the lock
        if holder is not None:
            break
        time.sleep(0.02)
        holder = _read_pid(fd)
    if on_wait is not None:
        on_wait(holder)
    else:
        logger.warning("waiting for another indexer (pid %s) of %s", holder or "?", store_name)


def _is_at_path(fd: int, lock_path: Path) -> bool:
    """Whether the file open as ``fd`` is still the one at ``lock_path`` (not deleted or
    replaced by the run that held it before)."""
    try:
        at_path = os.stat(lock_path)
    except OSError:
        return False
    mine = os.fstat(fd)
    return (mine.st_dev, mine.st_ino) == (at_path.st_dev, at_path.st_ino)


def _write_pid(fd: int, lock_path: Path) -> None:
    """Write this process's pid into the held lock file, for runs that wait to name it.

    Best effort: the pid only helps a waiting run's message, so a write that fails (a full
    disk) leaves the file empty rather than failing the run, whose own writes report the
    disk properly."""
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    except OSError as exc:
        logger.debug(
            "cannot write the pid into %s (%s): waiting runs will say pid ?", lock_path, exc
        )


def _remove_lock_file(fd: int, lock_path: Path) -> None:
    """Delete the lock file this process holds (called before the lock is let go), unless
    the file at the path is another one; if it cannot be deleted, at least empty it."""
    if not _is_at_path(fd, lock_path):
        return
    try:
        lock_path.unlink()
    except OSError:
        with suppress(OSError):
            os.ftruncate(fd, 0)


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
