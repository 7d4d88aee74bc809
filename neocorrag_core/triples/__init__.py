"""Where triples come from: the ``TripleSource`` protocol and its implementations.

The extractors (spaCy, LLM) and the SQLite store are imported lazily, on first access,
so importing this package never imports spaCy, Outlines or torch.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from neocorrag_core.triples.base import TripleSource, parse_triple, parse_triples
from neocorrag_core.triples.precomputed import (
    ChainedTripleSource,
    MetadataTripleSource,
    OpenIETripleSource,
)

if TYPE_CHECKING:
    from neocorrag_core.triples.extractor import TripleExtractor
    from neocorrag_core.triples.llm_extractor import LLMTripleExtractor
    from neocorrag_core.triples.spacy_extractor import SpacyTripleExtractor
    from neocorrag_core.triples.store import (
        CachedTripleSource,
        ExtractorKey,
        TripleStore,
        default_store_path,
    )

_LAZY = {
    "TripleExtractor": "neocorrag_core.triples.extractor",
    "LLMTripleExtractor": "neocorrag_core.triples.llm_extractor",
    "SpacyTripleExtractor": "neocorrag_core.triples.spacy_extractor",
    "CachedTripleSource": "neocorrag_core.triples.store",
    "ExtractorKey": "neocorrag_core.triples.store",
    "TripleStore": "neocorrag_core.triples.store",
    "default_store_path": "neocorrag_core.triples.store",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)


__all__ = [
    "CachedTripleSource",
    "ChainedTripleSource",
    "ExtractorKey",
    "LLMTripleExtractor",
    "MetadataTripleSource",
    "OpenIETripleSource",
    "SpacyTripleExtractor",
    "TripleExtractor",
    "TripleSource",
    "TripleStore",
    "default_store_path",
    "parse_triple",
    "parse_triples",
]
