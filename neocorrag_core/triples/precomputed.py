"""Precomputed triples: from passage metadata, or imported from HippoRAG OpenIE files."""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from neocorrag_core.errors import ConfigError, InputError
from neocorrag_core.formats import read_json_or_lines
from neocorrag_core.models.embedder import VectorCache
from neocorrag_core.triples.base import (
    TripleSource,
    check_triple_source,
    parse_triple,
    parse_triples,
)
from neocorrag_core.types import Passage, Triple
from neocorrag_core.validation import clean_text

logger = logging.getLogger(__name__)

METADATA_KEY = "triples"


class MetadataTripleSource:
    """Reads ``Passage.metadata["triples"]``: a list of ``[subject, relation, object]``.

    Dicts with ``subject``/``relation``/``object`` keys are accepted too, and so is the
    whole list as one JSON string (what vector stores with flat metadata, e.g. Chroma,
    keep; the ingestion transforms write it with ``metadata_format="json"``). Malformed
    items, and a string that is not JSON, are skipped with a warning. An absent key and a
    ``None`` value both give no triples (the sources that can extract treat both as "not
    given": :func:`has_metadata_triples`). ``max_per_passage``: a list is read to its first
    that many triples (``None``: whole); the items past it are not parsed.
    """

    def __init__(self, key: str = METADATA_KEY, *, max_per_passage: int | None = None) -> None:
        self.key = key
        self.max_per_passage = max_per_passage

    def triples_for(self, passages: Sequence[Passage]) -> list[list[Triple]]:
        """The metadata triples of each passage (empty where absent)."""
        origin = f"metadata[{self.key!r}]"
        return [
            parse_triples(
                _decoded(p.metadata.get(self.key), p.id, origin),
                p.id,
                origin=origin,
                limit=self.max_per_passage,
            )
            for p in passages
        ]


def triple_source_or_default(source: TripleSource | None, owner: str) -> TripleSource:
    """``source`` checked (:func:`check_triple_source`), or a
    :class:`~neocorrag_core.triples.MetadataTripleSource` when it is ``None``.

    Only ``None`` means "not given": a source that is falsy because it is empty (an
    ``OpenIETripleSource`` loaded from a file with no triples has ``len() == 0``) is
    the user's choice and is kept, not silently swapped for the metadata source."""
    check_triple_source(source, owner)
    return MetadataTripleSource() if source is None else source


def vector_cache_of(
    source: TripleSource, vectors: VectorCache | None, owner: str
) -> VectorCache | None:
    """The persistent vector cache an engine uses: ``vectors`` when given (checked), else
    the triple source's own (a :class:`~neocorrag_core.triples.DefaultTripleSource` keeps
    vectors in its store), else none."""
    if vectors is not None:
        if not isinstance(vectors, VectorCache):
            raise ConfigError(
                f"{owner}: vectors must be a VectorCache (e.g. a TripleStore), got "
                f"{type(vectors).__name__}"
            )
        return vectors
    own = getattr(source, "vectors", None)
    return own if isinstance(own, VectorCache) else None


def has_metadata_triples(passage: Passage, key: str = METADATA_KEY) -> bool:
    """Whether ``passage.metadata[key]`` holds the passage's triples: set to anything but
    ``None`` (an empty list says "no triples"; ``None``, what many vector stores write for
    a missing key, counts as absent, so the triples are read from the store or extracted)."""
    return passage.metadata.get(key) is not None


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
    """Lookup key of a passage text: sha256 of its whitespace-normalized form, lone
    surrogates replaced as :class:`~neocorrag_core.types.Passage` replaces them (so an
    imported document and the passage built from the same text get the same key)."""
    return hashlib.sha256(" ".join(clean_text(text).split()).encode("utf-8")).hexdigest()


