"""The :class:`LanguageModel` container (causal LM + tokenizer + lock) and its end-of-turn token."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

import numpy as np

# Tokens that end an assistant turn in common chat formats; ``<|im_end|>`` (ChatML, Qwen) first.
_END_OF_TURN_TOKENS = ("<|im_end|>", "<|eot_id|>", "<end_of_turn>", "<|end|>")


@dataclass
class LanguageModel:
    """A causal LM and its tokenizer, with one lock so concurrent callers never share ``generate``.

    Build one with :func:`resolve_lm`.
    """

    model: Any
    tokenizer: Any
    name: str = "custom"
    dtype_reason: str = field(default="", compare=False)
    """Why the model runs in its float format (the CPU's capability, a probe, or dtype=)."""
    lock: threading.RLock = field(default_factory=threading.RLock, repr=False, compare=False)

    @property
    def end_of_turn_id(self) -> int:
        """The token id that ends an assistant turn; see :func:`end_of_turn_token_id`."""
        return end_of_turn_token_id(self.tokenizer)


def end_of_turn_token_id(tokenizer: Any) -> int:
    """Id of the token that ends an assistant turn: the decoder's "candidate finished" token.

    ``<|im_end|>`` when the vocabulary has it (Qwen / ChatML models), else another known
    end-of-turn token used by the tokenizer's chat template, else ``tokenizer.eos_token_id``.
    """
    template = getattr(tokenizer, "chat_template", None)
    template = template if isinstance(template, str) else ""
    for i, token in enumerate(_END_OF_TURN_TOKENS):
        if i > 0 and token not in template:
            continue
        token_id = _token_id_if_in_vocab(tokenizer, token)
        if token_id is not None:
            return token_id
    eos = getattr(tokenizer, "eos_token_id", None)
    if isinstance(eos, (list, tuple)):
        eos = eos[0] if eos else None
    if isinstance(eos, (int, np.integer)) and not isinstance(eos, bool):
        return int(eos)
    raise ValueError(
        f"The tokenizer {type(tokenizer).__name__} has no end-of-turn token: neither '<|im_end|>' "
        "is in its vocabulary nor is an eos token set. Set one, e.g. "
        "tokenizer.eos_token = '</s>', before passing it to neocorrag."
    )


def _token_id_if_in_vocab(tokenizer: Any, token: str) -> int | None:
    """The id of ``token`` if it is a real (non-unk) entry of the vocabulary, else None."""
    try:
        token_id = tokenizer.convert_tokens_to_ids(token)
    except (KeyError, ValueError, TypeError, AttributeError):
        return None
    if not isinstance(token_id, (int, np.integer)) or isinstance(token_id, bool) or token_id < 0:
        return None
    try:
        back = tokenizer.convert_ids_to_tokens(int(token_id))
    except (KeyError, ValueError, TypeError, AttributeError, IndexError):
        return None
    return int(token_id) if back == token else None


# --------------------------------------------------------------------------------------------
# Embedder
# --------------------------------------------------------------------------------------------
