"""The triple store as a vector cache: the embedder's vectors, bounded, least recently used go.

Schema 3 stores keep the vectors of node and triple texts per embedder identity in their
``vectors`` table (:data:`~neocorrag_core.triples.store_schema.VECTORS_DDL`), so a query
over stored passages embeds only its own queries. This module reads and writes that
table: the bodies of :meth:`TripleStore.get_vectors
<neocorrag_core.triples.store.TripleStore.get_vectors>`, :meth:`~TripleStore.put_vectors`
and :meth:`~TripleStore.vector_summary` (the store's
:class:`~neocorrag_core.models.embedder.VectorCache` methods), run in the store's own
transactions; the byte bound (:data:`DEFAULT_MAX_VECTOR_BYTES`,
``NEOCORRAG_MAX_VECTOR_BYTES``) and the eviction of the least recently used vectors when
it is passed.
"""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Mapping, Sequence
from contextlib import suppress
from typing import TYPE_CHECKING

import numpy as np

from neocorrag_core.errors import ConfigError, StoreError
from neocorrag_core.triples.store_schema import _marks

if TYPE_CHECKING:
    from neocorrag_core.triples.store import TripleStore

VECTOR_DTYPE = "<f2"
"""How vectors are stored: float16, little-endian (half the bytes of float32; the embedder
rounds what it computes to float16, so nothing is lost by storing it)."""

VECTOR_ROW_OVERHEAD = 96
"""Bytes a stored vector costs beyond its own (key, embedder name, use day, b-tree slack);
what the byte bound counts, so the file grows by about the bound at most."""

DEFAULT_MAX_VECTOR_BYTES = 4 * 2**30
"""Default bound of a store's vectors: 4 GiB, about 5 million float16 MiniLM vectors
(~220,000 passages of spaCy triples). ``NEOCORRAG_MAX_VECTOR_BYTES`` or
``max_vector_bytes`` move it."""


def get_vectors(
    store: TripleStore, embedder_id: str, keys: Sequence[bytes]
) -> dict[bytes, np.ndarray]:
    """:meth:`TripleStore.get_vectors <neocorrag_core.triples.store.TripleStore.get_vectors>`:
    the stored vectors of ``keys``; stale use days refreshed without waiting."""
    if store.schema_version < 3 or not keys:
        return {}
    today = _today()
    found: dict[bytes, np.ndarray] = {}
    stale: list[bytes] = []
    unique = list(dict.fromkeys(keys))
    with store._transaction(write=False, action="read vectors from") as conn:
        for start in range(0, len(unique), 500):
            chunk = unique[start : start + 500]
            for key, blob, used in conn.execute(
                "SELECT text_key, vector, used FROM vectors WHERE embedder = ? "
                f"AND text_key IN ({_marks(chunk)})",
                (embedder_id, *chunk),
            ):
                found[bytes(key)] = np.frombuffer(blob, dtype=VECTOR_DTYPE).astype(np.float32)
                if used < today:
                    stale.append(bytes(key))
    if stale and not store.read_only:
        _touch_vectors(store, embedder_id, stale, today)
    return found


def _touch_vectors(store: TripleStore, embedder_id: str, keys: list[bytes], today: int) -> None:
    with suppress(StoreError), store._transaction(action="refresh vectors in", wait=False) as c:
        for start in range(0, len(keys), 500):
            chunk = keys[start : start + 500]
            c.execute(
                f"UPDATE vectors SET used = ? WHERE embedder = ? AND text_key IN ({_marks(chunk)})",
                (today, embedder_id, *chunk),
            )


