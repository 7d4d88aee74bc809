"""Stage c: evidence-guided filtering (Eq. 8, widened by the keep mode).

Rendering the result is ``rendering``'s job; the links a keep mode may use come from
:mod:`neocorrag_core.chains.links`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from neocorrag_core.chains.config import KeepMode, keep_rule
from neocorrag_core.chains.links import PassageLinks
from neocorrag_core.types import (
    DroppedPassage,
    EvidenceChain,
    KeepReason,
    KeptPassage,
    Passage,
    Provenance,
)


def refine_passages(
    passages: Sequence[Passage],
    chains: Sequence[EvidenceChain],
    top_n: int,
    *,
    keep: KeepMode,
    links: Sequence[PassageLinks] | None = None,
    chain_support: bool | None = None,
    comparison: bool = False,
    provenance: Mapping[str, Provenance] | None = None,
) -> tuple[list[KeptPassage], list[DroppedPassage]]:
    """Keep the top-N by retrieval rank, plus what the keep mode ``keep`` adds below that
    (no default here: the default is ``MinerConfig.keep``'s, stated there once).

    ``keep="paper"`` is Eq. 8: the top-N, and below that only the sources of a triple in
    a chosen chain. The other modes add passages about a query entity and/or bridge
    passages (``links`` must then be given, one per passage, from
    :func:`~neocorrag_core.chains.links.link_passages`); ``chain_support`` overrides whether
    chain-cited passages are kept. The first reason that applies is recorded, in the
    order top-N, chain, query entity, bridge. Support is decided by provenance (the
    passage is a source of a triple in a chosen chain), not by the paper's substring
    test: triples from an extractor rarely appear verbatim in the text. Original order is
    kept. When nothing would be kept, everything passes through, so the context is never
    empty.

    ``comparison`` (the question is shaped like one,
    :func:`~neocorrag_core.chains.links.is_comparison`) narrows the modes that keep query-entity
    passages when at least two passages are titled after what the question names: the evidence of
    "Which is older, X or Y?" is X's and Y's own passages, so only the top-1, those passages and
    the passages they name are kept: this loses no gold passage and drops noise the link
    rules would keep.

    ``provenance`` (passage id -> :class:`~neocorrag_core.types.Provenance`, from the
    retrieval step: EviReform) keeps, in the modes that keep linked passages (all but
    ``"paper"``), a passage no rule above kept but that a residual query found on purpose
    for a bridge entity (``FOUND_HOP``) or that holds a fact selected as evidence
    (``EVIDENCE``): a hop searched for must not be dropped as unlinked. A passage the
    retrieval knows nothing about is decided by the rules above alone.
    """
    rule = keep_rule(keep, top_n=top_n, chain_support=chain_support)
    use_chains, use_entities, use_bridges = rule.chain_sources, rule.query_entities, rule.bridges
    if (use_entities or use_bridges) and (links is None or len(links) != len(passages)):
        raise ValueError(f"keep={keep!r} needs links for every passage (link_passages)")
    compared = _compared(keep, links, comparison)
    supporters: dict[str, list[int]] = {}
    for chain_index, chain in enumerate(chains):
        for pid in chain.source_ids:
            supporters.setdefault(pid, [])
            if chain_index not in supporters[pid]:
                supporters[pid].append(chain_index)
    kept: list[KeptPassage] = []
    dropped: list[DroppedPassage] = []
    for rank, passage in enumerate(passages, start=1):
        chain_ids = tuple(supporters.get(passage.id, ()))
        link = links[rank - 1] if links is not None else None
        reason: KeepReason | None = None
        if compared and link is not None:
            if rank == 1:
                reason = KeepReason.TOP_N
            elif link.titled:
                reason = KeepReason.QUERY_ENTITY
            elif link.named:
                reason = KeepReason.BRIDGE
        elif rank <= rule.top_n:
            reason = KeepReason.TOP_N
        elif use_chains and chain_ids:
            reason = KeepReason.CHAIN
        elif use_entities and link is not None and link.query_entity:
            reason = KeepReason.QUERY_ENTITY
        elif use_bridges and link is not None and link.bridge:
            reason = KeepReason.BRIDGE
        if reason is None and provenance and (use_entities or use_bridges):
            found = provenance.get(passage.id)
            if found is not None and found.bridge:
                reason = KeepReason.FOUND_HOP
            elif found is not None and found.evidence:
                reason = KeepReason.EVIDENCE
        if reason is None:
            dropped.append(DroppedPassage(passage, rank))
        else:
            kept.append(KeptPassage(passage, rank, reason, chain_ids))
    if not kept and passages:
        return passthrough(passages), []
    return kept, dropped


def rank_cut(
    top_n: int, *, keep: KeepMode, links: Sequence[PassageLinks] | None, comparison: bool
) -> int:
    """How many best-ranked passages :func:`refine_passages` keeps by rank alone with these
    arguments: ``top_n``, or 1 when it reads the question as a comparison."""
    return 1 if _compared(keep, links, comparison) else top_n


def _compared(keep: KeepMode, links: Sequence[PassageLinks] | None, comparison: bool) -> bool:
    """Whether :func:`refine_passages` narrows a comparison question to its compared passages:
    the mode keeps query-entity passages and two or more are titled after what it names."""
    titled = sum(link.titled for link in links or ())
    return comparison and keep_rule(keep).query_entities and titled >= 2


def passthrough(passages: Sequence[Passage]) -> list[KeptPassage]:
    """Every passage kept, unchanged, marked as passed through."""
    return [
        KeptPassage(passage, rank, KeepReason.PASSTHROUGH)
        for rank, passage in enumerate(passages, start=1)
    ]


__all__ = ["passthrough", "rank_cut", "refine_passages"]
