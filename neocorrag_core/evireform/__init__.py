"""Evidence-guided query reformulation (EviReform): search again for the missing evidence.

Stages, one module each: ``propositions`` (a: triples of the retrieved passages, and the
sentences that state a relation the question asks about, become propositions),
``relations`` (the question's relation words the evidence has not covered yet; the
rules live in the shared text layer, :mod:`neocorrag_core.text.relations`),
``selection`` (b: relation-stating facts first, or the LM picks the helpful ones among the
candidates), ``residual`` (c: residual queries for what is still missing: bridge entities
with the open relation words, or written by the LM), ``scoring`` (d-f: per-query
normalization and mixing, one round of shared-entity propagation, passage aggregation),
``ranking`` (g: the chain-aware top-k); ``reformulator`` wires them around any
``search(query, k)`` function.
"""

from .config import ReformulationConfig, ReformulationTuning
from .reformulator import AsyncSearchFn, EvidenceReformulator, RetrievalError, SearchFn
from .types import Proposition, RankedPassage, ReformulationQuery, ReformulationResult

__all__ = [
    "AsyncSearchFn",
    "EvidenceReformulator",
    "Proposition",
    "RankedPassage",
    "ReformulationConfig",
    "ReformulationQuery",
    "ReformulationResult",
    "ReformulationTuning",
    "RetrievalError",
    "SearchFn",
]
