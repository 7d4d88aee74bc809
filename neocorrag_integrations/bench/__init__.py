"""Peer baselines for ``neocorrag eval``: LangChain's own document filters.

This module only declares the methods (cheap to import: no LangChain import here); they
are registered in the ``neocorrag.eval_methods`` entry point group by ``pyproject.toml``
and built by :mod:`neocorrag_integrations.bench.langchain_filters` when a run asks for
them (``pip install 'neocorrag[bench]'``).
"""

from __future__ import annotations

from neocorrag_core.eval.registry import MethodSpec

_FACTORY = "neocorrag_integrations.bench.langchain_filters:build"
_REQUIRES = "'neocorrag[bench]' (langchain-classic, langchain-community)"

LC_EMBEDDINGS_FILTER = MethodSpec(
    "lc-embeddings-filter", "LangChain EmbeddingsFilter (same embedder)", _FACTORY, _REQUIRES
)
# The same filter at fixed thresholds, for the recall/noise plot (named by threshold).
LC_EMBEDDINGS_FILTER_030 = MethodSpec(
    "lc-embeddings-filter-0.3", "LangChain EmbeddingsFilter at threshold 0.3", _FACTORY, _REQUIRES
)
LC_EMBEDDINGS_FILTER_040 = MethodSpec(
    "lc-embeddings-filter-0.4", "LangChain EmbeddingsFilter at threshold 0.4", _FACTORY, _REQUIRES
)
LC_EMBEDDINGS_FILTER_060 = MethodSpec(
    "lc-embeddings-filter-0.6", "LangChain EmbeddingsFilter at threshold 0.6", _FACTORY, _REQUIRES
)
LC_LLM_FILTER = MethodSpec(
    "lc-llm-filter", "LangChain LLMChainFilter (same LM, generated YES/NO)", _FACTORY, _REQUIRES
)
LC_LLM_FILTER_LOGITS = MethodSpec(
    "lc-llm-filter-logits",
    "LLMChainFilter prompt, YES/NO read from next-token logits",
    _FACTORY,
    _REQUIRES,
)

__all__ = [
    "LC_EMBEDDINGS_FILTER",
    "LC_EMBEDDINGS_FILTER_030",
    "LC_EMBEDDINGS_FILTER_040",
    "LC_EMBEDDINGS_FILTER_060",
    "LC_LLM_FILTER",
    "LC_LLM_FILTER_LOGITS",
]
