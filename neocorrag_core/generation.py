"""Plain LM text generation shared by the reader and the query reformulator."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from neocorrag_core.models import LanguageModel, end_of_turn_token_id


def chat_prompt_ids(lm: LanguageModel, text: str, plain_suffix: str = "") -> list[int]:
    """``text`` as one user turn in the LM's chat template (or plain text plus a suffix)."""
    tokenizer = lm.tokenizer
    if getattr(tokenizer, "chat_template", None):
        rendered = tokenizer.apply_chat_template(
            [{"role": "user", "content": text}], tokenize=False, add_generation_prompt=True
        )
        return list(tokenizer(rendered, add_special_tokens=False)["input_ids"])
    return list(tokenizer(text + plain_suffix)["input_ids"])


def model_device(model: Any) -> Any:
    """The device the model's inputs must live on."""
    device = getattr(model, "device", None)
    if device is not None:
        return device
    return next(model.parameters()).device


def greedy_generate(lm: LanguageModel, ids: Sequence[int], max_new_tokens: int) -> list[int]:
    """Greedy continuation of ``ids`` until an end-of-turn token; the model's own sampling
    settings are neutralized so every method's reader call is deterministic."""
    import torch

    with lm.lock, torch.inference_mode():
        end_id = end_of_turn_token_id(lm.tokenizer)
        eos = {end_id}
        model_eos = getattr(getattr(lm.model, "config", None), "eos_token_id", None)
        if isinstance(model_eos, int):
            eos.add(model_eos)
        pad_id = lm.tokenizer.pad_token_id
        inputs = torch.tensor([list(ids)], device=model_device(lm.model))
        output = lm.model.generate(
            inputs,
            attention_mask=torch.ones_like(inputs),
            max_new_tokens=max_new_tokens,
            do_sample=False,
            num_beams=1,
            temperature=None,
            top_p=None,
            top_k=None,
            repetition_penalty=1.0,
            eos_token_id=sorted(eos),
            pad_token_id=end_id if pad_id is None else pad_id,
        )
    # The end token stays in the list: it was generated, so it counts as a generated token.
    return output[0, len(ids) :].tolist()


__all__ = ["chat_prompt_ids", "greedy_generate", "model_device"]