def put_vectors(store: TripleStore, embedder_id: str, vectors: Mapping[bytes, np.ndarray]) -> None:
    """:meth:`TripleStore.put_vectors <neocorrag_core.triples.store.TripleStore.put_vectors>`:
    store ``vectors``, first writer wins; evict the least recently used past the bound."""
    if not vectors or store.read_only or store.schema_version < 3:
        return
    today = _today()
    rows = [
        (embedder_id, key, np.asarray(vec, dtype=VECTOR_DTYPE).tobytes(), today)
        for key, vec in vectors.items()
    ]
    row_bytes = sum(len(r[2]) + VECTOR_ROW_OVERHEAD for r in rows) // len(rows)
    with store._transaction(action="write vectors to") as conn:
        added = conn.executemany("INSERT OR IGNORE INTO vectors VALUES (?, ?, ?, ?)", rows).rowcount
        total = _meta_count(conn, "vector_bytes") + max(added, 0) * row_bytes
        if total > store.max_vector_bytes:
            total -= _evict_vectors(conn, total - (store.max_vector_bytes * 9) // 10)
        conn.execute(
            "INSERT OR REPLACE INTO meta VALUES ('vector_bytes', ?)", (str(max(total, 0)),)
        )


def vector_summary(store: TripleStore) -> dict[str, dict[str, int]]:
    """Vectors stored per embedder identity: ``{"vectors": n, "bytes": b}``."""
    if store.schema_version < 3:
        return {}
    with store._transaction(write=False, action="count the vectors of") as conn:
        return _vector_stats(conn)


def _vector_bound(value: int | None) -> int:
    if value is None:
        raw = os.environ.get("NEOCORRAG_MAX_VECTOR_BYTES", "").strip()
        if not raw:
            return DEFAULT_MAX_VECTOR_BYTES
        try:
            value = int(raw)
        except ValueError:
            raise ConfigError(
                f"NEOCORRAG_MAX_VECTOR_BYTES must be a whole number of bytes, got {raw!r}"
            ) from None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ConfigError(f"TripleStore.max_vector_bytes must be an int >= 0, got {value!r}")
    return value


def _today() -> int:
    return int(time.time() // 86400)


def _meta_count(conn: sqlite3.Connection, key: str) -> int:
    """A count the store keeps in its ``meta`` table (0 when absent or not a count)."""
    row = conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
    return int(row[0]) if row is not None and str(row[0]).isdigit() else 0


def _evict_vectors(conn: sqlite3.Connection, at_least: int) -> int:
    """Delete the least recently used vectors until ``at_least`` bytes are freed; returns the
    bytes freed (as the bound counts them)."""
    freed = evicted = 0
    while freed < at_least:
        candidates = conn.execute(
            "SELECT embedder, text_key, length(vector) FROM vectors ORDER BY used LIMIT 1000"
        ).fetchall()
        if not candidates:
            break
        victims = []
        for embedder, key, size in candidates:
            victims.append((embedder, key))
            freed += size + VECTOR_ROW_OVERHEAD
            if freed >= at_least:
                break
        conn.executemany("DELETE FROM vectors WHERE embedder = ? AND text_key = ?", victims)
        evicted += len(victims)
    if evicted:
        conn.execute(
            "INSERT OR REPLACE INTO meta VALUES ('vectors_evicted', ?)",
            (str(_meta_count(conn, "vectors_evicted") + evicted),),
        )
    return freed


def evicted_vectors(store: TripleStore) -> int:
    """:meth:`TripleStore.evicted_vectors
    <neocorrag_core.triples.store.TripleStore.evicted_vectors>`: vectors the byte bound has
    evicted from this store since it was made (0 for a store without vectors)."""
    if store.schema_version < 3:
        return 0
    with store._transaction(write=False, action="read the vector evictions of") as conn:
        return _meta_count(conn, "vectors_evicted")


def _vector_stats(conn: sqlite3.Connection) -> dict[str, dict[str, int]]:
    rows = conn.execute(
        "SELECT embedder, COUNT(*), SUM(length(vector)) FROM vectors GROUP BY embedder"
    ).fetchall()
    return {e: {"vectors": n, "bytes": int(b or 0)} for e, n, b in rows}


__all__ = [
    "DEFAULT_MAX_VECTOR_BYTES",
    "VECTOR_DTYPE",
    "VECTOR_ROW_OVERHEAD",
    "evicted_vectors",
    "get_vectors",
    "put_vectors",
    "vector_summary",
]
