"""What the two framework model translations share besides
:class:`~neocorrag_core.lm.wrapped_chat.WrappedChatModel` (the core's): our own embeddings
objects as the core takes them (:func:`shared_embedder`), and what ``as_chat_model`` /
``as_embedder`` refuse (:func:`check_wrappable`, which tells the frameworks apart with
:func:`framework_of`: the core never does). Imports neither framework.
"""

from __future__ import annotations

from typing import Any

from neocorrag_core.errors import ConfigError
from neocorrag_core.lm.chat import is_local_lm_spec
from neocorrag_core.models import LazyEmbedder


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


__all__ = ["check_wrappable", "framework_of", "is_our_embeddings", "shared_embedder"]
