"""Stage c: evidence-guided filtering (Eq. 8) and rendering of the chains for the reader."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from neocorrag_core.types import DroppedPassage, EvidenceChain, KeepReason, KeptPassage, Passage

if TYPE_CHECKING:
    from neocorrag_core.types import MiningResult

CHAIN_BLOCK_HEADER = "Evidence chains:"


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


def render_chains(chains: Sequence[EvidenceChain]) -> str:
    """A numbered block of chain texts for the answering model; '' when there are none."""
    if not chains:
        return ""
    lines = [CHAIN_BLOCK_HEADER]
    lines.extend(f"{i}. {chain.text}" for i, chain in enumerate(chains, start=1))
    return "\n".join(lines)


def render_passage(passage: Passage) -> str:
    """A passage as the reader sees it: ``title: text`` (or the text alone)."""
    return f"{passage.title}: {passage.text}" if passage.title else passage.text


def render_context(result: MiningResult, *, chains_first: bool = True) -> str:
    """The answer-ready context: the chain block and the kept passages, blank-line separated."""
    blocks = [render_passage(p) for p in result.passages]
    chain_block = result.chain_text
    if chain_block:
        blocks = [chain_block, *blocks] if chains_first else [*blocks, chain_block]
    return "\n\n".join(blocks)
