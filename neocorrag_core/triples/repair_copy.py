"""The salvage of a repair: copy every entry, link and vector that still reads into a new store.

Each copy reads the damaged file through :mod:`~neocorrag_core.triples.repair_scan` (past
its damaged pages) and writes the new store in transactions of its own (:func:`_write`,
whose failure stops the repair: the new store must be whole). Entries
(:func:`_copy_entries`): a passages row with all its triples, or nothing, so the new store
never serves a passage with triples missing. Document id links (:func:`_copy_links`):
from their table, then from its index. Vectors (:func:`_copy_vectors`): from their
table, resumed past damage by rowid and per embedder by text key, and counted as lost
from the index's list of keys. :func:`~neocorrag_core.triples.store_repair.repair_store`
runs them in this order.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator, Sequence
from contextlib import suppress
from pathlib import Path
from typing import Any

from neocorrag_core.errors import StoreError
from neocorrag_core.triples.repair_report import _cause
from neocorrag_core.triples.repair_scan import (
    _CHUNK,
    _READ_ERRORS,
    _batches,
    _each,
    _marks,
    _reads,
    _scan,
    _scan_past_damage,
    _scan_rowids,
)
from neocorrag_core.triples.store_schema import table_names


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
