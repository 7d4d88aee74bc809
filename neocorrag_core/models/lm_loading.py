"""Resolving an LM spec: the bundled presets, an HF id or folder, or a loaded (model, tokenizer)."""

from __future__ import annotations

import copy
import logging
import os
import time
from pathlib import Path
from typing import Any

from .bundled import _say, _size_text, bundled_lm_path, load_plan
from .cpu import choose_cpu_dtype, configure_cpu_threads
from .dtype import _dtype_kwargs, _parse_dtype, _torch_dtype
from .errors import _LM_SPEC_HELP, MissingDependencyError, ModelLoadError
from .hf import (
    _cause,
    _drop_gguf_quantizer,
    _hf_offline,
    _looks_like_local_path,
    _offline_note,
    _quiet_model_load,
    _require_gguf_support,
)
from .language_model import LanguageModel
from .presets import BUNDLED_LMS

logger = logging.getLogger(__name__)


def resolve_lm(
    spec: Any = None,
    *,
    cache_dir: str | os.PathLike[str] | None = None,
    dtype: Any = "auto",
    show_progress: bool = True,
) -> LanguageModel:
    """Turn ``spec`` (see ``_LM_SPEC_HELP``) into a :class:`LanguageModel` in eval mode.

    ``dtype="auto"`` loads the bundled model in the float format this CPU computes fastest
    (:func:`~neocorrag_core.models.cpu.choose_cpu_dtype`: bfloat16 where the CPU has bf16
    instructions and it measures faster, else float32; the one bf16 copy on disk is cast
    on load). A model loaded by id or folder keeps its own dtype, except that a 16-bit
    checkpoint is upcast to float32 on a CPU where 16-bit math is emulated (slower). A
    ``(model, tokenizer)`` you pass is never cast unless you ask. Pass
    ``torch.float32``/``"bfloat16"``/... to choose; ``LanguageModel.dtype_reason`` says why.
    If the tokenizer has no pad token, pad is set to eos; a tokenizer you passed in is copied
    first, so your object is never changed. A ``LanguageModel`` is returned untouched.
    ``cache_dir`` and ``show_progress`` only concern the bundled model's one-time conversion;
    the load itself shows no progress bar unless INFO logging is on for
    ``neocorrag_core.models`` (the CLI's ``-v``).
    """
    if isinstance(spec, LanguageModel):
        return spec
    # Before any branch: a typo in dtype= must not wait for a download or the bundled
    # model's one-time conversion (minutes) to be reported.
    target = _parse_dtype(dtype)
    if spec is None or (isinstance(spec, str) and spec in BUNDLED_LMS):
        preset = spec or "default"
        path = bundled_lm_path(cache_dir=cache_dir, show_progress=show_progress, preset=preset)
        target, reason = _auto_dtype(target)
        _say(load_plan(BUNDLED_LMS[preset], path, target), show_progress)
        started = time.perf_counter()
        model, tokenizer = _load_hf_folder(path, dtype=target, label="the bundled LM")
        return _finish_lm(
            model,
            tokenizer,
            BUNDLED_LMS[preset].name,
            copy_tokenizer=False,
            reason=reason,
            seconds=time.perf_counter() - started,
        )
    if isinstance(spec, (tuple, list)):
        if len(spec) != 2:
            raise TypeError(
                f"A tuple spec must be (model, tokenizer), got {len(spec)} items. {_LM_SPEC_HELP}."
            )
        model, tokenizer = spec
        _check_model_and_tokenizer(model, tokenizer)
        reason = "the model object's own dtype"
        if target != "auto":
            model = model.to(_torch_dtype(target))
            reason = "dtype= was given"
        config = getattr(model, "config", None)
        name = getattr(config, "_name_or_path", None) or getattr(config, "name_or_path", None)
        return _finish_lm(
            model, tokenizer, str(name) if name else "custom", copy_tokenizer=True, reason=reason
        )
    if isinstance(spec, (str, os.PathLike)):
        text = os.fspath(spec)
        if not isinstance(text, str) or not text.strip():
            raise TypeError(f"Empty or non-text model path {spec!r}. {_LM_SPEC_HELP}.")
        local = Path(text).expanduser()
        check_lm_path(spec)
        if local.is_dir():
            logger.info("loading the LM in %s (%s of weights)", local, _weights_size(local))
        started = time.perf_counter()
        model, tokenizer = _load_hf_folder(
            local if local.exists() else text, dtype=target, label=repr(text)
        )
        reason = "dtype= was given" if target != "auto" else "the checkpoint's own dtype"
        if target == "auto":
            model, reason = _avoid_emulated_half(model)
        return _finish_lm(
            model,
            tokenizer,
            text,
            copy_tokenizer=False,
            reason=reason,
            seconds=time.perf_counter() - started,
        )
    raise TypeError(
        f"Cannot use an object of type {type(spec).__name__} as LM. {_LM_SPEC_HELP}. {_NOT_LOCAL}"
    )


