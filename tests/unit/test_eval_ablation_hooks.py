"""The engine switches behind the Table 2 ablations: naive search and no filtering.

The lab's ablation methods built on them are tested in ``tests/lab/test_lab_miner_methods.py``."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import bag_of_words_embedder

from neocorrag_core import EvidenceChainMiner, KeepReason, MinerConfig, Passage
from neocorrag_core.chains.config import MinerTuning
from neocorrag_core.chains.graph import EvidenceGraph, normalize_entity
from neocorrag_core.chains.path_search import naive_search_paths, search_paths
from neocorrag_core.rendering import chain_text
from neocorrag_core.types import Triple


def test_config_rejects_unknown_search_mode():
    with pytest.raises(ValueError, match="search"):
        MinerTuning(search="greedy")  # type: ignore[arg-type]
    assert MinerTuning().search == "activated" and MinerTuning().filter_passages


def _graph():
    triples = [
        Triple("A", "r1", "B", ("p1",)),
        Triple("B", "r2", "C", ("p2",)),
        Triple("A", "r3", "D", ("p3",)),
    ]
    # triple 1 is orthogonal to the query: activated search prunes it, naive search does not
    vecs = np.array([[1.0, 0.0], [0.0, 1.0], [0.8, 0.6]], dtype=np.float32)
    return EvidenceGraph.from_triples(triples), vecs, np.array([1.0, 0.0], dtype=np.float32)


def test_naive_search_is_unpruned_and_shortest_first():
    graph, vecs, query = _graph()
    config, tuning = MinerConfig(tau_edge=0.5, tau_boost=0.5), MinerTuning(num_candidates=10)
    seeds = [normalize_entity("A")]
    naive, _ = naive_search_paths(graph, seeds, vecs, query, config, tuning)
    activated, _ = search_paths(graph, seeds, vecs, query, config, tuning)
    naive_sets = [set(p.triple_indices) for p in naive]
    assert [len(s) for s in naive_sets] == sorted(len(s) for s in naive_sets)
    assert {0, 1} in naive_sets  # reaches C through the pruned edge B - r2 -> C
    assert all(1 not in p.triple_indices for p in activated)
    # the recorded score is the plain cosine of the mean triple vector, no Eq. 5 factors
    two_hop = next(p for p in naive if set(p.triple_indices) == {0, 1})
    assert two_hop.score == pytest.approx(1 / np.sqrt(2))


def test_naive_search_keeps_the_first_m_paths():
    graph, vecs, query = _graph()
    seeds = [normalize_entity("A")]
    tuning = MinerTuning(num_candidates=2)
    naive, _ = naive_search_paths(graph, seeds, vecs, query, MinerConfig(), tuning)
    assert len(naive) == 2 and all(len(p.triple_indices) == 1 for p in naive)


def test_no_filter_keeps_every_passage_and_still_adds_chains():
    triples = {
        "p1": [["Van Hook Township", "located in", "Mountrail County"]],
        "p2": [["Paris", "capital of", "France"]],
        "p3": [["Berlin", "capital of", "Germany"]],
        "p4": [["Mountrail County", "capital", "Stanley"]],
    }
    passages = [Passage(k, f"text {k}", metadata={"triples": v}) for k, v in triples.items()]
    miner = EvidenceChainMiner(
        MinerConfig(decoding="none", tau_edge=0.1, tau_boost=0.1, top_n=1, chain_format="linking"),
        embedder=bag_of_words_embedder(),
    )
    query = "What is the capital of the county where Van Hook Township is located?"
    filtered = miner.mine(query, passages)
    kept_all = miner.tuned(filter_passages=False).mine(query, passages)
    assert len(filtered.passages) < 4
    assert [p.id for p in kept_all.passages] == ["p1", "p2", "p3", "p4"]
    assert all(k.reason is KeepReason.PASSTHROUGH for k in kept_all.kept)
    assert chain_text(kept_all) == chain_text(filtered) != ""
