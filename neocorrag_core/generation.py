"""LM calls shared by every stage: chat prompts, the input device, neutral generation settings.

Every ``generate`` call in the package takes its settings from :func:`neutral_settings`, so
a model's own ``generation_config`` (e.g. Qwen's ``repetition_penalty=1.1``, sampling
temperatures) never changes a score or makes a call nondeterministic.
"""

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


# Processors that would move scores away from the model's plain log-probs, all switched off.
_NEUTRAL_SAMPLING: dict[str, Any] = {
    "do_sample": False,
    "repetition_penalty": 1.0,
    "no_repeat_ngram_size": 0,
    "min_length": 0,
    "min_new_tokens": None,
    "bad_words_ids": None,
    "suppress_tokens": None,
    "begin_suppress_tokens": None,
    "forced_bos_token_id": None,
    "forced_eos_token_id": None,
    "sequence_bias": None,
    "renormalize_logits": False,
    "temperature": None,
    "top_k": None,
    "top_p": None,
}
# Beam search only: every beam runs to its end and is scored by its plain mean log-prob.
_NEUTRAL_BEAMS: dict[str, Any] = {"early_stopping": "never", "length_penalty": 1.0}


def neutral_settings(*, beams: bool = False) -> dict[str, Any]:
    """``generate`` keyword arguments that neutralize the model's own generation config.

    ``beams=True`` adds the beam-search settings (no early stop, no length penalty).
    A fresh dict each call, so callers may add their own keys.
    """
    settings = dict(_NEUTRAL_SAMPLING)
    if beams:
        settings.update(_NEUTRAL_BEAMS)
    return settings


def input_ids_tensor(lm: LanguageModel, rows: Sequence[Sequence[int]]) -> Any:
    """Token id rows as a ``long`` tensor on the device the model's inputs must live on."""
    import torch

    return torch.tensor([list(r) for r in rows], dtype=torch.long, device=model_device(lm.model))


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
        inputs = input_ids_tensor(lm, [ids])
        output = lm.model.generate(
            inputs,
            attention_mask=torch.ones_like(inputs),
            max_new_tokens=max_new_tokens,
            num_beams=1,
            eos_token_id=sorted(eos),
            pad_token_id=end_id if pad_id is None else pad_id,
            **neutral_settings(),
        )
    # The end token stays in the list: it was generated, so it counts as a generated token.
    new_ids: list[int] = output[0, len(ids) :].tolist()
    return new_ids


__all__ = [
    "chat_prompt_ids",
    "greedy_generate",
    "input_ids_tensor",
    "model_device",
    "neutral_settings",
]
