"""Where the adapters translate the framework models they receive, in one place.

Every adapter calls :func:`engine_embedder` on the ``embedder=`` and :func:`engine_lm` on the
``llm=`` it receives: a LangChain or LlamaIndex object is translated by its framework's
module (:mod:`._langchain_models`, :mod:`._llama_index_models`), recognised by its real
class and only when that framework is loaded (an object of a framework implies its package
was imported; none is imported here otherwise); our own embeddings objects become a
:class:`~neocorrag_core.models.LazyEmbedder` sharing the embedder behind them. Anything
else goes to the core as it is, which resolves it or says what to pass instead (the core
recognises no framework).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from types import ModuleType
from typing import Any

from neocorrag_core.lm.chat import ChatModel, is_local_lm_spec
from neocorrag_core.models import LazyEmbedder, TextEmbedder

from ._models import is_our_embeddings, shared_embedder


def _loaded_frameworks() -> list[ModuleType]:
    """The translation modules of the frameworks imported in this process (none is imported
    here for an object that cannot be theirs)."""
    found = []
    if "langchain_core" in sys.modules:
        from neocorrag_integrations import _langchain_models

        found.append(_langchain_models)
    if "llama_index.core" in sys.modules:
        from neocorrag_integrations import _llama_index_models

        found.append(_llama_index_models)
    return found


def engine_embedder(value: Any) -> Any:
    """``value`` as the core takes an embedder: a LangChain ``Embeddings`` or a LlamaIndex
    ``BaseEmbedding`` becomes its framework's encode function (``as_embedder``), our own
    ``NeocorRAGEmbeddings`` / ``NeocorRAGEmbedding`` a ``LazyEmbedder`` over the embedder
    behind it; ``None``, names, paths, callables and ``TextEmbedder`` / ``LazyEmbedder``
    objects go as they are (the core resolves them lazily, or says what to pass instead)."""
    if value is None or isinstance(value, (str, os.PathLike, TextEmbedder, LazyEmbedder)):
        return value
    if is_our_embeddings(value):
        return shared_embedder(value)
    for module in _loaded_frameworks():
        encode = module.embedder_of(value)
        if encode is not None:
            return encode
    return value


def engine_lm(value: Any, wrap: Callable[[Any], ChatModel]) -> Any:
    """``value`` as the core takes an LLM: a local LM spec or a
    :class:`~neocorrag_core.lm.chat.ChatModel` as it is; a LangChain chat model or a
    LlamaIndex LLM (by class) as its framework's chat model; anything else by ``wrap``, the
    calling adapter's own framework's ``as_chat_model`` (which raises a
    :class:`~neocorrag_core.errors.ConfigError` for an object that is not such an LLM)."""
    if is_local_lm_spec(value) or isinstance(value, ChatModel):
        return value
    for module in _loaded_frameworks():
        chat = module.chat_model_of(value)
        if chat is not None:
            return chat
    return wrap(value)


__all__ = ["engine_embedder", "engine_lm"]
