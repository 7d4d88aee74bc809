"""Where triples come from: the ``TripleSource`` protocol and its implementations."""

from neocorrag_core.triples.base import TripleSource, parse_triple, parse_triples
from neocorrag_core.triples.precomputed import (
    ChainedTripleSource,
    MetadataTripleSource,
    OpenIETripleSource,
)

__all__ = [
    "ChainedTripleSource",
    "MetadataTripleSource",
    "OpenIETripleSource",
    "TripleSource",
    "parse_triple",
    "parse_triples",
]
