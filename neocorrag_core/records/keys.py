"""Every ``neocorrag_*`` metadata key a refinement or a reformulation writes on a document.

The records (:mod:`neocorrag_core.records.refinement`, :mod:`~neocorrag_core.records.reformulation`)
are built with these keys in the core, so every framework writes the same ones; the adapters'
public module :mod:`neocorrag_integrations.metadata_keys` re-exports them, so a user imports a
key instead of repeating the string::

    from neocorrag_integrations.metadata_keys import KEPT_REASON
    reasons = [doc.metadata[KEPT_REASON] for doc in refined]
"""

from __future__ import annotations

from neocorrag_core.evireform.provenance import PROVENANCE_KEY

# --- written by NeocorRAGCompressor / NeocorRAGPostprocessor
KEPT_REASON = "neocorrag_kept_reason"
"""Why a document was kept: ``"top_n"``, ``"chain"``, ``"query_entity"``, ``"bridge"`` or
``"passthrough"`` (:class:`neocorrag_core.KeepReason`)."""
RETRIEVAL_RANK = "neocorrag_retrieval_rank"
"""1-based position of the document in the input (retrieval order)."""
CHAIN_IDS = "neocorrag_chain_ids"
"""Numbers (1-based: ``CHAINS``' ``number``, as in a chain block) of the chains this document
supplied a triple to. There is no block by default (``chain_format="none"``), and a chain may
have no line in one (``"linking"`` leaves out the chains one kept document states whole;
``max_chain_lines`` keeps the first lines); ``CHAINS`` lists every chain by its number."""
FALLBACK = "neocorrag_fallback"
"""Why nothing was filtered (e.g. ``"no_triples"``), or ``None`` when chains were found."""
IS_EVIDENCE_CHAINS = "neocorrag_evidence_chains"
"""``True`` on the one extra document/node that holds the evidence chains."""
# The six keys below (RUN_KEYS) describe the whole call: they sit on the first kept
# document when there is no chain document (the default chain_format="none", a block
# without text, include_chains=False), else on the chain document. run_metadata() finds
# them wherever they are.
CHAINS = "neocorrag_chains"
"""Run metadata: one dict per chain: ``number``, ``text``, ``triples`` (each with
``subject``, ``relation``, ``object`` and the ``source_ranks`` of the documents it came from),
``source_ranks`` and ``source_ids`` of the whole chain, ``search_score``, ``lm_logprob``."""
DROPPED_RANKS = "neocorrag_dropped_ranks"
"""Run metadata: retrieval ranks of the documents that were dropped."""
DROPPED_IDS = "neocorrag_dropped_ids"
"""Run metadata: ids of the dropped documents (``None`` where a document had none)."""
NUM_CANDIDATES = "neocorrag_num_candidates"
"""Run metadata: how many candidate chains the search found."""
TIMINGS = "neocorrag_timings"
"""Run metadata: seconds per engine stage."""
NOTES = "neocorrag_notes"
"""Run metadata: what the engine noted about the call (``MiningResult.notes``): a work cap
that bound (``WorkLimits``), the search's cap, decoding that fell back; empty when none."""
FOCUSED = "neocorrag_focused"
"""``True`` on a document whose text was cut to its evidence sentences
(``MinerConfig.passage_focus``: ``"all"``, the default, or ``"linked"``); absent on
documents handed on whole."""

RUN_KEYS = (CHAINS, DROPPED_RANKS, DROPPED_IDS, NUM_CANDIDATES, TIMINGS, NOTES)
"""The keys that describe the whole call rather than one document (see
:func:`run_metadata`)."""

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
    NOTES,
    FOCUSED,
)
"""Every metadata key the compressor and the postprocessor may add."""

# --- written by the EvidenceReformulationRetriever of either framework
EVIREFORM_RANK = "neocorrag_evireform_rank"
"""1-based position of the document in the reformulated ranking."""
EVIREFORM_SCORE = "neocorrag_evireform_score"
"""The EviReform score that ranked the document (a float; an empty query is an
``InputError``, so there is always one)."""
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
PROVENANCE = PROVENANCE_KEY
"""Only on a document a residual query found on purpose (its first result, the bridge
entity's page), or that holds a selected evidence fact: ``{"bridge": str, "evidence":
bool}``. A NeocorRAG compressor or postprocessor after the retriever reads it and keeps
such a document even when nothing links it to the others (kept reason ``"found_hop"`` or
``"evidence"``)."""

EVIREFORM_NOTES = "neocorrag_evireform_notes"
"""Only when EviReform noted something about the call (the same on each document of it):
residual searches given up at ``search_timeout``, queries past ``max_searches``, a work
cap that bound (``WorkLimits``), an LM step skipped for its budget."""

REFORMULATION_KEYS = (
    EVIREFORM_RANK,
    EVIREFORM_SCORE,
    FOUND_BY_QUERY,
    FOUND_BY_KIND,
    QUERY_RANKS,
    RESIDUAL_QUERIES,
    EVIREFORM_EVIDENCE,
)
"""Every metadata key the reformulating retrievers add to every document (and
:data:`PROVENANCE` to some, :data:`EVIREFORM_NOTES` to those of a call with notes)."""

# --- written by the graph retrievers (CorpusGraphRetriever, CorpusGraphNodeRetriever)
GRAPH_SCORE = "neocorrag_graph_score"
"""The document's share of the walk on the corpus graph (higher: closer to the evidence)."""
FOUND_BY_GRAPH = "neocorrag_found_by_graph"
"""``True`` when no search returned the document: the graph reached it through a shared
entity and it was fetched from the vector store by id."""
GRAPH_VIA = "neocorrag_graph_via"
"""The entities (surface names) that carried the walk to the document, most first."""

GRAPH_KEYS = (GRAPH_SCORE, FOUND_BY_GRAPH, GRAPH_VIA)
"""Every metadata key the graph retrievers add to every document."""

ALL_KEYS = (
    *REFINEMENT_KEYS,
    *REFORMULATION_KEYS,
    PROVENANCE,
    EVIREFORM_NOTES,
    *GRAPH_KEYS,
)
"""Every key any adapter writes; all start with ``neocorrag_``."""


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
]
