"""Evidence chains as a picture: which facts link the question's entities, and which
document each fact came from, so a reader sees why a document was kept.

Drawn from a refinement's records alone (the ``neocorrag_*`` metadata every framework's
refiner writes, :mod:`~neocorrag_core.records.keys`), so one picture serves every adapter:
each takes a document as :data:`Shown`, its metadata and its id. Needs the ``viz`` extra
(networkx, matplotlib), imported on first use so that the core imports without it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from neocorrag_core.records.keys import (
    CHAINS,
    DROPPED_RANKS,
    IS_EVIDENCE_CHAINS,
    KEPT_REASON,
    RETRIEVAL_RANK,
)
from neocorrag_core.records.refinement import run_metadata_of
from neocorrag_core.types import KeepReason

Shown = tuple[Mapping[str, Any], Any]
"""One document as the picture reads it: its metadata and its id (``None`` when it has
none; the id names a document without a ``"title"``)."""

_DOC_NODE = re.compile(r"doc \d+")
_REASON_COLORS = {
    KeepReason.CHAIN: "#4caf50",
    KeepReason.TOP_N: "#64b5f6",
    KeepReason.QUERY_ENTITY: "#ffb74d",
    KeepReason.BRIDGE: "#ba68c8",
    KeepReason.FOUND_HOP: "#4db6ac",
    KeepReason.EVIDENCE: "#f06292",
    KeepReason.PASSTHROUGH: "#90a4ae",
}
STATUS_COLORS = {
    **{reason.value: _REASON_COLORS[reason] for reason in KeepReason},
    "kept": "#78909c",
    "dropped": "#bdbdbd",
}
"""Document colours by status: a keep reason, ``"dropped"``, or ``"kept"`` for a reason this
version does not know. Entity nodes are drawn white."""
STATUS_LABELS = {
    **{reason.value: f"kept: {reason.label}" for reason in KeepReason},
    "kept": "kept",
    "dropped": "dropped",
}
"""The legend's entry for each status of :data:`STATUS_COLORS`."""


def evidence_graph(refined: Sequence[Shown], retrieved: Sequence[Shown] | None = None) -> Any:
    """A ``networkx.MultiDiGraph`` of one refined output (each document as :data:`Shown`).

    Entity nodes (``kind="entity"``, ``name``) are joined by one ``kind="fact"`` edge per
    chain triple (``relation``, ``chains``: chain numbers, ``ranks``: source documents); an
    entity is its own name, or ``"<name> (entity)"`` when that name is also a document
    node's. Document nodes are named ``"doc <rank>"`` (``kind="document"``, ``status``:
    a :class:`~neocorrag_core.types.KeepReason` value, ``"dropped"``, or ``"kept"`` for a
    reason it does not know, ``title``) with a ``kind="source"`` edge to
    the subject of each fact they supplied (``fact``: the triple). ``retrieved`` (the input, in
    retrieval order) gives the dropped documents their titles.
    """
    import networkx as nx

    chain_meta = run_metadata_of([meta for meta, _ in refined]) or None
    graph = nx.MultiDiGraph()
    for doc in refined:
        meta = doc[0]
        if meta.get(IS_EVIDENCE_CHAINS) or RETRIEVAL_RANK not in meta:
            continue
        rank = meta[RETRIEVAL_RANK]
        reason = meta.get(KEPT_REASON)
        status = reason if isinstance(reason, str) and reason in STATUS_COLORS else "kept"
        graph.add_node(f"doc {rank}", kind="document", status=status, title=_title(doc, rank))
    if chain_meta is None:
        return graph
    for rank in chain_meta.get(DROPPED_RANKS, []):
        title = _title(retrieved[rank - 1], rank) if retrieved else f"document {rank}"
        graph.add_node(f"doc {rank}", kind="document", status="dropped", title=title)
    facts: dict[tuple[str, str, str], dict[str, Any]] = {}
    for chain in chain_meta.get(CHAINS, []):
        for triple in chain["triples"]:
            key = (triple["subject"], triple["relation"], triple["object"])
            fact = facts.setdefault(key, {"chains": [], "ranks": triple["source_ranks"]})
            fact["chains"].append(chain["number"])
    for (subject, relation, obj), fact in facts.items():
        s_node, o_node = _entity_node(subject), _entity_node(obj)
        graph.add_node(s_node, kind="entity", name=subject)
        graph.add_node(o_node, kind="entity", name=obj)
        graph.add_edge(s_node, o_node, kind="fact", relation=relation, **fact)
        for rank in fact["ranks"]:
            node = f"doc {rank}"
            if node not in graph:
                # A source the list no longer holds (a later stage trimmed it): shown as
                # dropped, since it does not reach the reader.
                title = (
                    _title(retrieved[rank - 1], rank)
                    if retrieved and 0 < rank <= len(retrieved)
                    else f"document {rank}"
                )
                graph.add_node(node, kind="document", status="dropped", title=title)
            graph.add_edge(node, s_node, kind="source", fact=(subject, relation, obj))
    return graph


