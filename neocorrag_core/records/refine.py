"""One refiner call over an adapter's documents, the same in every framework.

The adapter reads its documents into :data:`~neocorrag_core.records.documents.Fields`;
:func:`refine_fields` decides which of them are mined (an earlier refinement's chain document
is not evidence; documents past the miner's cap are not read), mines them, and returns the
records the adapter writes into copies of its objects (:func:`refinement_records`), with the
id of the chain document when the chain format writes a block. The adapter's part is the
copying only.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass

from neocorrag_core.chains.config import MinerConfig
from neocorrag_core.chains.miner import EvidenceChainMiner
from neocorrag_core.evireform.provenance import provenance_in_metadata
from neocorrag_core.limits import cap_documents, collecting_notes
from neocorrag_core.records.documents import Fields, to_passages
from neocorrag_core.records.keys import IS_EVIDENCE_CHAINS
from neocorrag_core.records.refinement import RefinementRecords, refinement_records


@dataclass(frozen=True)
class Refined:
    """What one refiner call writes: the records, and the chain document's id."""

    records: RefinementRecords
    chain_id: str
    """``neocorrag-chains-<digest of query and block>`` ("" when no block is written)."""


def refine_fields(
    miner: EvidenceChainMiner,
    query: str,
    fields: Sequence[Fields],
    config: MinerConfig,
    *,
    include_chains: bool = True,
) -> Refined:
    """Refine the documents read as ``fields`` (checked, in retrieval order) for ``query``.

    Parameters
    ----------
    miner: the engine (its limits cap how many documents are read).
    query: the checked query.
    fields: every input document's fields; a chain document of an earlier refinement
        (``metadata["neocorrag_evidence_chains"]``) is replaced by this call's, not mined.
    config: the configuration the call runs, already checked.
    include_chains: write the chain block when the chain format has one.

    Returns
    -------
    The records (positions index ``fields``) and the chain document's id.

    Examples
    --------
    >>> refined = refine_fields(miner, "Who directed Up?", fields, miner.config)  # doctest: +SKIP
    >>> [r.position for r in refined.records.kept]  # doctest: +SKIP
    [0, 2]
    """
    positions = [
        i for i, item in enumerate(fields) if item[2].get(IS_EVIDENCE_CHAINS) is not True
    ] or list(range(len(fields)))
    with collecting_notes() as capped:  # documents past the cap are dropped unread
        read = cap_documents(positions, miner.limits)
    passages = to_passages([fields[i] for i in read])
    # What an EviReform retriever before this refiner knows: a hop it searched for on
    # purpose is kept even when nothing links it to the other documents.
    found = provenance_in_metadata(passages)
    result = miner.mine_unchecked(query, passages, config, provenance=found)
    result.notes = [*capped, *result.notes]
    records = refinement_records(
        result,
        passages,
        positions,
        [f[0] for f in fields],
        read=len(read),
        include_chains=include_chains,
    )
    digest = hashlib.sha256(f"{query}\n{records.block}".encode()).hexdigest()[:16]
    return Refined(records, f"neocorrag-chains-{digest}" if records.block else "")


__all__ = ["Refined", "refine_fields"]
