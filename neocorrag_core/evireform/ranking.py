"""Stage g (ours): a final top-k that keeps each evidence chain together.

The paper's ranking (stages d-f) scores every passage on its own, so a pool that holds a
complete chain can still lose one of its hops from the top-k: the bridge passage ranks
high for the question, the next hop high only for its residual query, and three passages
that match the question's words push it out. Here every residual query that found a
passage *about its bridge entity* is a link ``(source passage, hop passage)``. The top-k is
filled with the question's *anchors* first (passages whose title the question names: the
first hop of a bridge question, both sides of a comparison), then the best passage by the
mixed score, then each link's two ends in query order, then passages whose title a passage
already chosen names (the hop it points to, like a hyperlink), then by the mixed score.
Passages come back in mixed-score order.

Anchors are ours, not the paper's: residual queries about a bridge entity ("American rock
band") shift the mixed score towards passages about the bridge, and on comparison
questions ("Are Local H and For Against both from the United States?") that pushed the
passages about the compared entities out of the top-k although the first search had
found both.

Title pointers are ours too: a chain's passages name each other ("... released for the
Nintendo Entertainment System" points to the page "Nintendo Entertainment System"), so a
free slot goes first to a passage that a chosen one points to, and that passage can point
to the next.

Shared names and a cap per page are ours as well: after the pointers,
a free slot goes to a passage of the first search that names something a chosen passage
names ("John Knox" in the page about Margaret Knox and in the page about Presbyterianism),
and in the free slots a page with two passages chosen (by any step) gets no more while
another passage can take the slot (MuSiQue paragraphs share titles: four paragraphs of
"Atomic bombings of Hiroshima and Nagasaki" hold one entity and pushed out the "Enola Gay"
page the first search had ranked first).

Later rounds continue chains (ours): a query's link starts from the
facts it was written from, so the facts a second round selects cannot move a first-round
link to another source, and a link found by a second-round query enters only when its
source is already chosen, i.e. when it is the next hop of a chain in the top-k. Without
this a second round would trade complete chains for links from passages outside them
("Publix" -> "Publix" for a question about Indiana's alcohol laws).
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

from neocorrag_core.text.capitals import capitalized_spans
from neocorrag_core.types import Passage

from .residual import is_date_or_number, is_name_key, match_key, names_entity
from .types import Proposition, ReformulationQuery


@dataclass(frozen=True)
class ChainLink:
    """One hop found by a residual query: the passage its bridge entity came from (``""``
    when unknown) and the passage the query found about that entity."""

    source: str
    hop: str
    round: int = 1
    """The round of the query that found the hop; links of later rounds only continue a
    chain (see :func:`chain_top_k`)."""


def about_entity(entity: str, title: str, text: str, *, lead_chars: int = 120) -> bool:
    """Whether a passage is about ``entity``: its title names it (or the entity names the
    title), or, for passages without a title, the opening of its text names it."""
    if not entity.strip():
        return False
    if title.strip():
        return names_entity(title, entity) or names_entity(entity, title)
    return names_entity(text[:lead_chars], entity)


_QUALIFIER = re.compile(r"\s*\([^)]*\)\s*$")


def title_named(question: str, title: str) -> bool:
    """Whether ``question`` names the whole ``title`` (a trailing parenthesised qualifier
    such as ``(cocktail)`` or ``(1930 film)`` left out), as consecutive words, case and
    accents ignored: ``Gibson (cocktail)`` is named by "Do Gibson and Zurracapote both
    contain gin?", ``Silene stenophylla`` is not named by "Are Ferocactus and Silene ...?"."""
    key = _title_key(title)
    return bool(key) and f" {key} " in f" {match_key(question)} "


def _title_key(title: str) -> str:
    return match_key(_QUALIFIER.sub("", title))


