"""The answering model: one prompt template for every method, greedy, answer-only output.

The reader sees the method's passages and, for neocorrag methods whose chain format
writes one, the evidence chain block (none with the default ``chain_format="none"``). Its
output is cut to a short answer (first line, no "Answer:" prefix, no trailing period) so
exact match means something.
"""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from neocorrag_core.lm.generation import chat_prompt_ids, greedy_generate
from neocorrag_core.models import LanguageModel
from neocorrag_core.rendering import flatten, render_passage
from neocorrag_core.types import Passage

READER_PRESETS = ("default", "qwen-1.5b", "none")
NO_READER = "none"
"""``--reader none``: measure retrieval quality only (no answer, no EM/F1)."""

READER_TEMPLATE = (
    "Answer the question using the context below. Reply with the answer only: a short "
    "phrase such as a name, a place, a date, a number, or yes/no. No explanation.\n\n"
    "Context:\n{context}\n\n"
    "Question: {question}"
)
EMPTY_CONTEXT = "(no context)"

_PREFIX = re.compile(r"^\s*(?:final\s+)?answer\s*[:\-]\s*", re.IGNORECASE)


@dataclass(frozen=True)
class ReaderOutput:
    """One answer with what it cost."""

    answer: str
    raw: str
    prompt_tokens: int
    generated_tokens: int
    seconds: float


def reader_context(
    passages: Sequence[Passage], chain_text: str = "", max_passage_chars: int | None = None
) -> str:
    """The context block: the chain block (if any), then the passages, blank-line separated.
    With ``max_passage_chars``, each passage is flattened and then cut
    (:func:`~neocorrag_core.rendering.flatten`), so layout whitespace never uses up the cut."""
    blocks = [chain_text] if chain_text else []
    for passage in passages:
        text = render_passage(passage)
        blocks.append(flatten(text, max_passage_chars)[0] if max_passage_chars else text)
    return "\n\n".join(blocks) or EMPTY_CONTEXT


def clean_answer(raw: str) -> str:
    """First non-empty line, without an "Answer:" prefix, quotes or a trailing period."""
    line = next((ln.strip() for ln in raw.splitlines() if ln.strip()), "")
    line = _PREFIX.sub("", line).strip()
    line = line.strip("\"'*` ")
    return line[:-1].rstrip() if line.endswith(".") else line


class NoReader:
    """Stands in for the reader when only the contexts are measured (``--reader none``):
    every answer is empty and costs nothing; reports show EM/F1 as not measured."""

    name = NO_READER

    def answer(
        self, question: str, passages: Sequence[Passage], chain_text: str = ""
    ) -> ReaderOutput:
        """An empty answer, at no cost."""
        return ReaderOutput(answer="", raw="", prompt_tokens=0, generated_tokens=0, seconds=0.0)


class Reader:
    """Greedy short-answer generation with a local :class:`LanguageModel`."""

    def __init__(
        self,
        lm: LanguageModel,
        *,
        max_new_tokens: int = 20,
        max_passage_chars: int | None = None,
        template: str = READER_TEMPLATE,
    ) -> None:
        if max_new_tokens < 1:
            raise ValueError(f"max_new_tokens must be >= 1, got {max_new_tokens}")
        self.lm = lm
        self.max_new_tokens = max_new_tokens
        self.max_passage_chars = max_passage_chars
        self.template = template
        # Greedy decoding is deterministic: an identical prompt (e.g. a method that passed
        # the retrieved passages through unchanged) gets the stored answer and its cost.
        self._memo: dict[tuple[int, ...], ReaderOutput] = {}
        self._memo_question = ""

    @property
    def name(self) -> str:
        """The reader model's name, for reports."""
        return self.lm.name

    def prompt_ids(self, question: str, context: str) -> list[int]:
        """Token ids of the chat-formatted reader prompt."""
        text = self.template.format(context=context, question=question)
        return chat_prompt_ids(self.lm, text, plain_suffix="\nAnswer:")

    def answer(
        self, question: str, passages: Sequence[Passage], chain_text: str = ""
    ) -> ReaderOutput:
        """Answer ``question`` from ``passages`` (and chains); counts every token."""
        context = reader_context(passages, chain_text, self.max_passage_chars)
        started = time.perf_counter()
        with self.lm.lock:
            ids = self.prompt_ids(question, context)
            if question != self._memo_question:  # the runner goes question by question
                self._memo, self._memo_question = {}, question
            key = tuple(ids)
            if key in self._memo:
                return self._memo[key]
            new = greedy_generate(self.lm, ids, self.max_new_tokens)
            raw = self.lm.tokenizer.decode(new, skip_special_tokens=True)
        output = ReaderOutput(
            answer=clean_answer(raw),
            raw=raw,
            prompt_tokens=len(ids),
            generated_tokens=len(new),
            seconds=time.perf_counter() - started,
        )
        self._memo[key] = output
        return output


class ChatReader:
    """The same reader prompt, answered by the user's own chat model (a
    :class:`~neocorrag_core.lm.chat.ChatModel`: a LangChain or LlamaIndex LLM translated by
    the adapters' ``as_chat_model``), so a comparison runs with the LLM that will answer in
    production. Tokens are what the model reports, else estimated (four characters a token).
    """

    def __init__(
        self,
        chat: Any,
        *,
        max_passage_chars: int | None = None,
        template: str = READER_TEMPLATE,
    ) -> None:
        from neocorrag_core.lm.chat import ChatModel

        if not isinstance(chat, ChatModel):
            raise TypeError(
                "the reader must be a ChatModel (ask(messages, schema)); translate a LangChain "
                "or LlamaIndex LLM with the adapters' as_chat_model"
            )
        self.chat = chat
        self.max_passage_chars = max_passage_chars
        self.template = template
        self._memo: dict[str, ReaderOutput] = {}
        self._memo_question = ""

    @property
    def name(self) -> str:
        """The chat model's ``name`` when it has one, else its class name."""
        return str(getattr(self.chat, "name", "") or type(self.chat).__name__)

    def answer(
        self, question: str, passages: Sequence[Passage], chain_text: str = ""
    ) -> ReaderOutput:
        """Answer ``question`` from ``passages``; an identical prompt is asked once."""
        context = reader_context(passages, chain_text, self.max_passage_chars)
        prompt = self.template.format(context=context, question=question)
        if question != self._memo_question:
            self._memo, self._memo_question = {}, question
        if prompt in self._memo:
            return self._memo[prompt]
        started = time.perf_counter()
        reply = self.chat.ask([{"role": "user", "content": prompt}], None)
        raw = reply.value if isinstance(reply.value, str) else str(reply.value)
        output = ReaderOutput(
            answer=clean_answer(raw),
            raw=raw,
            prompt_tokens=int(reply.prompt_tokens),
            generated_tokens=int(reply.generated_tokens),
            seconds=time.perf_counter() - started,
        )
        self._memo[prompt] = output
        return output


__all__ = [
    "NO_READER",
    "READER_PRESETS",
    "READER_TEMPLATE",
    "ChatReader",
    "NoReader",
    "Reader",
    "ReaderOutput",
    "chat_prompt_ids",
    "clean_answer",
    "greedy_generate",
    "reader_context",
]
