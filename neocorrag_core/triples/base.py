"""The ``TripleSource`` protocol and the parsing every source shares."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

from neocorrag_core.types import Passage, Triple

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


def _clean(value: Any) -> str | None:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        value = str(value)
    if not isinstance(value, str):
        return None
    text = " ".join(value.split())
    return text or None


def parse_triple(item: Any, source_id: str) -> Triple | None:
    """Validate one raw triple (``[h, r, t]`` or ``{"subject", "relation", "object"}``).

    Returns ``None`` for anything malformed: wrong arity, non-string parts, empty
    parts. Callers skip those with a warning rather than failing the query.
    """
    if isinstance(item, Triple):
        return Triple(item.subject, item.relation, item.object, (source_id,))
    parts: Sequence[Any] | None = None
    if isinstance(item, Mapping):
        parts = [item.get("subject"), item.get("relation"), item.get("object")]
    elif isinstance(item, (list, tuple)) and len(item) == 3:
        parts = item
    if parts is None:
        return None
    subject, relation, obj = (_clean(p) for p in parts)
    if subject is None or relation is None or obj is None:
        return None
    return Triple(subject, relation, obj, (source_id,))


def parse_triples(items: Any, source_id: str, *, origin: str) -> list[Triple]:
    """Parse a list of raw triples, skipping (and counting in one warning) the bad ones."""
    if items is None:
        return []
    if not isinstance(items, (list, tuple)):
        logger.warning("%s for passage %r is not a list of triples; ignored", origin, source_id)
        return []
    triples: list[Triple] = []
    bad = 0
    seen: set[tuple[str, str, str]] = set()
    for item in items:
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
