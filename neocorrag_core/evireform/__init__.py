"""Evidence-guided query reformulation (EviReform): search again for the missing evidence.

Stages, one module each: ``propositions`` (a: triples of the retrieved passages
become propositions), ``selection`` (b: the LM picks the helpful ones among the
candidates), ``residual`` (c: residual queries for what is still missing, or bridge
entities without an LM), ``scoring`` (d-f: per-query normalization and mixing, one
round of shared-entity propagation, passage aggregation); ``reformulator`` wires them
around any ``search(query, k)`` function.
"""

from .config import ReformulationConfig
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
    "RetrievalError",
    "SearchFn",
]
