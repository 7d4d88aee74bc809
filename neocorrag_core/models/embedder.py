"""The :class:`TextEmbedder`: any batch encode function, L2-normalised, with a text cache."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import numpy as np

EncodeFn = Callable[[list[str]], Any]
"""A batch encode function: texts in, an (n, d) array (or nested lists) out."""


class EmbedderCacheInfo(NamedTuple):
    """Counters of a :class:`TextEmbedder` cache (for benchmarks and tests)."""

    hits: int
    misses: int
    encode_calls: int
    size: int
    max_size: int


class TextEmbedder:
    """Wraps any batch encode function with L2 normalisation and a per-instance text cache.

    Each distinct text is sent to ``encode`` at most once while it stays cached; a call sends
    only its uncached texts, deduplicated, in a single batch. The cache keeps the
    ``cache_size`` most recently used texts (least recently used evicted first).
    """

    def __init__(
        self,
        encode: Callable[[list[str]], np.ndarray | list[list[float]]],
        name: str = "custom",
        cache_size: int = 200_000,
    ) -> None:
        if not callable(encode):
            raise TypeError(f"encode must be callable list[str] -> array, got {type(encode)!r}")
        if not isinstance(cache_size, int) or cache_size < 0:
            raise ValueError(f"cache_size must be an int >= 0, got {cache_size!r}")
        self._encode = encode
        self.name = name
        self._cache_size = cache_size
        self._cache: OrderedDict[str, np.ndarray] = OrderedDict()
        self._lock = threading.RLock()
        self._dim: int | None = None
        self._hits = 0
        self._misses = 0
        self._encode_calls = 0

    def __repr__(self) -> str:
        return f"TextEmbedder(name={self.name!r}, dim={self._dim}, cached={len(self._cache)})"

    @property
    def dim(self) -> int | None:
        """Embedding width, known after the first non-empty :meth:`embed` call."""
        return self._dim

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Float32 array (n, d) of unit-length rows (zero vectors stay zero), in input order."""
        if isinstance(texts, (str, bytes)):
            raise TypeError("embed takes a sequence of strings; wrap a single text as [text]")
        texts = list(texts)
        for t in texts:
            if not isinstance(t, str):
                raise TypeError(f"embed takes strings, got an item of type {type(t).__name__}")
        with self._lock:
            if not texts:
                return np.zeros((0, self._dim or 0), dtype=np.float32)
            found: dict[str, np.ndarray | None] = {}
            missing: list[str] = []
            for t in texts:
                if t in found:
                    continue
                row = self._cache.get(t)
                if row is None:
                    missing.append(t)
                else:
                    self._cache.move_to_end(t)
                found[t] = row
            self._misses += len(missing)
            self._hits += len(texts) - len(missing)
            if missing:
                new_rows = self._encode_batch(missing)
                for t, row in zip(missing, new_rows, strict=True):
                    found[t] = row
                    self._store(t, row)
            rows = [row for t in texts if (row := found[t]) is not None]  # all found by now
            return np.stack(rows).astype(np.float32, copy=False)

    def _encode_batch(self, texts: list[str]) -> np.ndarray:
        """One call to the wrapped encode function, checked and L2-normalised."""
        self._encode_calls += 1
        raw = self._encode(list(texts))
        if hasattr(raw, "detach"):  # a torch tensor
            raw = raw.detach().float().cpu().numpy()
        try:
            arr = np.asarray(raw, dtype=np.float32)
        except (TypeError, ValueError) as err:
            raise ValueError(
                f"embedder {self.name!r} returned {type(raw).__name__}, which is not a numeric "
                "(n, d) array"
            ) from err
        if arr.ndim != 2 or arr.shape[0] != len(texts) or arr.shape[1] == 0:
            raise ValueError(
                f"embedder {self.name!r} returned shape {arr.shape} for {len(texts)} texts; "
                f"expected ({len(texts)}, d)"
            )
        if self._dim is None:
            self._dim = int(arr.shape[1])
        elif arr.shape[1] != self._dim:
            raise ValueError(
                f"embedder {self.name!r} returned width {arr.shape[1]}, "
                f"earlier calls gave {self._dim}"
            )
        norms = np.linalg.norm(arr, axis=1, keepdims=True)
        return np.ascontiguousarray(arr / np.where(norms > 0, norms, 1.0), dtype=np.float32)

    def _store(self, text: str, row: np.ndarray) -> None:
        if self._cache_size == 0:
            return
        self._cache[text] = row.copy()
        while len(self._cache) > self._cache_size:
            self._cache.popitem(last=False)

    def cache_info(self) -> EmbedderCacheInfo:
        """Hit/miss/encode-call counters and the cache's current and maximum size."""
        with self._lock:
            return EmbedderCacheInfo(
                self._hits, self._misses, self._encode_calls, len(self._cache), self._cache_size
            )

    def clear_cache(self) -> None:
        """Forget every cached embedding (counters are kept)."""
        with self._lock:
            self._cache.clear()