def question_anchors(
    question: str, passages: Sequence[Passage], first_ranks: dict[str, int], *, limit: int
) -> list[str]:
    """Up to ``limit`` ids of ``passages`` whose title the question names
    (:func:`title_named`), one per distinct title, best first-search rank first
    (``first_ranks``: id -> rank in the question's own results; passages it did not return
    come last, in ``passages`` order).

    One per title: several passages of one page ("iPhone" twice, "Catalan language" seven
    times in a MuSiQue pool) are one entity, and anchoring them all would fill the top-k
    with the first hop."""
    if limit <= 0:
        return []
    arrival = {p.id: i for i, p in enumerate(passages)}
    ranked = sorted(passages, key=lambda p: (first_ranks.get(p.id, len(arrival)), arrival[p.id]))
    question_key = f" {match_key(question)} "
    by_title: dict[str, str] = {}  # title key -> its best-ranked passage
    for passage in ranked:
        key = _title_key(passage.title)
        if key and f" {key} " in question_key:
            by_title.setdefault(key, passage.id)
    return list(by_title.values())[:limit]


def title_pointers(passages: Sequence[Passage]) -> dict[str, list[str]]:
    """Passage id -> the ids of the other passages whose title its text names, in
    ``passages`` order: the title (a trailing qualifier left out) as consecutive words,
    accents ignored and **case kept**, so "the band" does not name the page "The Band".
    Passages with the same title (case ignored) never point to each other (seven "Catalan
    language" paragraphs are one page); titles that are a number, a date or only function
    words ("It", "1990") and passages without a title are never pointed to."""
    keys = [_title_key(p.title) for p in passages]
    keyed = [(p, key, _pointer_form(p.title, key)) for p, key in zip(passages, keys, strict=True)]
    out: dict[str, list[str]] = {}
    for passage, own in zip(passages, keys, strict=True):
        text = f" {match_key(passage.text, fold_case=False)} "
        out[passage.id] = [
            other.id
            for other, key, form in keyed
            if form and key != own and other.id != passage.id and f" {form} " in text
        ]
    return out


def _pointer_form(title: str, key: str) -> str:
    """The title as a text must write it to point to it (``key``: its :func:`_title_key`),
    or "" when it cannot be pointed to."""
    if not is_name_key(key):
        return ""
    return match_key(_QUALIFIER.sub("", title), fold_case=False)


def shared_names(
    passages: Sequence[Passage], question: str, *, among: Collection[str]
) -> dict[str, list[str]]:
    """Passage id -> the ids in ``among`` (other passages) that name something it names
    too, in ``passages`` order: a name is a capitalised span of at least two words in the
    text, or the title ("John Knox", "Cairo University"), case and accents ignored; names
    the question gives, numbers and dates do not count (every passage the question
    retrieved shares those)."""
    question_key = f" {match_key(question)} "
    names = {p.id: _names(p, question_key) for p in passages}
    return {
        p.id: [
            other.id
            for other in passages
            if other.id in among and other.id != p.id and names[p.id] & names[other.id]
        ]
        for p in passages
    }


def _names(passage: Passage, question_key: str) -> set[str]:
    spans = [*capitalized_spans(passage.text), passage.title]
    keys = {match_key(s) for s in spans if s}
    return {
        key
        for key in keys
        if len(key.split()) >= 2 and not is_date_or_number(key) and f" {key} " not in question_key
    }


