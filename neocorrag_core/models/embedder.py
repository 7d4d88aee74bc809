"""The :class:`TextEmbedder`: any batch encode function, checked, L2-normalised, cached.

Each distinct text is encoded at most once per embedder: a call looks in the in-memory
cache, then in a persistent :class:`VectorCache` when the caller passes one and the
embedder has an :attr:`~TextEmbedder.identity`, and encodes only what neither holds, in
one batch. What the encoder returns is checked (shape, width, finite values) before
anything is cached or stored, so one bad reply never poisons later calls.
"""

from __future__ import annotations

import hashlib
import logging
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple, Protocol, runtime_checkable

import numpy as np

from neocorrag_core.errors import ConfigError, EmbedderError, StoreError
from neocorrag_core.once import LoadOnce

logger = logging.getLogger(__name__)

EncodeFn = Callable[[list[str]], Any]
"""A batch encode function: texts in, an (n, d) array (or nested lists) out."""

DEFAULT_CACHE_BYTES = 256 * 2**20
"""Default bound of the in-memory cache: 256 MiB (about 150k MiniLM vectors)."""

_ENTRY_OVERHEAD = 120
"""Bytes an in-memory cache entry costs beyond its vector: key, array header, dict slot."""


_ENCODE_CALL_HELP = (
    "an embedder callable is called as encode(list of texts) and returns an (n, d) array; a "
    "framework's embeddings object is not one: translate it first with "
    "neocorrag_integrations.langchain.as_embedder or "
    "neocorrag_integrations.llama_index.as_embedder"
)
"""Appended to the error of an encode function that raised ``TypeError`` / ``AttributeError``."""


def text_key(text: str) -> bytes:
    """The cache key of ``text``: the first 16 bytes of its UTF-8 sha256.

    A digest, not the text: a cached 300 KB question costs 16 bytes of key, and the same
    key addresses the persistent cache. Lone surrogates (not valid UTF-8) are hashed as
    they are (``surrogatepass``), so such text has a key too.
    """
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()[:16]


@runtime_checkable
class VectorCache(Protocol):
    """A persistent store of vectors by (embedder identity, :func:`text_key`).

    :class:`~neocorrag_core.triples.store.TripleStore` is one. Implementations may return
    any subset of the asked keys; a failure raises
    :class:`~neocorrag_core.errors.StoreError` (the embedder then goes on without it).
    """

    def get_vectors(self, embedder_id: str, keys: Sequence[bytes]) -> dict[bytes, np.ndarray]:
        """The stored vectors of ``keys`` (those it has) for this embedder."""
        ...

    def put_vectors(self, embedder_id: str, vectors: Mapping[bytes, np.ndarray]) -> None:
        """Store ``vectors`` for this embedder (a key stored already is left as it is)."""
        ...


class EmbedderCacheInfo(NamedTuple):
    """Counters of a :class:`TextEmbedder` cache (for benchmarks and tests)."""

    hits: int
    """Texts served from the in-memory cache."""
    misses: int
    """Texts not in memory (then read from the persistent cache, or encoded)."""
    encode_calls: int
    size: int
    max_size: int | None
    stored_hits: int = 0
    """Of the misses, texts read from a persistent cache."""
    encoded: int = 0
    """Texts sent to the encoder."""
    bytes: int = 0
    """Bytes the in-memory cache holds (vectors plus a fixed overhead per entry)."""
    max_bytes: int = DEFAULT_CACHE_BYTES


