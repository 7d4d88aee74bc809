"""Numeric formats: parsing a ``dtype=`` argument and passing it to transformers."""

from __future__ import annotations

import re
from typing import Any

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
