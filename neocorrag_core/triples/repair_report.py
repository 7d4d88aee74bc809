"""What a store check and a store repair say: their verdicts, reports, refusals and fixes.

The data that :func:`~neocorrag_core.triples.store_repair.check_store` and
:func:`~neocorrag_core.triples.store_repair.repair_store` hand back (:class:`StoreCheck`,
the check's verdict, its ``status`` one of :data:`OK`, :data:`DAMAGED`,
:data:`NOT_A_STORE`, :data:`OTHER_SCHEMA`, :data:`MISSING`; :class:`RepairReport`, what a
repair salvaged and lost) or raise (:class:`RepairRefused`), and the words they use: the
commands that check and repair a store (quoted for a shell), the fix of a damaged store,
and an SQLite error as one line. Re-exported by
:mod:`~neocorrag_core.triples.store_repair`.
"""

from __future__ import annotations

import os
import shlex
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from neocorrag_core.errors import StoreError

OK = "ok"
DAMAGED = "damaged"
NOT_A_STORE = "not-a-store"
OTHER_SCHEMA = "other-schema"
MISSING = "missing"


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


def _cause(exc: BaseException) -> str:
    """An exception as one line of text (SQLite messages may hold newlines)."""
    return " ".join(str(exc).split()) or type(exc).__name__


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
    "repair_command",
]
