"""Graph selection: the question's evidence seeds a walk on the corpus graph, and the
passages where it stays are the ones handed on.

Three kinds of seed, as HippoRAG 2 seeds its walk, without its LLM: the entities of the
facts that match the question best (the triples of the passages the queries returned,
compared with the question by their stored vectors), the entities the question names, and
the passages the queries returned (by their retrieval score, lightly: the graph's reach
is what this stage adds). A common entity seeds less than a rare one (divided by how many
passages name it). The walk is :func:`~neocorrag_core.graph.propagation.local_pagerank`,
which spreads the seeds' mass only as far as it stays above ``GraphSettings.epsilon`` (its
cost does not grow with the corpus), or with ``epsilon=0`` the power iteration over the
whole graph (:func:`~neocorrag_core.graph.propagation.personalized_pagerank`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from neocorrag_core.graph.corpus_graph import CorpusGraph
from neocorrag_core.graph.propagation import (
    DEFAULT_EPSILON,
    LocalWalk,
    local_pagerank,
    personalized_pagerank,
)


@dataclass(frozen=True)
class GraphSettings:
    """How the walk is seeded and how far it goes (research settings, chosen on tune halves).

    Attributes:
        damping: probability of following an edge rather than restarting at a seed.
        facts: how many of the best-matching facts seed their two entities.
        passage_weight: weight of the returned passages' retrieval scores in the restart
            distribution, against the fact and question entities' total of 1 each.
        question_weight: total weight of the entities the question names.
        min_fact_score: facts matching the question below this cosine never seed.
        epsilon: push threshold of the local walk (per column entry, relative to a restart
            mass of 1): mass spreads only from nodes holding more, so the walk's cost
            depends on ``epsilon`` and the graph near the seeds, not on the corpus size;
            every passage's score is low by at most ``damping * epsilon * degree /
            (1 - damping)`` (:class:`~neocorrag_core.graph.propagation.LocalWalk`). The
            default, ``1e-7``, ranks the open corpus's passages as the global walk does:
            on the tune halves of MuSiQue, HotpotQA and 2Wiki the top 5 chosen are the
            same for every question (4 of 382 question-pools differ at ranks 11-14, between
            scores closer than the bound), and so are the top 20 of 100 random seed sets;
            the second ``via`` entity, ranked among near-equal entity scores, may differ.
            ``0``: power iteration over the whole graph (exact to its tolerance; its time
            grows with the corpus: docs/pipeline.md, "At scale").
    """

    damping: float = 0.5
    facts: int = 5
    passage_weight: float = 0.05
    question_weight: float = 0.5
    min_fact_score: float = 0.0
    epsilon: float = DEFAULT_EPSILON

    def __post_init__(self) -> None:
        if not 0.0 <= self.damping < 1.0:
            raise ValueError(f"GraphSettings.damping must be in [0, 1), got {self.damping}")
        if self.facts < 0:
            raise ValueError(f"GraphSettings.facts must be >= 0, got {self.facts}")
        for name in ("passage_weight", "question_weight", "epsilon"):
            if getattr(self, name) < 0:
                raise ValueError(f"GraphSettings.{name} must be >= 0, got {getattr(self, name)}")


@dataclass(frozen=True)
class GraphPick:
    """One passage the walk ranked, and why it is there."""

    passage: str
    """The passage's content hash."""
    score: float
    """Its share of the walk."""
    via: tuple[str, ...] = ()
    """The entities (surface names) that carried the walk to it, most first: the path from
    the question's evidence to a passage no query returned."""


def seed_vector(
    graph: CorpusGraph,
    *,
    fact_entities: Mapping[str, float],
    question_entities: Mapping[str, float],
    passages: Mapping[str, float],
    settings: GraphSettings,
) -> np.ndarray:
    """The restart distribution over the graph's nodes.

    ``fact_entities`` and ``question_entities`` map entity keys to weights (each group is
    scaled to a total of 1, then the question's by ``question_weight``); ``passages`` maps
    passage hashes to retrieval scores (scaled by ``passage_weight``). Keys the graph does
    not hold are skipped.
    """
    reset = np.zeros(graph.num_nodes)
    n_e = len(graph.entities)
    specificity = graph.entity_passage_counts
    for weights, scale in ((fact_entities, 1.0), (question_entities, settings.question_weight)):
        found = {
            graph.entity_index[k]: w
            for k, w in weights.items()
            if k in graph.entity_index and w > 0
        }
        if not found:
            continue
        idx = np.fromiter(found, dtype=np.int64)
        w = np.fromiter(found.values(), dtype=np.float64) / np.maximum(specificity[idx], 1.0)
        reset[idx] += scale * w / w.sum()
    for digest, score in passages.items():
        p = graph.passage_index.get(digest)
        if p is not None and score > 0:
            reset[n_e + p] += settings.passage_weight * score
    return reset


def rank_passages(
    graph: CorpusGraph, reset: np.ndarray, *, settings: GraphSettings, limit: int
) -> list[GraphPick]:
    """The ``limit`` passages the walk from ``reset`` visits most, best first, each with the
    entities that brought the walk to it.

    The walk is local unless ``settings.epsilon`` is 0 (see :class:`GraphSettings`): then
    only the passages it reached are ranked (a passage it never reached has no score, and
    is never picked).
    """
    seeds = np.flatnonzero(reset)
    if limit < 1 or not len(seeds):
        return []
    n_e = len(graph.entities)
    if settings.epsilon > 0:
        walk = local_pagerank(
            graph.transition,
            seeds,
            reset[seeds],
            damping=settings.damping,
            epsilon=settings.epsilon,
        )
    else:
        scores = personalized_pagerank(graph.transition, reset, damping=settings.damping)
        reached = np.flatnonzero(scores)
        walk = LocalWalk(reached, scores[reached], 0.0, len(reached), 0, 0)
    passage_nodes = np.flatnonzero(walk.nodes >= n_e)
    passage_scores = walk.scores[passage_nodes]
    limit = min(limit, len(passage_scores))
    if limit < 1:
        return []
    # the best ``limit``, ties in node order (the same order for either walk)
    cut = -np.partition(-passage_scores, limit - 1)[limit - 1]
    candidates = np.flatnonzero(passage_scores >= cut)
    top = candidates[np.argsort(-passage_scores[candidates], kind="stable")][:limit]
    picks: list[GraphPick] = []
    incidence = graph.passage_entities
    for i in top:
        score = float(passage_scores[i])
        if score <= 0:
            break
        p = int(walk.nodes[passage_nodes[i]]) - n_e
        named = incidence.indices[incidence.indptr[p] : incidence.indptr[p + 1]]
        named_scores = _scores_of(walk, named)
        best = np.argsort(-named_scores, kind="stable")[:2]
        via = tuple(graph.names[named[b]] for b in best if named_scores[b] > 0)
        picks.append(GraphPick(graph.passages[p], score, via))
    return picks


def _scores_of(walk: LocalWalk, nodes: np.ndarray) -> np.ndarray:
    """The walk's scores of ``nodes`` (0 where it did not reach)."""
    at = np.searchsorted(walk.nodes, nodes)
    found = at < len(walk.nodes)
    found[found] = walk.nodes[at[found]] == nodes[found]
    out = np.zeros(len(nodes))
    out[found] = walk.scores[at[found]]
    return out


__all__ = ["GraphPick", "GraphSettings", "rank_passages", "seed_vector"]
