"""``CachedTripleSource``: a triple source that reads the store first and extracts the rest.

What ``neocorrag index`` and the default triple source run on: passages already in a
:class:`~neocorrag_core.triples.store.TripleStore` are read, the missing ones are extracted
once (per content hash) and written back.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from neocorrag_core.triples.extractor import TripleExtractor, clean_triples
from neocorrag_core.triples.keys import ExtractorKey, text_sha256
from neocorrag_core.types import Passage, Triple

if TYPE_CHECKING:
    from neocorrag_core.triples.resilient import ResilientStore
    from neocorrag_core.triples.store import TripleStore

# Records go to the store's logger: the name users configure for everything the store does.
logger = logging.getLogger("neocorrag_core.triples.store")


@dataclass
class CacheStats:
    """What a :class:`CachedTripleSource` did: passages served from the store or extracted."""

    hits: int = 0
    extracted: int = 0
    triples_written: int = 0


class CachedTripleSource:
    """A ``TripleSource`` that reads the store first, extracts only what is missing, stores it.

    Identical passages in one call are extracted once. ``stats`` counts hits and
    extractions over the life of the source (the CLI and tests read it). Over a read-only
    store (a shared, pre-built cache) the stored passages are read as usual and the missing
    ones are extracted and returned but not stored, with one warning per source.

    ``max_chars`` caps what the extractor reads of one passage (its beginning) and
    ``max_chars_per_call`` what one :meth:`triples_for` call extracts in all: the passages
    past it get no triples in that call and nothing is stored for them (the query-time
    bound of :class:`~neocorrag_core.limits.WorkLimits`; ``None``: no cap, as at indexing).
    ``max_chars_per_document`` scales that budget with the call: at most that many
    characters per passage asked about (the smaller budget binds).
    """

    def __init__(
        self,
        store: TripleStore | ResilientStore,
        extractor: TripleExtractor,
        *,
        batch_size: int = 32,
        max_chars: int | None = None,
        max_chars_per_call: int | None = None,
        max_chars_per_document: int | None = None,
    ) -> None:
        if batch_size < 1:
            raise ValueError("batch_size must be at least 1")
        self.max_chars = max_chars
        self.max_chars_per_call = max_chars_per_call
        self.max_chars_per_document = max_chars_per_document
        self.store = store
        self.extractor = extractor
        self.key = ExtractorKey.of(extractor)
        self.batch_size = batch_size
        self.stats = CacheStats()
        self._lock = threading.Lock()
        self._warned_read_only = False

    def triples_for(self, passages: Sequence[Passage]) -> list[list[Triple]]:
        """Stored triples per passage; missing passages are extracted and written back."""
        passages = list(passages)
        stored = self.store.get_many(passages, self.key)
        missing: dict[str, list[int]] = {}
        for i, found in enumerate(stored):
            if found is None:
                missing.setdefault(text_sha256(passages[i]), []).append(i)
        result: list[list[Triple]] = [found or [] for found in stored]
        with self._lock:
            self.stats.hits += len(passages) - sum(len(v) for v in missing.values())
        todo = self._within_budget([idxs[0] for idxs in missing.values()], passages, missing)
        if todo and self.store.read_only:
            self._extract_without_storing([passages[i] for i in todo], missing, passages, result)
            return result
        for start in range(0, len(todo), self.batch_size):
            batch = [passages[i] for i in todo[start : start + self.batch_size]]
            self.extract_and_store(batch)
        if todo:
            # Read back, so every passage gets exactly the stored (cleaned) form.
            done = {text_sha256(passages[i]) for i in todo}
            flat = [i for digest, idxs in missing.items() if digest in done for i in idxs]
            again = self.store.get_many([passages[i] for i in flat], self.key)
            for i, found in zip(flat, again, strict=True):
                result[i] = found or []
        return result

    def _within_budget(
        self, todo: list[int], passages: list[Passage], missing: dict[str, list[int]]
    ) -> list[int]:
        """The passages of ``todo`` that fit the call's extraction budget (in rank order;
        the first always does)."""
        budgets = []
        if self.max_chars_per_call is not None:
            budgets.append((self.max_chars_per_call, "WorkLimits.max_extract_chars_per_call"))
        if self.max_chars_per_document is not None:
            scaled = self.max_chars_per_document * len(passages)
            budgets.append((scaled, "WorkLimits.max_extract_chars_per_document"))
        if not budgets:
            return todo
        budget, cap = min(budgets)
        room = budget
        kept: list[int] = []
        for i in todo:
            size = len(passages[i].text)
            if self.max_chars is not None:
                size = min(size, self.max_chars)
            if size > room and kept:
                break
            room -= size
            kept.append(i)
        if len(kept) < len(todo):
            from neocorrag_core.limits import note

            note(
                f"work cap: {len(todo) - len(kept)} passage(s) past {budget:,} characters of "
                f"extraction in one call got no triples this call ({cap}); index the corpus "
                "ahead to avoid it"
            )
        return kept

    def _extract_without_storing(
        self,
        todo: list[Passage],
        missing: dict[str, list[int]],
        passages: list[Passage],
        result: list[list[Triple]],
    ) -> None:
        # Reads must keep working on a shared read-only cache, so a miss is not an error:
        # the passage is extracted and cleaned exactly as the store would have cleaned it.
        with self._lock:
            warn, self._warned_read_only = not self._warned_read_only, True
        if warn:
            logger.warning(
                "%s is read-only: %d passage(s) missing from it are extracted now but not "
                "stored, so later runs extract them again (index them into a writable store)",
                self.store.path,
                len(todo),
            )
        for start in range(0, len(todo), self.batch_size):
            batch = todo[start : start + self.batch_size]
            for passage, triples in zip(batch, self._extract(batch), strict=True):
                for i in missing[text_sha256(passage)]:
                    result[i] = clean_triples(triples, passages[i].id)
            with self._lock:
                self.stats.extracted += len(batch)

    def _extract(self, batch: Sequence[Passage]) -> list[list[Triple]]:
        limit = self.max_chars
        if limit is not None:  # the extractor reads the beginning of a very long passage
            batch = [p if len(p.text) <= limit else replace(p, text=p.text[:limit]) for p in batch]
        extracted = self.extractor.extract(batch)
        if len(extracted) != len(batch):
            raise RuntimeError(
                f"{type(self.extractor).__name__}.extract returned {len(extracted)} lists for "
                f"{len(batch)} passages"
            )
        return [list(triples) for triples in extracted]

    def extract_and_store(self, batch: Sequence[Passage]) -> int:
        """Extract one batch and write it; returns the number of triples written.

        Raises :class:`~neocorrag_core.errors.StoreError` if the store is read-only.
        """
        extracted = self._extract(batch)
        written = self.store.put_many(list(zip(batch, extracted, strict=True)), self.key)
        with self._lock:
            self.stats.extracted += len(batch)
            self.stats.triples_written += written
        return written
