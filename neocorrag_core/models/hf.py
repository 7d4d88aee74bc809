"""Hugging Face helpers: offline mode, quiet progress bars, error chaining, GGUF support."""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import logging
import os
import threading
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


LOAD_PROGRESS_LOGGER = "neocorrag_core.models"
"""The logger whose level decides whether a model load shows Hugging Face's progress bars:
INFO or lower (the CLI's ``-v``) shows them; the default WARNING hides them."""


def _load_progress_wanted() -> bool:
    """Whether a model load shows the Hugging Face progress bars ("Loading weights", the
    tokenizer's): only when INFO is enabled on :data:`LOAD_PROGRESS_LOGGER`. A load takes
    seconds and the bars say nothing a user acts on, so a library call is quiet by default
    and verbosity is asked for the usual way, through logging."""
    return logging.getLogger(LOAD_PROGRESS_LOGGER).isEnabledFor(logging.INFO)


@contextlib.contextmanager
def _quiet_model_load() -> Iterator[None]:
    """Load a model inside this block: Hugging Face's progress bars are hidden unless
    :func:`_load_progress_wanted` (then restored as they were)."""
    with _quiet_transformers_progress(not _load_progress_wanted()):
        yield


_QUIET_LOCK = threading.Lock()
_quiet_depth = 0
_quiet_saved: tuple[bool, dict[str, bool]] | None = None


@contextlib.contextmanager
def _quiet_transformers_progress(quiet: bool) -> Iterator[None]:
    """Hide the progress bars of transformers (and of huggingface_hub, which it switches
    with them) inside the block when ``quiet``, then put back the state found before.

    Blocks may overlap across threads: the first one in saves the state and the last one
    out restores it, so none leaves the bars off for good. ``HF_HUB_DISABLE_PROGRESS_BARS=0``
    (the user forcing the bars on) wins: nothing is hidden then."""
    if not quiet or not _enter_quiet():
        yield
        return
    try:
        yield
    finally:
        _leave_quiet()


def _enter_quiet() -> bool:
    """Hide the bars (the first block in saves their state); False when nothing was hidden."""
    global _quiet_depth, _quiet_saved
    try:
        from huggingface_hub import constants
        from transformers.utils import logging as hf_logging
    except ImportError:  # the load itself reports the missing package
        return False
    if constants.HF_HUB_DISABLE_PROGRESS_BARS is False:
        return False
    with _QUIET_LOCK:
        if _quiet_depth == 0:
            _quiet_saved = (hf_logging.is_progress_bar_enabled(), dict(_hub_bar_states()))
            hf_logging.disable_progress_bar()  # type: ignore[no-untyped-call]
        _quiet_depth += 1
    return True


def _leave_quiet() -> None:
    """Undo :func:`_enter_quiet`; the last block out restores the saved state."""
    global _quiet_depth, _quiet_saved
    from transformers.utils import logging as hf_logging

    with _QUIET_LOCK:
        _quiet_depth -= 1
        if _quiet_depth or _quiet_saved is None:
            return
        was_enabled, hub_states = _quiet_saved
        _quiet_saved = None
        if was_enabled:
            hf_logging.enable_progress_bar()  # type: ignore[no-untyped-call]
        states = _hub_bar_states()
        states.clear()  # both calls above reset huggingface_hub's per-group switches
        states.update(hub_states)


def _hub_bar_states() -> dict[str, bool]:
    """huggingface_hub's table of progress-bar switches (global and per group), or an empty
    dict where this version keeps none."""
    module = importlib.import_module("huggingface_hub.utils.tqdm")
    states = getattr(module, "progress_bar_states", None)
    return states if isinstance(states, dict) else {}


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
