"""Stage a: Eq. 2 seeds and their fallback, Eq. 3-4 pruned DFS, Eq. 5 scoring, work caps."""

from __future__ import annotations

import math

import numpy as np
import pytest

from neocorrag_core.chains.config import MinerConfig, MinerTuning, miner_settings
from neocorrag_core.chains.graph import EvidenceGraph
from neocorrag_core.chains.path_search import (
    activated_score,
    path_score,
    search_paths,
    select_seeds,
    to_chain,
)
from neocorrag_core.rendering import linearize
from neocorrag_core.types import Triple


def settings(**changes: object) -> tuple[MinerConfig, MinerTuning]:
    return miner_settings(changes=changes)


def unit(*xs: float) -> np.ndarray:
    v = np.asarray(xs, dtype=np.float32)
    return v / np.linalg.norm(v)


def test_eq5_matches_hand_computed_value():
    config, tuning = settings(max_path_length=1, alpha=0.9, beta=1.1, tau_edge=0.45, tau_boost=0.7)
    vecs = np.stack([unit(1, 0), unit(0, 1)])
    q = unit(0.6, 0.8)
    sims = vecs @ q  # 0.6, 0.8 -> one triple reaches tau_boost 0.7
    # alpha^(2-1) * cos([.5,.5], q) * beta^1 = 0.9 * (0.6+0.8)/sqrt(2) * 1.1
    expected = 0.9 * (1.4 / math.sqrt(2)) * 1.1
    assert path_score(vecs, sims, q, config, tuning) == pytest.approx(expected, rel=1e-6)


def test_eq5_no_penalty_within_length_and_no_boost_below_threshold():
    _config, tuning = settings(max_path_length=10, tau_edge=0.45, tau_boost=0.95)
    vecs = np.stack([unit(1, 0), unit(0, 1)])
    q = unit(0.6, 0.8)
    assert activated_score(2, vecs.sum(axis=0), 0, q, tuning) == pytest.approx(
        1.4 / math.sqrt(2), rel=1e-6
    )
    # Each triple above tau_boost multiplies by beta.
    assert activated_score(2, vecs.sum(axis=0), 2, q, tuning) == pytest.approx(
        1.4 / math.sqrt(2) * 1.1**2, rel=1e-6
    )


def test_tau_boost_below_tau_edge_is_rejected():
    with pytest.raises(ValueError, match="tau_boost"):
        MinerConfig(tau_edge=0.5, tau_boost=0.4)


def test_seeds_pass_tau_node_on_aggregated_entities():
    config, tuning = settings(tau_node=0.9)
    nodes = ["a", "b", "c"]
    node_vecs = np.stack([unit(1, 0, 0), unit(0, 1, 0), unit(1, 1, 0)])
    entities = np.stack([unit(1, 0.05, 0), unit(1, -0.05, 0)])
    seeds = select_seeds(nodes, node_vecs, entities, unit(0, 0, 1), config, tuning)
    assert seeds.nodes == ["a"]
    assert seeds.fallback is None


def test_seed_fallback_per_entity_when_nothing_reaches_tau_node():
    # Two orthogonal entities: their mean is ~0.71 from each, below 0.9.
    config, tuning = settings(
        tau_node=0.9, seed_fallback_per_entity=1, seed_fallback_min_similarity=0.5
    )
    nodes = ["a", "b", "c"]
    node_vecs = np.stack([unit(1, 0, 0), unit(0, 1, 0), unit(0, 0, 1)])
    entities = np.stack([unit(1, 0, 0), unit(0, 1, 0)])
    seeds = select_seeds(nodes, node_vecs, entities, unit(0, 0, 1), config, tuning)
    assert seeds.fallback == "per_entity"
    assert set(seeds.nodes) == {"a", "b"}


def test_seed_fallback_to_query_when_no_entity_matches():
    config, tuning = settings(seed_fallback_per_entity=1, seed_fallback_min_similarity=0.9)
    nodes = ["a", "b"]
    node_vecs = np.stack([unit(1, 0), unit(0, 1)])
    entities = np.stack([unit(1, 1)])  # 0.71 to both, below the fallback minimum
    seeds = select_seeds(nodes, node_vecs, entities, unit(0.1, 1), config, tuning)
    assert seeds == type(seeds)(["b"], "query")


def _chain_graph() -> EvidenceGraph:
    return EvidenceGraph.from_triples(
        [
            Triple("Van Hook Township", "located in", "Mountrail County", ("p1",)),
            Triple("Mountrail County", "capital", "Stanley", ("p2",)),
            Triple("Stanley", "named after", "Someone Else", ("p3",)),
        ]
    )


