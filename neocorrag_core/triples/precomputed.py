"""Precomputed triples: from passage metadata, or imported from HippoRAG OpenIE files."""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from neocorrag_core.errors import InputError
from neocorrag_core.formats import read_json_or_lines
from neocorrag_core.triples.base import parse_triple, parse_triples
from neocorrag_core.types import Passage, Triple

logger = logging.getLogger(__name__)

METADATA_KEY = "triples"


class MetadataTripleSource:
    """Reads ``Passage.metadata["triples"]``: a list of ``[subject, relation, object]``.

    Dicts with ``subject``/``relation``/``object`` keys are accepted too, and so is the
    whole list as one JSON string (what vector stores with flat metadata, e.g. Chroma,
    keep; the ingestion transforms write it with ``metadata_format="json"``). Malformed
    items, and a string that is not JSON, are skipped with a warning.
    """

    def __init__(self, key: str = METADATA_KEY) -> None:
        self.key = key

    def triples_for(self, passages: Sequence[Passage]) -> list[list[Triple]]:
        """The metadata triples of each passage (empty where absent)."""
        origin = f"metadata[{self.key!r}]"
        return [
            parse_triples(_decoded(p.metadata.get(self.key), p.id, origin), p.id, origin=origin)
            for p in passages
        ]


def _decoded(value: Any, passage_id: str, origin: str) -> Any:
    """``value``, or the triples a JSON string holds; a string that is not JSON gives ``None``
    (after a warning). Only ``json.loads``: metadata is untrusted text, never evaluated."""
    if not isinstance(value, str):
        return value
    try:
        return json.loads(value)
    except (ValueError, RecursionError) as exc:  # RecursionError: absurdly deep nesting
        logger.warning(
            "%s of passage %r is a string but not JSON triples (%s); ignored",
            origin,
            passage_id,
            exc,
        )
        return None


def text_key(text: str) -> str:
    """Lookup key of a passage text: sha256 of its whitespace-normalized form."""
    return hashlib.sha256(" ".join(text.split()).encode("utf-8")).hexdigest()


class OpenIETripleSource:
    """Triples from a HippoRAG OpenIE results file, matched to passages by text.

    The file is ``{"docs": [{"title", "text", "passage", "extracted_triples": [[h, r, t], ...]}]}``
    as written by HippoRAG's OpenIE step. A passage is matched on its text
    (whitespace-normalized), then on ``title + "\\n" + text`` (HippoRAG's ``passage``
    field); unmatched passages get no triples.
    """

    def __init__(self, triples_by_text: dict[str, list[tuple[str, str, str]]]) -> None:
        self._by_text = triples_by_text

    @classmethod
    def from_file(cls, path: str | Path) -> OpenIETripleSource:
        """Import a HippoRAG OpenIE JSON file."""
        path = Path(path)
        data = read_json_or_lines(path, what="OpenIE file")  # errors name the file
        return cls.from_records(data, origin=str(path))

    @classmethod
    def from_records(cls, data: Any, *, origin: str = "OpenIE data") -> OpenIETripleSource:
        """Import already-parsed OpenIE data (the dict with ``docs``, or the list of docs)."""
        docs = data.get("docs") if isinstance(data, dict) else data
        if not isinstance(docs, list):
            raise InputError(
                f"{origin} does not look like HippoRAG OpenIE output: expected a 'docs' list"
            )
        by_text: dict[str, list[tuple[str, str, str]]] = {}
        skipped_docs = bad_triples = 0
        for doc in docs:
            if not isinstance(doc, dict) or not isinstance(doc.get("extracted_triples"), list):
                skipped_docs += 1
                continue
            # Validate once at import, so lookups are silent and cheap.
            triples = []
            for item in doc["extracted_triples"]:
                parsed = parse_triple(item, "import")
                if parsed is None:
                    bad_triples += 1
                else:
                    triples.append(parsed.key())
            for field in ("text", "passage"):
                value = doc.get(field)
                if isinstance(value, str) and value.strip():
                    by_text.setdefault(text_key(value), triples)
        if skipped_docs or bad_triples:
            logger.warning(
                "%s: skipped %d doc(s) without 'extracted_triples' and %d malformed triple(s)",
                origin,
                skipped_docs,
                bad_triples,
            )
        return cls(by_text)

    def __len__(self) -> int:
        return len(self._by_text)

    def lookup(self, passage: Passage) -> list[Triple] | None:
        """Triples for one passage, or ``None`` when the file has no such passage."""
        for text in (passage.text, f"{passage.title}\n{passage.text}"):
            raw = self._by_text.get(text_key(text))
            if raw is not None:
                unique = dict.fromkeys(raw)
                return [Triple(h, r, t, (passage.id,)) for h, r, t in unique]
        return None

    def triples_for(self, passages: Sequence[Passage]) -> list[list[Triple]]:
        """The imported triples of each passage (empty where the file lacks it)."""
        return [self.lookup(p) or [] for p in passages]


class ChainedTripleSource:
    """Asks each source in turn and keeps, per passage, the first non-empty answer."""

    def __init__(self, *sources: Any) -> None:
        if not sources:
            raise ValueError("ChainedTripleSource needs at least one source")
        self.sources = sources

    def triples_for(self, passages: Sequence[Passage]) -> list[list[Triple]]:
        """First non-empty triples per passage across the sources."""
        result: list[list[Triple]] = [[] for _ in passages]
        missing = list(range(len(passages)))
        for source in self.sources:
            if not missing:
                break
            found = source.triples_for([passages[i] for i in missing])
            still: list[int] = []
            for i, triples in zip(missing, found, strict=True):
                if triples:
                    result[i] = triples
                else:
                    still.append(i)
            missing = still
        return result
