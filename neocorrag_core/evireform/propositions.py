"""Stage a: the retrieved passages' triples become propositions tied to their passages."""

from __future__ import annotations

import re
from collections.abc import Sequence

from neocorrag_core.graph import normalize_entity
from neocorrag_core.types import Passage, Triple

from .types import Proposition

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
LEAD_SENTENCE_CHARS = 200


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


def _from_triple(triple: Triple, passage_id: str) -> Proposition:
    surface = tuple(dict.fromkeys(e for e in (triple.subject, triple.object) if e.strip()))
    keys = tuple(dict.fromkeys(k for k in map(normalize_entity, surface) if k))
    return Proposition(triple.text, (passage_id,), keys, surface, triple)


def _lead_sentence(passage: Passage) -> Proposition:
    body = " ".join(passage.text.split())
    lead = _SENTENCE_END.split(body, maxsplit=1)[0][:LEAD_SENTENCE_CHARS]
    title = " ".join(passage.title.split())
    text = f"{title}: {lead}" if title and lead else title or lead
    key = normalize_entity(title) if title else ""
    return Proposition(text, (passage.id,), (key,) if key else (), (title,) if key else ())


__all__ = ["build_propositions"]