def test_dfs_walks_both_directions_and_keeps_triple_direction_in_text():
    graph = _chain_graph()
    vecs = np.stack([unit(1, 0), unit(1, 0.1), unit(1, 0.2)])
    config, tuning = settings(tau_edge=0.0, tau_boost=0.0, max_hops=3)
    # Seed in the middle: one branch goes backwards through "located in".
    paths, stats = search_paths(graph, ["mountrail county"], vecs, unit(1, 0), config, tuning)
    texts = {to_chain(graph, p).text for p in paths}
    assert "Mountrail County <- located in - Van Hook Township" in texts
    assert "Mountrail County - capital -> Stanley - named after -> Someone Else" in texts
    assert stats.truncated is False


def test_dfs_prunes_edges_below_tau_edge():
    graph = _chain_graph()
    vecs = np.stack([unit(1, 0), unit(0, 1), unit(1, 0)])  # "capital" is orthogonal to q
    config, tuning = settings(tau_edge=0.45, tau_boost=0.45)
    paths, stats = search_paths(graph, ["van hook township"], vecs, unit(1, 0), config, tuning)
    assert [p.triple_indices for p in paths] == [(0,)]
    assert stats.pruned >= 1


def test_same_triple_set_from_two_seeds_counts_once():
    graph = _chain_graph()
    vecs = np.stack([unit(1, 0)] * 3)
    config, tuning = settings(tau_edge=0.0, tau_boost=0.0, max_hops=2)
    paths, _ = search_paths(
        graph, ["van hook township", "stanley"], vecs, unit(1, 0), config, tuning
    )
    keys = [frozenset(p.triple_indices) for p in paths]
    assert len(keys) == len(set(keys))


def test_dfs_caps_bound_work_on_a_dense_graph():
    # A complete graph on 40 entities: 780 facts, far too many simple paths to enumerate.
    names = [f"E{i}" for i in range(40)]
    triples = [
        Triple(a, "links", b, (f"p{i % 50}",))
        for i, (a, b) in enumerate((a, b) for j, a in enumerate(names) for b in names[j + 1 :])
    ]
    graph = EvidenceGraph.from_triples(triples)
    rng = np.random.default_rng(0)
    vecs = rng.normal(size=(len(graph.triples), 8)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    q = vecs.mean(axis=0) / np.linalg.norm(vecs.mean(axis=0))
    config, tuning = settings(tau_edge=-1.0, tau_boost=-1.0, max_hops=6, max_expansions=3000)
    paths, stats = search_paths(graph, ["e0", "e1"], vecs, q, config, tuning)
    assert stats.truncated
    assert stats.expansions <= 3000
    assert len(paths) == tuning.num_candidates
    scores = [p.score for p in paths]
    assert scores == sorted(scores, reverse=True)


def test_paths_never_revisit_a_node_and_respect_max_hops():
    graph = EvidenceGraph.from_triples(
        [
            Triple("A", "r", "B", ("p",)),
            Triple("B", "r", "C", ("p",)),
            Triple("C", "r", "A", ("p",)),
        ]
    )
    vecs = np.stack([unit(1, 0)] * 3)
    config, tuning = settings(tau_edge=0.0, tau_boost=0.0, max_hops=2)
    paths, _ = search_paths(graph, ["a"], vecs, unit(1, 0), config, tuning)
    assert paths and all(len(p.triple_indices) <= 2 for p in paths)
    for path in paths:
        assert len(set(path.triple_indices)) == len(path.triple_indices)


def test_top_m_keeps_best_scores():
    graph = _chain_graph()
    vecs = np.stack([unit(1, 0), unit(0.5, 1), unit(0, 1)])
    config, tuning = settings(tau_edge=-1.0, tau_boost=-1.0, num_candidates=2)
    paths, _ = search_paths(graph, ["van hook township"], vecs, unit(1, 0), config, tuning)
    assert len(paths) == 2
    assert paths[0].triple_indices == (0,)
    assert paths[0].score >= paths[1].score


def test_linearize_forward_and_backward_steps():
    t1 = Triple("A", "r1", "B")
    t2 = Triple("C", "r2", "B")
    assert linearize([t1, t2], [True, False]) == "A - r1 -> B <- r2 - C"
    assert linearize([t2], [False]) == "B <- r2 - C"
    assert linearize([], []) == ""
