"""The CPU we run on: which float format it computes fastest, and how many threads to use.

bfloat16 halves the bytes an LM moves, but only CPUs with bf16 instructions (AMX, or
AVX512-BF16) compute it natively; elsewhere torch emulates it, and on an AVX2-only EPYC
the bundled 0.5B LM prefilled 3.8x slower in bf16 than in fp32 (issue 11). So
``dtype="auto"`` asks :func:`choose_cpu_dtype`:

* no bf16 instruction on a CPU whose flags we can read (x86 ``flags``, or the ``Features``
  of an Arm CPU on Linux, where BF16 shows as ``bf16``) -> ``float32`` (certain);
* AMX-BF16 -> ``bfloat16`` (certain);
* anything else (AVX512-BF16 without AMX, or Arm BF16, where torch's kernels may or may not
  use it; flags we cannot read or place, e.g. on macOS) -> a one-off timed probe of both
  formats on LM-shaped matrix products, cached per machine under the neocorrag cache.

``NEOCORRAG_DTYPE`` (``bfloat16`` / ``float32``) or ``dtype=`` overrides the choice;
``neocorrag doctor`` prints it with its reason.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import platform
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

from .bundled import default_cache_dir
from .dtype import _parse_dtype

logger = logging.getLogger(__name__)

_PROBE_FILE = "cpu-dtype-probe.json"
_PROBE_VERSION = 1
# The probe's shapes: one Qwen2.5-0.5B MLP (hidden 896, intermediate 4864), prefill of a
# 128-token prompt plus 16 single-token decode steps, the two regimes an LM call spends in.
_HIDDEN, _INTERMEDIATE, _PREFILL, _DECODE_STEPS = 896, 4864, 128, 16


# Names only one family's /proc/cpuinfo uses: x86 ``flags`` always list fpu/sse2 (and the
# vector extensions), an AArch64 ``Features`` line always fp/asimd (32-bit Arm: vfp/neon).
_X86_FLAGS = frozenset({"fpu", "sse", "sse2", "avx", "avx2", "avx512f", "avx512_bf16", "amx_bf16"})
_ARM_FLAGS = frozenset({"fp", "asimd", "neon", "vfp", "bf16", "svebf16"})
_ARM_BF16 = frozenset({"bf16", "svebf16"})


@dataclass(frozen=True)
class CpuInfo:
    """What the CPU offers, as far as this process can tell."""

    model_name: str
    flags: frozenset[str] | None
    """The CPU feature flags (``None`` where they cannot be read, e.g. outside Linux)."""
    torch_capability: str
    """``torch.backends.cpu.get_cpu_capability()``, e.g. ``"AVX2"`` or ``"AVX512"``."""
    logical_cpus: int
    """CPUs this process may run on (its affinity set)."""
    physical_cores: int
    """Physical cores among them (SMT siblings counted once)."""

    @property
    def has_amx_bf16(self) -> bool:
        """AMX tiles with bf16: native bf16 matrix multiply."""
        return self.flags is not None and "amx_bf16" in self.flags

    @property
    def has_avx512_bf16(self) -> bool:
        """AVX512-BF16 dot-product instructions."""
        return self.flags is not None and "avx512_bf16" in self.flags

    @property
    def flag_family(self) -> Literal["x86", "arm", "unknown"]:
        """Whose feature names ``flags`` holds: ``"x86"``, ``"arm"`` or ``"unknown"``.

        Told from the names themselves, so a :class:`CpuInfo` built by hand is placed the
        same way as one read from ``/proc/cpuinfo``; the two families share no name here.
        """
        if not self.flags:
            return "unknown"
        if self.flags & _X86_FLAGS:
            return "x86"
        if self.flags & _ARM_FLAGS:
            return "arm"
        return "unknown"

    @property
    def has_arm_bf16(self) -> bool:
        """The Armv8.6 BF16 extension (``bf16``; ``svebf16`` for its SVE form)."""
        return self.flag_family == "arm" and not _ARM_BF16.isdisjoint(self.flags or ())


@dataclass(frozen=True)
class DtypeChoice:
    """The float format LMs load in on this machine, and why."""

    dtype: str
    """``"bfloat16"`` or ``"float32"``."""
    reason: str
    """One sentence a person can check (the flags seen, or the probe's timings)."""
    source: str
    """``"override"``, ``"capability"``, ``"probe"`` or ``"cached probe"``."""


def _read_cpuinfo() -> tuple[str, frozenset[str] | None, dict[tuple[str, str], None]]:
    """Model name, flags and the set of (physical id, core id) pairs from /proc/cpuinfo."""
    try:
        text = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return platform.processor() or platform.machine(), None, {}
    name, flags = "", None
    cores: dict[tuple[str, str], None] = {}
    physical = core = ""
    for line in text.splitlines():
        key, _, value = line.partition(":")
        key, value = key.strip(), value.strip()
        if key == "model name" and not name:
            name = value
        elif key in ("flags", "Features") and flags is None:
            flags = frozenset(value.split())
        elif key == "physical id":
            physical = value
        elif key == "core id":
            core = value
        elif not line.strip() and (physical or core):
            cores[(physical, core)] = None
            physical = core = ""
    if physical or core:
        cores[(physical, core)] = None
    return name or platform.machine(), flags, cores


def cpu_info() -> CpuInfo:
    """Read the CPU's model, flags, torch's capability level and the usable cores."""
    import torch

    name, flags, cores = _read_cpuinfo()
    try:
        logical = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        logical = os.cpu_count() or 1
    total_logical = os.cpu_count() or logical
    # SMT siblings: scale the physical count to the CPUs this process may use.
    physical_total = len(cores) or total_logical
    per_core = max(1, round(total_logical / physical_total))
    physical = max(1, logical // per_core)
    try:
        capability = str(torch.backends.cpu.get_cpu_capability())
    except Exception:  # older torch
        capability = "unknown"
    return CpuInfo(name, flags, capability, logical, physical)


def _override() -> str | None:
    """``NEOCORRAG_DTYPE`` read with the same aliases as ``dtype=`` (``bf16``, ``fp32``, ...)."""
    value = os.environ.get("NEOCORRAG_DTYPE", "").strip()
    try:
        parsed = _parse_dtype(value or "auto")
    except ValueError:
        parsed = None
    if parsed == "auto":
        return None
    if parsed not in ("bfloat16", "float32"):
        raise ValueError(f"NEOCORRAG_DTYPE must be auto, bfloat16 or float32, got {value!r}")
    return str(parsed)


def _fingerprint(info: CpuInfo) -> str:
    import torch

    parts = [info.model_name, sorted(info.flags or ()), info.torch_capability]
    key = json.dumps([*parts, torch.__version__, platform.machine(), _PROBE_VERSION])
    return hashlib.sha256(key.encode()).hexdigest()[:16]


def probe_seconds(dtype: str, *, repeats: int = 3) -> float:
    """Best-of-``repeats`` seconds of an LM-shaped MLP's prefill plus decode in ``dtype``."""
    import torch

    torch_dtype = getattr(torch, dtype)
    generator = torch.Generator().manual_seed(0)
    up = torch.randn(_HIDDEN, _INTERMEDIATE, generator=generator).to(torch_dtype)
    down = torch.randn(_INTERMEDIATE, _HIDDEN, generator=generator).to(torch_dtype)
    prompt = torch.randn(_PREFILL, _HIDDEN, generator=generator).to(torch_dtype)
    token = prompt[:1]
    best = float("inf")
    with torch.inference_mode():
        for _ in range(repeats + 1):  # the first round warms kernels up and is not counted
            started = time.perf_counter()
            torch.nn.functional.silu(prompt @ up) @ down
            for _ in range(_DECODE_STEPS):
                torch.nn.functional.silu(token @ up) @ down
            best = min(best, time.perf_counter() - started)
    return best


def _probe(info: CpuInfo, cache_dir: Path) -> DtypeChoice:
    path = cache_dir / _PROBE_FILE
    fingerprint = _fingerprint(info)
    try:
        stored = json.loads(path.read_text(encoding="utf-8"))
        if stored.get("fingerprint") == fingerprint and stored.get("dtype") in (
            "bfloat16",
            "float32",
        ):
            return DtypeChoice(stored["dtype"], stored["reason"], "cached probe")
    except (OSError, ValueError, AttributeError):
        pass
    fp32, bf16 = probe_seconds("float32"), probe_seconds("bfloat16")
    dtype = "bfloat16" if bf16 < fp32 else "float32"
    reason = (
        f"timed probe on {info.model_name} ({info.torch_capability}): bfloat16 "
        f"{bf16 * 1e3:.1f} ms vs float32 {fp32 * 1e3:.1f} ms for the same LM-shaped work"
    )
    choice = DtypeChoice(dtype, reason, "probe")
    try:
        cache_dir.mkdir(parents=True, exist_ok=True)
        record = {"fingerprint": fingerprint, **asdict(choice), "bf16_s": bf16, "fp32_s": fp32}
        tmp = path.with_name(f"{path.name}.tmp-{os.getpid()}")
        tmp.write_text(json.dumps(record, indent=2), encoding="utf-8")
        os.replace(tmp, path)
    except OSError as err:  # a read-only cache: probe again next time, still correct
        logger.debug("could not cache the dtype probe in %s: %s", path, err)
    return choice


def choose_cpu_dtype(
    info: CpuInfo | None = None, *, cache_dir: str | os.PathLike[str] | None = None
) -> DtypeChoice:
    """The float format LMs should load in on this CPU (see the module docstring)."""
    forced = _override()
    if forced is not None:
        return DtypeChoice(forced, "NEOCORRAG_DTYPE is set", "override")
    info = info or cpu_info()
    if info.has_amx_bf16:
        return DtypeChoice(
            "bfloat16", f"{info.model_name} has AMX-BF16 (native bf16 matmul)", "capability"
        )
    # Only flags we can place rule bf16 out: an unknown family's names may spell it otherwise.
    lacking = {
        "x86": None if info.has_avx512_bf16 else "no amx_bf16, no avx512_bf16",
        "arm": None if info.has_arm_bf16 else "no bf16 in its Arm features",
    }.get(info.flag_family)
    if lacking is not None:
        return DtypeChoice(
            "float32",
            f"{info.model_name} ({info.torch_capability}) has no bf16 instructions "
            f"({lacking}): bfloat16 would be emulated",
            "capability",
        )
    root = Path(cache_dir).expanduser() if cache_dir is not None else default_cache_dir()
    return _probe(info, root)


def configure_cpu_threads(info: CpuInfo | None = None) -> int:
    """Cap torch's intra-op threads at the physical cores this process may use.

    torch may start one thread per logical CPU; on SMT machines two threads then share
    a core's vector units and each LM call runs slower. Only ever lowers the count, and
    leaves it alone when ``OMP_NUM_THREADS`` or ``torch.set_num_threads`` chose it.
    Returns the thread count in force.
    """
    import torch

    current = torch.get_num_threads()
    if os.environ.get("OMP_NUM_THREADS"):
        return current
    info = info or cpu_info()
    if current > info.physical_cores:
        torch.set_num_threads(info.physical_cores)
        logger.info(
            "torch threads %d -> %d (physical cores available)", current, info.physical_cores
        )
    return int(torch.get_num_threads())


SMALL_BATCH = 16
"""Embedding calls of at most this many texts run on one torch thread (see
:func:`threads_for_batch`)."""

_thread_lock = threading.Lock()
_single_users = 0
_saved_threads = 0


@contextmanager
def threads_for_batch(n_texts: int) -> Iterator[None]:
    """Run a small embedding call (at most :data:`SMALL_BATCH` texts) on one torch thread.

    Measured on this 2-core machine (``benchmarks/bench_threads.py``, MiniLM): a question
    alone took 8.3 ms on one thread against 6.8 on two when the machine was idle, but 18 ms
    against 39 with two other busy processes (and 34 against 74 for a question and its
    entities); a batch of 30+ texts gained 1.7x from the second thread idle. A query over
    stored passages embeds only its question and entities, and a service is rarely alone
    on its CPU, so small calls take one thread and large ones (indexing, a cold call) keep
    the process's count. torch's count is process-wide: it is restored when the last small
    call running ends, and left alone when ``OMP_NUM_THREADS`` is set.
    """
    if n_texts > SMALL_BATCH or os.environ.get("OMP_NUM_THREADS"):
        yield
        return
    import torch

    global _single_users, _saved_threads
    with _thread_lock:
        if _single_users == 0:
            _saved_threads = torch.get_num_threads()
            if _saved_threads > 1:
                torch.set_num_threads(1)
        _single_users += 1
    try:
        yield
    finally:
        with _thread_lock:
            _single_users -= 1
            if _single_users == 0 and _saved_threads > 1:
                torch.set_num_threads(_saved_threads)


def describe(choice: DtypeChoice, info: CpuInfo) -> dict[str, Any]:
    """Everything ``neocorrag doctor`` prints about the CPU, as plain data."""
    import torch

    bf16_flags = sorted(f for f in (info.flags or ()) if "bf16" in f)
    return {
        "cpu": info.model_name,
        "torch": torch.__version__,
        "torch capability": info.torch_capability,
        "bf16 flags": ", ".join(bf16_flags) or ("none" if info.flags is not None else "unknown"),
        "cpus usable / physical cores": f"{info.logical_cpus} / {info.physical_cores}",
        "torch threads": torch.get_num_threads(),
        "LM float format": f"{choice.dtype} ({choice.source}: {choice.reason})",
    }


__all__ = [
    "CpuInfo",
    "DtypeChoice",
    "choose_cpu_dtype",
    "configure_cpu_threads",
    "cpu_info",
    "describe",
    "probe_seconds",
    "threads_for_batch",
]
