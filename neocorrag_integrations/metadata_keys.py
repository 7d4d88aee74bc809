"""Every ``neocorrag_*`` metadata key the LangChain and LlamaIndex adapters write.

One public module, imported by both adapters, so a key is spelled once and users can
import it instead of repeating the string::

    from neocorrag_integrations.metadata_keys import KEPT_REASON
    reasons = [doc.metadata[KEPT_REASON] for doc in refined]

The keys are the core's (:mod:`neocorrag_core.records.keys`, where they are documented):
the records every framework writes are built there.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from neocorrag_core.records.keys import ALL_KEYS as ALL_KEYS
from neocorrag_core.records.keys import CHAIN_IDS as CHAIN_IDS
from neocorrag_core.records.keys import CHAINS as CHAINS
from neocorrag_core.records.keys import DROPPED_IDS as DROPPED_IDS
from neocorrag_core.records.keys import DROPPED_RANKS as DROPPED_RANKS
from neocorrag_core.records.keys import EVIREFORM_EVIDENCE as EVIREFORM_EVIDENCE
from neocorrag_core.records.keys import EVIREFORM_NOTES as EVIREFORM_NOTES
from neocorrag_core.records.keys import EVIREFORM_RANK as EVIREFORM_RANK
from neocorrag_core.records.keys import EVIREFORM_SCORE as EVIREFORM_SCORE
from neocorrag_core.records.keys import FALLBACK as FALLBACK
from neocorrag_core.records.keys import FOCUSED as FOCUSED
from neocorrag_core.records.keys import FOUND_BY_GRAPH as FOUND_BY_GRAPH
from neocorrag_core.records.keys import FOUND_BY_KIND as FOUND_BY_KIND
from neocorrag_core.records.keys import FOUND_BY_QUERY as FOUND_BY_QUERY
from neocorrag_core.records.keys import GRAPH_KEYS as GRAPH_KEYS
from neocorrag_core.records.keys import GRAPH_SCORE as GRAPH_SCORE
from neocorrag_core.records.keys import GRAPH_VIA as GRAPH_VIA
from neocorrag_core.records.keys import IS_EVIDENCE_CHAINS as IS_EVIDENCE_CHAINS
from neocorrag_core.records.keys import KEPT_REASON as KEPT_REASON
from neocorrag_core.records.keys import NOTES as NOTES
from neocorrag_core.records.keys import NUM_CANDIDATES as NUM_CANDIDATES
from neocorrag_core.records.keys import PROVENANCE as PROVENANCE
from neocorrag_core.records.keys import QUERY_RANKS as QUERY_RANKS
from neocorrag_core.records.keys import REFINEMENT_KEYS as REFINEMENT_KEYS
from neocorrag_core.records.keys import REFORMULATION_KEYS as REFORMULATION_KEYS
from neocorrag_core.records.keys import RESIDUAL_QUERIES as RESIDUAL_QUERIES
from neocorrag_core.records.keys import RETRIEVAL_RANK as RETRIEVAL_RANK
from neocorrag_core.records.keys import RUN_KEYS as RUN_KEYS
from neocorrag_core.records.keys import TIMINGS as TIMINGS


def run_metadata(refined: Sequence[Any]) -> dict[str, Any]:
    """The metadata of the whole call (:data:`RUN_KEYS`) in one refined output.

    ``refined`` is what ``NeocorRAGCompressor`` or ``NeocorRAGPostprocessor`` returned
    (LangChain documents or LlamaIndex nodes). The keys sit on the first kept document
    when there is no chain document (the default ``chain_format="none"``; a block with no
    text, as ``"linking"`` gives when every chain sits in one kept document;
    ``include_chains=False``), otherwise on the chain document. ``{}`` for an output that
    carries none (not refined by neocorrag, or trimmed by a later step).
    """
    carriers = [d.metadata for d in refined if CHAINS in d.metadata]
    chain_docs = [m for m in carriers if m.get(IS_EVIDENCE_CHAINS) is True]
    found = (chain_docs or carriers or [{}])[0]
    return {key: found[key] for key in RUN_KEYS if key in found}


__all__ = [
    "ALL_KEYS",
    "CHAINS",
    "CHAIN_IDS",
    "DROPPED_IDS",
    "DROPPED_RANKS",
    "EVIREFORM_EVIDENCE",
    "EVIREFORM_NOTES",
    "EVIREFORM_RANK",
    "EVIREFORM_SCORE",
    "FALLBACK",
    "FOCUSED",
    "FOUND_BY_GRAPH",
    "FOUND_BY_KIND",
    "FOUND_BY_QUERY",
    "GRAPH_KEYS",
    "GRAPH_SCORE",
    "GRAPH_VIA",
    "IS_EVIDENCE_CHAINS",
    "KEPT_REASON",
    "NOTES",
    "NUM_CANDIDATES",
    "PROVENANCE",
    "QUERY_RANKS",
    "REFINEMENT_KEYS",
    "REFORMULATION_KEYS",
    "RESIDUAL_QUERIES",
    "RETRIEVAL_RANK",
    "RUN_KEYS",
    "TIMINGS",
    "run_metadata",
]
