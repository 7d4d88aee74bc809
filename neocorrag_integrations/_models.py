"""What the two framework model translations share.

The core takes no framework objects: a chat LLM reaches it as a
:class:`~neocorrag_core.lm.chat.ChatModel` (``ask(messages, schema)``) and an embeddings
object as an encode function (``texts -> vectors``). Each framework's translation lives in
its own module (:mod:`neocorrag_integrations._langchain_models`,
:mod:`neocorrag_integrations._llama_index_models`), which uses that framework's own API and
checks against its real classes; :mod:`neocorrag_integrations._translate` applies them to
what the adapters receive. Here is what both translations share:
:class:`FrameworkChatModel` (the framework's structured output for the schema where it
offers one, built once per schema; its text answer otherwise, or when the structured call
fails or returns nothing), the model's name in store keys, reported token counts, our own
embeddings objects as the core takes them (:func:`shared_embedder`), and what
``as_chat_model`` / ``as_embedder`` refuse (:func:`check_wrappable`, which tells the
frameworks apart with :func:`framework_of`: the core never does).

Imports neither framework.
"""

from __future__ import annotations

import logging
from abc import ABC, abstractmethod
from typing import Any

from neocorrag_core.errors import ConfigError
from neocorrag_core.lm.chat import ChatReply, Messages, is_local_lm_spec, structured_reply
from neocorrag_core.models import LazyEmbedder

logger = logging.getLogger(__name__)


class FrameworkChatModel(ABC):
    """A framework LLM as a :class:`~neocorrag_core.lm.chat.ChatModel`.

    :meth:`ask` with a schema uses the framework's structured output where the LLM offers
    it (asked once per schema, remembered) and its text answer otherwise; a structured call
    that raises (a provider error) or yields no object (LangChain returns ``None`` when the
    model answers without the tool call) falls back to the text answer, with a warning, so
    the call is not lost. A failing text call raises: the belief controller reports it as a
    :class:`~neocorrag_core.errors.ModelCallError` naming the component.

    Subclasses say how their framework builds and calls a structured runnable and asks for
    text (with the token usage it reports). Picklable when the LLM is (the structured
    runnables are rebuilt after unpickling).
    """

    framework: str = ""
    """``"LangChain"`` or ``"LlamaIndex"``: which framework's LLM this wraps."""

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
        return self._ask_text(messages)

    def structured_runnable(self, schema: type[Any]) -> Any:
        """The framework's structured-output runnable for the pydantic ``schema``, or
        ``None`` when the LLM has none (remembered, so a missing one is asked about once)."""
        if schema not in self._structured:
            runnable = None
            try:
                runnable = self._make_structured(schema)
            except (NotImplementedError, AttributeError, TypeError, ValueError) as exc:
                logger.info("%s LLM: no structured output (%s); parsing text", self.framework, exc)
            self._structured[schema] = runnable
        return self._structured[schema]

    @abstractmethod
    def _make_structured(self, schema: type[Any]) -> Any:
        """The framework's structured runnable for ``schema``, or ``None`` when the LLM
        offers none; may raise what an LLM without structured output raises."""

    @abstractmethod
    def _ask_structured(self, runnable: Any, messages: Messages) -> Any:
        """The object ``runnable`` answers ``messages`` with (``None``: no object)."""

    @abstractmethod
    def _ask_text(self, messages: Messages) -> ChatReply:
        """The LLM's text answer to ``messages``, with the token usage it reports."""


def model_name_of(llm: Any) -> str:
    """The name of a framework LLM in store keys: its own ``name``, else its class and model
    name (``ChatOpenAI:gpt-4o-mini``; LlamaIndex keeps it in ``metadata.model_name``), else
    its class."""
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
    """A token count a framework reported: a non-negative int, else ``None`` (estimate)."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def framework_of(obj: Any) -> str | None:
    """``"LangChain"`` or ``"LlamaIndex"`` when ``obj`` is an instance of a class defined in
    one of those frameworks' packages (``langchain*``, ``llama_index``; its own class or a
    base class), else ``None``.

    Read from the module names of the classes alone: nothing is imported and no method of
    ``obj`` is looked up. The adapters use it to refuse the other framework's object with
    that framework's adapter function; the core never tells frameworks apart."""
    for cls in type(obj).__mro__:
        top = (getattr(cls, "__module__", None) or "").partition(".")[0]
        if top.startswith("langchain"):
            return "LangChain"
        if top == "llama_index":
            return "LlamaIndex"
    return None


def is_our_embeddings(value: Any) -> bool:
    """Whether ``value`` is one of our own embeddings objects (``NeocorRAGEmbeddings``,
    ``NeocorRAGEmbedding``): the core gets the very
    :class:`~neocorrag_core.models.TextEmbedder` behind them (:func:`shared_embedder`), not
    an encode function over their framework methods."""
    return callable(getattr(value, "text_embedder", None)) and not isinstance(value, type)


def shared_embedder(value: Any) -> LazyEmbedder:
    """One of our own embeddings objects (:func:`is_our_embeddings`) as the core takes it: a
    :class:`~neocorrag_core.models.LazyEmbedder` over its ``text_embedder()``, so an engine
    shares the embedder behind it (one model, one cache: a query the retriever embedded is
    not embedded again; its identity keeps the persistent vector cache in use), resolved on
    the engine's first use. Pickles with the object."""
    return LazyEmbedder(value.text_embedder)


_MODULES = {"LangChain": "langchain", "LlamaIndex": "llama_index"}


def check_wrappable(
    value: Any,
    *,
    function: str,
    kind: str,
    method: str,
    suggestion: str,
    other: str,
    other_kind: str,
    local_spec: bool = False,
    classes: bool = False,
) -> None:
    """What one framework's ``as_chat_model`` / ``as_embedder`` (``function``) refuses, as a
    :class:`~neocorrag_core.errors.ConfigError` that says what to pass: a local LM spec
    (``local_spec``: it goes to the core as it is), an object of the ``other`` framework
    (``other_kind``, wrapped by that framework's ``function``), a class (``classes``) or an
    object without a callable ``method`` (not ``kind``; pass ``suggestion``)."""
    if local_spec and is_local_lm_spec(value):
        raise ConfigError(
            f"{function} wraps {kind}; {value!r} is a local LM spec: pass it to the core as it is"
        )
    if framework_of(value) == other:
        raise ConfigError(
            f"{type(value).__name__} is {other_kind}: wrap it with "
            f"neocorrag_integrations.{_MODULES[other]}.{function}"
        )
    if (classes and isinstance(value, type)) or not callable(getattr(value, method, None)):
        raise ConfigError(
            f"{function}: {type(value).__name__} is not {kind} (it has no {method}); "
            f"pass {suggestion}"
        )


__all__ = [
    "FrameworkChatModel",
    "check_wrappable",
    "framework_of",
    "is_our_embeddings",
    "model_name_of",
    "reported_count",
    "shared_embedder",
]
