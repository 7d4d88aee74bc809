"""``ResilientStore``: the triple store as a cache that never fails a query.

The default triple source (what the adapters use) reads and writes the user's shared store
(``~/.cache/neocorrag/triples.sqlite``) on every call. A store is a cache: when it cannot
be opened, or fails later (a full disk, an I/O error, damaged pages, the file deleted or
replaced while open), the call must still be served. So every read and write goes through
this wrapper:

* the first failure of an outage logs one warning naming the file, the cause and the fix;
  from then on triples and vectors are read from and written to a private in-memory store,
  so what was extracted in the failing call is still used, and not extracted again;
* the file is tried again after ``retry_seconds`` (a new connection, so a file that was
  replaced is opened anew), except when it is damaged or is not a neocorrag store: such a
  file is left alone until another file takes its place (``neocorrag store repair`` makes
  one; ``neocorrag store check`` says what to do), so nothing is ever written into damaged
  pages;
* what the in-memory store holds is read first, so answers stay the same across an
  outage; it is bounded (``MEMORY_PASSAGES`` passages, vectors by bytes).

Ingestion (``neocorrag index``, the ingestion transforms) writes the store directly and
reports its errors: there a failed write must be seen, not absorbed.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from neocorrag_core.errors import StoreError
from neocorrag_core.triples.keys import ExtractorKey
from neocorrag_core.triples.store import TripleStore, default_store_path
from neocorrag_core.types import Passage, Triple

logger = logging.getLogger("neocorrag_core.triples.store")

RETRY_SECONDS = 60.0
"""How long a failed store is left alone before it is tried again."""

MEMORY_PASSAGES = 50_000
"""Passages the in-memory stand-in keeps during an outage before it starts afresh."""

MEMORY_VECTOR_BYTES = 256 * 2**20
"""Bytes of vectors the in-memory stand-in keeps (least recently used evicted)."""

_FINAL = ("damaged", "foreign", "schema")
"""Kinds of failure that retrying in this process cannot fix (the file must change)."""


class ResilientStore:
    """A :class:`~neocorrag_core.triples.store.TripleStore` that degrades to memory.

    Args:
        store: a path (``None``: the default store), or an open ``TripleStore`` to wrap.
        retry_seconds: how long after a failure the file is tried again.

    Offers what the query path uses of a store (``get_many``, ``put_many``, ``contains``,
    ``link_documents``, ``get_vectors``, ``put_vectors``); none of them raises
    :class:`~neocorrag_core.errors.StoreError`. :attr:`healthy` says whether the file is in
    use now, :attr:`last_error` why not.
    """

    def __init__(
        self,
        store: str | os.PathLike[str] | TripleStore | None = None,
        *,
        retry_seconds: float = RETRY_SECONDS,
    ) -> None:
        if isinstance(store, TripleStore):
            self._file: TripleStore | None = store
            self._spec: str | os.PathLike[str] | None = store.path
        else:
            self._file = None
            self._spec = store  # None: the default path, resolved when first opened
        self.retry_seconds = retry_seconds
        self._retry_at = 0.0
        self._final = False
        self._final_id: tuple[int, int] | None = None  # the damaged file, while it is there
        self.last_error: StoreError | None = None
        self._memory: TripleStore | None = None
        self._lock = threading.RLock()
        self._warned_outage = False

    def __repr__(self) -> str:
        state = "healthy" if self.healthy else f"in memory ({self.last_error})"
        return f"ResilientStore({self.path!r}, {state})"

    def __getstate__(self) -> dict[str, Any]:
        return {"spec": self._spec, "retry_seconds": self.retry_seconds}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["spec"], retry_seconds=state["retry_seconds"])  # type: ignore[misc]

    # -- state -----------------------------------------------------------------------------

    @property
    def path(self) -> str:
        """The store file (the default path when none was given)."""
        if self._file is not None:
            return self._file.path
        return os.fspath(self._spec) if self._spec is not None else str(default_store_path())

    @property
    def healthy(self) -> bool:
        """Whether the file store is in use (``False`` during an outage)."""
        return self.last_error is None

    @property
    def read_only(self) -> bool:
        """Whether the file store is read-only (writes then go nowhere: it is a cache)."""
        store = self._file
        return bool(store is not None and store.read_only)

    @property
    def store(self) -> TripleStore | None:
        """The file store, opened if it can be (``None`` during an outage)."""
        return self._usable()

    def _usable(self) -> TripleStore | None:
        with self._lock:
            if self._file is not None and self.last_error is None:
                return self._file
            if time.monotonic() < self._retry_at or (
                self._final and _file_id(self.path) == self._final_id
            ):
                return None  # a damaged file is tried again only once it was replaced
            try:
                if self._file is not None:
                    self._file.close()
                self._file = TripleStore(self._spec)
            except StoreError as err:
                self._fail(err, "open")
                return None
            if self.last_error is not None:
                logger.info("the triple store %s is in use again", self.path)
            self.last_error = None
            self._warned_outage = False
            return self._file

    def _fail(self, err: StoreError, action: str) -> None:
        with self._lock:
            self.last_error = err
            self._final = err.kind in _FINAL
            self._final_id = _file_id(self.path) if self._final else None
            self._retry_at = time.monotonic() + self.retry_seconds
            if self._warned_outage:
                logger.debug("triple store still failing (%s): %s", action, err)
                return
            self._warned_outage = True
        then = (
            "it is not read or written again until the file is replaced: run "
            "`neocorrag store check` on it (`neocorrag store repair` salvages what is readable)"
            if self._final
            else f"it is tried again in {self.retry_seconds:g} s"
        )
        logger.warning(
            "the triple store %s failed (%s); this call and the next ones keep triples and "
            "vectors in memory, so no query fails because of it; %s",
            self.path,
            err,
            then,
        )

    def _mem(self) -> TripleStore:
        with self._lock:
            if self._memory is None:
                self._memory = TripleStore(":memory:", max_vector_bytes=MEMORY_VECTOR_BYTES)
            elif self._memory.count() > MEMORY_PASSAGES:
                self._memory.close()
                self._memory = TripleStore(":memory:", max_vector_bytes=MEMORY_VECTOR_BYTES)
            return self._memory

    # -- triples ---------------------------------------------------------------------------

    def get_many(self, passages: Sequence[Passage], key: ExtractorKey) -> list[list[Triple] | None]:
        """Stored triples per passage (``None``: stored nowhere), memory first, then file."""
        passages = list(passages)
        out: list[list[Triple] | None] = [None] * len(passages)
        if self._memory is not None:
            out = self._memory.get_many(passages, key)
        rest = [i for i, found in enumerate(out) if found is None]
        store = self._usable() if rest else None
        if store is not None:
            try:
                found = store.get_many([passages[i] for i in rest], key)
            except StoreError as err:
                self._fail(err, "read")
            else:
                for i, triples in zip(rest, found, strict=True):
                    out[i] = triples
        return out

    def contains(self, passages: Sequence[Passage], key: ExtractorKey) -> list[bool]:
        """Whether each passage is stored (in memory or in the file)."""
        return [found is not None for found in self.get_many(passages, key)]

    def put_many(
        self,
        items: Sequence[tuple[Passage, Sequence[Triple]]],
        key: ExtractorKey,
        *,
        link_ids: bool = False,
    ) -> int:
        """Write to the file; during an outage (or if the write fails) to memory."""
        store = self._usable()
        if store is not None and not store.read_only:
            try:
                return store.put_many(items, key, link_ids=link_ids)
            except StoreError as err:
                self._fail(err, "write")
        return self._mem().put_many(items, key)

    def link_documents(self, pairs: Sequence[tuple[str, Passage]]) -> int:
        """Link document ids to passages in the file (skipped during an outage)."""
        store = self._usable()
        if store is None or store.read_only:
            return 0
        try:
            return store.link_documents(pairs)
        except StoreError as err:
            self._fail(err, "write")
            return 0

    # -- vectors ---------------------------------------------------------------------------

    def get_vectors(self, embedder_id: str, keys: Sequence[bytes]) -> dict[bytes, np.ndarray]:
        """Stored vectors of ``keys``, memory first, then the file."""
        found: dict[bytes, np.ndarray] = {}
        if self._memory is not None:
            found = self._memory.get_vectors(embedder_id, keys)
        rest = [k for k in keys if k not in found]
        store = self._usable() if rest else None
        if store is not None:
            try:
                found.update(store.get_vectors(embedder_id, rest))
            except StoreError as err:
                self._fail(err, "read vectors from")
        return found

    def put_vectors(self, embedder_id: str, vectors: Mapping[bytes, np.ndarray]) -> None:
        """Write vectors to the file; during an outage (or if the write fails) to memory."""
        store = self._usable()
        if store is not None:
            if store.read_only:
                return
            try:
                store.put_vectors(embedder_id, vectors)
                return
            except StoreError as err:
                self._fail(err, "write vectors to")
        self._mem().put_vectors(embedder_id, vectors)


def _file_id(path: str) -> tuple[int, int] | None:
    """(device, inode) of the file at ``path``, or ``None`` when there is none."""
    try:
        st = os.stat(os.path.expanduser(path))
    except OSError:
        return None
    return (st.st_dev, st.st_ino)


__all__ = ["MEMORY_PASSAGES", "RETRY_SECONDS", "ResilientStore"]
