"""The errors model loading raises, and the help texts that say what a spec may be."""

from __future__ import annotations

from neocorrag_core.errors import MissingDependencyError, ModelLoadError

from .presets import BUNDLED_LMS

__all__ = ["MissingDependencyError", "ModelLoadError"]

# Written from the preset table, so a new bundled preset is named here too.
_BUNDLED_CHOICES = ", ".join(f"{key!r}: {lm.name}" for key, lm in BUNDLED_LMS.items())
_LM_SPEC_HELP = (
    f"resolve_lm accepts: None or a bundled model's name ({_BUNDLED_CHOICES}), "
    "a LanguageModel, a (model, tokenizer) tuple of loaded Hugging Face objects, "
    "a Hugging Face model id such as 'Qwen/Qwen2.5-0.5B-Instruct', "
    "or a local folder (str or pathlib.Path) holding config.json, weights and tokenizer files"
)
_EMBEDDER_SPEC_HELP = (
    "resolve_embedder accepts: None or 'default' (the bundled all-MiniLM-L6-v2), a "
    "TextEmbedder or LazyEmbedder, a sentence_transformers.SentenceTransformer, a "
    "sentence-transformers model name or local folder (str or pathlib.Path), or a callable "
    "list[str] -> array (n, d). The core takes no framework objects: translate a LangChain "
    "Embeddings object with neocorrag_integrations.langchain.as_embedder(embeddings) and a "
    "LlamaIndex embedding with neocorrag_integrations.llama_index.as_embedder(embed_model) "
    "(either also takes the adapters' NeocorRAGEmbeddings / NeocorRAGEmbedding)"
)
