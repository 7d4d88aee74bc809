"""One indexer at a time per store: the ``flock`` behind ``TripleStore.indexer_lock``.

An OS advisory lock on a file next to the store, so it is released when its holder ends,
even by ``kill -9``: a stale lock cannot exist. The holder writes its pid into the file,
so a run that has to wait can say for whom.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from neocorrag_core.errors import StoreError

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

    ``on_wait`` is called once with the holder's pid (if known) before waiting; without
    it a warning naming ``store_name`` is logged. Where file locks are unsupported this
    proceeds unlocked. See :meth:`~neocorrag_core.triples.store.TripleStore.indexer_lock`.
    """
    if fcntl is None:
        yield
        return
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
                    "waiting for another indexer (pid %s) of %s", holder or "?", store_name
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
