"""Which retrieved passages the evidence ties to the question, besides the chosen chains.

The paper's stage c keeps a passage below the top-N only when a chosen chain cites it
(Eq. 8). That drops gold passages whenever no chosen chain reaches them: the five chosen
chains crowd around one query entity, the hop to a second entity's passage is reachable
only through a pruned triple, or the bridge to the next hop is named differently
("West Chicago High School" in one passage, "West Chicago, Illinois" in the next). This
module computes the two cheap, local signals that recover most of those passages:

* **query entity**: the passage is *about* something the question names (its topic is
  mentioned in the question, or one of its triples has a capitalised query entity as
  subject or object);
* **bridge**: the passage is linked to an *anchor* (the best-ranked passage or a
  query-entity passage), either because the anchor's text names the passage's topic, or by
  sharing an entity with the anchor's triples that is not itself a query entity and not a
  hub (an entity in more than half of the passages, and in at least three).

A passage's *topic* is its title without a trailing qualifier ("Hello Love (song)" ->
"Hello Love", "West Chicago, Illinois" -> "West Chicago"), or, without a title, the most
frequent subject of its triples. Everything here is pure string and set work on the
triples the miner already has: no model call.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from neocorrag_core.text.entities import normalize_entity
from neocorrag_core.types import Passage, Triple

_MIN_TOPIC_CHARS = 3
# An entity shared by more than this fraction of the passages links everything to
# everything ("United States", a year); it is no evidence of a hop.
_HUB_FRACTION = 0.5


@dataclass(frozen=True)
class PassageLinks:
    """What ties one passage to the question, apart from chain support."""

    topic: str
    """The normalized topic (title without qualifier, else the most frequent subject)."""
    query_entity: bool
    """The passage is about something the question names."""
    bridge: bool
    """The passage is linked to an anchor passage (topic named there, or a shared entity)."""
    linked_to: tuple[int, ...] = ()
    """0-based positions of the anchor passages it is linked to."""
    titled: bool = False
    """Its topic is something the question names (a query entity, or a phrase of the
    question); narrower than ``query_entity``, which a triple naming one also sets."""
    named: bool = False
    """An anchor passage's text names its topic (the narrower half of ``bridge``)."""


def _without_qualifier(title: str) -> str:
    """``title`` without a trailing ``(qualifier)`` and the space before it. String
    searches, not the regex ``\\s*\\([^)]*\\)\\s*$``, which is quadratic on a long run of
    spaces or parentheses (16,000 spaces took 1.4 s, and titles come from user metadata)."""
    text = title.rstrip()
    if not text.endswith(")"):
        return title
    before = text.rfind(")", 0, len(text) - 1)  # the qualifier holds no ")"
    start = text.find("(", before + 1, len(text) - 1)
    return title if start < 0 else text[:start].rstrip()


def passage_topic(passage: Passage, triples: Sequence[Triple]) -> str:
    """Normalized topic of a passage: its title without a trailing qualifier, else the
    most frequent subject among its triples ("" when it has neither)."""
    title = _without_qualifier(passage.title or "").split(",")[0].strip()
    if title:
        return normalize_entity(title)
    counts = Counter(normalize_entity(t.subject) for t in triples)
    return counts.most_common(1)[0][0] if counts else ""


def mentions(text: str, name: str) -> bool:
    r"""Whether normalized ``text`` names ``name`` as a whole phrase (not inside a word).

    What ``(?<!\w)name(?!\w)`` matches, by substring search: no pattern is compiled from
    ``name`` (a title of a megabyte would be parsed into one on every call)."""
    if len(name) < _MIN_TOPIC_CHARS:
        return False
    start = text.find(name)
    while start >= 0:
        end = start + len(name)
        if (start == 0 or not _is_word(text[start - 1])) and (
            end == len(text) or not _is_word(text[end])
        ):
            return True
        start = text.find(name, start + 1)
    return False


