"""Consolidation on the corpus graph: the store's triples as one graph of the whole corpus,
and a personalized PageRank walk from the question's evidence that chooses the passages
handed on, including passages no query returned.

- :mod:`~neocorrag_core.graph.corpus_graph`: the graph, read from the triple store and
  rebuilt when the store changes.
- :mod:`~neocorrag_core.graph.propagation`: personalized PageRank on a sparse matrix, near
  the seeds (a push whose cost does not grow with the corpus) or over the whole graph.
- :mod:`~neocorrag_core.graph.selection`: seeds and the ranking of passages.
- :mod:`~neocorrag_core.graph.consolidation`: the stage: returned passages in, ``k`` out.
- :mod:`~neocorrag_core.graph.retriever`: the search's candidates chosen on the graph.
"""

from neocorrag_core.graph.consolidation import FetchFn, GraphConsolidator, GraphSelection
from neocorrag_core.graph.corpus_graph import CorpusGraph, CorpusGraphCache, build_corpus_graph
from neocorrag_core.graph.propagation import LocalWalk, local_pagerank, personalized_pagerank
from neocorrag_core.graph.retriever import (
    DEFAULT_CANDIDATES,
    GraphRetriever,
    fetch_by_document_ids,
    graph_of,
)
from neocorrag_core.graph.selection import GraphPick, GraphSettings, rank_passages, seed_vector

__all__ = [
    "DEFAULT_CANDIDATES",
    "CorpusGraph",
    "CorpusGraphCache",
    "FetchFn",
    "GraphConsolidator",
    "GraphPick",
    "GraphRetriever",
    "GraphSelection",
    "GraphSettings",
    "LocalWalk",
    "build_corpus_graph",
    "fetch_by_document_ids",
    "graph_of",
    "local_pagerank",
    "personalized_pagerank",
    "rank_passages",
    "seed_vector",
]