class TextEmbedder:
    """Wraps any batch encode function with checks, L2 normalisation and caches.

    Args:
        encode: texts in, an ``(n, d)`` array (numpy, torch or nested lists) out.
        name: shown in messages and ``repr``.
        cache_size: most entries the in-memory cache keeps (``None``: bounded by bytes
            only); 0 disables it.
        cache_bytes: most bytes the in-memory cache keeps (least recently used first out).
        identity: what makes this embedder's vectors this embedder's: a model name and
            version, or a fingerprint of its files. Only an embedder with an identity reads
            and writes a persistent :class:`VectorCache`, and only under that identity, so
            another embedder never reads its vectors. ``None`` (a callable or framework
            object we cannot fingerprint): in-memory caching only.

    A call sends only its uncached texts, deduplicated, to ``encode`` in a single batch. A
    raising encoder, or one that returns the wrong shape, a changed width or non-finite
    values, raises :class:`~neocorrag_core.errors.EmbedderError` naming the embedder;
    nothing of that reply is cached, so the next call asks the encoder again.
    """

    def __init__(
        self,
        encode: Callable[[list[str]], np.ndarray | list[list[float]]],
        name: str = "custom",
        cache_size: int | None = None,
        *,
        cache_bytes: int = DEFAULT_CACHE_BYTES,
        identity: str | None = None,
    ) -> None:
        if not callable(encode):
            raise TypeError(f"encode must be callable list[str] -> array, got {type(encode)!r}")
        for label, value in (("cache_size", cache_size), ("cache_bytes", cache_bytes)):
            if value is None and label == "cache_size":
                continue
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"{label} must be an int >= 0, got {value!r}")
        if identity is not None and (not isinstance(identity, str) or not identity.strip()):
            raise ValueError(f"identity must be a non-empty string or None, got {identity!r}")
        self._encode = encode
        self.name = name
        self.identity = identity
        self._cache_size = cache_size
        self._cache_bytes = cache_bytes
        self._bytes = 0
        self._cache: OrderedDict[bytes, np.ndarray] = OrderedDict()
        self._lock = threading.RLock()
        self._dim: int | None = None
        self._hits = 0
        self._misses = 0
        self._stored_hits = 0
        self._encoded = 0
        self._encode_calls = 0
        self._cache_warned: set[int] = set()

    def __repr__(self) -> str:
        return f"TextEmbedder(name={self.name!r}, dim={self._dim}, cached={len(self._cache)})"

    @property
    def dim(self) -> int | None:
        """Embedding width, known after the first non-empty :meth:`embed` call."""
        return self._dim

    def embed(self, texts: Sequence[str], *, cache: VectorCache | None = None) -> np.ndarray:
        """Float32 array (n, d) of unit-length rows (zero vectors stay zero), in input order;
        values are rounded to float16 precision (what a persistent cache stores).

        ``cache``: a persistent :class:`VectorCache` to read before encoding and to write
        what was encoded (used only when this embedder has an :attr:`identity`). A cache
        that fails is skipped for the call, with one warning per cache.
        """
        if isinstance(texts, (str, bytes)):
            raise TypeError("embed takes a sequence of strings; wrap a single text as [text]")
        texts = list(texts)
        for t in texts:
            if not isinstance(t, str):
                raise TypeError(f"embed takes strings, got an item of type {type(t).__name__}")
        persistent = cache if self.identity is not None else None
        with self._lock:
            if not texts:
                return np.zeros((0, self._dim or 0), dtype=np.float32)
            keys = [text_key(t) for t in texts]
            found: dict[bytes, np.ndarray] = {}
            missing: dict[bytes, str] = {}
            for key, text in zip(keys, texts, strict=True):
                if key in found or key in missing:
                    continue
                row = self._cache.get(key)
                if row is None:
                    missing[key] = text
                else:
                    self._cache.move_to_end(key)
                    found[key] = row
            self._misses += len(missing)
            self._hits += len(texts) - len(missing)
            if missing and persistent is not None:
                for key, row in self._read(persistent, list(missing)).items():
                    found[key] = row
                    self._remember(key, row)
                    del missing[key]
            if missing:
                new_rows = self._encode_batch(list(missing.values()))
                fresh = dict(zip(missing, new_rows, strict=True))
                for key, row in fresh.items():
                    found[key] = row
                    self._remember(key, row)
                if persistent is not None:
                    self._write(persistent, fresh)
            return np.stack([found[key] for key in keys]).astype(np.float32, copy=False)

    def missing(self, texts: Sequence[str], *, cache: VectorCache | None = None) -> set[str]:
        """The texts of ``texts`` that :meth:`embed` would have to encode: in neither the
        in-memory cache nor ``cache`` (whose vectors are read into memory on the way, so
        the :meth:`embed` that follows finds them there)."""
        persistent = cache if self.identity is not None else None
        with self._lock:
            absent = {text_key(t): t for t in texts}
            for key in [k for k in absent if k in self._cache]:
                del absent[key]
            if absent and persistent is not None:
                for key, row in self._read(persistent, list(absent)).items():
                    self._remember(key, row)
                    del absent[key]
            return set(absent.values())

    def _read(self, cache: VectorCache, keys: list[bytes]) -> dict[bytes, np.ndarray]:
        """Rows ``cache`` holds for ``keys`` that fit this embedder (others are ignored)."""
        assert self.identity is not None
        try:
            stored = cache.get_vectors(self.identity, keys)
        except StoreError as err:
            self._warn_cache(cache, "read", err)
            return {}
        usable: dict[bytes, np.ndarray] = {}
        for key, row in stored.items():
            vec = np.asarray(row, dtype=np.float32)
            if vec.ndim != 1 or (self._dim is not None and vec.shape[0] != self._dim):
                continue  # another width under the same identity: encode it again
            if not np.isfinite(vec).all():
                continue
            if self._dim is None:
                self._dim = int(vec.shape[0])
            usable[key] = vec
        self._stored_hits += len(usable)
        return usable

    def _write(self, cache: VectorCache, rows: dict[bytes, np.ndarray]) -> None:
        assert self.identity is not None
        try:
            cache.put_vectors(self.identity, rows)
        except StoreError as err:
            self._warn_cache(cache, "write", err)

    def _warn_cache(self, cache: VectorCache, action: str, err: Exception) -> None:
        if id(cache) in self._cache_warned:
            return
        self._cache_warned.add(id(cache))
        logger.warning(
            "embedder %r could not %s its vector cache (%s); going on without it for this "
            "call: vectors are computed instead",
            self.name,
            action,
            err,
        )

    def _encode_batch(self, texts: list[str]) -> np.ndarray:
        """One call to the wrapped encode function, checked and L2-normalised."""
        self._encode_calls += 1
        self._encoded += len(texts)
        try:
            raw = self._encode(list(texts))
        except Exception as err:
            # A wrong type or a missing attribute is most often an object that is not an
            # encode function at all (a framework's embeddings object, callable on nodes).
            hint = f"; {_ENCODE_CALL_HELP}" if isinstance(err, (TypeError, AttributeError)) else ""
            raise EmbedderError(
                f"embedder {self.name!r} failed on {len(texts)} text(s): "
                f"{type(err).__name__}: {err}{hint}"
            ) from err
        if hasattr(raw, "detach"):  # a torch tensor
            raw = raw.detach().float().cpu().numpy()
        try:
            arr = np.asarray(raw, dtype=np.float32)
        except (TypeError, ValueError) as err:
            raise EmbedderError(
                f"embedder {self.name!r} returned {type(raw).__name__}, which is not a numeric "
                "(n, d) array"
            ) from err
        if arr.ndim != 2 or arr.shape[0] != len(texts) or arr.shape[1] == 0:
            raise EmbedderError(
                f"embedder {self.name!r} returned shape {arr.shape} for {len(texts)} texts; "
                f"expected ({len(texts)}, d)"
            )
        if self._dim is not None and arr.shape[1] != self._dim:
            raise EmbedderError(
                f"embedder {self.name!r} returned width {arr.shape[1]}, "
                f"earlier calls gave {self._dim}"
            )
        bad = ~np.isfinite(arr).all(axis=1)
        if bad.any():
            raise EmbedderError(
                f"embedder {self.name!r} returned non-finite values (NaN or infinity) for "
                f"{int(bad.sum())} of {len(texts)} text(s); nothing of this reply was cached"
            )
        if self._dim is None:
            self._dim = int(arr.shape[1])
        norms = np.linalg.norm(arr, axis=1, keepdims=True)
        unit = arr / np.where(norms > 0, norms, 1.0)
        # Rounded to float16, the precision vectors are stored at: a vector read back from
        # a store is then exactly the one computed, so a call gives the same result whether
        # its vectors were computed now, kept in memory or read from disk.
        return np.ascontiguousarray(unit.astype(np.float16), dtype=np.float32)

    def _remember(self, key: bytes, row: np.ndarray) -> None:
        if self._cache_size == 0 or self._cache_bytes == 0:
            return
        if key in self._cache:
            return
        row = np.array(row, dtype=np.float32)  # a private copy: callers get fresh arrays
        self._cache[key] = row
        self._bytes += row.nbytes + _ENTRY_OVERHEAD
        while self._cache and (
            self._bytes > self._cache_bytes
            or (self._cache_size is not None and len(self._cache) > self._cache_size)
        ):
            _, old = self._cache.popitem(last=False)
            self._bytes -= old.nbytes + _ENTRY_OVERHEAD

    def cache_info(self) -> EmbedderCacheInfo:
        """Hit/miss/encode counters and the in-memory cache's size and bounds."""
        with self._lock:
            return EmbedderCacheInfo(
                self._hits,
                self._misses,
                self._encode_calls,
                len(self._cache),
                self._cache_size,
                stored_hits=self._stored_hits,
                encoded=self._encoded,
                bytes=self._bytes,
                max_bytes=self._cache_bytes,
            )

    def clear_cache(self) -> None:
        """Forget every vector held in memory (counters are kept; persistent caches too)."""
        with self._lock:
            self._cache.clear()
            self._bytes = 0


