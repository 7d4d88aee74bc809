"""Structured generation, in one place: every stage that asks an LM for a JSON object.

Two kinds of LM are served:

* a local Hugging Face causal LM (:class:`LocalJSONGenerator`): greedy, batched with left
  padding, every generated token constrained by an Outlines JSON-schema logits processor
  (one per schema, built on first use), so a finished output always parses and fits the
  schema; the prompt's untrusted text never becomes a chat control token
  (:func:`~neocorrag_core.lm.generation.chat_ids`);
* a chat model (:class:`~neocorrag_core.lm.chat.ChatModel`, ``ask(messages, schema)``):
  the callers ask it directly; it answers with the schema's object where it can, else
  with text, which they parse (:func:`parse_json_object`) and validate. A framework LLM
  becomes one in its adapter (``neocorrag_integrations.*.as_chat_model``); nothing here
  knows a framework.

Model output is only ever read with ``json``; nothing it says is executed. The triple
extractor (:mod:`neocorrag_core.triples.llm_extractor`) and the evidence verifier
(:mod:`neocorrag_core.belief.verifier`) both generate through this module.
"""

from __future__ import annotations

import copy
import json
import logging
import re
from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import Any

from neocorrag_core.errors import MissingDependencyError
from neocorrag_core.lm.chat import CHARS_PER_TOKEN, as_plain_data, estimate_tokens
from neocorrag_core.lm.generation import chat_ids, model_device, neutral_settings

logger = logging.getLogger(__name__)

WHITESPACE_PATTERN = r"[ ]?"
"""A single optional space between JSON tokens: Outlines' default pattern allows unbounded
whitespace, which a weak model can loop in until ``max_new_tokens``."""


# ------------------------------------------------------------------------------------------
# Parsing (never eval)
# ------------------------------------------------------------------------------------------

_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.DOTALL)


def parse_json_object(text: str) -> dict[str, Any] | None:
    """The first JSON object in a text answer (code fences and prose around it allowed),
    or ``None`` when there is none or it does not parse (nested too deep included: model
    output never raises here). Read with ``json`` only."""
    if not isinstance(text, str):
        return None
    fenced = _FENCE.search(text)
    body = fenced.group(1) if fenced else text
    start = body.find("{")
    if start < 0:
        return None
    try:
        value, _ = json.JSONDecoder().raw_decode(body, start)
    except (ValueError, RecursionError):  # JSONDecodeError is a ValueError
        return None
    return value if isinstance(value, dict) else None


# ------------------------------------------------------------------------------------------
# Local Hugging Face LM, constrained by Outlines
# ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Completion:
    """One generated output of a local LM."""

    text: str
    """The generated text, special tokens removed."""
    finished: bool
    """Whether it ended on eos (``False``: cut by the token budget)."""
    prompt_tokens: int
    generated_tokens: int
    """Generated tokens up to and including eos (padding after it not counted)."""


def schema_key(schema: Mapping[str, Any]) -> str:
    """The JSON text of a schema, as Outlines receives it and as processors are cached.

    Keys keep their order: Outlines generates an object's properties in the order the
    schema lists them, and callers rely on it (the verifier puts the field that may be
    cut by the token budget last)."""
    return json.dumps(schema, separators=(",", ":"))


