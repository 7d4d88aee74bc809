"""Stage a: seed nodes (Eq. 2), pruned DFS (Eq. 3-4) and activated path scoring (Eq. 5)."""

from __future__ import annotations

import heapq
import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from neocorrag_core.chains.config import MinerConfig, MinerTuning
from neocorrag_core.chains.graph import EvidenceGraph
from neocorrag_core.rendering import linearize
from neocorrag_core.types import EvidenceChain


@dataclass(frozen=True)
class SeedSelection:
    """Seed node keys (best first) and which rule chose them."""

    nodes: list[str]
    fallback: str | None = None
    """``None`` when Eq. 2 itself found seeds; ``"per_entity"`` or ``"query"`` otherwise."""


@dataclass(frozen=True)
class CandidatePath:
    """A scored path: triple indices into the graph, and for each whether it was walked forward."""

    triple_indices: tuple[int, ...]
    forward: tuple[bool, ...]
    score: float


@dataclass
class SearchStats:
    """How much work the DFS did, and whether a cap cut it short."""

    expansions: int = 0
    pruned: int = 0
    paths_scored: int = 0
    truncated: bool = False
    notes: list[str] = field(default_factory=list)


def _unit(vector: np.ndarray) -> np.ndarray:
    norm = float(np.linalg.norm(vector))
    return vector / norm if norm > 0 else vector


def select_seeds(
    node_keys: Sequence[str],
    node_vecs: np.ndarray,
    entity_vecs: np.ndarray,
    query_vec: np.ndarray,
    config: MinerConfig,
    tuning: MinerTuning,
) -> SeedSelection:
    """Eq. 2: nodes with cos(node, mean of E_q) >= tau_node, with a documented fallback.

    The paper compares each node with the *aggregated* embedding of all query
    entities. With small embedders and several entities nothing may reach 0.90;
    then we take, per entity, its ``seed_fallback_per_entity`` most similar nodes
    (if at least ``seed_fallback_min_similarity``), and failing that the nodes
    most similar to the whole query. The rule used is reported.
    """
    if len(node_keys) == 0:
        return SeedSelection([])
    if len(entity_vecs):
        aggregated = _unit(entity_vecs.mean(axis=0))
        sims = node_vecs @ aggregated
        passing = np.flatnonzero(sims >= config.tau_node)
        if passing.size:
            order = passing[np.argsort(-sims[passing], kind="stable")]
            return SeedSelection([node_keys[i] for i in order[: tuning.max_seeds]])
        per_entity = node_vecs @ entity_vecs.T  # (nodes, entities)
        best: dict[int, float] = {}
        k = tuning.seed_fallback_per_entity
        for column in per_entity.T:
            for i in np.argsort(-column, kind="stable")[:k]:
                if column[i] >= tuning.seed_fallback_min_similarity:
                    best[int(i)] = max(best.get(int(i), -1.0), float(column[i]))
        if best:
            ranked = sorted(best, key=lambda i: -best[i])
            return SeedSelection([node_keys[i] for i in ranked[: tuning.max_seeds]], "per_entity")
    sims = node_vecs @ query_vec
    order = np.argsort(-sims, kind="stable")[: tuning.seed_fallback_per_entity]
    return SeedSelection([node_keys[i] for i in order], "query")


def activated_score(
    length: int, vec_sum: np.ndarray, boosts: int, query_vec: np.ndarray, tuning: MinerTuning
) -> float:
    """Eq. 5 from a path's length, the sum of its triple embeddings and its boost count.

    score = alpha^ReLU(|P| - L) * cos(mean_k Emb(t_k), Emb(q)) * beta^#{k: sim_k >= tau_boost}
    """
    penalty = tuning.alpha ** max(0, length - tuning.max_path_length)
    relevance = float(_unit(vec_sum / length) @ query_vec)
    return penalty * relevance * _reward(tuning.beta, boosts)


# beta^boosts saturates here: a float power that overflows raises OverflowError (beta=1e200,
# two boosts), and an infinite score would be dropped as non-finite. Any |penalty * relevance|
# <= ~1 times this stays finite.
_MAX_REWARD = 1e300


def _reward(beta: float, boosts: int) -> float:
    try:
        return min(float(beta**boosts), _MAX_REWARD)
    except OverflowError:
        return _MAX_REWARD


def path_score(
    triple_vecs: np.ndarray,
    triple_sims: np.ndarray,
    query_vec: np.ndarray,
    config: MinerConfig,
    tuning: MinerTuning,
) -> float:
    """Eq. 5 for one path given its triples' embeddings and their cosines to the query."""
    boosts = int(np.count_nonzero(triple_sims >= config.tau_boost))
    return activated_score(len(triple_vecs), triple_vecs.sum(axis=0), boosts, query_vec, tuning)


