"""Structured generation, in one place: every stage that asks an LM for a JSON object.

Two kinds of LM are served:

* a local Hugging Face causal LM (:class:`LocalJSONGenerator`): greedy, batched with left
  padding, every generated token constrained by an Outlines JSON-schema logits processor
  (one per schema, built on first use), so a finished output always parses and fits the
  schema; the prompt's untrusted text never becomes a chat control token
  (:func:`~neocorrag_core.lm.generation.chat_ids`);
* the user's framework LLM (:class:`FrameworkLLM`): a LangChain chat model or a LlamaIndex
  LLM, detected by duck typing (no framework is imported here); its own structured output
  is used where it offers one, otherwise its text answer is returned for the caller to
  parse (:func:`parse_json_object`) and validate.

Model output is only ever read with ``json``; nothing it says is executed. The triple
extractor (:mod:`neocorrag_core.triples.llm_extractor`) and the evidence verifier
(:mod:`neocorrag_core.belief.verifier`) both generate through this module.
"""

from __future__ import annotations

import copy
import json
import logging
import math
import re
from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import Any, Literal

from neocorrag_core.errors import MissingDependencyError
from neocorrag_core.lm.generation import chat_ids, model_device, neutral_settings

logger = logging.getLogger(__name__)

FrameworkKind = Literal["langchain", "llamaindex"]

WHITESPACE_PATTERN = r"[ ]?"
"""A single optional space between JSON tokens: Outlines' default pattern allows unbounded
whitespace, which a weak model can loop in until ``max_new_tokens``."""

CHARS_PER_TOKEN = 4
"""Token estimate for framework LLMs that report no usage (about four characters per
token for English text with common BPE vocabularies)."""


# ------------------------------------------------------------------------------------------
# Framework detection and message conversion
# ------------------------------------------------------------------------------------------


def framework_kind(lm: Any) -> FrameworkKind | None:
    """``"langchain"`` for an object with ``invoke`` (a chat model), ``"llamaindex"`` for one
    with ``complete`` (an LLM), ``None`` for a local LM spec (``None``, a name, a path, a
    ``(model, tokenizer)`` pair, a :class:`~neocorrag_core.models.LanguageModel`)."""
    if lm is None or isinstance(lm, (str, tuple, list)) or hasattr(lm, "tokenizer"):
        return None
    if callable(getattr(lm, "invoke", None)):
        return "langchain"
    if callable(getattr(lm, "complete", None)):
        return "llamaindex"
    return None


def langchain_messages(messages: Sequence[Mapping[str, str]]) -> list[tuple[str, str]]:
    """Chat messages (``{"role", "content"}``) as LangChain ``(role, content)`` tuples."""
    roles = {"system": "system", "user": "human", "assistant": "ai"}
    return [(roles[m["role"]], m["content"]) for m in messages]


def messages_as_text(messages: Sequence[Mapping[str, str]]) -> str:
    """One prompt string for completion-style LLMs (LlamaIndex ``complete``): the turns,
    labelled by role, ending where the assistant's answer starts."""
    return "\n\n".join(f"{m['role'].upper()}:\n{m['content']}" for m in messages) + (
        "\n\nASSISTANT:\n"
    )


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


def estimate_tokens(text: str) -> int:
    """Tokens a framework LLM is assumed to spend on ``text`` when it reports none."""
    return math.ceil(len(text) / CHARS_PER_TOKEN) if text else 0


