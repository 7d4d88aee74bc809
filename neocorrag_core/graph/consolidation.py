"""The consolidation stage: from the passages the queries returned to the ``k`` the corpus
graph says the evidence connects, including passages no query returned.

:class:`GraphConsolidator` seeds the walk (:mod:`neocorrag_core.graph.selection`) from the
question and what the queries returned, ranks the corpus graph's passages, and hands back
the best ``k`` as :class:`~neocorrag_core.types.Passage` objects: returned ones as they
came, the others fetched by the caller's ``fetch`` (from the user's vector store by id).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from neocorrag_core.chains.query_entities import ngram_entities
from neocorrag_core.graph.corpus_graph import CorpusGraph, CorpusGraphCache
from neocorrag_core.graph.selection import GraphPick, GraphSettings, rank_passages, seed_vector
from neocorrag_core.text.entities import normalize_entity
from neocorrag_core.triples.keys import text_sha256
from neocorrag_core.types import Passage

logger = logging.getLogger(__name__)

FetchFn = Callable[[Sequence[str], CorpusGraph], Mapping[str, Passage]]
"""``fetch(hashes, graph) -> {hash: passage}``: the passages of stored content hashes the
caller can produce (``graph.documents`` maps each hash to its document ids); a hash it
cannot produce is left out and the next-ranked passage takes its place."""


@dataclass
class GraphSelection:
    """What the graph chose for one question."""

    passages: list[Passage]
    """The chosen passages, best first."""
    picks: list[GraphPick]
    """The walk's ranking of the chosen passages (aligned with :attr:`passages`)."""
    found_by_graph: set[str] = field(default_factory=set)
    """Ids of chosen passages that no query returned."""
    seeds: dict[str, float] = field(default_factory=dict)
    """Entity seeds (surface name -> restart weight), for reading the choice."""
    notes: list[str] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)
    """Seconds: ``select`` (the walk and its seeds); a retriever adds ``search``, ``total``."""


class GraphConsolidator:
    """Chooses ``k`` passages on the corpus graph from what the queries returned.

    Args:
        graphs: the store's graph (:class:`~neocorrag_core.graph.corpus_graph.CorpusGraphCache`).
        triple_source: where the returned passages' triples come from (their facts seed).
        embedder: a zero-argument callable giving the :class:`~neocorrag_core.models.TextEmbedder`
            (the engine's, loaded once).
        vectors: the vector cache the fact texts' vectors are read from (the store).
        settings: the walk's settings.
    """

    def __init__(
        self,
        graphs: CorpusGraphCache,
        *,
        triple_source: Any,
        embedder: Callable[[], Any],
        vectors: Any = None,
        settings: GraphSettings | None = None,
    ) -> None:
        self.graphs = graphs
        self.triple_source = triple_source
        self._embedder = embedder
        self.vectors = vectors
        self.settings = settings or GraphSettings()

    def select(
        self,
        question: str,
        returned: Sequence[Passage],
        k: int,
        *,
        fetch: FetchFn | None = None,
    ) -> GraphSelection:
        """The ``k`` passages the graph ranks best for ``question`` given ``returned``.

        Without ``fetch`` only returned passages can be chosen (the graph then reorders and
        selects among them).
        """
        started = time.perf_counter()
        graph = self.graphs.get()
        settings = self.settings
        hashes = [text_sha256(p) for p in returned]
        by_hash: dict[str, Passage] = {}
        for digest, given in zip(hashes, returned, strict=True):
            by_hash.setdefault(digest, given)
        fact_seeds = self._fact_seeds(question, list(by_hash.values()))
        keys = graph.entity_index
        named = {normalize_entity(e) for e in ngram_entities(question, keys)}
        question_seeds = {key: 1.0 for key in named if key in keys}
        passage_seeds = {d: max(float(p.score or 0.0), 0.0) for d, p in by_hash.items()}
        reset = seed_vector(
            graph,
            fact_entities=fact_seeds,
            question_entities=question_seeds,
            passages=passage_seeds,
            settings=settings,
        )
        notes: list[str] = []
        unstored = [d for d in by_hash if d not in graph.passage_index]
        if unstored:
            notes.append(f"{len(unstored)} returned passage(s) not in the store's graph")
        ranked = rank_passages(graph, reset, settings=settings, limit=3 * k + len(by_hash))
        wanted = [pick.passage for pick in ranked if pick.passage not in by_hash]
        fetched: Mapping[str, Passage] = {}
        if wanted and fetch is not None:
            fetched = fetch(wanted, graph)
        chosen: list[Passage] = []
        picks: list[GraphPick] = []
        found: set[str] = set()
        for pick in ranked:
            passage = by_hash.get(pick.passage) or fetched.get(pick.passage)
            if passage is None:
                continue
            if pick.passage not in by_hash:
                found.add(passage.id)
            chosen.append(passage)
            picks.append(pick)
            if len(chosen) == k:
                break
        # Returned passages the graph does not hold (or a walk that reached too few) keep
        # their place after the graph's choice, best retrieval score first.
        if len(chosen) < k:
            for digest in sorted(by_hash, key=lambda d: -passage_seeds[d]):
                if len(chosen) == k:
                    break
                if all(p is not by_hash[digest] for p in chosen):
                    chosen.append(by_hash[digest])
                    picks.append(GraphPick(digest, 0.0))
        names = {k_: graph.names[graph.entity_index[k_]] for k_ in fact_seeds if k_ in keys}
        seeds = {names.get(k_, k_): w for k_, w in fact_seeds.items()}
        timings = {"select": time.perf_counter() - started}
        return GraphSelection(chosen, picks, found, seeds, notes, timings)

    def _fact_seeds(self, question: str, passages: Sequence[Passage]) -> dict[str, float]:
        """Entity key -> best score of a fact naming it, over the ``facts`` best facts."""
        if self.settings.facts == 0 or not passages:
            return {}
        triples = [t for per in self.triple_source.triples_for(passages) for t in per]
        if not triples:
            return {}
        texts = list(dict.fromkeys(t.text for t in triples))
        embedder = self._embedder()
        # The facts are the passages' own (stored with them); the question is not kept.
        asked = embedder.embed([question])[0]
        scores = dict(zip(texts, embedder.embed(texts, cache=self.vectors) @ asked, strict=True))
        best = sorted(triples, key=lambda t: -scores[t.text])
        seeds: dict[str, float] = {}
        taken: set[str] = set()
        for triple in best:
            if len(taken) == self.settings.facts:
                break
            score = float(scores[triple.text])
            if score < self.settings.min_fact_score or triple.text in taken:
                continue
            taken.add(triple.text)
            for name in (triple.subject, triple.object):
                key = normalize_entity(name)
                if key:
                    seeds[key] = max(seeds.get(key, 0.0), score)
        return seeds


__all__ = ["FetchFn", "GraphConsolidator", "GraphSelection"]
