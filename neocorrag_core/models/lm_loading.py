"""Resolving an LM spec: the bundled presets, an HF id or folder, or a loaded (model, tokenizer)."""

from __future__ import annotations

import copy
import os
from pathlib import Path
from typing import Any

from .bundled import bundled_lm_path
from .dtype import _dtype_kwargs, _parse_dtype, _torch_dtype
from .errors import _LM_SPEC_HELP, MissingDependencyError, ModelLoadError
from .hf import (
    _cause,
    _drop_gguf_quantizer,
    _hf_offline,
    _looks_like_local_path,
    _offline_note,
    _quiet_transformers_progress,
    _require_gguf_support,
)
from .language_model import LanguageModel
from .presets import BUNDLED_LMS


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
