"""LangChain models as the core takes them: a chat model as a ``ChatModel``, embeddings as
an encode function. The one place neocorrag calls a LangChain model.

* :func:`as_chat_model`: a chat model (or any runnable from messages to a message) as a
  :class:`~neocorrag_core.lm.chat.ChatModel`: ``with_structured_output(schema)`` where the
  model offers it, ``invoke`` for text, token usage from the reply's ``usage_metadata``;
* :func:`as_embedder`: ``Embeddings`` as an encode function over ``embed_documents``.

The adapters apply them to the ``llm=`` and ``embedder=`` they receive; core users call
them (re-exported by :mod:`neocorrag_integrations.langchain`) before handing a LangChain
object to a core class.
"""

from __future__ import annotations

from typing import Any

from langchain_core.embeddings import Embeddings
from langchain_core.runnables import Runnable, RunnableConfig
from langchain_core.runnables.config import merge_configs

from neocorrag_core.lm.chat import ChatModel, Messages
from neocorrag_core.lm.wrapped_chat import WrappedChatModel, text_of

from ._models import check_wrappable, is_our_embeddings, shared_embedder

_ROLES = {"system": "system", "user": "human", "assistant": "ai"}


def langchain_messages(messages: Messages) -> list[tuple[str, str]]:
    """Chat messages (``{"role", "content"}``) as LangChain ``(role, content)`` tuples."""
    return [(_ROLES[m["role"]], m["content"]) for m in messages]


class LangChainChatModel(WrappedChatModel):
    """A LangChain chat model as a :class:`~neocorrag_core.lm.chat.ChatModel`.

    Args:
        llm: the chat model (or any runnable from ``(role, content)`` messages to a message
            or a string).
        config: a run's config (callbacks, tags) put on every call, text and structured
            (:meth:`with_config`).
        name: the name in store keys (default: the model's class and model name).
    """

    kind = "LangChain"

    def __init__(
        self, llm: Any, config: RunnableConfig | None = None, *, name: str | None = None
    ) -> None:
        super().__init__(llm, name)
        self.config = config

    def with_config(self, config: RunnableConfig) -> LangChainChatModel:
        """The same model with one run's config on every call.

        ``llm.with_config(...)`` is not enough: a ``RunnableBinding`` forwards
        ``with_structured_output`` to the bound model and the structured calls would lose
        the callbacks; here the structured runnable gets them as well.
        """
        merged = config if self.config is None else merge_configs(self.config, config)
        return LangChainChatModel(self.llm, merged, name=self._name)

    def _make_structured(self, schema: type[Any]) -> Any:
        make = getattr(self.llm, "with_structured_output", None)
        if make is None:
            return None
        runnable = make(schema)
        return runnable if self.config is None else runnable.with_config(self.config)

    def _ask_structured(self, runnable: Any, messages: Messages) -> Any:
        return runnable.invoke(langchain_messages(messages))

    def _ask_text(self, messages: Messages) -> tuple[str, Any]:
        chat = langchain_messages(messages)
        config = {} if self.config is None else {"config": self.config}
        answer = self.llm.invoke(chat, **config)
        return text_of(getattr(answer, "content", answer)), getattr(answer, "usage_metadata", None)


class EmbedDocuments:
    """LangChain ``Embeddings`` as the core's encode function (``texts -> vectors``), one
    ``embed_documents`` call per batch. Picklable when the embeddings object is (adapters
    and engines configured with it pickle)."""

    def __init__(self, embeddings: Any) -> None:
        self.embeddings = embeddings
        self.__name__ = type(embeddings).__name__  # the TextEmbedder's name

    def __call__(self, texts: list[str]) -> Any:
        return self.embeddings.embed_documents(list(texts))

    def __repr__(self) -> str:
        return f"EmbedDocuments({self.__name__})"


def as_chat_model(llm: Any) -> ChatModel:
    """A LangChain chat model as a :class:`~neocorrag_core.lm.chat.ChatModel`, for the core's
    ``lm=`` (``BeliefController.from_models``, ``LMVerifier``, ``LLMTripleExtractor``...).

    Uses the model's ``with_structured_output(schema)`` where it offers it, else its text
    answer (``invoke``), with the token usage of ``usage_metadata``. A ``ChatModel`` is
    returned as it is; a local LM spec, a LlamaIndex LLM or an object without ``invoke``
    raises :class:`~neocorrag_core.errors.ConfigError` saying what to pass.
    """
    if isinstance(llm, ChatModel):
        return llm
    check_wrappable(
        llm,
        function="as_chat_model",
        kind="a LangChain chat model",
        method="invoke",
        suggestion="a chat model such as ChatOpenAI(...)",
        other="LlamaIndex",
        other_kind="a LlamaIndex LLM",
        local_spec=True,
    )
    return LangChainChatModel(llm)


def as_embedder(embeddings: Any) -> Any:
    """LangChain ``Embeddings`` as what the core takes for ``embedder=``: an encode function
    ``list[str] -> vectors`` over ``embed_documents`` (:func:`resolve_embedder
    <neocorrag_core.models.resolve_embedder>` wraps it in a cached, normalising
    ``TextEmbedder``).

    Our own ``NeocorRAGEmbeddings`` (or the other adapter's) becomes a
    :class:`~neocorrag_core.models.LazyEmbedder` over the embedder behind it, which the core
    shares (resolved on first use). A LlamaIndex embedding or an object without
    ``embed_documents`` raises :class:`~neocorrag_core.errors.ConfigError`.
    """
    if is_our_embeddings(embeddings):
        return shared_embedder(embeddings)
    check_wrappable(
        embeddings,
        function="as_embedder",
        kind="a LangChain Embeddings object",
        method="embed_documents",
        suggestion="an instance such as HuggingFaceEmbeddings(...)",
        other="LlamaIndex",
        other_kind="a LlamaIndex embedding",
        classes=True,
    )
    return EmbedDocuments(embeddings)


def chat_model_of(value: Any) -> ChatModel | None:
    """``value`` as a chat model when it is a LangChain runnable (a chat model, or one
    wrapped by ``with_retry`` / ``with_fallbacks`` / ``with_config``), else ``None``."""
    return LangChainChatModel(value) if isinstance(value, Runnable) else None


def embedder_of(value: Any) -> Any:
    """``value`` as an encode function when it is a LangChain ``Embeddings``, else ``None``."""
    return EmbedDocuments(value) if isinstance(value, Embeddings) else None


__all__ = [
    "EmbedDocuments",
    "LangChainChatModel",
    "as_chat_model",
    "as_embedder",
    "chat_model_of",
    "embedder_of",
    "langchain_messages",
]