def _is_word(char: str) -> bool:
    r"""Whether ``char`` is a regex word character (``\w``: alphanumeric or ``_``)."""
    return char.isalnum() or char == "_"


def is_name(entity: str) -> bool:
    """Whether ``entity`` looks like a name (a capital or a digit), not a common noun the
    n-gram matcher found among the graph's nodes ("director", "father")."""
    return any(ch.isupper() or ch.isdigit() for ch in entity)


def _without_longer(question: str, topic: str, entities: set[str]) -> str:
    """The question with every longer query entity containing ``topic`` blanked out, so
    "Fallen City" is not found in "Love in a Fallen City"."""
    for entity in sorted(entities, key=len, reverse=True):
        if len(entity) > len(topic) and mentions(entity, topic):
            question = question.replace(entity, " ")
    return question


def entity_keys(triples: Iterable[Triple]) -> set[str]:
    """The normalized subjects and objects of ``triples``."""
    return {normalize_entity(name) for t in triples for name in (t.subject, t.object)}


def link_passages(
    query: str,
    query_entities: Sequence[str],
    passages: Sequence[Passage],
    per_passage: Sequence[Sequence[Triple]],
    *,
    anchors_top: int = 1,
) -> list[PassageLinks]:
    """The links of every passage (same order as ``passages``).

    Args:
        query: the question.
        query_entities: E_q, the names the miner found in the question.
        passages: the retrieved passages, best first.
        per_passage: each passage's triples (as the triple source returned them).
        anchors_top: the best-ranked passages that count as anchors even when they hold
            no query entity (the retriever's own best guess at the first hop).
    """
    if len(per_passage) != len(passages):
        raise ValueError("per_passage must hold one list of triples per passage")
    question = normalize_entity(query)
    # Lower-case entities are common nouns the n-gram matcher found among the graph's
    # nodes ("director", "father"); a passage that mentions one is not about the question.
    wanted = {normalize_entity(e) for e in query_entities if is_name(e)} - {""}
    entity_sets = [entity_keys(ts) for ts in per_passage]
    topics = [passage_topic(p, ts) for p, ts in zip(passages, per_passage, strict=True)]
    texts = [normalize_entity(f"{p.title} . {p.text}") for p in passages]
    spread = Counter(e for es in entity_sets for e in es)
    hub_limit = max(2, int(_HUB_FRACTION * len(passages)))
    titled = [
        topics[i] in wanted or mentions(_without_longer(question, topics[i], wanted), topics[i])
        for i in range(len(passages))
    ]
    about = [titled[i] or bool(entity_sets[i] & wanted) for i in range(len(passages))]
    anchors = [i for i in range(len(passages)) if i < anchors_top or about[i]]
    links: list[PassageLinks] = []
    for i in range(len(passages)):
        own = {e for e in entity_sets[i] - wanted if spread[e] <= hub_limit}
        named = {j for j in anchors if j != i and mentions(texts[j], topics[i])}
        linked = tuple(j for j in anchors if j in named or (j != i and own & entity_sets[j]))
        links.append(
            PassageLinks(topics[i], about[i], bool(linked), linked, titled[i], bool(named))
        )
    return links


_YES_NO_OPENERS = ("are", "were", "is", "was", "do", "does", "did")


def is_comparison(query: str) -> bool:
    """Whether ``query`` is shaped like a comparison: it offers alternatives (" or ") or
    asks yes/no ("Are X and Y both ...?"). English-only, like the rest of the link rules;
    :func:`~neocorrag_core.chains.keep.refine_passages` also needs two passages titled after
    what the question names before it treats the question as one."""
    words = query.strip().lower().split()
    return bool(words) and (words[0] in _YES_NO_OPENERS or "or" in words)


__all__ = [
    "PassageLinks",
    "entity_keys",
    "is_comparison",
    "is_name",
    "link_passages",
    "mentions",
    "passage_topic",
]
