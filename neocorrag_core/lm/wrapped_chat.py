"""Another library's LLM as a :class:`~neocorrag_core.lm.chat.ChatModel`: the part every
such translation shares.

:class:`WrappedChatModel` asks the LLM for a structured object where it offers structured
output (built once per schema, remembered) and for text otherwise, or when the structured
call fails or returns nothing, so the call is not lost. A subclass says how its library
builds and calls a structured runnable, asks for text, and reports token usage; the
framework adapters hold theirs (the core recognises no framework).
"""

from __future__ import annotations

import logging
from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import Any

from neocorrag_core.lm.chat import ChatReply, Messages, structured_reply, text_reply

logger = logging.getLogger(__name__)


class WrappedChatModel(ABC):
    """An LLM as a :class:`~neocorrag_core.lm.chat.ChatModel`.

    :meth:`ask` with a schema uses the LLM's structured output where it offers it and its
    text answer otherwise; a structured call that raises (a provider error) or yields no
    object falls back to the text answer, with a warning. A failing text call raises: the
    belief controller reports it as a :class:`~neocorrag_core.errors.ModelCallError` naming
    the component. Picklable when the LLM is (the structured runnables are rebuilt).

    Parameters
    ----------
    llm: the wrapped LLM.
    name: its name in store keys (default: :func:`model_name_of`).
    """

    kind: str = "wrapped"
    """Whose LLM this wraps, in log messages."""
    usage_keys: tuple[str, str] = ("input_tokens", "output_tokens")
    """The prompt and generated token counts' keys in the reply's usage mapping."""

    def __init__(self, llm: Any, name: str | None = None) -> None:
        self.llm = llm
        self._name = name
        self._structured: dict[Any, Any] = {}

    @property
    def name(self) -> str:
        """The LLM's name: the LLM triple extractor's store key uses it (``llm:<name>``)."""
        if self._name is None:
            self._name = model_name_of(self.llm)
        return self._name

    def __repr__(self) -> str:
        return f"{type(self).__name__}({type(self.llm).__name__})"

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_structured"] = {}  # runnables seldom pickle; rebuilt on first use
        return state

    def ask(self, messages: Messages, schema: type[Any] | None = None) -> ChatReply:
        """The structured answer for ``schema`` when the LLM offers structured output (and
        it succeeds with an object), else the text answer."""
        runnable = self.structured_runnable(schema) if schema is not None else None
        if runnable is not None:
            try:
                value = self._ask_structured(runnable, messages)
            except Exception as exc:  # a provider error must not lose the call
                logger.warning("structured output failed (%s); falling back to parsing text", exc)
            else:
                if value is not None:
                    return structured_reply(value, messages)
                logger.warning("structured output returned nothing; falling back to parsing text")
        text, usage = self._ask_text(messages)
        prompt, generated = (
            (reported_count(usage.get(key)) for key in self.usage_keys)
            if isinstance(usage, Mapping)
            else (None, None)
        )
        return text_reply(text, messages, prompt_tokens=prompt, generated_tokens=generated)

    def structured_runnable(self, schema: type[Any]) -> Any:
        """The structured-output runnable for the pydantic ``schema``, or ``None`` when the
        LLM has none (remembered, so a missing one is asked about once)."""
        if schema not in self._structured:
            runnable = None
            try:
                runnable = self._make_structured(schema)
            except (NotImplementedError, AttributeError, TypeError, ValueError) as exc:
                logger.info("%s LLM: no structured output (%s); parsing text", self.kind, exc)
            self._structured[schema] = runnable
        return self._structured[schema]

    @abstractmethod
    def _make_structured(self, schema: type[Any]) -> Any:
        """The structured runnable for ``schema``, or ``None`` when the LLM offers none; may
        raise what an LLM without structured output raises."""

    @abstractmethod
    def _ask_structured(self, runnable: Any, messages: Messages) -> Any:
        """The object ``runnable`` answers ``messages`` with (``None``: no object)."""

    @abstractmethod
    def _ask_text(self, messages: Messages) -> tuple[str, Any]:
        """The LLM's text reply to ``messages`` and the usage mapping it reports (keys
        :attr:`usage_keys`; anything else: the counts are estimated)."""


def text_of(content: Any) -> str:
    """A reply's content as text (``str()`` of anything that is not a string)."""
    return content if isinstance(content, str) else str(content)


def model_name_of(llm: Any) -> str:
    """The name of an LLM in store keys: its own ``name``, else its class and model name
    (``ChatOpenAI:gpt-4o-mini``; from ``model_name`` / ``model``, on the LLM or its
    ``metadata``), else its class."""
    name = getattr(llm, "name", None)
    if isinstance(name, str) and name:
        return name
    for owner in (llm, getattr(llm, "metadata", None)):
        for attr in ("model_name", "model"):
            value = getattr(owner, attr, None)
            if isinstance(value, str) and value:
                return f"{type(llm).__name__}:{value}"
    return type(llm).__name__


def reported_count(value: Any) -> int | None:
    """A token count a library reported: a non-negative int, else ``None`` (estimated)."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


__all__ = ["WrappedChatModel", "model_name_of", "reported_count", "text_of"]
