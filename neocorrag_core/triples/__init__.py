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
    from neocorrag_core.triples.cached import CachedTripleSource
    from neocorrag_core.triples.default import DefaultTripleSource
    from neocorrag_core.triples.extractor import TripleExtractor
    from neocorrag_core.triples.factory import make_extractor, spacy_available
    from neocorrag_core.triples.ingest import TripleAnnotator
    from neocorrag_core.triples.keys import ExtractorKey
    from neocorrag_core.triples.llm_extractor import LLMTripleExtractor
    from neocorrag_core.triples.spacy_extractor import SpacyTripleExtractor
    from neocorrag_core.triples.store import (
        DeleteReport,
        StoreSummary,
        TripleStore,
        default_store_path,
    )
    from neocorrag_core.triples.store_jsonl import ImportReport

_LAZY = {
    "DefaultTripleSource": "neocorrag_core.triples.default",
    "TripleExtractor": "neocorrag_core.triples.extractor",
    "make_extractor": "neocorrag_core.triples.factory",
    "spacy_available": "neocorrag_core.triples.factory",
    "TripleAnnotator": "neocorrag_core.triples.ingest",
    "LLMTripleExtractor": "neocorrag_core.triples.llm_extractor",
    "SpacyTripleExtractor": "neocorrag_core.triples.spacy_extractor",
    "CachedTripleSource": "neocorrag_core.triples.cached",
    "ExtractorKey": "neocorrag_core.triples.keys",
    "DeleteReport": "neocorrag_core.triples.store",
    "ImportReport": "neocorrag_core.triples.store_jsonl",
    "StoreSummary": "neocorrag_core.triples.store",
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
    "DefaultTripleSource",
    "DeleteReport",
    "ExtractorKey",
    "ImportReport",
    "LLMTripleExtractor",
    "MetadataTripleSource",
    "OpenIETripleSource",
    "SpacyTripleExtractor",
    "StoreSummary",
    "TripleAnnotator",
    "TripleExtractor",
    "TripleSource",
    "TripleStore",
    "default_store_path",
    "make_extractor",
    "parse_triple",
    "parse_triples",
    "spacy_available",
]
