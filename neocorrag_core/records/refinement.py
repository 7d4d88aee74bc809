"""A refinement's records: what each kept document says about why it is kept, and the
metadata of the whole call, as every framework writes them.

The refiners of both adapters hand the miner the passages of their documents (``positions``:
where each passage's document stands in the input; an earlier refinement's chain document
is not mined) and turn :func:`refinement_records` into copies of the kept documents and,
when the chain format writes a block, one chain document. The framework's part is the
copying only.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from neocorrag_core.records.keys import (
    CHAIN_IDS,
    CHAINS,
    DROPPED_IDS,
    DROPPED_RANKS,
    FALLBACK,
    FOCUSED,
    IS_EVIDENCE_CHAINS,
    KEPT_REASON,
    NOTES,
    NUM_CANDIDATES,
    RETRIEVAL_RANK,
    RUN_KEYS,
    TIMINGS,
)
from neocorrag_core.rendering import chain_text
from neocorrag_core.types import MiningResult, Passage


@dataclass(frozen=True)
class KeptRecord:
    """One kept document: where it stands in the input, the metadata to add to its copy,
    and its cut text (``None``: handed on whole)."""

    position: int
    metadata: dict[str, Any]
    text: str | None


@dataclass(frozen=True)
class RefinementRecords:
    """Everything a refiner writes for one call."""

    kept: list[KeptRecord]
    """The kept documents, in input order."""
    run: dict[str, Any]
    """The call's metadata (:data:`~neocorrag_core.records.keys.RUN_KEYS`): on the chain
    document when there is one, else already in the first kept record's metadata."""
    block: str
    """The chain block for a chain document ("" when none is written)."""
    sources: list[int]
    """Input positions of the documents the chains came from (the chain document's)."""

    @property
    def chain_metadata(self) -> dict[str, Any]:
        """The chain document's metadata."""
        return {IS_EVIDENCE_CHAINS: True, **self.run}


def refinement_records(
    result: MiningResult,
    passages: Sequence[Passage],
    positions: Sequence[int],
    doc_ids: Sequence[Any],
    *,
    read: int | None = None,
    include_chains: bool = True,
) -> RefinementRecords:
    """The records of ``result``, mined from ``passages``.

    Parameters
    ----------
    result: what the miner returned for ``passages``.
    passages: the passages the miner was given, in order.
    positions: the input position of each mined document; ``positions[read:]`` were not
        mined (past ``WorkLimits.max_documents``) and count as dropped.
    doc_ids: the id of every input document (``None`` where one had none).
    read: how many of ``positions`` were mined (``None``: all).
    include_chains: write the chain block when the chain format has one.

    Returns
    -------
    The kept documents' metadata and the call's, 1-based ranks as the keys document them.
    """
    read = len(positions) if read is None else read
    index_of = {p.id: positions[j] for j, p in enumerate(passages)}

    def ranks(passage_ids: Any) -> list[int]:
        return sorted({index_of[pid] for pid in passage_ids if pid in index_of})

    chains, sources = [], set()
    for number, chain in enumerate(result.chains, start=1):
        indices = ranks(chain.source_ids)
        sources.update(indices)
        chains.append(
            {
                "number": number,
                "text": chain.text,
                "triples": [
                    {
                        "subject": t.subject,
                        "relation": t.relation,
                        "object": t.object,
                        "source_ranks": [i + 1 for i in ranks(t.source_ids)],
                    }
                    for t in chain.triples
                ],
                "source_ranks": [i + 1 for i in indices],
                "source_ids": [doc_ids[i] for i in indices],
                "search_score": float(chain.search_score),
                "lm_logprob": None if chain.lm_logprob is None else float(chain.lm_logprob),
            }
        )
    dropped = [positions[d.rank - 1] for d in result.dropped] + list(positions[read:])
    run = {
        CHAINS: chains,
        DROPPED_RANKS: [i + 1 for i in dropped],
        DROPPED_IDS: [doc_ids[i] for i in dropped],
        NUM_CANDIDATES: result.num_candidates,
        TIMINGS: dict(result.timings),
        NOTES: list(result.notes),
    }
    block = chain_text(result) if include_chains else ""
    kept: list[KeptRecord] = []
    for k in result.kept:
        added = {
            KEPT_REASON: k.reason.value,
            RETRIEVAL_RANK: positions[k.rank - 1] + 1,
            CHAIN_IDS: [i + 1 for i in k.chain_indices],
            FALLBACK: result.fallback,
            **({FOCUSED: True} if k.full_text is not None else {}),
            **(run if not block and not kept else {}),  # no chain document: on the first
        }
        text = None if k.full_text is None else k.passage.text
        kept.append(KeptRecord(index_of[k.passage.id], added, text))
    return RefinementRecords(kept, run, block, sorted(sources))


def run_metadata(refined: Sequence[Any]) -> dict[str, Any]:
    """The metadata of the whole call (:data:`~neocorrag_core.records.keys.RUN_KEYS`) in
    one refined output.

    ``refined`` is what a refiner returned (LangChain documents or LlamaIndex nodes: any
    objects with a ``metadata`` dict). The keys sit on the first kept document when there
    is no chain document (the default ``chain_format="none"``; a block with no text, as
    ``"linking"`` gives when every chain sits in one kept document;
    ``include_chains=False``), otherwise on the chain document. ``{}`` for an output that
    carries none (not refined by neocorrag, or trimmed by a later step).
    """
    return run_metadata_of([d.metadata for d in refined])


def run_metadata_of(metadata: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """:func:`run_metadata` given the metadata dict of each document of the output, in
    order: for a caller that has read them already (the evidence picture)."""
    carriers = [m for m in metadata if CHAINS in m]
    chain_docs = [m for m in carriers if m.get(IS_EVIDENCE_CHAINS) is True]
    found: Mapping[str, Any] = (chain_docs or carriers or [{}])[0]
    return {key: found[key] for key in RUN_KEYS if key in found}


__all__ = [
    "KeptRecord",
    "RefinementRecords",
    "refinement_records",
    "run_metadata",
    "run_metadata_of",
]
