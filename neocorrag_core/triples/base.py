"""The ``TripleSource`` protocol and the parsing every source shares."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

from neocorrag_core.limits import note
from neocorrag_core.types import Passage, Triple
from neocorrag_core.validation import clean_text

logger = logging.getLogger(__name__)


@runtime_checkable
class TripleSource(Protocol):
    """Anything that can give the triples of a batch of passages.

    Returns one list per passage, in the same order; a passage without triples
    gets an empty list. Sources must set ``Triple.source_ids`` to the passage id.
    Extractors, stores and precomputed files all plug in through this protocol.
    """

    def triples_for(self, passages: Sequence[Passage]) -> list[list[Triple]]:
        """The triples of each passage, aligned with ``passages``."""
        ...


def check_triple_source(source: object, owner: str) -> None:
    """Raise :class:`~neocorrag_core.errors.ConfigError` when ``source`` (given to
    ``owner``) is not a :class:`TripleSource`: checked at construction, so that a wrong
    object fails with the fix instead of an ``AttributeError`` at the first query."""
    if source is None or isinstance(source, TripleSource):
        return
    from neocorrag_core.errors import ConfigError

    hint = "an extractor, a DefaultTripleSource or any object with triples_for(passages)"
    if type(source).__name__ == "TripleStore":
        # The store only keeps triples: the sources that read it also know what to do on
        # a miss (extract and store, or skip).
        hint = (
            "DefaultTripleSource(store=...) to read it (extracting what it lacks), or "
            "CachedTripleSource(store, extractor)"
        )
    raise ConfigError(
        f"{owner}: triple_source must be a TripleSource, got {type(source).__name__}; pass {hint}"
    )


# Caps on a triple's parts at graph build. A real entity or relation is a few words (the
# longest titles of the dev sets are ~60 characters); a 20,000-character "entity" (one
# garbled extraction) once made beam search 90x slower, since every candidate chain through
# it is that long, and even a 200-character cap doubled beam time (bench_oversized.py).
# Cut, not dropped: the fact may still link.
MAX_ENTITY_CHARS = 100
MAX_RELATION_CHARS = 60


def _cap(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    head = text[:limit]
    cut = head.rsplit(" ", 1)[0] if " " in head[limit // 2 :] else head
    return cut.rstrip() + "…"


def bounded_triple(triple: Triple) -> Triple:
    """``triple`` with its entities cut to ``MAX_ENTITY_CHARS`` and its relation to
    ``MAX_RELATION_CHARS`` characters (at a word boundary, with an ellipsis) and lone
    surrogates replaced (:func:`~neocorrag_core.validation.clean_text`: a source of the
    user's may hand back any string); unchanged (the same object) when already fine."""
    subject = _cap(clean_text(triple.subject), MAX_ENTITY_CHARS)
    relation = _cap(clean_text(triple.relation), MAX_RELATION_CHARS)
    obj = _cap(clean_text(triple.object), MAX_ENTITY_CHARS)
    if (subject, relation, obj) == triple.key():
        return triple
    return Triple(subject, relation, obj, triple.source_ids)


def triples_per_passage(source: TripleSource, passages: Sequence[Passage]) -> list[list[Triple]]:
    """``source.triples_for(passages)``, checked to hold one list per passage, with every
    triple's text length capped (:func:`bounded_triple`); what every stage builds graphs from."""
    per_passage = source.triples_for(passages)
    if not isinstance(per_passage, Sequence) or len(per_passage) != len(passages):
        got = len(per_passage) if isinstance(per_passage, Sequence) else type(per_passage).__name__
        raise RuntimeError(
            f"{type(source).__name__}.triples_for returned {got} lists for {len(passages)} "
            "passages; it must return one list per passage"
        )
    return [[bounded_triple(t) for t in triples] for triples in per_passage]


def _clean(value: Any) -> str | None:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        value = str(value)
    if not isinstance(value, str):
        return None
    text = " ".join(clean_text(value).split())
    return text or None


def parse_triple(item: Any, source_id: str) -> Triple | None:
    """Validate one raw triple (``[h, r, t]`` or ``{"subject", "relation", "object"}``).

    Returns ``None`` for anything malformed: wrong arity, non-string parts, empty
    parts. Callers skip those with a warning rather than failing the query. Whitespace is
    collapsed and lone surrogates are replaced by U+FFFD
    (:func:`~neocorrag_core.validation.clean_text`).
    """
    parts: Sequence[Any] | None = None
    if isinstance(item, Triple):  # checked like the rest: metadata is untrusted
        parts = [item.subject, item.relation, item.object]
    elif isinstance(item, Mapping):
        parts = [item.get("subject"), item.get("relation"), item.get("object")]
    elif isinstance(item, (list, tuple)) and len(item) == 3:
        parts = item
    if parts is None:
        return None
    subject, relation, obj = (_clean(p) for p in parts)
    if subject is None or relation is None or obj is None:
        return None
    return Triple(subject, relation, obj, (source_id,))


def parse_triples(
    items: Any, source_id: str, *, origin: str, limit: int | None = None
) -> list[Triple]:
    """Parse a list of raw triples, skipping (and counting in one warning) the bad ones.

    ``limit``: parse no more once that many triples are read (the items past it are not
    looked at: a 100,000-item list costs what its first ones cost); a cut is noted for the
    call in progress (:func:`~neocorrag_core.limits.note`)."""
    if items is None:
        return []
    if not isinstance(items, (list, tuple, str)) and callable(getattr(items, "tolist", None)):
        # A numpy array (what Arrow- or pandas-backed vector stores give back for a list)
        items = items.tolist()
    if not isinstance(items, (list, tuple)):
        logger.warning("%s for passage %r is not a list of triples; ignored", origin, source_id)
        return []
    triples: list[Triple] = []
    bad = 0
    seen: set[tuple[str, str, str]] = set()
    for position, item in enumerate(items):
        if limit is not None and len(triples) >= limit:
            note(
                f"work cap: {len(items) - position} triple item(s) past {limit} per passage "
                "were not read (WorkLimits.max_triples_per_passage)"
            )
            break
        triple = parse_triple(item, source_id)
        if triple is None:
            bad += 1
        elif triple.key() not in seen:
            seen.add(triple.key())
            triples.append(triple)
    if bad:
        logger.warning(
            "skipped %d malformed triple(s) in %s of passage %r (expected [subject, relation, "
            "object] of non-empty strings)",
            bad,
            origin,
            source_id,
        )
    return triples
