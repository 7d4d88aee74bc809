"""What every triple extractor shares: the protocol, the text it reads, and triple clean-up."""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Sequence
from typing import Protocol, runtime_checkable

from neocorrag_core.text.entities import normalize_entity
from neocorrag_core.types import Passage, Triple
from neocorrag_core.validation import clean_text

logger = logging.getLogger(__name__)

_TITLE_QUALIFIER = re.compile(r"\s*\([^()]*\)\s*$")


@runtime_checkable
class TripleExtractor(Protocol):
    """Makes triples from passage text; ``extractor_id`` + ``version`` key the cache.

    Bump ``version`` whenever a change (prompt, rules, model) can change the output,
    so stored triples of the old behaviour are not served for the new one; settings of
    one instance that change the output (e.g. a non-default ``max_words``) belong in
    ``extractor_id``.
    Every extractor is also a ``TripleSource`` (``triples_for`` = ``extract``).
    """

    @property
    def extractor_id(self) -> str:
        """Which extractor made the triples (e.g. ``"spacy:en_core_web_sm"``)."""
        ...

    @property
    def version(self) -> str:
        """Bumped whenever the same extractor's output can change."""
        ...

    def extract(self, passages: Sequence[Passage]) -> list[list[Triple]]:
        """The triples of each passage, aligned with ``passages``."""
        ...


def passage_document(passage: Passage) -> str:
    """What the store hashes: the title line, then the whitespace-normalized text, whole.

    An extractor reads this text, or less of it (a ``max_words`` cut; the spaCy extractor
    uses the title only to resolve references): what it leaves out depends on its
    settings, which are therefore part of its ``extractor_id``, the other half of the key.
    """
    text = " ".join(passage.text.split())
    title = " ".join(passage.title.split())
    return f"{title}\n{text}" if title else text


def canonical_title(title: str) -> str:
    """The entity a title names: "The Zone (2017 film)" -> "The Zone" (Wikipedia qualifiers off)."""
    title = " ".join(title.split())
    stripped = _TITLE_QUALIFIER.sub("", title)
    return stripped or title


def clean_triples(triples: Iterable[Triple], source_id: str) -> list[Triple]:
    """Collapse whitespace, replace lone surrogates, drop empty parts and self-loops,
    de-duplicate on normalized parts.

    The first surface form of a duplicate is kept; matching uses
    :func:`neocorrag_core.text.entities.normalize_entity` (case-folded), the same key the
    graph uses.
    What every store write goes through, so text that is not valid Unicode never reaches
    SQLite (:func:`~neocorrag_core.validation.clean_text`).
    """
    out: list[Triple] = []
    seen: set[tuple[str, str, str]] = set()
    for triple in triples:
        subject, relation, obj = (" ".join(clean_text(part).split()) for part in triple.key())
        head, tail = normalize_entity(subject), normalize_entity(obj)
        rel = " ".join(relation.split()).casefold()
        if not head or not tail or not rel or head == tail:
            continue
        key = (head, rel, tail)
        if key in seen:
            continue
        seen.add(key)
        out.append(Triple(subject, relation, obj, (source_id,)))
    return out


def truncate_words(text: str, max_words: int, *, passage_id: str, extractor: str) -> str:
    """Cut ``text`` to ``max_words`` (>= 1) words, warning once per passage (bounded
    extraction cost)."""
    if max_words < 1:
        raise ValueError(f"max_words must be >= 1, got {max_words}")
    words = text.split(" ")
    if len(words) <= max_words:
        return text
    logger.warning(
        "%s: passage %r has %d words; only the first %d are read (raise max_words to read more)",
        extractor,
        passage_id,
        len(words),
        max_words,
    )
    return " ".join(words[:max_words])
