"""Choosing the LM float format for the CPU: capability rules, the cached probe, overrides."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from neocorrag_core.models import cpu, resolve_lm
from neocorrag_core.models.cpu import CpuInfo, choose_cpu_dtype, configure_cpu_threads


def info(flags: set[str] | None, physical: int = 2, logical: int = 2) -> CpuInfo:
    return CpuInfo("Test CPU", None if flags is None else frozenset(flags), "AVX2", logical,
                   physical)  # fmt: skip


@pytest.fixture(autouse=True)
def _no_override(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NEOCORRAG_DTYPE", raising=False)


def no_probe(dtype: str, **kwargs: object) -> float:
    raise AssertionError("the capability rules should have decided without a probe")


def test_no_bf16_instructions_means_float32(monkeypatch, tmp_path):
    monkeypatch.setattr(cpu, "probe_seconds", no_probe)
    choice = choose_cpu_dtype(info({"avx2", "fma"}), cache_dir=tmp_path)
    assert (choice.dtype, choice.source) == ("float32", "capability")
    assert "no bf16 instructions" in choice.reason


def test_amx_means_bfloat16(monkeypatch, tmp_path):
    monkeypatch.setattr(cpu, "probe_seconds", no_probe)
    choice = choose_cpu_dtype(info({"avx512f", "amx_bf16", "amx_tile"}), cache_dir=tmp_path)
    assert (choice.dtype, choice.source) == ("bfloat16", "capability")


@pytest.mark.parametrize(("bf16_s", "fp32_s", "expected"), [(1.0, 2.0, "bfloat16"),
                                                             (2.0, 1.0, "float32")])  # fmt: skip
def test_ambiguous_cpus_are_probed_once_and_the_result_cached(
    monkeypatch, tmp_path, bf16_s, fp32_s, expected
):
    calls = []

    def fake_probe(dtype: str, **kwargs: object) -> float:
        calls.append(dtype)
        return bf16_s if dtype == "bfloat16" else fp32_s

    monkeypatch.setattr(cpu, "probe_seconds", fake_probe)
    for flags in ({"avx512f", "avx512_bf16"}, None):  # bf16 without AMX; unreadable flags
        calls.clear()
        first = choose_cpu_dtype(info(flags), cache_dir=tmp_path / str(flags is None))
        again = choose_cpu_dtype(info(flags), cache_dir=tmp_path / str(flags is None))
        assert (first.dtype, first.source) == (expected, "probe")
        assert (again.dtype, again.source) == (expected, "cached probe")
        assert sorted(calls) == ["bfloat16", "float32"]  # timed once, then read back
        assert "ms" in first.reason


def test_a_cached_probe_of_another_machine_is_not_used(monkeypatch, tmp_path):
    monkeypatch.setattr(
        cpu, "probe_seconds", lambda dtype, **kw: 1.0 if dtype == "bfloat16" else 2.0
    )
    choose_cpu_dtype(info({"avx512_bf16"}), cache_dir=tmp_path)
    record = json.loads((tmp_path / "cpu-dtype-probe.json").read_text())
    record.update(fingerprint="another machine", dtype="float32")
    (tmp_path / "cpu-dtype-probe.json").write_text(json.dumps(record))
    assert choose_cpu_dtype(info({"avx512_bf16"}), cache_dir=tmp_path).source == "probe"


def test_an_unwritable_cache_still_gives_a_choice(monkeypatch, tmp_path):
    monkeypatch.setattr(cpu, "probe_seconds", lambda dtype, **kw: 1.0)
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    assert choose_cpu_dtype(info(None), cache_dir=blocker / "cache").source == "probe"


def test_environment_override(monkeypatch, tmp_path):
    monkeypatch.setattr(cpu, "probe_seconds", no_probe)
    monkeypatch.setenv("NEOCORRAG_DTYPE", "bf16")
    assert choose_cpu_dtype(info({"avx2"}), cache_dir=tmp_path).dtype == "bfloat16"
    monkeypatch.setenv("NEOCORRAG_DTYPE", "int4")
    with pytest.raises(ValueError, match="NEOCORRAG_DTYPE"):
        choose_cpu_dtype(info({"avx2"}), cache_dir=tmp_path)


def test_the_real_probe_times_both_formats():
    assert cpu.probe_seconds("float32", repeats=1) > 0
    assert cpu.probe_seconds("bfloat16", repeats=1) > 0


def test_cpu_info_reads_this_machine():
    found = cpu.cpu_info()
    assert found.logical_cpus >= found.physical_cores >= 1
    assert found.model_name


def test_threads_are_only_ever_lowered_to_the_physical_cores(monkeypatch):
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        assert configure_cpu_threads(info(set(), physical=4, logical=8)) == 1  # never raised
        torch.set_num_threads(2)
        assert configure_cpu_threads(info(set(), physical=1, logical=2)) == 1
    finally:
        torch.set_num_threads(before)


def test_a_16_bit_checkpoint_is_upcast_where_16_bit_math_is_emulated(monkeypatch, tmp_path: Path):
    from tiny_models import save_tiny_lm

    folder = save_tiny_lm(tmp_path / "lm", dtype=torch.bfloat16)
    monkeypatch.setenv("NEOCORRAG_DTYPE", "float32")
    lm = resolve_lm(folder, show_progress=False)
    assert lm.model.dtype == torch.float32 and "upcast" in lm.dtype_reason
    monkeypatch.setenv("NEOCORRAG_DTYPE", "bfloat16")
    lm = resolve_lm(folder, show_progress=False)
    assert lm.model.dtype == torch.bfloat16
    assert resolve_lm(folder, dtype="float32", show_progress=False).dtype_reason == (
        "dtype= was given"
    )


# Features of an AWS Graviton3 (Neoverse V1) and a Graviton2 (Neoverse N1) on Linux.
GRAVITON3 = frozenset(
    "fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics fphp asimdhp cpuid asimdrdm jscvt fcma "
    "lrcpc dcpop sha3 sm3 sm4 asimddp sha512 sve asimdfhm dit uscat ilrcpc flagm ssbs paca "
    "pacg dcpodp svei8mm svebf16 i8mm bf16 dgh rng".split()
)
GRAVITON2 = frozenset(
    "fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics fphp asimdhp cpuid asimdrdm lrcpc "
    "dcpop asimddp ssbs".split()
)


def test_arm_bf16_is_probed_not_ruled_out(monkeypatch, tmp_path):
    monkeypatch.setattr(
        cpu, "probe_seconds", lambda dtype, **kw: 1.0 if dtype == "bfloat16" else 2.0
    )
    graviton3 = CpuInfo("aarch64", GRAVITON3, "SVE256", 4, 4)
    assert graviton3.flag_family == "arm" and graviton3.has_arm_bf16
    choice = choose_cpu_dtype(graviton3, cache_dir=tmp_path)
    assert (choice.dtype, choice.source) == ("bfloat16", "probe")


def test_arm_without_bf16_is_float32_for_an_arm_reason(monkeypatch, tmp_path):
    monkeypatch.setattr(cpu, "probe_seconds", no_probe)
    choice = choose_cpu_dtype(CpuInfo("aarch64", GRAVITON2, "DEFAULT", 4, 4), cache_dir=tmp_path)
    assert (choice.dtype, choice.source) == ("float32", "capability")
    assert "Arm features" in choice.reason and "avx512" not in choice.reason


def test_flags_of_no_known_family_are_probed(monkeypatch, tmp_path):
    monkeypatch.setattr(cpu, "probe_seconds", lambda dtype, **kw: 1.0)
    assert choose_cpu_dtype(info({"zarch", "vx"}), cache_dir=tmp_path).source == "probe"


def test_a_bf16_checkpoint_stays_bf16_on_an_arm_cpu_measured_faster(monkeypatch, tmp_path: Path):
    """``_avoid_emulated_half`` asks the same choice: on Graviton3 it no longer upcasts."""
    from tiny_models import save_tiny_lm

    folder = save_tiny_lm(tmp_path / "lm", dtype=torch.bfloat16)
    monkeypatch.setenv("NEOCORRAG_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(cpu, "cpu_info", lambda: CpuInfo("aarch64", GRAVITON3, "SVE256", 1, 1))
    monkeypatch.setattr(
        cpu, "probe_seconds", lambda dtype, **kw: 1.0 if dtype == "bfloat16" else 2.0
    )
    lm = resolve_lm(folder, show_progress=False)
    assert lm.model.dtype == torch.bfloat16 and "probe" in lm.dtype_reason


def test_small_embedding_calls_run_on_one_thread_and_restore_the_count(monkeypatch) -> None:
    import threading

    import torch

    from neocorrag_core.models.cpu import SMALL_BATCH, threads_for_batch

    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        seen: list[int] = []

        def small_call() -> None:
            with threads_for_batch(1):
                seen.append(torch.get_num_threads())

        with threads_for_batch(3):
            assert torch.get_num_threads() == 1
            inner = threading.Thread(target=small_call)
            inner.start()
            inner.join()
            assert torch.get_num_threads() == 1  # the other call's end restored nothing
        assert seen == [1]
        with threads_for_batch(SMALL_BATCH + 1):
            assert torch.get_num_threads() == 2  # a large batch keeps the process's count
        with threads_for_batch(1), threads_for_batch(2):
            assert torch.get_num_threads() == 1
        assert torch.get_num_threads() == 2  # restored when the last small call ended
        monkeypatch.setenv("OMP_NUM_THREADS", "2")
        with threads_for_batch(1):
            assert torch.get_num_threads() == 2  # the user chose: left alone
    finally:
        torch.set_num_threads(before)
