"""What a triple store says when it fails: SQLite's errors as one :class:`StoreError` each.

Every failure to open, read or write a
:class:`~neocorrag_core.triples.store.TripleStore` becomes a
:class:`~neocorrag_core.errors.StoreError` naming the file, the cause and the fix, with a
``kind`` (``damaged``, ``foreign``, ``schema``, ``read-only``, ``busy``, ``full``,
``other``) that callers branch on. This module writes those messages: the store's
:meth:`~neocorrag_core.triples.store.TripleStore._error` (what its transactions raise) and
the refusals of a file that is damaged or someone else's database, which the opening
code raises (:mod:`~neocorrag_core.triples.store_open`,
:mod:`~neocorrag_core.triples.store_migrate`).
"""

from __future__ import annotations

import shlex
import sqlite3
from typing import TYPE_CHECKING

from neocorrag_core.errors import StoreError
from neocorrag_core.os_errors import disk_is_full

if TYPE_CHECKING:
    from neocorrag_core.triples.store import TripleStore


class StoreSchemaError(StoreError, ValueError):
    """The store file was written by another neocorrag store schema.

    Also a ``ValueError``, what this case raised before the :mod:`~neocorrag_core.errors`
    family existed.
    """

    def __init__(self, *args: object) -> None:
        super().__init__(*args, kind="schema")

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), self.args)


def damaged_message(path: str, cause: str) -> str:
    """The message of a store file that is damaged or not a neocorrag store at all."""
    return (
        f"the triple store {path} is damaged or is not a neocorrag triple store "
        f"({cause}); it was left as it is: `neocorrag store check --store {path}` says which "
        "and the fix, or point NEOCORRAG_CACHE / --store at another file"
    )


def foreign_message(path: str, tables: set[str]) -> str:
    """The message of an SQLite database that holds another program's tables."""
    # Not "delete it": this file may be someone's data.
    names = ", ".join(sorted(tables)[:6])
    return (
        f"{path} is an SQLite database but not a neocorrag triple store (it holds the "
        f"tables {names}); it was left as it is: point NEOCORRAG_CACHE / --store at "
        "another file"
    )


def sqlite_error(store: TripleStore, action: str, exc: sqlite3.Error) -> StoreError:
    """The :class:`StoreError` of ``exc``, raised while ``store`` tried to ``action`` it:
    the file, SQLite's cause, the fix, and the ``kind`` of failure."""
    cause = " ".join(str(exc).split()) or type(exc).__name__
    code = str(getattr(exc, "sqlite_errorname", ""))  # Python >= 3.11
    low = cause.lower()
    if code in ("SQLITE_NOTADB", "SQLITE_CORRUPT") or any(
        word in low for word in ("not a database", "malformed", "corrupt")
    ):
        return StoreError(damaged_message(store.path, cause), kind="damaged")
    if code.startswith("SQLITE_READONLY") or "readonly" in low:
        kind = "read-only"
        fix = (
            "the file or its folder is not writable: open it with read_only=True to read "
            "it, or point NEOCORRAG_CACHE / --store at a writable file"
        )
    elif code.startswith("SQLITE_BUSY") or "locked" in low:
        kind = "busy"
        fix = (
            f"another process held it for longer than the {store.timeout:g} s timeout; "
            "retry, or pass a longer timeout"
        )
    elif code.startswith("SQLITE_FULL") or "full" in low:
        kind = "full"
        fix = "free some disk space, or point NEOCORRAG_CACHE / --store at another disk"
    elif (code.startswith("SQLITE_IOERR") or "disk i/o error" in low) and not store._memory:
        # SQLite says "disk I/O error", not "full", when a full disk stops it growing
        # its -shm file: tell the two apart by the room left on the disk.
        if disk_is_full(store._file):
            kind = "full"
            fix = (
                f"the disk holding {store._file.parent} is full: free some disk space, or "
                "point NEOCORRAG_CACHE / --store at another disk"
            )
        else:
            kind = "other"
            fix = (
                "the disk reported an I/O error: check the disk (the system log names the "
                f"fault), then run `neocorrag store check --store {shlex.quote(store.path)}`"
            )
    else:
        kind = "other"
        fix = (
            "check that the file and its folder exist and are readable (writable to add "
            "triples), or point NEOCORRAG_CACHE / --store elsewhere"
        )
    return StoreError(f"cannot {action} the triple store {store.path}: {cause}; {fix}", kind=kind)


__all__ = ["StoreSchemaError", "damaged_message", "foreign_message", "sqlite_error"]
