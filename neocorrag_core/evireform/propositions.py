"""Stage a: the retrieved passages' triples become propositions tied to their passages."""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import lru_cache

from neocorrag_core.rendering import FACT_SENTENCE_CHARS, fact_sentences, lead_fact
from neocorrag_core.text.capitals import capitalized_spans
from neocorrag_core.text.entities import normalize_entity
from neocorrag_core.text.relations import relation_position
from neocorrag_core.types import Passage, Triple

from .types import Proposition

LEAD_SENTENCE_CHARS = FACT_SENTENCE_CHARS


def build_propositions(
    passages: Sequence[Passage], triples_per_passage: Sequence[Sequence[Triple]]
) -> list[Proposition]:
    """One proposition per distinct fact, remembering every passage that states it.

    A passage without triples still gets one proposition, its title and lead
    sentence, so it can be selected and scored; its only entity is its title.
    """
    if len(passages) != len(triples_per_passage):
        raise ValueError(
            f"got triples for {len(triples_per_passage)} passages but {len(passages)} passages"
        )
    by_text: dict[str, Proposition] = {}
    for passage, triples in zip(passages, triples_per_passage, strict=True):
        made = [_from_triple(t, passage.id) for t in triples] or [_lead_sentence(passage)]
        for prop in made:
            if not prop.text:
                continue
            old = by_text.get(prop.text)
            if old is None:
                by_text[prop.text] = prop
            elif passage.id not in old.passage_ids:
                by_text[prop.text] = Proposition(
                    old.text,
                    (*old.passage_ids, passage.id),
                    old.entities,
                    old.surface_entities,
                    old.triple,
                )
    return list(by_text.values())


def relation_sentences(
    passages: Sequence[Passage],
    words: Sequence[str],
    *,
    max_names: int = 3,
) -> list[Proposition]:
    """One proposition per sentence that states one of the question's relation ``words``
    ("His father was Thomas Stanley" for "father"); its entities are the sentence's names,
    those after the relation word first (nearest first), at most ``max_names``.

    Triple extractors miss relations, and the next hop hides behind them: a sentence that
    says the relation the question asks about names the bridge even when no triple does.
    """
    if not words:
        return []
    found: list[Proposition] = []
    for passage in passages:
        for sentence in fact_sentences(passage.text):
            at = relation_position(sentence, words)
            if at < 0:
                continue
            names = _names_near(sentence, at)[: max(0, max_names)]
            keys = tuple(dict.fromkeys(k for k in map(normalize_entity, names) if k))
            if keys:
                text = sentence[:FACT_SENTENCE_CHARS]
                found.append(Proposition(text, (passage.id,), keys, names))
    return found


_SEGMENT = re.compile(r"[,;:()\[\]\"“”]|\s+and\s+|\s+or\s+")


def _names_near(sentence: str, at: int) -> tuple[str, ...]:
    """The names of a sentence (capitalized spans of its comma-free segments), those that
    start at or after character ``at`` first in reading order, then the earlier ones from
    the nearest back."""
    after: list[str] = []
    before: list[str] = []
    position = 0
    for segment in _SEGMENT.split(sentence):
        start = sentence.find(segment, position) if segment else position
        position = max(position, start + len(segment))
        cursor = 0  # spans come in reading order: look for each after the previous one
        for span in capitalized_spans(segment):
            found = _whole_word(span.split()[0]).search(segment, cursor)
            offset = found.start() if found else cursor
            cursor = found.end() if found else cursor
            (after if start + offset >= at else before).append(span)
    return tuple(dict.fromkeys([*after, *reversed(before)]))


@lru_cache(maxsize=1024)
def _whole_word(word: str) -> re.Pattern[str]:
    """The pattern of ``word`` as a whole word, kept compiled: the names of the sentences a
    process reads are more distinct words than :mod:`re`'s own cache (512 patterns) holds,
    which would compile most of them again on every call."""
    return re.compile(rf"(?<!\w){re.escape(word)}(?!\w)")


def _from_triple(triple: Triple, passage_id: str) -> Proposition:
    surface = tuple(dict.fromkeys(e for e in (triple.subject, triple.object) if e.strip()))
    keys = tuple(dict.fromkeys(k for k in map(normalize_entity, surface) if k))
    return Proposition(triple.text, (passage_id,), keys, surface, triple)


def _lead_sentence(passage: Passage) -> Proposition:
    text = lead_fact(passage.title, passage.text)
    title = " ".join(passage.title.split())
    key = normalize_entity(title) if title else ""
    return Proposition(text, (passage.id,), (key,) if key else (), (title,) if key else ())


__all__ = ["build_propositions", "relation_sentences"]