_NOT_LOCAL = (
    "A chat model (a neocorrag_core.lm.chat.ChatModel, or a LangChain / LlamaIndex LLM "
    "wrapped by neocorrag_integrations.langchain.as_chat_model / "
    "neocorrag_integrations.llama_index.as_chat_model) serves the BeliefRAG components and "
    "the LLM triple extractor (their lm=), not a stage that needs a local LM's tokens "
    "(chain decoding, EviReform's LM steps)."
)
"""The last words of resolve_lm's error for an object it cannot load: where a chat model
goes instead (the core never asks what such an object is)."""


def check_lm_path(spec: Any) -> None:
    """Raise :class:`ModelLoadError` when ``spec`` is a path (or reads as one) to a folder that
    does not exist; anything else passes. Cheap: for callers that must fail before they
    create something (a store) on a typo, without loading the model."""
    if spec is None or (isinstance(spec, str) and spec in BUNDLED_LMS):
        return
    if not isinstance(spec, (str, os.PathLike)):
        return
    text = os.fspath(spec)
    if not isinstance(text, str) or not text.strip():
        return
    local = Path(text).expanduser()
    if not local.exists() and (isinstance(spec, os.PathLike) or _looks_like_local_path(text)):
        raise ModelLoadError(
            f"No model folder at {local.absolute()}. "
            f"Pass an existing folder, a Hugging Face model id, or a loaded (model, tokenizer) "
            f"tuple. {_LM_SPEC_HELP}."
        )


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


def _auto_dtype(target: Any) -> tuple[Any, str]:
    """The dtype to load the bundled LM in, and why."""
    if target != "auto":
        return target, "dtype= was given"
    choice = choose_cpu_dtype()
    return choice.dtype, f"{choice.source}: {choice.reason}"


def _avoid_emulated_half(model: Any) -> tuple[Any, str]:
    """Upcast a CPU model loaded in bf16/fp16 to float32 where 16-bit math is emulated."""
    import torch

    current = getattr(model, "dtype", None)
    on_cpu = getattr(getattr(model, "device", None), "type", "cpu") == "cpu"
    if current not in (torch.bfloat16, torch.float16) or not on_cpu:
        return model, "the checkpoint's own dtype"
    choice = choose_cpu_dtype()
    if choice.dtype == "float32" or current == torch.float16:
        # fp16 has no fast CPU path on any x86 we know; bf16 only where measured faster.
        return model.to(torch.float32), f"upcast from {current} ({choice.reason})"
    return model, f"the checkpoint's own dtype ({choice.source}: {choice.reason})"


def _weights_size(folder: Path) -> str:
    """The weight files' total size in a model folder, for the log line before loading it."""
    total = sum(
        f.stat().st_size
        for f in folder.iterdir()
        if f.is_file() and f.suffix in (".safetensors", ".bin", ".gguf", ".pt")
    )
    return _size_text(total)


def _finish_lm(
    model: Any,
    tokenizer: Any,
    name: str,
    *,
    copy_tokenizer: bool,
    reason: str = "",
    seconds: float | None = None,
) -> LanguageModel:
    """Eval mode, a pad token (pad = eos, on a copy when the tokenizer is the user's), CPU
    threads capped at the physical cores, and the load logged with its float format (and
    how long it took, ``seconds``)."""
    if callable(getattr(model, "eval", None)):
        model.eval()
    if getattr(tokenizer, "pad_token", None) is None and getattr(tokenizer, "eos_token", None):
        if copy_tokenizer:
            tokenizer = copy.deepcopy(tokenizer)
        tokenizer.pad_token = tokenizer.eos_token
    configure_cpu_threads()
    dtype = str(getattr(model, "dtype", "unknown")).removeprefix("torch.")
    took = f" in {seconds:.1f} s" if seconds is not None else ""
    logger.info("LM %s loaded%s, %s (%s)", name, took, dtype, reason or "as given")
    return LanguageModel(model=model, tokenizer=tokenizer, name=name, dtype_reason=reason)


def _load_hf_folder(source: Path | str, *, dtype: Any, label: str) -> tuple[Any, Any]:
    """AutoModelForCausalLM + AutoTokenizer from a folder, HF id or .gguf file, errors wrapped;
    without progress bars unless asked for (:func:`~neocorrag_core.models.hf._quiet_model_load`)."""
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
    if gguf and isinstance(source, Path):
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
        with _quiet_model_load():
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
