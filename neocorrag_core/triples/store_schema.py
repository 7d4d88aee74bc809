"""The triple store's tables: their DDL, the schema version, and the migrations between them.

Also the statements every reader and writer of those tables shares (:func:`insert_entry`,
:func:`key_filter`), so that the row layout is written down in one place. Everything here
runs inside a transaction the caller holds (:class:`~neocorrag_core.triples.store.TripleStore`
opens them): nothing commits.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence, Sized
from pathlib import Path

from neocorrag_core.text.entities import normalize_entity
from neocorrag_core.triples.keys import ExtractorKey
from neocorrag_core.types import Triple

SCHEMA_VERSION = 3

SQLITE_MAGIC = b"SQLite format 3\x00"
"""The first 16 bytes of every SQLite 3 database."""


def is_sqlite_file(path: Path) -> bool:
    """Whether ``path`` is an existing file that starts like an SQLite 3 database."""
    try:
        with open(path, "rb") as fh:
            return fh.read(len(SQLITE_MAGIC)) == SQLITE_MAGIC
    except OSError:
        return False


SCHEMA_1_DDL = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS passages (
    text_sha256 TEXT NOT NULL,
    extractor TEXT NOT NULL,
    version TEXT NOT NULL,
    num_triples INTEGER NOT NULL,
    created REAL NOT NULL,
    PRIMARY KEY (text_sha256, extractor, version)
);
CREATE TABLE IF NOT EXISTS triples (
    text_sha256 TEXT NOT NULL,
    extractor TEXT NOT NULL,
    version TEXT NOT NULL,
    position INTEGER NOT NULL,
    subject TEXT NOT NULL,
    relation TEXT NOT NULL,
    object TEXT NOT NULL,
    subject_key TEXT NOT NULL,
    object_key TEXT NOT NULL,
    PRIMARY KEY (text_sha256, extractor, version, position)
);
CREATE INDEX IF NOT EXISTS triples_by_subject ON triples (subject_key);
CREATE INDEX IF NOT EXISTS triples_by_object ON triples (object_key);
"""
"""The schema 1 tables; every later schema is reached from it by :data:`MIGRATIONS`."""

DOCUMENTS_DDL = """
CREATE TABLE IF NOT EXISTS documents (
    doc_id TEXT NOT NULL,
    text_sha256 TEXT NOT NULL,
    PRIMARY KEY (doc_id, text_sha256)
);
CREATE INDEX IF NOT EXISTS documents_by_hash ON documents (text_sha256, doc_id);
"""
# The index covers (hash, doc id), so "which documents link this hash" and the export's
# hash-ordered scan read the index alone.


VECTORS_DDL = """
CREATE TABLE IF NOT EXISTS vectors (
    embedder TEXT NOT NULL,
    text_key BLOB NOT NULL,
    vector BLOB NOT NULL,
    used INTEGER NOT NULL,
    UNIQUE (embedder, text_key)
);
CREATE INDEX IF NOT EXISTS vectors_by_use ON vectors (used);
"""
# One row per (embedder identity, text key): the vector of one node or triple text as
# float16, little-endian (the embedder rounds every vector to float16 when it computes it,
# so a stored vector is the one computed), and the day (days since the epoch) it was last
# used, for least-recently-used eviction. A rowid table, not WITHOUT ROWID: rows of ~800
# bytes pack badly in a WITHOUT ROWID b-tree (measured: 3x the file size). ``meta`` keeps
# the running byte count under 'vector_bytes'.


def run_script(conn: sqlite3.Connection, script: str) -> None:
    """Run each statement of ``script`` in the caller's transaction."""
    # Not executescript(): it would COMMIT the transaction the statements must run in.
    for statement in script.split(";"):
        if statement.strip():
            conn.execute(statement)


def _migrate_1_to_2(conn: sqlite3.Connection) -> None:
    """Schema 2: the ``documents`` table (user document id -> content hash).

    A schema 1 store never recorded document ids, so the table starts empty; passages
    written from now on are linked (:meth:`~neocorrag_core.triples.store.TripleStore.put_many`).
    """
    run_script(conn, DOCUMENTS_DDL)