def _entity_node(name: str) -> str:
    """The node of an entity: its name, unless that is a document node's name ("doc 2"),
    which would merge the entity into the document; then ``"doc 2 (entity)"``."""
    return f"{name} (entity)" if _DOC_NODE.fullmatch(name) else name


def _pair_labels(facts: Sequence[tuple[str, str, dict[str, Any]]]) -> dict[tuple[str, str], str]:
    """One label per entity pair: two relations between the same two entities are drawn as
    one arrow, so both relations go on it ("r1 / r2")."""
    labels: dict[tuple[str, str], list[str]] = {}
    for u, v, d in facts:
        labels.setdefault((u, v), []).append(d["relation"])
    return {pair: " / ".join(dict.fromkeys(names)) for pair, names in labels.items()}


def draw_evidence(
    refined: Sequence[Shown],
    retrieved: Sequence[Shown] | None = None,
    *,
    ax: Any = None,
    title: str | None = None,
    seed: int = 0,
) -> Any:
    """Draw :func:`evidence_graph` with matplotlib; returns the ``Axes``.

    Entities (white circles) are joined by arrows labelled with the relation. Documents sit
    in retrieval order along the bottom as squares coloured by why they were kept (green:
    supplies a chain fact, blue: top-N by rank, grey: dropped), with a dotted line to the
    middle of each fact they supplied.
    """
    import matplotlib.pyplot as plt
    import networkx as nx
    from matplotlib.lines import Line2D

    graph = evidence_graph(refined, retrieved)
    if ax is None:
        _, ax = plt.subplots(figsize=(12, 7))
    entities = [n for n, d in graph.nodes(data=True) if d["kind"] == "entity"]
    documents = sorted(
        (n for n, d in graph.nodes(data=True) if d["kind"] == "document"),
        key=lambda n: int(n.split()[1]),
    )
    facts = [(u, v, d) for u, v, d in graph.edges(data=True) if d["kind"] == "fact"]
    # Entities in the upper part (spring layout of the facts alone), documents in a row below.
    pos: dict[str, Any] = {}
    if entities:
        facts_only = nx.DiGraph()
        facts_only.add_nodes_from(entities)
        facts_only.add_edges_from((u, v) for u, v, _ in facts)
        layout = nx.spring_layout(facts_only, seed=seed, k=1.5)
        for node, (x, y) in layout.items():
            pos[node] = (x, 0.35 + 0.65 * (y + 1) / 2)
    for i, node in enumerate(documents):
        pos[node] = (-1 + 2 * (i + 0.5) / len(documents), -0.45)
    for u, subject, d in graph.edges(data=True):
        if d["kind"] == "source":
            obj = _entity_node(d["fact"][2])
            middle = [(pos[subject][k] + pos[obj][k]) / 2 for k in (0, 1)]
            ax.plot(*zip(pos[u], middle, strict=True), ":", color="gray", linewidth=1, zorder=0)
    nx.draw_networkx_edges(
        graph,
        pos,
        edgelist=[(u, v) for u, v, _ in facts],
        width=2,
        arrowsize=18,
        node_size=1800,
        ax=ax,
    )
    nx.draw_networkx_edge_labels(
        graph,
        pos,
        edge_labels=_pair_labels(facts),
        font_size=8,
        ax=ax,
    )
    nx.draw_networkx_nodes(
        graph, pos, nodelist=entities, node_color="white", edgecolors="black", node_size=1800, ax=ax
    )
    nx.draw_networkx_nodes(
        graph,
        pos,
        nodelist=documents,
        node_shape="s",
        node_color=[STATUS_COLORS[graph.nodes[n]["status"]] for n in documents],
        node_size=2200,
        ax=ax,
    )
    labels = {n: _wrap(graph.nodes[n]["name"]) for n in entities}
    labels.update({n: f"{n}\n{_wrap(graph.nodes[n]['title'], 12)}" for n in documents})
    nx.draw_networkx_labels(graph, pos, labels=labels, font_size=7, ax=ax)
    handles = [
        Line2D([], [], marker="s", linestyle="", color=STATUS_COLORS[s], label=STATUS_LABELS[s])
        for s in STATUS_COLORS
        if s == "dropped" or any(d.get("status") == s for _, d in graph.nodes(data=True))
    ]
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8)
    if title:
        ax.set_title(title)
    ax.set_xlim(-1.25, 1.25)
    ax.set_ylim(-0.7, 1.15)
    ax.set_axis_off()
    return ax


def _title(doc: Shown, rank: int) -> str:
    """A document's label: its ``"title"``, else its id, else ``"document <rank>"``."""
    meta, doc_id = doc
    title = meta.get("title")
    if isinstance(title, str) and title:
        return title
    return str(doc_id) if doc_id else f"document {rank}"


def _wrap(text: str, width: int = 18) -> str:
    import textwrap

    return "\n".join(textwrap.wrap(text, width=width)) or text


__all__ = ["STATUS_COLORS", "STATUS_LABELS", "Shown", "draw_evidence", "evidence_graph"]
