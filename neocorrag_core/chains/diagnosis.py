"""Where the chain pipeline lost a dropped passage (the loss diagnosis of stage c).

For every passage stage c drops, :func:`loss_stages` names the first stage it did not get
through: no triples; no path from a seed at all; reachable only through pruned triples;
reached but outside the top-M candidates; a candidate but in no chosen chain; chosen but
dropped by the keep rule. Summed over the *gold* passages a refiner drops (the eval harness
knows which those are), this says which stage to improve. Reachability is a breadth-first
walk of the small per-query graph, so the diagnosis costs well under a millisecond.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

from neocorrag_core.chains.graph import EvidenceGraph
from neocorrag_core.types import EvidenceChain, LossStage, Passage, Triple


def reachable_triples(
    graph: EvidenceGraph,
    seeds: Iterable[str],
    *,
    max_hops: int,
    allowed: Sequence[bool] | None = None,
) -> set[int]:
    """Indices of the triples on some walk of at most ``max_hops`` steps from a seed.

    ``allowed[i]`` False removes triple ``i`` from the graph (e.g. the pruned ones).
    """
    frontier = set(seeds)
    seen_nodes = set(frontier)
    found: set[int] = set()
    for _ in range(max_hops):
        nxt: set[str] = set()
        for node in frontier:
            for edge in graph.neighbors(node):
                if allowed is not None and not allowed[edge.triple_index]:
                    continue
                found.add(edge.triple_index)
                if edge.neighbor not in seen_nodes:
                    seen_nodes.add(edge.neighbor)
                    nxt.add(edge.neighbor)
        if not nxt:
            break
        frontier = nxt
    return found


def loss_stages(
    dropped: Sequence[Passage],
    per_passage: dict[str, Sequence[Triple]],
    graph: EvidenceGraph,
    seeds: Sequence[str],
    triple_sims: np.ndarray,
    candidates: Sequence[EvidenceChain],
    chains: Sequence[EvidenceChain],
    *,
    tau_edge: float,
    max_hops: int,
) -> dict[str, LossStage]:
    """Passage id -> the first stage each dropped passage did not get through.

    Args:
        dropped: the passages stage c removed.
        per_passage: passage id -> the triples its source returned.
        graph, seeds: the query's evidence graph and seed node keys.
        triple_sims: cos(triple, query) per graph triple (the Eq. 4 pruning scores).
        candidates: the top-M paths handed to decoding; chains: the chosen ones.
        tau_edge, max_hops: the search settings the miner used.
    """
    if not dropped:
        return {}
    everywhere = reachable_triples(graph, seeds, max_hops=max_hops)
    unpruned = reachable_triples(
        graph, seeds, max_hops=max_hops, allowed=[bool(s >= tau_edge) for s in triple_sims]
    )
    in_candidates = {pid for chain in candidates for pid in chain.source_ids}
    in_chains = {pid for chain in chains for pid in chain.source_ids}
    by_passage: dict[str, set[int]] = {}
    for index, triple in enumerate(graph.triples):
        for pid in triple.source_ids:
            by_passage.setdefault(pid, set()).add(index)
    stages: dict[str, LossStage] = {}
    for passage in dropped:
        own = by_passage.get(passage.id, set())
        if not per_passage.get(passage.id) or not own:
            stage = LossStage.NO_TRIPLES
        elif not own & everywhere:
            stage = LossStage.NOT_CONNECTED
        elif not own & unpruned:
            stage = LossStage.PRUNED
        elif passage.id not in in_candidates:
            stage = LossStage.OUTSIDE_TOP_M
        elif passage.id not in in_chains:
            stage = LossStage.NO_CHOSEN_CHAIN
        else:
            stage = LossStage.KEEP_RULE
        stages[passage.id] = stage
    return stages


__all__ = ["loss_stages", "reachable_triples"]
