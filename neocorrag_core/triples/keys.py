"""The two parts of every triple-store key: the passage's content hash and the extractor.

Kept apart from :mod:`neocorrag_core.triples.store` so that what only names stored
passages (the indexing engines, :class:`~neocorrag_core.triples.cached.CachedTripleSource`)
need not import the store itself. Both names are re-exported by the store module.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

from neocorrag_core.triples.extractor import passage_document
from neocorrag_core.types import Passage
from neocorrag_core.validation import clean_text


def text_sha256(passage: Passage) -> str:
    """Store key of a passage: sha256 of :func:`passage_document` (title line + whole text;
    a ``max_words`` cut is part of the extractor id, not of this hash)."""
    return hashlib.sha256(passage_document(passage).encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class ExtractorKey:
    """Which extractor made the stored triples; part of every store key."""

    extractor_id: str
    version: str

    @classmethod
    def of(cls, extractor: Any) -> ExtractorKey:
        """The key of an extractor object (its ``extractor_id`` and ``version``, lone
        surrogates replaced: they are stored as text)."""
        try:
            return cls(clean_text(str(extractor.extractor_id)), clean_text(str(extractor.version)))
        except AttributeError:
            raise TypeError(
                f"{type(extractor).__name__} is not a triple extractor: it needs "
                "'extractor_id' and 'version' attributes (see TripleExtractor)"
            ) from None
