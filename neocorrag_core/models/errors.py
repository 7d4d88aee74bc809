"""The errors model loading raises, and the help texts that say what a spec may be."""

from __future__ import annotations

from typing import Any

from neocorrag_core.errors import MissingDependencyError, ModelLoadError

from .presets import BUNDLED_LMS

__all__ = ["MissingDependencyError", "ModelLoadError", "embedder_help", "framework_of"]

# Written from the preset table, so a new bundled preset is named here too.
_BUNDLED_CHOICES = ", ".join(f"{key!r}: {lm.name}" for key, lm in BUNDLED_LMS.items())
_LM_SPEC_HELP = (
    f"resolve_lm accepts: None or a bundled model's name ({_BUNDLED_CHOICES}), "
    "a LanguageModel, a (model, tokenizer) tuple of loaded Hugging Face objects, "
    "a Hugging Face model id such as 'Qwen/Qwen2.5-0.5B-Instruct', "
    "or a local folder (str or pathlib.Path) holding config.json, weights and tokenizer files"
)
_EMBEDDER_SPEC_HELP = (
    "resolve_embedder accepts: None or 'default' (the bundled all-MiniLM-L6-v2), a TextEmbedder, "
    "a sentence_transformers.SentenceTransformer, a sentence-transformers model name or local "
    "folder (str or pathlib.Path), a callable list[str] -> array (n, d), or the "
    "NeocorRAGEmbeddings / NeocorRAGEmbedding objects of the adapters; wrap a LangChain "
    "Embeddings object with neocorrag_integrations.langchain.as_embedder(embeddings) and a "
    "LlamaIndex embedding with neocorrag_integrations.llama_index.as_embedder(embed_model)"
)


def framework_of(obj: Any) -> str | None:
    """``"LangChain"`` or ``"LlamaIndex"`` when ``obj`` is an instance of a class defined in
    one of those frameworks' packages (``langchain*``, ``llama_index``; its own class or a
    base class), else ``None``.

    Read from the module names of the classes alone: nothing is imported and no method of
    ``obj`` is looked up. The core uses it only to refuse such an object with the adapter
    function that wraps it; it never calls a framework object.
    """
    for cls in type(obj).__mro__:
        top = (getattr(cls, "__module__", None) or "").partition(".")[0]
        if top.startswith("langchain"):
            return "LangChain"
        if top == "llama_index":
            return "LlamaIndex"
    return None


def embedder_help(spec: Any) -> str:
    """Why ``spec``, an object of a framework, is not an embedder here, and the fix."""
    if framework_of(spec) == "LangChain":
        fix = "neocorrag_integrations.langchain.as_embedder(embeddings)"
    else:
        fix = "neocorrag_integrations.llama_index.as_embedder(embed_model)"
    return (
        f"{type(spec).__name__} is a {framework_of(spec)} object; the core takes no framework "
        f"objects: wrap it with {fix}, which gives an encode function the core takes"
    )
