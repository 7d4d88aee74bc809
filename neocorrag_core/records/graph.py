"""What a graph retriever says about each document it hands on
(:data:`~neocorrag_core.records.keys.GRAPH_KEYS`)."""

from __future__ import annotations

from typing import Any

from neocorrag_core.graph.consolidation import GraphSelection
from neocorrag_core.records.keys import FOUND_BY_GRAPH, GRAPH_SCORE, GRAPH_VIA


def graph_records(selection: GraphSelection) -> list[dict[str, Any]]:
    """One metadata dict per chosen passage, aligned with ``selection.passages``."""
    return [
        {
            GRAPH_SCORE: pick.score,
            FOUND_BY_GRAPH: passage.id in selection.found_by_graph,
            GRAPH_VIA: list(pick.via),
        }
        for passage, pick in zip(selection.passages, selection.picks, strict=True)
    ]


__all__ = ["graph_records"]
