"""Evidence chains as a picture, from the output of either adapter (LangChain documents or
LlamaIndex nodes) and, for the dropped documents' titles, its input.

The picture is the core's (:mod:`neocorrag_core.records.viz`, where it is described); here
each document or node is read into what it draws from, its metadata and its id. Needs the
``viz`` extra (networkx, matplotlib).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from neocorrag_core.records import viz as _viz
from neocorrag_core.records.viz import STATUS_COLORS, STATUS_LABELS, Shown


def evidence_graph(refined: Sequence[Any], retrieved: Sequence[Any] | None = None) -> Any:
    """:func:`neocorrag_core.records.viz.evidence_graph` of a refiner's documents or nodes."""
    return _viz.evidence_graph(*_read(refined, retrieved))


def draw_evidence(
    refined: Sequence[Any],
    retrieved: Sequence[Any] | None = None,
    *,
    ax: Any = None,
    title: str | None = None,
    seed: int = 0,
) -> Any:
    """:func:`neocorrag_core.records.viz.draw_evidence` of a refiner's documents or nodes;
    returns the matplotlib ``Axes``."""
    return _viz.draw_evidence(*_read(refined, retrieved), ax=ax, title=title, seed=seed)


def _read(
    refined: Sequence[Any], retrieved: Sequence[Any] | None
) -> tuple[list[Shown], list[Shown] | None]:
    """Each LangChain document (``id``) or LlamaIndex node (``node_id``) as its metadata
    and its id."""

    def shown(documents: Sequence[Any]) -> list[Shown]:
        return [
            (d.metadata, getattr(d, "id", None) or getattr(d, "node_id", None)) for d in documents
        ]

    return shown(refined), None if retrieved is None else shown(retrieved)


__all__ = ["STATUS_COLORS", "STATUS_LABELS", "draw_evidence", "evidence_graph"]
