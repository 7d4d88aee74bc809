"""The sentence-transformers encoder on ONNX Runtime: the same vectors, faster on a CPU.

A model whose pipeline is a transformer, mean pooling and (optionally) normalisation, the
bundled MiniLM's, is exported once to ONNX from its own weights (``torch.onnx``; cached
under ``$NEOCORRAG_CACHE/onnx``) and run by ONNX Runtime in float32. The vectors agree with
PyTorch's to within a few 1e-7 per component (``benchmarks/bench_embed_backend.py``), finer
than the float16 they are stored in, so the store's vectors keep the embedder's identity.
``NEOCORRAG_EMBED_BACKEND`` chooses: ``auto`` (the default: ONNX Runtime where it and
``onnx`` are installed, the ``onnx`` extra), ``onnx`` (a warning when it cannot be used),
``torch``. Any failure to export or load falls back to PyTorch with a warning: a backend
never makes an embedding call fail.
"""

from __future__ import annotations

import hashlib
import importlib.util
import logging
import os
import threading
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from neocorrag_core.errors import ConfigError

from .cpu import SMALL_BATCH

logger = logging.getLogger(__name__)

EMBED_BACKENDS = ("auto", "onnx", "torch")
"""Values of ``NEOCORRAG_EMBED_BACKEND`` (``neocorrag index --embed-backend``)."""

DEFAULT_BACKEND = "auto"
"""The backend when ``NEOCORRAG_EMBED_BACKEND`` is unset."""

_EXPORT_FORMAT = "neocorrag-onnx-1"
"""In the exported file's name: bump when the export changes (inputs, opset, outputs)."""
_INPUTS = ("input_ids", "attention_mask", "token_type_ids")
_export_lock = threading.Lock()


def embed_backend() -> str:
    """The backend ``NEOCORRAG_EMBED_BACKEND`` asks for (:data:`DEFAULT_BACKEND` when unset)."""
    choice = os.environ.get("NEOCORRAG_EMBED_BACKEND", DEFAULT_BACKEND).strip().lower()
    choice = choice or DEFAULT_BACKEND
    if choice not in EMBED_BACKENDS:
        raise ConfigError(
            f"NEOCORRAG_EMBED_BACKEND must be one of {', '.join(EMBED_BACKENDS)}, got {choice!r}"
        )
    return choice


def onnx_installed() -> bool:
    """Whether ONNX Runtime and ``onnx`` (the export's) are importable (the ``onnx`` extra)."""
    return all(importlib.util.find_spec(name) is not None for name in ("onnxruntime", "onnx"))


def _plain_mean_pooling(model: Any) -> Any:
    """The transformer module of a sentence-transformers ``model`` whose pipeline is a
    transformer, mean pooling and at most a normalisation, else ``None`` (other poolings,
    dense layers, prompts: left to PyTorch)."""
    try:
        modules = list(model)
    except TypeError:
        return None
    names = [type(m).__name__ for m in modules]
    if names not in (["Transformer", "Pooling"], ["Transformer", "Pooling", "Normalize"]):
        return None
    pooling = modules[1].get_config_dict()
    mean = pooling.get("pooling_mode") == "mean" or pooling.get("pooling_mode_mean_tokens")
    if not mean:
        return None
    if not str(getattr(model, "device", "cpu")).startswith("cpu"):
        return None
    return modules[0]


def onnx_encoder(model: Any, *, batch_size: int = 64) -> Callable[[list[str]], np.ndarray] | None:
    """An encode function running ``model`` (a loaded sentence-transformers model) on ONNX
    Runtime, or ``None`` when the backend setting, the installed packages or the model's
    pipeline say PyTorch (the caller's encoder then). Exports on the first use of a model
    (a few seconds), then loads the cached file."""
    choice = embed_backend()
    if choice == "torch":
        return None
    transformer = _plain_mean_pooling(model)
    if transformer is None or not onnx_installed():
        if choice == "onnx":
            why = "not installed (pip install 'neocorrag[onnx]')" if transformer else "not usable"
            logger.warning("NEOCORRAG_EMBED_BACKEND=onnx: ONNX Runtime %s; using PyTorch", why)
        return None
    try:
        return _OnnxEncoder(model, transformer, batch_size)
    except Exception as err:  # export or load: PyTorch still embeds
        logger.warning("ONNX Runtime encoder unavailable (%s: %s); using PyTorch",
                       type(err).__name__, err)  # fmt: skip
        return None


def onnx_cache_dir() -> Path:
    """Where exported models are kept: ``$NEOCORRAG_CACHE/onnx``."""
    from .bundled import default_cache_dir

    return default_cache_dir() / "onnx"