def chain_top_k(
    order: Sequence[str],
    links: Sequence[ChainLink],
    k: int,
    *,
    lead: int = 1,
    anchors: Sequence[str] = (),
    pointers: Mapping[str, Sequence[str]] | None = None,
    neighbours: Mapping[str, Sequence[str]] | None = None,
    pages: Mapping[str, str] | None = None,
    max_per_page: int | None = None,
) -> list[str]:
    """The top-``k`` ids: the ``anchors`` (at most ``k``), then the first ``lead`` of
    ``order`` (the mixed-score ranking, best first), then each link whose missing ends
    still fit, in turn (a link of round 2 or later only when its source is already chosen),
    then (with ``pointers``, id -> ids it points to, see
    :func:`title_pointers`) the best-ordered passage a chosen one points to, again and
    again, then (with ``neighbours``, id -> ids that share a name with it, see
    :func:`shared_names`) the best-ordered passage that shares a name with a chosen one,
    again and again, then the rest of ``order``; returned in ``order``'s order. With
    ``pages`` (id -> page key, e.g. the title; ``""`` = a page of its own) and
    ``max_per_page``, those last three steps pass over a passage whose page already has
    ``max_per_page`` chosen while another passage can take the slot. Anchors, link ends,
    pointers and neighbours missing from ``order`` are ignored."""
    rank = {pid: i for i, pid in enumerate(order)}
    chosen: list[str] = []
    page_of = pages or {}

    def take(*ids: str) -> None:
        # A link enters whole or not at all: half a chain is no better than any passage.
        missing = list(dict.fromkeys(p for p in ids if p in rank and p not in chosen))
        if len(chosen) + len(missing) <= k:
            chosen.extend(missing)

    def crowded(pid: str) -> bool:
        page = page_of.get(pid, "")
        if max_per_page is None or not page:
            return False
        return sum(1 for c in chosen if page_of.get(c, "") == page) >= max_per_page

    for pid in anchors:
        take(pid)
    for pid in order[: max(0, lead)]:
        take(pid)
    for link in links:
        # A later round follows a bridge of the chain it continues; a later-round link
        # from elsewhere would split the slots between two half chains.
        if link.round > 1 and link.source not in chosen:
            continue
        take(link.source, link.hop)
    for follow in (pointers, neighbours):
        while follow and len(chosen) < k:
            reached = {t for pid in chosen for t in follow.get(pid, ())}
            nxt = next(
                (p for p in order if p in reached and p not in chosen and not crowded(p)), None
            )
            if nxt is None:
                break
            take(nxt)
    for pid in order:
        if not crowded(pid):
            take(pid)
    for pid in order:
        take(pid)
    return sorted(chosen, key=rank.__getitem__)


def chain_links(
    queries: Sequence[ReformulationQuery],
    results: dict[int, list[str]],
    evidence: Sequence[Proposition],
    passages: dict[str, Passage],
    order: Sequence[Passage],
    *,
    evidence_upto: Mapping[int, int] | None = None,
) -> list[ChainLink]:
    """One :class:`ChainLink` per residual query whose bridge entity an ``evidence`` fact
    names and that found a passage about that entity: that passage (the best-ranked of its
    results about the bridge) and the best-ranked passage of the fact that named it. A
    query of kind ``"question"`` (a name of the question itself) links ``""`` to its first
    result about the name, else its first result that names it.

    With ``evidence_upto`` (round -> how many leading ``evidence`` facts had been selected
    when that round's queries were written), a query's source comes only from the facts it
    was written from; without it every fact counts."""
    rank = {p.id: i for i, p in enumerate(order)}
    links: list[ChainLink] = []
    for index, query in enumerate(queries):
        if not query.bridge:
            continue
        if query.kind == "question":
            # The question's own entity: no fact named it, so the hop has no source; the
            # best result about it (by title, else naming it anywhere) starts the chain.
            hits = [passages[pid] for pid in results.get(index, []) if pid in passages]
            about = [p.id for p in hits if about_entity(query.bridge, p.title, p.text)]
            naming = [p.id for p in hits if names_entity(p.text, query.bridge)]
            hop = next(iter(about + naming), None)
            if hop is not None:
                links.append(ChainLink("", hop))
            continue
        known = evidence[: (evidence_upto or {}).get(query.round, len(evidence))]
        named = [
            pid
            for prop in known
            if any(names_entity(s, query.bridge) for s in prop.surface_entities)
            for pid in prop.passage_ids
            if pid in rank
        ]
        if not named:
            continue
        source = min(named, key=rank.__getitem__)
        for pid in results.get(index, []):
            found = passages.get(pid)
            if found is None or pid == source:
                continue
            if about_entity(query.bridge, found.title, found.text):
                links.append(ChainLink(source, pid, query.round))
                break
    return links


__all__ = [
    "ChainLink",
    "about_entity",
    "chain_links",
    "chain_top_k",
    "question_anchors",
    "shared_names",
    "title_named",
    "title_pointers",
]