def search_paths(
    graph: EvidenceGraph,
    seeds: Sequence[str],
    triple_vecs: np.ndarray,
    query_vec: np.ndarray,
    config: MinerConfig,
    tuning: MinerTuning,
) -> tuple[list[CandidatePath], SearchStats]:
    """Pruned DFS from every seed; returns the top ``num_candidates`` paths by Eq. 5.

    Edges are walked in both directions (a question may enter a fact from its
    object), an edge is expanded only if cos(triple, q) >= tau_edge (Eq. 4), a
    path never revisits a node, and every path of 1..max_hops triples is a
    candidate. The same set of triples reached from two seeds counts once.
    ``max_expansions`` and ``max_paths`` bound the work on dense graphs.
    """
    stats = SearchStats()
    if not seeds or len(graph.triples) == 0:
        return [], stats
    triple_sims = triple_vecs @ query_vec
    seen: set[frozenset[int]] = set()
    best: list[tuple[float, int, CandidatePath]] = []  # min-heap of the top M
    counter = 0

    for seed in seeds:
        # Stack items: (node, triple indices, directions, visited nodes, sum of vecs, boosts)
        stack: list[tuple[str, tuple[int, ...], tuple[bool, ...], frozenset[str], np.ndarray, int]]
        stack = [(seed, (), (), frozenset([seed]), np.zeros_like(query_vec), 0)]
        while stack:
            node, path, dirs, visited, vec_sum, boosts = stack.pop()
            if len(path) >= tuning.max_hops:
                continue
            for edge in graph.neighbors(node):
                if edge.neighbor in visited or edge.triple_index in path:
                    continue
                if (
                    stats.expansions >= tuning.max_expansions
                    or stats.paths_scored >= tuning.max_paths
                ):
                    stats.truncated = True
                    break
                stats.expansions += 1
                if triple_sims[edge.triple_index] < config.tau_edge:
                    stats.pruned += 1
                    continue
                new_path = (*path, edge.triple_index)
                new_dirs = (*dirs, edge.forward)
                new_sum = vec_sum + triple_vecs[edge.triple_index]
                new_boosts = boosts + int(triple_sims[edge.triple_index] >= config.tau_boost)
                stack.append(
                    (
                        edge.neighbor,
                        new_path,
                        new_dirs,
                        visited | {edge.neighbor},
                        new_sum,
                        new_boosts,
                    )
                )
                key = frozenset(new_path)
                if key in seen:
                    continue
                seen.add(key)
                stats.paths_scored += 1
                score = activated_score(len(new_path), new_sum, new_boosts, query_vec, tuning)
                counter += 1
                item = (score, -counter, CandidatePath(new_path, new_dirs, score))
                if len(best) < tuning.num_candidates:
                    heapq.heappush(best, item)
                elif item > best[0]:
                    heapq.heapreplace(best, item)
            if stats.truncated:
                break
        if stats.truncated:
            stats.notes.append(
                f"search stopped at the work cap ({stats.expansions} expansions, "
                f"{stats.paths_scored} paths)"
            )
            break
    ranked = sorted(best, reverse=True)
    return [item[2] for item in ranked if math.isfinite(item[0])], stats


def naive_search_paths(
    graph: EvidenceGraph,
    seeds: Sequence[str],
    triple_vecs: np.ndarray,
    query_vec: np.ndarray,
    config: MinerConfig,
    tuning: MinerTuning,
) -> tuple[list[CandidatePath], SearchStats]:
    """Ablation "w/ Naive Chain Search": unpruned breadth-first paths from the seeds.

    No tau_edge pruning and no Eq. 5 activation: paths of 1..max_hops triples are
    enumerated shortest first (all seeds together, best seed first) and the first
    ``num_candidates`` distinct triple sets are kept. ``score`` is the plain
    cos(mean triple embedding, q), recorded for ``decoding="none"`` but not used
    to choose the candidates.
    """
    from collections import deque

    stats = SearchStats()
    if not seeds or len(graph.triples) == 0:
        return [], stats
    seen: set[frozenset[int]] = set()
    found: list[CandidatePath] = []
    queue: deque[tuple[str, tuple[int, ...], tuple[bool, ...], frozenset[str]]] = deque(
        (seed, (), (), frozenset([seed])) for seed in seeds
    )
    while queue and len(found) < tuning.num_candidates:
        node, path, dirs, visited = queue.popleft()
        if len(path) >= tuning.max_hops:
            continue
        for edge in graph.neighbors(node):
            if edge.neighbor in visited or edge.triple_index in path:
                continue
            if stats.expansions >= tuning.max_expansions:
                stats.truncated = True
                stats.notes.append(f"naive search stopped at {stats.expansions} expansions")
                queue.clear()
                break
            stats.expansions += 1
            new_path = (*path, edge.triple_index)
            new_dirs = (*dirs, edge.forward)
            queue.append((edge.neighbor, new_path, new_dirs, visited | {edge.neighbor}))
            key = frozenset(new_path)
            if key in seen:
                continue
            seen.add(key)
            stats.paths_scored += 1
            score = float(_unit(triple_vecs[list(new_path)].mean(axis=0)) @ query_vec)
            found.append(CandidatePath(new_path, new_dirs, score))
            if len(found) >= tuning.num_candidates:
                break
    return found, stats


def to_chain(graph: EvidenceGraph, path: CandidatePath) -> EvidenceChain:
    """Turn a scored path into an :class:`EvidenceChain` with its linearized text."""
    triples = tuple(graph.triples[i] for i in path.triple_indices)
    forward = tuple(path.forward)
    return EvidenceChain(triples, linearize(triples, forward), path.score, forward=forward)
