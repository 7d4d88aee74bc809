"""OS errors in words: a full disk, permissions, a read-only file system, an I/O error.

The triple store, its export and import, its indexer lock and the CLI meet the same few OS
errors. :func:`describe_os_error` says each as one phrase that names the file and the fix,
so that every message reads alike and none is a bare ``[Errno 28] No space left on
device``; :func:`disk_is_full` tells a full disk behind an error that does not say so
(SQLite reports a full disk as a "disk I/O error" when it cannot grow its ``-shm`` file).
"""

from __future__ import annotations

import errno
import os
import shutil
from pathlib import Path

FULL_BYTES = 1 << 20
"""A disk with less free space than this (1 MiB) for this user counts as full: SQLite and
the exports write whole pages and blocks, so a disk with a few KiB left fails as a full
one does."""

_NO_SPACE = frozenset(
    code for code in (errno.ENOSPC, getattr(errno, "EDQUOT", None)) if code is not None
)
_DENIED = frozenset((errno.EACCES, errno.EPERM))
_TOO_MANY_FILES = frozenset((errno.EMFILE, errno.ENFILE))


def disk_is_full(path: str | os.PathLike[str]) -> bool:
    """Whether the file system holding ``path`` (or its nearest existing folder) has less
    than :data:`FULL_BYTES` free for this user; ``False`` when that cannot be told."""
    folder = Path(path)
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    try:
        return shutil.disk_usage(folder).free < FULL_BYTES
    except OSError:
        return False


def describe_os_error(
    exc: OSError, path: str | os.PathLike[str] | None = None, *, stream: str | None = None
) -> str:
    """``"<what went wrong with the file>; <the fix>"`` for ``exc``, met on ``path``.

    The file named is the one the error names (``exc.filename``), else ``path`` (what the
    caller was reading or writing), else ``stream`` (a name such as ``"stdout"``, for an
    error writing a standard stream: the disk is then the one it is redirected to). One
    line, no errno number, no traceback: the caller prefixes what it was doing and may
    append what state its data is in.
    """
    filename = exc.filename if exc.filename not in (None, "") else path
    if filename is not None:
        name = os.fspath(filename)
        folder = f" and its folder {_folder(name)}"
        device = f"the device holding {_folder(name)}"
    else:
        name = stream or "the file"
        folder = ""
        device = f"the disk {name} is redirected to" if stream else "the disk"
    code = exc.errno
    if code in _NO_SPACE:
        what = "disk quota exceeded" if code == getattr(errno, "EDQUOT", None) else "no space left"
        return (
            f"{what} on {device} (writing {name}); free disk space there, or write to "
            "another disk, and run again"
        )
    if code in _DENIED:
        return (
            f"permission denied on {name}; run as a user who may read and write it{folder}, "
            "or work on a copy in a folder you own"
        )
    if code == errno.EROFS:
        return (
            f"{device} is a read-only file system (writing {name}); copy the file to a "
            "writable disk and use the copy"
        )
    if code == errno.EIO:
        return (
            f"the disk holding {name} reported an I/O error; check the disk (the system log "
            "names the fault) and run again, or copy the file to another disk"
        )
    if code in _TOO_MANY_FILES:
        return (
            f"too many open files (opening {name}); raise the limit (`ulimit -n`) or close "
            "other programs, and run again"
        )
    if code == errno.EFBIG:
        return f"{name} grew past the largest file its file system allows; write it elsewhere"
    cause = exc.strerror or str(exc) or type(exc).__name__
    return f"{cause} ({name}); check {name}{folder}, and run again"


def _folder(name: str) -> str:
    """The folder that holds ``name`` (``name`` itself when it is one)."""
    path = Path(name)
    return str(path if path.is_dir() else path.parent)


__all__ = ["FULL_BYTES", "describe_os_error", "disk_is_full"]