class _OnnxEncoder:
    """``texts -> vectors`` (mean-pooled, not normalised: the embedder normalises) on ONNX
    Runtime, with the model's own tokenizer and sequence cap; a call of a few texts (a
    query) runs on one thread, a batch on every core, as the PyTorch encoder does."""

    def __init__(self, model: Any, transformer: Any, batch_size: int) -> None:
        import onnxruntime

        self.tokenizer = model.tokenizer
        self.max_length = int(getattr(model, "max_seq_length", None) or 512)
        self.batch_size = batch_size
        path = _exported(transformer.auto_model)
        self._sessions: dict[int, Any] = {}
        self._path = str(path)
        self._ort = onnxruntime
        self._lock = threading.Lock()
        self._session(1)  # loads now: a broken file falls back at construction

    def _session(self, threads: int) -> Any:
        with self._lock:
            session = self._sessions.get(threads)
            if session is None:
                options = self._ort.SessionOptions()
                options.intra_op_num_threads = threads
                options.inter_op_num_threads = 1
                session = self._ort.InferenceSession(
                    self._path, options, providers=["CPUExecutionProvider"]
                )
                self._sessions[threads] = session
            return session

    def __call__(self, texts: list[str]) -> np.ndarray:
        import torch

        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        # As the PyTorch encoder: one thread for a query, torch's count (OMP_NUM_THREADS, the
        # process's CPUs) for a batch, so a run pinned to a core stays on it.
        threads = 1 if len(texts) <= SMALL_BATCH else max(1, torch.get_num_threads())
        session = self._session(threads)
        order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
        out: list[np.ndarray] = [np.empty(0)] * len(texts)
        for start in range(0, len(order), self.batch_size):
            chunk = order[start : start + self.batch_size]
            encoded = self.tokenizer(
                [texts[i] for i in chunk],
                padding=True,
                truncation=True,
                max_length=self.max_length,
                return_tensors="np",
            )
            feed = {
                name: np.asarray(encoded[name], dtype=np.int64)
                for name in _INPUTS
                if name in encoded
            }
            if "token_type_ids" not in feed:
                feed["token_type_ids"] = np.zeros_like(feed["input_ids"])
            hidden = session.run(None, feed)[0]
            mask = feed["attention_mask"][..., None].astype(np.float32)
            pooled = (hidden * mask).sum(axis=1) / np.clip(mask.sum(axis=1), 1e-9, None)
            for i, row in zip(chunk, pooled, strict=True):
                out[i] = row
        return np.stack(out)


def _fingerprint(auto_model: Any) -> str:
    """A name for ``auto_model``'s weights: every tensor's name and shape and 4,096 values
    spread over it (a whole digest of a 90 MB model took a third of a second at each
    process start; two models that differ, fine-tuned or not, differ in these values)."""
    digest = hashlib.sha256(_EXPORT_FORMAT.encode())
    for name, tensor in sorted(auto_model.state_dict().items()):
        flat = tensor.detach().reshape(-1)
        digest.update(f"{name}:{tuple(tensor.shape)}:{tensor.dtype}".encode())
        digest.update(flat[:: max(1, flat.numel() // 4096)].cpu().numpy().tobytes())
    return digest.hexdigest()[:24]


def _exported(auto_model: Any) -> Path:
    """The ONNX file of ``auto_model`` (a Hugging Face encoder), exported on first use and
    named by a digest of its weights and the export format."""
    import torch

    path = onnx_cache_dir() / f"{_fingerprint(auto_model)}.onnx"
    with _export_lock:
        if path.is_file():
            return path
        path.parent.mkdir(parents=True, exist_ok=True)

        class _LastHidden(torch.nn.Module):
            def __init__(self, inner: Any) -> None:
                super().__init__()
                self.inner = inner

            def forward(self, input_ids: Any, attention_mask: Any, token_type_ids: Any) -> Any:
                return self.inner(
                    input_ids=input_ids,
                    attention_mask=attention_mask,
                    token_type_ids=token_type_ids,
                ).last_hidden_state

        sample = torch.ones((2, 4), dtype=torch.long)
        axes = {name: {0: "batch", 1: "tokens"} for name in (*_INPUTS, "last_hidden_state")}
        partial = path.with_suffix(f".{os.getpid()}.partial")
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the exporter's tracer warnings
            torch.onnx.export(
                _LastHidden(auto_model).eval(),
                (sample, sample, torch.zeros_like(sample)),
                str(partial),
                input_names=list(_INPUTS),
                output_names=["last_hidden_state"],
                dynamic_axes=axes,
                opset_version=17,
                dynamo=False,
            )
        os.replace(partial, path)  # whole or absent: a concurrent reader never sees half
        return path


__all__ = ["EMBED_BACKENDS", "embed_backend", "onnx_cache_dir", "onnx_encoder", "onnx_installed"]
