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
    "resolve_embedder accepts: None or 'default' (the bundled all-MiniLM-L6-v2), a TextEmbedder, "
    "a sentence_transformers.SentenceTransformer, a sentence-transformers model name or local "
    "folder (str or pathlib.Path), a LangChain Embeddings object (embed_documents), a "
    "LlamaIndex embedding (get_text_embedding_batch), or a callable list[str] -> array (n, d)"
)
