"""The errors model loading raises, and the help texts that say what a spec may be."""

from __future__ import annotations

from neocorrag_core.errors import MissingDependencyError, ModelLoadError

__all__ = ["MissingDependencyError", "ModelLoadError"]

_LM_SPEC_HELP = (
    "resolve_lm accepts: None or 'default' (the bundled Qwen2.5-Coder-0.5B-Instruct), "
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
