"""Every ``neocorrag_*`` metadata key the LangChain and LlamaIndex adapters write.

One public module, imported by both adapters, so a key is spelled once and users can
import it instead of repeating the string::

    from neocorrag_integrations.metadata_keys import KEPT_REASON
    reasons = [doc.metadata[KEPT_REASON] for doc in refined]
"""

from __future__ import annotations

# --- written by NeocorRAGCompressor / NeocorRAGPostprocessor
KEPT_REASON = "neocorrag_kept_reason"
"""Why a document was kept: ``"top_n"``, ``"chain"``, ``"query_entity"``, ``"bridge"`` or
``"passthrough"`` (:class:`neocorrag_core.KeepReason`)."""
RETRIEVAL_RANK = "neocorrag_retrieval_rank"
"""1-based position of the document in the input (retrieval order)."""
CHAIN_IDS = "neocorrag_chain_ids"
"""Numbers (1-based, as in the chain block) of the chains this document supplied a triple to."""
FALLBACK = "neocorrag_fallback"
"""Why nothing was filtered (e.g. ``"no_triples"``), or ``None`` when chains were found."""
IS_EVIDENCE_CHAINS = "neocorrag_evidence_chains"
"""``True`` on the one extra document/node that holds the evidence chains."""
CHAINS = "neocorrag_chains"
"""On the chain document: one dict per chain: ``number``, ``text``, ``triples`` (each with
``subject``, ``relation``, ``object`` and the ``source_ranks`` of the documents it came from),
``source_ranks`` and ``source_ids`` of the whole chain, ``search_score``, ``lm_logprob``."""
DROPPED_RANKS = "neocorrag_dropped_ranks"
"""On the chain document: retrieval ranks of the documents that were dropped."""
DROPPED_IDS = "neocorrag_dropped_ids"
"""On the chain document: ids of the dropped documents (``None`` where a document had none)."""
NUM_CANDIDATES = "neocorrag_num_candidates"
"""On the chain document: how many candidate chains the search found."""
TIMINGS = "neocorrag_timings"
"""On the chain document: seconds per engine stage."""
FOCUSED = "neocorrag_focused"
"""``True`` on a document whose text was cut to its evidence sentences
(``miner_config={"passage_focus": "linked"}``); absent on whole documents."""

REFINEMENT_KEYS = (
    KEPT_REASON,
    RETRIEVAL_RANK,
    CHAIN_IDS,
    FALLBACK,
    IS_EVIDENCE_CHAINS,
    CHAINS,
    DROPPED_RANKS,
    DROPPED_IDS,
    NUM_CANDIDATES,
    TIMINGS,
    FOCUSED,
)
"""Every metadata key the compressor and the postprocessor may add."""

# --- written by the EvidenceReformulationRetriever of either framework
EVIREFORM_RANK = "neocorrag_evireform_rank"
"""1-based position of the document in the reformulated ranking."""
EVIREFORM_SCORE = "neocorrag_evireform_score"
"""The EviReform score that ranked the document (``None`` when the query was empty and the
wrapped retriever's results passed through)."""
FOUND_BY_QUERY = "neocorrag_found_by_query"
"""Text of the first query whose results held the document."""
FOUND_BY_KIND = "neocorrag_found_by_kind"
"""Kind of that query: ``"original"``, ``"question"`` (a name of the question the first
search found nothing about), ``"template"`` (a bridge entity with the question's open
relation words), ``"entities"`` (a bare bridge entity), ``"lm"`` or ``"repeat"``."""
QUERY_RANKS = "neocorrag_query_ranks"
"""Every query whose results held the document: ``{"query", "kind", "rank"}`` (1-based)."""
RESIDUAL_QUERIES = "neocorrag_residual_queries"
"""Every query sent after the original question (the same on each document of one call):
``{"text", "kind", "round"}``, in the order they were sent."""
EVIREFORM_EVIDENCE = "neocorrag_evireform_evidence"
"""The propositions selected as evidence (the same on each document of one call)."""

REFORMULATION_KEYS = (
    EVIREFORM_RANK,
    EVIREFORM_SCORE,
    FOUND_BY_QUERY,
    FOUND_BY_KIND,
    QUERY_RANKS,
    RESIDUAL_QUERIES,
    EVIREFORM_EVIDENCE,
)
"""Every metadata key the reformulating retrievers add."""

ALL_KEYS = REFINEMENT_KEYS + REFORMULATION_KEYS
"""Every key any adapter writes; all start with ``neocorrag_``."""

__all__ = [
    "ALL_KEYS",
    "CHAINS",
    "CHAIN_IDS",
    "DROPPED_IDS",
    "DROPPED_RANKS",
    "EVIREFORM_EVIDENCE",
    "EVIREFORM_RANK",
    "EVIREFORM_SCORE",
    "FALLBACK",
    "FOUND_BY_KIND",
    "FOUND_BY_QUERY",
    "IS_EVIDENCE_CHAINS",
    "KEPT_REASON",
    "NUM_CANDIDATES",
    "QUERY_RANKS",
    "REFINEMENT_KEYS",
    "REFORMULATION_KEYS",
    "RESIDUAL_QUERIES",
    "RETRIEVAL_RANK",
    "TIMINGS",
]
