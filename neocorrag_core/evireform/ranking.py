"""Stage g (ours): a final top-k that keeps each evidence chain together.

The paper's ranking (stages d-f) scores every passage on its own, so a pool that holds a
complete chain can still lose one of its hops from the top-k: the bridge passage ranks
high for the question, the next hop high only for its residual query, and three passages
that match the question's words push it out. Here every residual query that found a
passage *about its bridge entity* is a link ``(source passage, hop passage)``; the top-k
is filled with the best passage of the question first, then each link's two ends in
query order, then by the mixed score. Passages come back in mixed-score order.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from neocorrag_core.types import Passage

from .residual import names_entity
from .types import Proposition, ReformulationQuery


@dataclass(frozen=True)
class ChainLink:
    """One hop found by a residual query: the passage its bridge entity came from (``""``
    when unknown) and the passage the query found about that entity."""

    source: str
    hop: str


def about_entity(entity: str, title: str, text: str, *, lead_chars: int = 120) -> bool:
    """Whether a passage is about ``entity``: its title names it (or the entity names the
    title), or, for passages without a title, the opening of its text names it."""
    if not entity.strip():
        return False
    if title.strip():
        return names_entity(title, entity) or names_entity(entity, title)
    return names_entity(text[:lead_chars], entity)


def chain_top_k(
    order: Sequence[str], links: Sequence[ChainLink], k: int, *, lead: int = 1
) -> list[str]:
    """The top-``k`` ids: the first ``lead`` of ``order`` (the mixed-score ranking, best
    first), then each link whose missing ends still fit, in turn, then the rest of ``order``;
    returned in ``order``'s order. Link ends missing from ``order`` are ignored."""
    rank = {pid: i for i, pid in enumerate(order)}
    chosen: list[str] = []

    def take(*ids: str) -> None:
        # A link enters whole or not at all: half a chain is no better than any passage.
        missing = list(dict.fromkeys(p for p in ids if p in rank and p not in chosen))
        if len(chosen) + len(missing) <= k:
            chosen.extend(missing)

    for pid in order[: max(0, lead)]:
        take(pid)
    for link in links:
        take(link.source, link.hop)
    for pid in order:
        take(pid)
    return sorted(chosen, key=rank.__getitem__)


def chain_links(
    queries: Sequence[ReformulationQuery],
    results: dict[int, list[str]],
    evidence: Sequence[Proposition],
    passages: dict[str, Passage],
    order: Sequence[Passage],
) -> list[ChainLink]:
    """One :class:`ChainLink` per residual query whose bridge entity an ``evidence`` fact
    names and that found a passage about that entity: that passage (the best-ranked of its
    results about the bridge) and the best-ranked passage of the fact that named it."""
    rank = {p.id: i for i, p in enumerate(order)}
    links: list[ChainLink] = []
    for index, query in enumerate(queries):
        if not query.bridge:
            continue
        named = [
            pid
            for prop in evidence
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
                links.append(ChainLink(source, pid))
                break
    return links


__all__ = ["ChainLink", "about_entity", "chain_links", "chain_top_k"]