def _migrate_2_to_3(conn: sqlite3.Connection) -> None:
    """Schema 3: the ``vectors`` table (the embeddings of node and triple texts, per
    embedder). It starts empty: vectors are computed the next time a text is seen."""
    run_script(conn, VECTORS_DDL)


MIGRATIONS: dict[int, Callable[[sqlite3.Connection], None]] = {
    1: _migrate_1_to_2,
    2: _migrate_2_to_3,
}
"""``{n: step}``: ``step`` turns a schema ``n`` store into schema ``n + 1`` (in the caller's
transaction). A new schema adds one step; an old file is walked up step by step."""


def create_tables(conn: sqlite3.Connection) -> str | None:
    """Create the tables of :data:`SCHEMA_VERSION` in an empty database.

    Returns ``None`` once they are made; if another opener stored a schema version first,
    only the missing schema 1 tables are made and that version is returned, for the
    caller to check and upgrade.
    """
    run_script(conn, SCHEMA_1_DDL)
    found = stored_version(conn)
    if found is None:
        run_script(conn, DOCUMENTS_DDL)
        run_script(conn, VECTORS_DDL)
        conn.execute("INSERT INTO meta VALUES ('schema', ?)", (str(SCHEMA_VERSION),))
    return found


def can_upgrade(version: int) -> bool:
    """Whether this code reads a schema ``version`` store, as it is or after migrating."""
    return version <= SCHEMA_VERSION and all(
        v in MIGRATIONS for v in range(version, SCHEMA_VERSION)
    )


def upgrade(conn: sqlite3.Connection, version: int) -> bool:
    """Run the migration steps from ``version`` up (in ``conn``'s transaction); ``False``
    if the store is at :data:`SCHEMA_VERSION` already."""
    if version >= SCHEMA_VERSION:
        return False
    for step in range(version, SCHEMA_VERSION):
        MIGRATIONS[step](conn)
    conn.execute("UPDATE meta SET value = ? WHERE key = 'schema'", (str(SCHEMA_VERSION),))
    return True


def table_names(conn: sqlite3.Connection) -> set[str]:
    """The names of the database's tables (ours or, in a foreign file, anyone's)."""
    return {name for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}


def stored_version(conn: sqlite3.Connection) -> str | None:
    """The schema version the ``meta`` table records, as stored; ``None`` if none is."""
    row = conn.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone()
    return None if row is None else str(row[0])


def insert_entry(
    conn: sqlite3.Connection,
    digest: str,
    extractor: str,
    version: str,
    cleaned: Sequence[Triple],
    now: float,
) -> bool:
    """Store one entry's (cleaned) triples; ``False`` if the key is stored already."""
    cur = conn.execute(
        "INSERT OR IGNORE INTO passages VALUES (?, ?, ?, ?, ?)",
        (digest, extractor, version, len(cleaned), now),
    )
    if cur.rowcount == 0:
        return False
    conn.executemany(
        "INSERT INTO triples VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [
            (
                digest,
                extractor,
                version,
                i,
                t.subject,
                t.relation,
                t.object,
                # Stored keys predate accent folding; folding them needs a schema step.
                normalize_entity(t.subject, fold_accents=False),
                normalize_entity(t.object, fold_accents=False),
            )
            for i, t in enumerate(cleaned)
        ],
    )
    return True


def key_filter(key: ExtractorKey | None, word: str) -> tuple[str, tuple[str, ...]]:
    """SQL (``WHERE``/``AND`` ...) restricting rows to one extractor, and its parameters."""
    if key is None:
        return "", ()
    return f"{word} extractor = ? AND version = ?", (key.extractor_id, key.version)


def _marks(chunk: Sized) -> str:
    """One SQL parameter mark per item of ``chunk`` (``?,?,?``), for ``IN (...)`` lists."""
    return ",".join("?" * len(chunk))
