"""The drop-in triple source of the adapters: metadata, else the store, else spaCy, else nothing.

A user who adds the compressor or the postprocessor to a pipeline over ordinary documents
(no ``metadata["triples"]``) must get chains without any wiring. So, per passage:

1. ``metadata["triples"]`` when it is set (even to an empty list: the user said so; a
   ``None`` value counts as absent, as many vector stores write a missing key that way);
2. else the persistent :class:`~neocorrag_core.triples.store.TripleStore` (what ``neocorrag
   index`` or an ingestion transform wrote, or an earlier query extracted);
3. else the extractor (spaCy when the ``spacy`` extra is installed); what it extracts is
   written to the store, so the next query over the same text reads it back;
4. else no triples: the passage passes through as before, and one warning (once per
   source) names the extra to install.

Nothing is opened or loaded until the first call. The store is a cache and never fails a
query: one that cannot be opened (e.g. a read-only home folder) or fails later (a full disk,
damaged pages, the file deleted) is stood in for by memory, with one warning, and tried
again later (:class:`~neocorrag_core.triples.resilient.ResilientStore`).

The same store keeps the vectors of node and triple texts per embedder
(:attr:`DefaultTripleSource.vectors`): an engine that reads its triples here embeds each
text once, ever, not once per call or per process.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Sequence
from typing import Any

from neocorrag_core.errors import ConfigError
from neocorrag_core.limits import WorkLimits, check_limits
from neocorrag_core.once import LoadOnce
from neocorrag_core.triples.extractor import TripleExtractor
from neocorrag_core.triples.factory import make_extractor, spacy_available
from neocorrag_core.triples.precomputed import (
    METADATA_KEY,
    MetadataTripleSource,
    has_metadata_triples,
)
from neocorrag_core.triples.resilient import ResilientStore
from neocorrag_core.triples.spacy_extractor import SpacyTripleExtractor
from neocorrag_core.triples.store import CachedTripleSource, ExtractorKey, TripleStore
from neocorrag_core.types import Passage, Triple
from neocorrag_core.validation import check_bool

logger = logging.getLogger(__name__)

SPACY_EXTRA_HINT = "pip install 'neocorrag[spacy]'"


class DefaultTripleSource:
    """Triples from metadata, else the store, else the extractor (stored), else none.

    Args:
        store: the store file (``None``: :func:`~neocorrag_core.triples.store.default_store_path`,
            which ``NEOCORRAG_TRIPLE_STORE`` / ``NEOCORRAG_CACHE`` move), or a
            :class:`~neocorrag_core.triples.store.TripleStore` to share.
        extractor: a spec (``"spacy"``, ``"spacy:<pipeline>"``, ``"llm"``, ...; see
            :func:`~neocorrag_core.triples.factory.make_extractor`) or an extractor object;
            its id and version are also the key the store is read under.
        extract: ``False`` to only read metadata and the store, never extracting (e.g. a
            corpus indexed ahead with ``neocorrag index``, on a machine without the extra).
        metadata_key: the metadata key holding precomputed triples.
        limits: what one call may extract (:class:`~neocorrag_core.limits.WorkLimits`:
            ``max_extract_chars`` per passage, ``max_extract_chars_per_call``).

    ``stats`` (a :class:`~neocorrag_core.triples.store.CacheStats` once the store is
    used) counts store hits and extractions. Picklable: a copy opens its own store.
    """

    vectors: ResilientStore
    """The store as the engines' persistent vector cache (a
    :class:`~neocorrag_core.models.VectorCache`)."""

    def __init__(
        self,
        *,
        store: str | os.PathLike[str] | TripleStore | None = None,
        extractor: str | TripleExtractor = "spacy",
        extract: bool = True,
        metadata_key: str = METADATA_KEY,
        limits: WorkLimits | None = None,
    ) -> None:
        if store is not None and not isinstance(store, (str, os.PathLike, TripleStore)):
            raise ConfigError(
                f"DefaultTripleSource: store must be a path or a TripleStore, got "
                f"{type(store).__name__}"
            )
        if not isinstance(metadata_key, str) or not metadata_key:
            raise ConfigError("DefaultTripleSource: metadata_key must be a non-empty string")
        check_bool("DefaultTripleSource", "extract", extract)
        self.limits = check_limits(limits, "DefaultTripleSource")
        # Fail on a bad spec now, not at the first query; nothing is loaded by this.
        self._extractor: TripleExtractor = make_extractor(extractor)
        self.extract = extract
        self._store_spec = store
        self.metadata = MetadataTripleSource(
            metadata_key, max_per_passage=self.limits.max_triples_per_passage
        )
        self.vectors = ResilientStore(store)  # opens nothing until first used
        self._cached: LoadOnce[CachedTripleSource | _StoreReader] = LoadOnce()
        self._lock = threading.RLock()
        self._warned: set[str] = set()

    def __repr__(self) -> str:
        store = self._store_spec.path if isinstance(self._store_spec, TripleStore) else None
        where = store or (str(self._store_spec) if self._store_spec else "default store")
        return f"DefaultTripleSource(store={where!r}, extractor={self._extractor!r})"

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state.pop("_lock")
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.RLock()

    @property
    def extractor(self) -> TripleExtractor:
        """The extractor for passages the store lacks; the store is read under its key."""
        return self._extractor

    @property
    def stats(self) -> Any:
        """Store hits / extractions so far (``None`` before the store was first used)."""
        backend = self._cached.peek()
        return None if backend is None else backend.stats

    def triples_for(self, passages: Sequence[Passage]) -> list[list[Triple]]:
        """The triples of each passage: metadata, else store, else extractor, else none."""
        passages = list(passages)
        out: list[list[Triple]] = [[] for _ in passages]
        has = [has_metadata_triples(p, self.metadata.key) for p in passages]
        given = [i for i, flag in enumerate(has) if flag]
        from_metadata = self.metadata.triples_for([passages[i] for i in given])
        for i, triples in zip(given, from_metadata, strict=True):
            out[i] = triples
        rest = [i for i, flag in enumerate(has) if not flag]
        if not rest:
            return out
        backend = self._cached.get(self._open)
        # One extraction at a time: spaCy pipelines and small LMs are not documented as
        # thread-safe, and adapters are called from worker threads (batch, async).
        with self._lock:
            found = backend.triples_for([passages[i] for i in rest])
        for i, triples in zip(rest, found, strict=True):
            out[i] = triples
        if isinstance(backend, _StoreReader) and backend.misses:
            self._warn_once(
                "no-extractor",
                "%d document(s) had no triples in metadata or in the triple store %s, so "
                "nothing could be mined from them: %s so that triples are extracted (and "
                "stored) automatically, or index the corpus first (neocorrag index; "
                "TripleExtractorTransform)",
                backend.misses,
                backend.store.path,
                SPACY_EXTRA_HINT if backend.why == "spacy" else "pass extract=True",
            )
            backend.misses = 0
        return out

    # -- building the backend (once) ------------------------------------------------------

    def _open(self) -> CachedTripleSource | _StoreReader:
        store = self.vectors  # the same resilient store serves triples and vectors
        extractor = self._extractor
        installed = not isinstance(extractor, SpacyTripleExtractor) or spacy_available()
        if self.extract and installed:
            logger.info(
                "triples of documents without metadata['triples'] come from %s, else %s "
                "(written back to the store)",
                store.path,
                extractor,
            )
            return CachedTripleSource(
                store,
                extractor,
                max_chars=self.limits.max_extract_chars,
                max_chars_per_call=self.limits.max_extract_chars_per_call,
                max_chars_per_document=self.limits.max_extract_chars_per_document,
            )
        return _StoreReader(store, ExtractorKey.of(extractor), "off" if installed else "spacy")

    def _warn_once(self, topic: str, message: str, *args: Any) -> None:
        with self._lock:
            if topic in self._warned:
                return
            self._warned.add(topic)
        logger.warning(message, *args)


class _StoreReader:
    """The store-only fallback: reads stored triples, extracts nothing, counts the misses."""

    def __init__(self, store: ResilientStore, key: ExtractorKey, why: str) -> None:
        self.store = store
        self.key = key
        self.why = why
        self.misses = 0
        self.stats = None

    def triples_for(self, passages: Sequence[Passage]) -> list[list[Triple]]:
        found = self.store.get_many(passages, self.key)
        self.misses += sum(1 for f in found if f is None)
        return [f or [] for f in found]
