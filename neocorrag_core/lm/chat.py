"""The one chat interface the core asks a hosted or framework LLM through: :class:`ChatModel`.

The core knows no framework. Whatever LLM a user brings (a LangChain chat model, a
LlamaIndex LLM, an HTTP client of their own) reaches the belief components and the LLM
triple extractor as a :class:`ChatModel`: one method,
``ask(messages, schema) -> ChatReply``, where ``messages`` are ``{"role", "content"}``
dicts (roles ``system``, ``user``, ``assistant``) and ``schema`` is a pydantic model class
the answer should fit, or ``None`` for a plain text answer. The translation of a framework
object into a ``ChatModel`` lives in the adapters
(``neocorrag_integrations.langchain.as_chat_model``,
``neocorrag_integrations.llama_index.as_chat_model``), which use each framework's own
structured-output API. The method is called ``ask``, a name no framework uses, so a
framework object can never pass for a ``ChatModel`` by accident (and the architecture test
can forbid the frameworks' method names in the core outright).

Where the core takes either a local LM spec or a chat model (``lm=`` of the belief
components and of :class:`~neocorrag_core.triples.LLMTripleExtractor`),
:func:`chat_model_or_none` tells them apart by type alone and refuses anything else with a
:class:`~neocorrag_core.errors.ConfigError` that says what the core takes and names the
adapter functions that translate a framework LLM (the core does not tell which framework an
object comes from: the adapters do, and translate before calling the core).
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from neocorrag_core.errors import ConfigError
from neocorrag_core.models.language_model import LanguageModel

CHARS_PER_TOKEN = 4
"""Token estimate for chat models that report no usage (about four characters per token
for English text with common BPE vocabularies)."""

Messages = Sequence[Mapping[str, str]]
"""A chat: ``{"role": "system" | "user" | "assistant", "content": text}`` turns, in order."""


@dataclass(frozen=True)
class ChatReply:
    """One answer of a :class:`ChatModel`.

    Token counts are what the model reported where it says, else estimated
    (:func:`estimate_tokens`): the controller's cost budget counts them either way.
    """

    value: Any
    """The structured object (a pydantic model or a dict) when ``structured``, else text."""
    structured: bool
    """Whether ``value`` is the object of the schema asked for (not text to parse)."""
    prompt_tokens: int
    generated_tokens: int


@runtime_checkable
class ChatModel(Protocol):
    """A chat LLM the core can ask: the only way a hosted or framework LLM reaches it.

    ``ask(messages, schema)`` returns the model's answer to ``messages``: with a pydantic
    model class as ``schema``, the object of that schema where the model can give one
    (``ChatReply.structured``), else its text, which the caller parses and validates (it
    never trusts a reply: every reader validates and never evaluates it); with ``None``,
    its text. A provider error may raise: the belief controller names the component and
    chains the error (:class:`~neocorrag_core.errors.ModelCallError`).

    An implementation may carry a ``name`` string: the LLM triple extractor's store key
    uses it (``llm:<name>``), so triples of different models are never mixed.
    """

    def ask(self, messages: Messages, schema: type[Any] | None = None) -> ChatReply:
        """The answer to ``messages``, fitting ``schema`` where the model can."""
        ...


def estimate_tokens(text: str) -> int:
    """Tokens a chat model is assumed to spend on ``text`` when it reports none."""
    return math.ceil(len(text) / CHARS_PER_TOKEN) if text else 0


def prompt_tokens_of(messages: Messages) -> int:
    """The estimated prompt tokens of a chat (the contents of its turns)."""
    return estimate_tokens("".join(m["content"] for m in messages))


def text_reply(
    text: str,
    messages: Messages,
    *,
    prompt_tokens: int | None = None,
    generated_tokens: int | None = None,
) -> ChatReply:
    """A text :class:`ChatReply`; counts the model did not report (``None``) are estimated."""
    return ChatReply(
        text,
        False,
        prompt_tokens_of(messages) if prompt_tokens is None else prompt_tokens,
        estimate_tokens(text) if generated_tokens is None else generated_tokens,
    )


def structured_reply(value: Any, messages: Messages) -> ChatReply:
    """A structured :class:`ChatReply` for ``value`` (a pydantic model or a dict), its token
    counts estimated from the chat and from the object's JSON (structured-output APIs
    seldom report usage)."""
    return ChatReply(value, True, prompt_tokens_of(messages), _object_tokens(value))


def as_plain_data(value: Any) -> Any:
    """A structured answer as plain data: a pydantic model dumped, anything else as is."""
    dump = getattr(value, "model_dump", None)
    return dump() if callable(dump) else value


def _object_tokens(value: Any) -> int:
    try:
        return estimate_tokens(json.dumps(as_plain_data(value), default=str))
    except (TypeError, ValueError):
        return estimate_tokens(str(value))


def is_local_lm_spec(lm: Any) -> bool:
    """Whether ``lm`` is something :func:`~neocorrag_core.models.resolve_lm` takes: ``None``
    (the bundled default), a preset name, a Hugging Face id or folder, a ``(model,
    tokenizer)`` pair or a :class:`~neocorrag_core.models.LanguageModel`. Decided by type
    alone."""
    return lm is None or isinstance(lm, (str, os.PathLike, tuple, list, LanguageModel))


def chat_model_or_none(owner: str, lm: Any) -> ChatModel | None:
    """``lm`` when it is a :class:`ChatModel`, ``None`` when it is a local LM spec
    (:func:`is_local_lm_spec`), and a :class:`~neocorrag_core.errors.ConfigError` for
    anything else, naming the adapter functions that wrap a framework LLM.

    Raised at construction, so a LangChain chat model or a LlamaIndex LLM passed to a core
    class fails at once with the fix, not later with an ``AttributeError``."""
    if isinstance(lm, ChatModel):
        return lm
    if is_local_lm_spec(lm):
        return None
    raise ConfigError(f"{owner}: {lm_help(lm)}")


def lm_help(lm: Any) -> str:
    """What to pass instead of ``lm``, an object that is neither a local LM spec nor a
    :class:`ChatModel`: what the core takes, and the adapters' translators."""
    what = f"{type(lm).__module__}.{type(lm).__qualname__}"
    return (
        f"lm is a {what}, neither a local LM spec (None, a preset name, a Hugging Face id or "
        "folder, a (model, tokenizer) pair, a LanguageModel) nor a ChatModel. The core "
        "takes no framework objects: wrap a LangChain chat model with "
        "neocorrag_integrations.langchain.as_chat_model(llm), a LlamaIndex LLM with "
        "neocorrag_integrations.llama_index.as_chat_model(llm), or implement "
        "neocorrag_core.lm.chat.ChatModel (ask(messages, schema))."
    )


__all__ = [
    "CHARS_PER_TOKEN",
    "ChatModel",
    "ChatReply",
    "Messages",
    "as_plain_data",
    "chat_model_or_none",
    "estimate_tokens",
    "is_local_lm_spec",
    "lm_help",
    "prompt_tokens_of",
    "structured_reply",
    "text_reply",
]
