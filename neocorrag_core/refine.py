"""Stage c: evidence-guided filtering (Eq. 8). Rendering the result is ``rendering``'s job."""

from __future__ import annotations

from collections.abc import Sequence

from neocorrag_core.types import DroppedPassage, EvidenceChain, KeepReason, KeptPassage, Passage


def refine_passages(
    passages: Sequence[Passage], chains: Sequence[EvidenceChain], top_n: int
) -> tuple[list[KeptPassage], list[DroppedPassage]]:
    """Eq. 8: keep the top-N by retrieval rank, and below that only chain-supporting passages.

    Support is decided by provenance (the passage is a source of a triple in a
    chosen chain), not by the paper's substring test: triples from an extractor
    rarely appear verbatim in the text. Original order is kept. When nothing
    would be kept, everything passes through, so the context is never empty.
    """
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
        if rank <= top_n:
            kept.append(KeptPassage(passage, rank, KeepReason.TOP_N, chain_ids))
        elif chain_ids:
            kept.append(KeptPassage(passage, rank, KeepReason.CHAIN, chain_ids))
        else:
            dropped.append(DroppedPassage(passage, rank))
    if not kept and passages:
        return passthrough(passages), []
    return kept, dropped


def passthrough(passages: Sequence[Passage]) -> list[KeptPassage]:
    """Every passage kept, unchanged, marked as passed through."""
    return [
        KeptPassage(passage, rank, KeepReason.PASSTHROUGH)
        for rank, passage in enumerate(passages, start=1)
    ]


__all__ = ["passthrough", "refine_passages"]