class LazyEmbedder:
    """A :class:`TextEmbedder` built on first use by ``build`` (a function of no arguments)
    and shared: every engine given this object (as ``embedder=``) gets the very embedder
    ``build`` returns, one model and one cache.

    The adapters hand the core their own embeddings objects (``NeocorRAGEmbeddings``,
    ``NeocorRAGEmbedding``) this way, through ``as_embedder``: the embedder behind them is
    resolved when an engine first needs it, not when the engine is built. Thread-safe; a
    pickled copy carries ``build`` (it must pickle) but not the embedder it built.
    """

    def __init__(self, build: Callable[[], TextEmbedder]) -> None:
        if not callable(build):
            raise ConfigError(
                f"LazyEmbedder takes a function of no arguments returning a TextEmbedder, "
                f"got {type(build).__name__}"
            )
        self.build = build
        self._embedder: LoadOnce[TextEmbedder] = LoadOnce()

    @property
    def loaded(self) -> bool:
        """Whether ``build`` has run."""
        return self._embedder.loaded

    def get(self) -> TextEmbedder:
        """The embedder ``build`` returns (built on the first call, the same one after)."""
        return self._embedder.get(self._build)

    def _build(self) -> TextEmbedder:
        embedder = self.build()
        if not isinstance(embedder, TextEmbedder):
            raise ConfigError(
                f"LazyEmbedder: {self._what()} returned a {type(embedder).__name__}, "
                "not a TextEmbedder"
            )
        return embedder

    def _what(self) -> str:
        return str(getattr(self.build, "__qualname__", None) or type(self.build).__name__)

    def __repr__(self) -> str:
        return f"LazyEmbedder({self._what()}, loaded={self.loaded})"
