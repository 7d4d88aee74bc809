"""LlamaIndex models as the core takes them: an LLM as a ``ChatModel``, an embedding as an
encode function. The one place neocorrag calls a LlamaIndex model.

* :func:`as_chat_model`: an LLM as a :class:`~neocorrag_core.lm.chat.ChatModel`:
  ``as_structured_llm(schema)`` when ``metadata.is_function_calling_model``, ``complete``
  for text (the chat as one prompt), token usage from the response's ``additional_kwargs``
  (``prompt_tokens`` / ``completion_tokens``, where the provider puts them);
* :func:`as_embedder`: a ``BaseEmbedding`` as an encode function over
  ``get_text_embedding_batch``.

The adapters apply them to the ``llm=`` and ``embedder=`` they receive; core users call
them (re-exported by :mod:`neocorrag_integrations.llama_index`) before handing a LlamaIndex
object to a core class.
"""

from __future__ import annotations

from typing import Any

from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.base.llms.base import BaseLLM

from neocorrag_core.lm.chat import ChatModel, Messages
from neocorrag_core.lm.wrapped_chat import WrappedChatModel, text_of

from ._models import check_wrappable, is_our_embeddings, shared_embedder


def messages_as_text(messages: Messages) -> str:
    """One prompt string for ``complete``: the turns, labelled by role, ending where the
    assistant's answer starts."""
    return "\n\n".join(f"{m['role'].upper()}:\n{m['content']}" for m in messages) + (
        "\n\nASSISTANT:\n"
    )


class LlamaIndexChatModel(WrappedChatModel):
    """A LlamaIndex LLM as a :class:`~neocorrag_core.lm.chat.ChatModel`.

    Args:
        llm: the LLM (anything with LlamaIndex's ``complete``).
        name: the name in store keys (default: the LLM's class and
            ``metadata.model_name``).
    """

    kind = "LlamaIndex"
    usage_keys = ("prompt_tokens", "completion_tokens")

    def _make_structured(self, schema: type[Any]) -> Any:
        metadata = getattr(self.llm, "metadata", None)
        if not getattr(metadata, "is_function_calling_model", False):
            return None
        return self.llm.as_structured_llm(schema)

    def _ask_structured(self, runnable: Any, messages: Messages) -> Any:
        return runnable.complete(messages_as_text(messages)).raw

    def _ask_text(self, messages: Messages) -> tuple[str, Any]:
        answer = self.llm.complete(messages_as_text(messages))
        return text_of(getattr(answer, "text", answer)), getattr(answer, "additional_kwargs", None)


class TextEmbeddingBatch:
    """A LlamaIndex embedding as the core's encode function (``texts -> vectors``), one
    ``get_text_embedding_batch`` call per batch. Picklable when the embedding is (adapters
    and engines configured with it pickle)."""

    def __init__(self, embed_model: Any) -> None:
        self.embed_model = embed_model
        self.__name__ = type(embed_model).__name__  # the TextEmbedder's name

    def __call__(self, texts: list[str]) -> Any:
        return self.embed_model.get_text_embedding_batch(list(texts))

    def __repr__(self) -> str:
        return f"TextEmbeddingBatch({self.__name__})"


def as_chat_model(llm: Any) -> ChatModel:
    """A LlamaIndex LLM as a :class:`~neocorrag_core.lm.chat.ChatModel`, for the core's
    ``lm=`` (``BeliefController.from_models``, ``LMVerifier``, ``LLMTripleExtractor``...).

    Uses ``as_structured_llm(schema)`` when the LLM is a function-calling model, else its
    text answer (``complete``), with the token usage of ``additional_kwargs``. A
    ``ChatModel`` is returned as it is; a local LM spec, a LangChain object or an object
    without ``complete`` raises :class:`~neocorrag_core.errors.ConfigError` saying what to
    pass.
    """
    if isinstance(llm, ChatModel):
        return llm
    check_wrappable(
        llm,
        function="as_chat_model",
        kind="a LlamaIndex LLM",
        method="complete",
        suggestion="an LLM such as OpenAI(...)",
        other="LangChain",
        other_kind="a LangChain object",
        local_spec=True,
    )
    return LlamaIndexChatModel(llm)


def as_embedder(embed_model: Any) -> Any:
    """A LlamaIndex embedding as what the core takes for ``embedder=``: an encode function
    ``list[str] -> vectors`` over ``get_text_embedding_batch`` (:func:`resolve_embedder
    <neocorrag_core.models.resolve_embedder>` wraps it in a cached, normalising
    ``TextEmbedder``).

    Our own ``NeocorRAGEmbedding`` (or the other adapter's) becomes a
    :class:`~neocorrag_core.models.LazyEmbedder` over the embedder behind it, which the core
    shares (resolved on first use). A LangChain object or an object without
    ``get_text_embedding_batch`` raises :class:`~neocorrag_core.errors.ConfigError`.
    """
    if is_our_embeddings(embed_model):
        return shared_embedder(embed_model)
    check_wrappable(
        embed_model,
        function="as_embedder",
        kind="a LlamaIndex embedding",
        method="get_text_embedding_batch",
        suggestion="an instance such as HuggingFaceEmbedding(...)",
        other="LangChain",
        other_kind="a LangChain object",
        classes=True,
    )
    return TextEmbeddingBatch(embed_model)


def chat_model_of(value: Any) -> ChatModel | None:
    """``value`` as a chat model when it is a LlamaIndex LLM, else ``None``."""
    return LlamaIndexChatModel(value) if isinstance(value, BaseLLM) else None


def embedder_of(value: Any) -> Any:
    """``value`` as an encode function when it is a LlamaIndex embedding, else ``None``."""
    return TextEmbeddingBatch(value) if isinstance(value, BaseEmbedding) else None


__all__ = [
    "LlamaIndexChatModel",
    "TextEmbeddingBatch",
    "as_chat_model",
    "as_embedder",
    "chat_model_of",
    "embedder_of",
    "messages_as_text",
]
