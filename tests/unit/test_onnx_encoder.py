"""The ONNX Runtime encoder: the same vectors as PyTorch's, chosen by
``NEOCORRAG_EMBED_BACKEND``, and a fallback to PyTorch that never fails a call."""

from __future__ import annotations

import logging

import numpy as np
import pytest
from tiny_models import save_tiny_embedder

from neocorrag_core.errors import ConfigError
from neocorrag_core.models import onnx_encoder as module
from neocorrag_core.models.embedder_loading import (
    _load_sentence_transformer,
    _sentence_transformer_encoder,
)
from neocorrag_core.models.onnx_encoder import embed_backend, onnx_encoder

pytest.importorskip("onnxruntime")
pytest.importorskip("onnx")

TEXTS = [
    "Van Hook Township",
    "Mountrail County capital Stanley",
    "the county seat of the county where the township is located, a much longer text",
    "x",
]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return _load_sentence_transformer(str(save_tiny_embedder(tmp_path_factory.mktemp("st"))))


@pytest.fixture(autouse=True)
def _own_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("NEOCORRAG_CACHE", str(tmp_path / "cache"))


def test_the_onnx_vectors_are_pytorchs(tiny, monkeypatch):
    monkeypatch.setenv("NEOCORRAG_EMBED_BACKEND", "torch")
    slow = _sentence_transformer_encoder(tiny, bf16=False)
    monkeypatch.setenv("NEOCORRAG_EMBED_BACKEND", "onnx")
    fast = _sentence_transformer_encoder(tiny, bf16=False)
    assert isinstance(fast, module._OnnxEncoder)
    many = TEXTS * 30  # more than a small call: the many-thread session, several batches
    for texts in (TEXTS[:1], TEXTS, many):
        np.testing.assert_allclose(fast(texts), slow(texts), atol=1e-5)
    # Exported once, then loaded from the cache by the next encoder.
    files = list((module.onnx_cache_dir()).glob("*.onnx"))
    assert len(files) == 1
    again = onnx_encoder(tiny)
    assert again is not None and list(module.onnx_cache_dir().glob("*.onnx")) == files


def test_the_setting_chooses_and_is_checked(tiny, monkeypatch):
    monkeypatch.setenv("NEOCORRAG_EMBED_BACKEND", "torch")
    assert onnx_encoder(tiny) is None
    monkeypatch.delenv("NEOCORRAG_EMBED_BACKEND")
    assert embed_backend() == module.DEFAULT_BACKEND
    monkeypatch.setenv("NEOCORRAG_EMBED_BACKEND", "auto")
    assert onnx_encoder(tiny) is not None  # installed here: auto takes it
    monkeypatch.setenv("NEOCORRAG_EMBED_BACKEND", "gpu")
    with pytest.raises(ConfigError, match="NEOCORRAG_EMBED_BACKEND must be one of"):
        onnx_encoder(tiny)


def test_bfloat16_keeps_pytorch(tiny, monkeypatch):
    monkeypatch.setenv("NEOCORRAG_EMBED_BACKEND", "onnx")
    assert not isinstance(_sentence_transformer_encoder(tiny, bf16=True), module._OnnxEncoder)


def test_a_model_it_cannot_run_stays_on_pytorch(tiny, monkeypatch, caplog):
    monkeypatch.setenv("NEOCORRAG_EMBED_BACKEND", "onnx")
    with caplog.at_level(logging.WARNING):
        assert onnx_encoder([object()]) is None  # not transformer + mean pooling
    assert "using PyTorch" in caplog.text


def test_a_failed_export_falls_back_with_a_warning(tiny, monkeypatch, caplog):
    def broken(_model):
        raise OSError("read-only cache")

    monkeypatch.setattr(module, "_exported", broken)
    monkeypatch.setenv("NEOCORRAG_EMBED_BACKEND", "auto")
    with caplog.at_level(logging.WARNING):
        encode = _sentence_transformer_encoder(tiny, bf16=False)
    assert not isinstance(encode, module._OnnxEncoder)
    assert "read-only cache" in caplog.text and "using PyTorch" in caplog.text
    assert encode(TEXTS).shape[0] == len(TEXTS)