class OpenIETripleSource:
    """Triples from a HippoRAG OpenIE results file, matched to passages by title and text.

    The file is ``{"docs": [{"title", "text", "passage", "extracted_triples": [[h, r, t], ...]}]}``
    as written by HippoRAG's OpenIE step. A passage is matched (whitespace-normalized) on
    ``title + "\\n" + text`` (HippoRAG's ``passage`` field) first, then on its text alone,
    but only where exactly one document of the file has that text: two documents with one
    text and different titles (a page and its "... filmography" page) are told apart by
    their titles, never swapped. Unmatched passages get no triples.

    Args:
        triples_by_text: triples by :func:`text_key` of a text (or of a ``passage`` field)
            that only one document has.
        triples_by_passage: triples by :func:`text_key` of ``title + "\\n" + text``, asked
            first (:meth:`from_records` builds both).
    """

    def __init__(
        self,
        triples_by_text: dict[str, list[tuple[str, str, str]]],
        triples_by_passage: dict[str, list[tuple[str, str, str]]] | None = None,
    ) -> None:
        self._by_text = triples_by_text
        self._by_passage = triples_by_passage or {}

    @classmethod
    def from_file(cls, path: str | Path) -> OpenIETripleSource:
        """Import a HippoRAG OpenIE JSON file."""
        path = Path(path)
        data = read_json_or_lines(path, what="OpenIE file")  # errors name the file
        return cls.from_records(data, origin=str(path))

    @classmethod
    def from_records(cls, data: Any, *, origin: str = "OpenIE data") -> OpenIETripleSource:
        """Import already-parsed OpenIE data (the dict with ``docs``, or the list of docs).

        Warns once about documents it cannot use, texts shared by documents with different
        titles (matched on title and text only), and repeated documents whose triples
        differ (the first is kept)."""
        docs = data.get("docs") if isinstance(data, dict) else data
        if not isinstance(docs, list):
            raise InputError(
                f"{origin} does not look like HippoRAG OpenIE output: expected a 'docs' list"
            )
        by_passage: dict[str, list[tuple[str, str, str]]] = {}
        by_text: dict[str, list[tuple[str, str, str]]] = {}
        owners: dict[str, set[str]] = {}  # text key -> passage keys of the docs with that text
        skipped_docs = bad_triples = conflicting_docs = 0
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
            passage_keys = _passage_keys(doc)
            if not passage_keys:
                continue
            conflict = False
            for key in passage_keys:
                kept = by_passage.setdefault(key, triples)
                conflict = conflict or (kept is not triples and kept != triples)
            conflicting_docs += conflict
            for field in ("text", "passage"):
                value = doc.get(field)
                if isinstance(value, str) and value.strip():
                    key = text_key(value)
                    by_text.setdefault(key, triples)
                    owners.setdefault(key, set()).add(passage_keys[0])
        shared = {key for key, docs_of_text in owners.items() if len(docs_of_text) > 1}
        for key in shared:
            del by_text[key]
        if skipped_docs or bad_triples:
            logger.warning(
                "%s: skipped %d doc(s) without 'extracted_triples' and %d malformed triple(s)",
                origin,
                skipped_docs,
                bad_triples,
            )
        if shared:
            logger.warning(
                "%s: %d text(s) belong to %d documents with different titles; a passage with "
                "such a text is matched on its title and text only",
                origin,
                len(shared),
                len(set().union(*(owners[key] for key in shared))),
            )
        if conflicting_docs:
            logger.warning(
                "%s: %d doc(s) repeat the title and text of an earlier doc with other triples; "
                "the first doc's triples are kept",
                origin,
                conflicting_docs,
            )
        return cls(by_text, by_passage)

    def __len__(self) -> int:
        """The number of distinct passages (title and text) the file has triples for (of
        keys, for a source built from a text map alone)."""
        return len(self._by_passage) if self._by_passage else len(self._by_text)

    def lookup(self, passage: Passage) -> list[Triple] | None:
        """Triples for one passage, or ``None`` when the file has no such passage."""
        whole = text_key(f"{passage.title}\n{passage.text}")
        raw = self._by_passage.get(whole)
        if raw is None:  # the text alone, where only one document has it
            raw = self._by_text.get(text_key(passage.text), self._by_text.get(whole))
        if raw is None:
            return None
        unique = dict.fromkeys(raw)
        return [Triple(h, r, t, (passage.id,)) for h, r, t in unique]

    def triples_for(self, passages: Sequence[Passage]) -> list[list[Triple]]:
        """The imported triples of each passage (empty where the file lacks it)."""
        return [self.lookup(p) or [] for p in passages]


def _passage_keys(doc: dict[str, Any]) -> list[str]:
    """The :func:`text_key` of a doc's ``passage`` field and of its title + text (most often
    one key), or none when the doc has no text."""
    keys: list[str] = []
    passage, title, text = doc.get("passage"), doc.get("title"), doc.get("text")
    if isinstance(passage, str) and passage.strip():
        keys.append(text_key(passage))
    if isinstance(text, str) and text.strip():
        key = text_key(f"{'' if title is None else title}\n{text}")
        if key not in keys:
            keys.append(key)
    return keys


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