class LocalJSONGenerator:
    """Greedy, batched generation of JSON objects with a local LM.

    Args:
        lm: a :class:`~neocorrag_core.models.LanguageModel`.
        constrained: constrain every token with an Outlines JSON-schema processor (turn
            off only to measure how often unconstrained output fails).
        neutral: neutralize the model's own generation config (repetition penalty,
            sampling settings; :func:`~neocorrag_core.lm.generation.neutral_settings`).

    One processor per schema, built on first use under the LM's lock (a few seconds for a
    150k-token vocabulary); the Outlines wrapper of the model is built once and shared.
    """

    def __init__(self, lm: Any, *, constrained: bool = True, neutral: bool = True) -> None:
        self.lm = lm
        self.constrained = constrained
        self.neutral = neutral
        self._wrapped: Any = None
        self._processors: dict[str, Any] = {}

    def processor(self, schema: Mapping[str, Any]) -> Any:
        """The Outlines logits processor of ``schema`` (built once, cached by schema)."""
        key = schema_key(schema)
        if key not in self._processors:
            try:
                import outlines
                from outlines.backends import get_json_schema_logits_processor
            except ImportError:
                raise MissingDependencyError(
                    "schema-constrained generation needs Outlines: pip install "
                    "'neocorrag[llm-extract]' (or pass constrained=False)"
                ) from None
            if self._wrapped is None:
                # Outlines sets padding side and pad token on the tokenizer it wraps; give it
                # a copy so the LM other stages share keeps its own settings.
                self._wrapped = outlines.from_transformers(
                    self.lm.model, copy.deepcopy(self.lm.tokenizer)
                )
            self._processors[key] = get_json_schema_logits_processor(
                "outlines_core", self._wrapped, key, whitespace_pattern=WHITESPACE_PATTERN
            )
        return self._processors[key]

    def generate(
        self,
        conversations: Sequence[Sequence[Mapping[str, str]]],
        schema: Mapping[str, Any],
        budget: int,
    ) -> list[Completion]:
        """One completion per chat (rendered with :func:`chat_ids`), ``budget`` new tokens
        at most."""
        tok = self.lm.tokenizer
        return self.generate_ids([chat_ids(tok, c) for c in conversations], schema, budget)

    def generate_ids(
        self, rows: Sequence[Sequence[int]], schema: Mapping[str, Any], budget: int
    ) -> list[Completion]:
        """One completion per prompt of token ids (already safe: built by the caller with
        :func:`chat_ids`), generated as one left-padded batch."""
        import torch
        from transformers import LogitsProcessorList

        if not rows:
            return []
        tok = self.lm.tokenizer
        enc = tok.pad(
            {"input_ids": [list(r) for r in rows]},
            padding=True,
            padding_side="left",
            return_tensors="pt",
        )
        # Outlines only lets the schema end on the tokenizer's eos; stop on that token.
        eos = tok.eos_token_id
        pad = tok.pad_token_id if tok.pad_token_id is not None else eos
        settings: dict[str, Any] = neutral_settings() if self.neutral else {"do_sample": False}
        with self.lm.lock:
            if self.constrained:
                processor = self.processor(schema)
                processor.reset()  # per-row state from the previous batch
                settings["logits_processor"] = LogitsProcessorList([processor])
            device = model_device(self.lm.model)
            with torch.inference_mode(), _eager():
                out = self.lm.model.generate(
                    input_ids=enc["input_ids"].to(device),
                    attention_mask=enc["attention_mask"].to(device),
                    max_new_tokens=budget,
                    num_beams=1,
                    eos_token_id=eos,
                    pad_token_id=pad,
                    **settings,
                )
        new = out[:, enc["input_ids"].shape[1] :].tolist()
        texts = tok.batch_decode(new, skip_special_tokens=True)
        completions = []
        for prompt, row, text in zip(rows, new, texts, strict=True):
            finished = eos in row
            used = row.index(eos) + 1 if finished else len(row)
            completions.append(Completion(text, finished, len(prompt), used))
        return completions


def _eager() -> AbstractContextManager[Any]:
    """Run ``torch.compile``-decorated code eagerly while generating.

    outlines-core masks the logits with a ``torch.compile``d kernel: its first call in a
    process compiles for 15-40 s on a CPU and needs a C++ compiler on the machine. Eager,
    the mask costs microseconds more per token, next to milliseconds for the LM's step.
    """
    import torch

    set_stance = getattr(getattr(torch, "compiler", None), "set_stance", None)
    return set_stance("force_eager") if callable(set_stance) else nullcontext()


__all__ = [
    "CHARS_PER_TOKEN",
    "WHITESPACE_PATTERN",
    "Completion",
    "LocalJSONGenerator",
    "as_plain_data",
    "estimate_tokens",
    "parse_json_object",
    "schema_key",
]
