"""Reading a damaged SQLite file past its damaged pages, for the salvage of a repair.

A table scan stops at the first page SQLite cannot read; these readers go on. :func:`_scan`
reads until the first error and says whether it reached the end; :func:`_scan_rowids`
and :func:`_scan_past_damage` resume past each damaged stretch by probing ahead for the
next key whose row reads (then bisecting back); :func:`_each` reads a chunk of keys in
one query, or key by key if that fails. So a damaged page costs the rows on it, not the
rest of the table. What reading a damaged page can raise is :data:`_READ_ERRORS`. The
copy into the new store (:mod:`~neocorrag_core.triples.repair_copy`) is built on these.
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

from neocorrag_core.triples.repair_report import _cause

# Records go to the store's logger: the name users configure for everything the store does.
logger = logging.getLogger("neocorrag_core.triples.store")

_CHUNK = 500
"""Keys per lookup query: below SQLite's bound-parameter limit, and small enough that a
chunk that fails is retried key by key without much repeated work."""

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
