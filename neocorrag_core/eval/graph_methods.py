"""Graph retrieval in the benchmark (``graph``): the shared search asked for
:data:`~neocorrag_core.graph.retriever.DEFAULT_CANDIDATES` candidates, then the corpus graph
of the run's triple store chooses the ``k`` handed to the reader, fetching stored passages
no query returned from the run's corpus.

It needs a triple store holding the corpus (``--triples spacy``; index the corpus into the
run's ``triples.sqlite`` first for the graph to reach passages no query returned:
``neocorrag index CORPUS --store OUT/triples.sqlite``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from neocorrag_core.eval.protocol import BuildContext, MethodInput, MethodOutput
from neocorrag_core.graph import (
    DEFAULT_CANDIDATES,
    CorpusGraph,
    GraphConsolidator,
    GraphSettings,
    graph_of,
)
from neocorrag_core.triples.keys import text_sha256
from neocorrag_core.types import Passage

GRAPH_VERSION = "graph-1"
"""Bumped when the graph's construction, seeds or walk change."""


class GraphMethod:
    """``graph``: the search's candidates chosen (and completed) on the corpus graph."""

    def __init__(
        self,
        name: str,
        consolidator: GraphConsolidator,
        corpus: Sequence[Passage],
        candidates: int = DEFAULT_CANDIDATES,
    ) -> None:
        self.name = name
        self.consolidator = consolidator
        self.candidates = candidates
        self._by_hash = {text_sha256(p): p for p in corpus}

    def fetch(self, hashes: Sequence[str], graph: CorpusGraph) -> Mapping[str, Passage]:
        """The run's corpus passages of ``hashes``."""
        return {h: self._by_hash[h] for h in hashes if h in self._by_hash}

    def refine(self, call: MethodInput) -> MethodOutput:
        """Search for the candidates, then the graph's ``k``."""
        k = call.k or len(call.passages) or 5
        returned = call.search(call.question, max(self.candidates, k))
        chosen = self.consolidator.select(call.question, returned, k, fetch=self.fetch)
        return MethodOutput(
            passages=chosen.passages,
            timings=dict(chosen.timings),
            info={
                "found_by_graph": sorted(chosen.found_by_graph),
                "via": {
                    p.id: list(pick.via)
                    for p, pick in zip(chosen.passages, chosen.picks, strict=True)
                },
                "notes": chosen.notes,
            },
        )


def method_version(name: str) -> str:
    """:data:`GRAPH_VERSION` and the default settings."""
    return f"{GRAPH_VERSION} {GraphSettings()} candidates={DEFAULT_CANDIDATES}"


def build(name: str, context: BuildContext) -> GraphMethod:
    """Factory of ``graph``: the run's triple store's graph and the miner's embedder."""
    miner = context.miner
    consolidator = GraphConsolidator(
        graph_of(miner.triple_source),
        triple_source=miner.triple_source,
        embedder=lambda: miner.embedder,
        vectors=miner.vectors,
    )
    return GraphMethod(name, consolidator, context.corpus)


__all__ = ["GRAPH_VERSION", "GraphMethod", "build", "method_version"]