def as_plain_data(value: Any) -> Any:
    """A structured answer as plain data: a pydantic model dumped, anything else as is."""
    dump = getattr(value, "model_dump", None)
    return dump() if callable(dump) else value


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

    def complete(
        self,
        conversations: Sequence[Sequence[Mapping[str, str]]],
        schema: Mapping[str, Any],
        budget: int,
    ) -> list[Completion]:
        """One completion per chat (rendered with :func:`chat_ids`), ``budget`` new tokens
        at most."""
        tok = self.lm.tokenizer
        return self.complete_ids([chat_ids(tok, c) for c in conversations], schema, budget)

    def complete_ids(
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


# ------------------------------------------------------------------------------------------
# Framework LLMs (LangChain, LlamaIndex), by duck typing
# ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class FrameworkReply:
    """One answer of a framework LLM."""

    value: Any
    """The structured object (a pydantic model or dict) when ``structured``, else text."""
    structured: bool
    prompt_tokens: int
    """Reported by the LLM where it says; else estimated (:func:`estimate_tokens`)."""
    generated_tokens: int


class FrameworkLLM:
    """Asks a LangChain chat model or a LlamaIndex LLM, with structured output where the LLM
    offers it and its text answer otherwise.

    Args:
        llm: the framework LLM.
        kind: ``"langchain"`` or ``"llamaindex"`` (default: :func:`framework_kind`).
    """

    def __init__(self, llm: Any, kind: FrameworkKind | None = None) -> None:
        found = kind or framework_kind(llm)
        if found is None:
            raise TypeError(
                f"{type(llm).__name__} is neither a LangChain chat model (invoke) nor a "
                "LlamaIndex LLM (complete)"
            )
        self.llm = llm
        self.kind: FrameworkKind = found
        self._structured: dict[Any, Any] = {}

    def structured_runnable(self, model: Any) -> Any:
        """The structured-output runnable for the pydantic ``model``, or ``None`` when the
        LLM has none (remembered, so a missing one is asked about once)."""
        if model not in self._structured:
            runnable = None
            try:
                if self.kind == "langchain" and hasattr(self.llm, "with_structured_output"):
                    runnable = self.llm.with_structured_output(model)
                elif self.kind == "llamaindex" and getattr(
                    getattr(self.llm, "metadata", None), "is_function_calling_model", False
                ):
                    runnable = self.llm.as_structured_llm(model)
            except (NotImplementedError, AttributeError, TypeError, ValueError) as exc:
                logger.info("%s offers no structured output (%s); parsing text", self.kind, exc)
            self._structured[model] = runnable
        return self._structured[model]

    def ask(self, messages: Sequence[Mapping[str, str]], model: Any = None) -> FrameworkReply:
        """The structured answer for ``model`` when the LLM offers structured output (and it
        succeeds with an object), else the text answer."""
        runnable = self.structured_runnable(model) if model is not None else None
        if runnable is not None:
            try:
                if self.kind == "langchain":
                    value = runnable.invoke(langchain_messages(messages))
                else:
                    value = runnable.complete(messages_as_text(messages)).raw
            except Exception as exc:  # a provider error must not lose the call
                logger.warning("structured output failed (%s); falling back to parsing text", exc)
            else:
                if value is not None:
                    prompt = estimate_tokens("".join(m["content"] for m in messages))
                    return FrameworkReply(value, True, prompt, _estimate_object_tokens(value))
                # LangChain returns None when the model answered without the tool call (and
                # a LlamaIndex response may carry no object): no answer yet, as on an error.
                logger.warning("structured output returned nothing; falling back to parsing text")
        return self.text(messages)

    def text(self, messages: Sequence[Mapping[str, str]]) -> FrameworkReply:
        """The LLM's plain text answer to ``messages``, with its token usage."""
        if self.kind == "langchain":
            answer = self.llm.invoke(langchain_messages(messages))
            content = getattr(answer, "content", answer)
        else:
            answer = self.llm.complete(messages_as_text(messages))
            content = getattr(answer, "text", answer)
        text = content if isinstance(content, str) else str(content)
        prompt, generated = _reported_usage(answer)
        if prompt is None:
            prompt = estimate_tokens("".join(m["content"] for m in messages))
        if generated is None:
            generated = estimate_tokens(text)
        return FrameworkReply(text, False, prompt, generated)


def _reported_usage(answer: Any) -> tuple[int | None, int | None]:
    """Token counts the framework attached to an answer: LangChain's ``usage_metadata``,
    or the ``prompt_tokens`` / ``completion_tokens`` LlamaIndex providers put in
    ``additional_kwargs``."""
    usage = getattr(answer, "usage_metadata", None)
    if isinstance(usage, Mapping):
        return _count(usage.get("input_tokens")), _count(usage.get("output_tokens"))
    extra = getattr(answer, "additional_kwargs", None)
    if isinstance(extra, Mapping):
        return _count(extra.get("prompt_tokens")), _count(extra.get("completion_tokens"))
    return None, None


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _estimate_object_tokens(value: Any) -> int:
    try:
        return estimate_tokens(json.dumps(as_plain_data(value), default=str))
    except (TypeError, ValueError):
        return estimate_tokens(str(value))


__all__ = [
    "CHARS_PER_TOKEN",
    "WHITESPACE_PATTERN",
    "Completion",
    "FrameworkKind",
    "FrameworkLLM",
    "FrameworkReply",
    "LocalJSONGenerator",
    "as_plain_data",
    "estimate_tokens",
    "framework_kind",
    "langchain_messages",
    "messages_as_text",
    "parse_json_object",
    "schema_key",
]
