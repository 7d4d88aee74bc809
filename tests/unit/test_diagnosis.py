"""The loss diagnosis: the first chain stage each dropped passage did not get through."""

from __future__ import annotations

import numpy as np

from neocorrag_core.chains.diagnosis import loss_stages, reachable_triples
from neocorrag_core.chains.graph import EvidenceGraph
from neocorrag_core.types import EvidenceChain, LossStage, Passage, Triple

# seed "a"; a-b (p1, similar to the query), b-c (p2, pruned: low similarity), c-d (p3),
# a-e (p4), x-y (p5, another component), p6 has no triple at all.
TRIPLES = [
    Triple("a", "r", "b", ("p1",)),
    Triple("b", "r", "c", ("p2",)),
    Triple("c", "r", "d", ("p3",)),
    Triple("a", "r", "e", ("p4",)),
    Triple("x", "r", "y", ("p5",)),
]
SIMS = np.array([0.9, 0.1, 0.9, 0.9, 0.9])


def _graph() -> EvidenceGraph:
    return EvidenceGraph.from_triples(TRIPLES)


def test_reachable_triples_respects_hops_and_pruning():
    graph = _graph()
    assert reachable_triples(graph, ["a"], max_hops=1) == {0, 3}
    assert reachable_triples(graph, ["a"], max_hops=3) == {0, 1, 2, 3}
    assert reachable_triples(graph, ["a"], max_hops=3, allowed=[s >= 0.5 for s in SIMS]) == {0, 3}


def test_each_stage_is_named():
    graph = _graph()
    passages = {f"p{i}": Passage(f"p{i}", "t") for i in range(1, 7)}
    per_passage = {pid: [t for t in TRIPLES if pid in t.source_ids] for pid in passages}
    chain_p1 = EvidenceChain((TRIPLES[0],), "a - r -> b", 1.0)
    chain_p4 = EvidenceChain((TRIPLES[3],), "a - r -> e", 0.9)
    stages = loss_stages(
        list(passages.values()),
        per_passage,
        graph,
        ["a"],
        SIMS,
        candidates=[chain_p1, chain_p4],
        chains=[chain_p1],
        tau_edge=0.5,
        max_hops=3,
    )
    assert stages == {
        "p1": LossStage.KEEP_RULE,  # in a chosen chain, yet dropped
        "p2": LossStage.PRUNED,  # b-c itself is below tau_edge
        "p3": LossStage.PRUNED,  # c-d is only reachable through b-c
        "p4": LossStage.NO_CHOSEN_CHAIN,
        "p5": LossStage.NOT_CONNECTED,
        "p6": LossStage.NO_TRIPLES,
    }


def test_reached_but_not_a_candidate_is_outside_top_m():
    graph = _graph()
    stages = loss_stages(
        [Passage("p4", "t")],
        {"p4": [TRIPLES[3]]},
        graph,
        ["a"],
        SIMS,
        candidates=[],
        chains=[],
        tau_edge=0.5,
        max_hops=3,
    )
    assert stages == {"p4": LossStage.OUTSIDE_TOP_M}


def test_naive_search_never_reports_pruned(bow_embedder):
    # The naive-search ablation walks every edge, so a passage it dropped was reached but
    # not chosen; only the pruned (activated) search can lose one to tau_edge.
    from neocorrag_core import EvidenceChainMiner
    from neocorrag_core.chains.config import miner_settings

    passages = [
        Passage("p1", "Alice married Bob.", metadata={"triples": [["Alice", "married", "Bob"]]}),
        Passage("p2", "Zed Yonder.", metadata={"triples": [["Bob", "born in", "Paris"]]}),
        Passage("p3", "Filler text.", metadata={"triples": [["Qux", "is", "Quux"]]}),
    ]
    stages = {}
    for search in ("activated", "naive"):
        config, tuning = miner_settings(
            changes={
                "search": search,
                "keep": "paper",
                "top_n": 1,
                "num_candidates": 1,
                "tau_node": 0.1,
                # "Alice married Bob" is at 0.29 of the query, "Bob born in Paris" 0
                "tau_edge": 0.2,
                "tau_boost": 0.6,
            }
        )
        miner = EvidenceChainMiner(config, tuning=tuning, embedder=bow_embedder)
        result = miner.mine("Who did Alice marry?", passages, query_entities="ngram", diagnose=True)
        stages[search] = {d.passage.id: d.stage for d in result.dropped}
    assert stages["activated"].get("p2") == LossStage.PRUNED
    assert stages["naive"].get("p2") == LossStage.OUTSIDE_TOP_M
