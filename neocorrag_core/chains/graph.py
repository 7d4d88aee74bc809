"""``EvidenceGraph``: entities as nodes, triples as edges that remember their source passages."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

# The matching key moved to the shared text layer (the triple store's keys use it too);
# these names stay importable from here.
from neocorrag_core.text.entities import normalization_memo as normalization_memo
from neocorrag_core.text.entities import normalize_entity as normalize_entity
from neocorrag_core.types import Triple


@dataclass(frozen=True)
class Edge:
    """One traversal step from a node: the triple, the node it leads to, and its direction."""

    triple_index: int
    neighbor: str
    forward: bool
    """True when the step follows the triple subject -> object."""


@dataclass
class EvidenceGraph:
    """A small multigraph of the retrieved passages' triples.

    Identical facts from several passages are merged into one edge whose
    ``source_ids`` hold every passage, so provenance survives de-duplication.
    Adjacency is a plain dict (the graph is rebuilt per query and holds tens to
    hundreds of triples); :meth:`to_networkx` converts for drawing.
    """

    triples: list[Triple] = field(default_factory=list)
    surface: dict[str, str] = field(default_factory=dict)
    adjacency: dict[str, list[Edge]] = field(default_factory=dict)

    @classmethod
    def from_triples(cls, triples: Iterable[Triple]) -> EvidenceGraph:
        """Build the graph, merging duplicate facts (matched on normalized parts)."""
        merged: dict[tuple[str, str, str], int] = {}
        graph = cls()
        for triple in triples:
            head, tail = normalize_entity(triple.subject), normalize_entity(triple.object)
            if not head or not tail or head == tail:
                continue  # a self-loop cannot extend a path; an empty entity is no node
            key = (head, " ".join(triple.relation.split()).casefold(), tail)
            if key in merged:
                index = merged[key]
                old = graph.triples[index]
                sources = tuple(dict.fromkeys(old.source_ids + triple.source_ids))
                graph.triples[index] = Triple(old.subject, old.relation, old.object, sources)
                continue
            index = len(graph.triples)
            merged[key] = index
            graph.triples.append(triple)
            graph.surface.setdefault(head, triple.subject)
            graph.surface.setdefault(tail, triple.object)
            graph.adjacency.setdefault(head, []).append(Edge(index, tail, True))
            graph.adjacency.setdefault(tail, []).append(Edge(index, head, False))
        return graph

    @property
    def nodes(self) -> list[str]:
        """Node keys (normalized entity names), in first-seen order."""
        return list(self.surface)

    def neighbors(self, node: str) -> list[Edge]:
        """Edges leaving ``node`` in either direction."""
        return self.adjacency.get(node, [])

    def to_networkx(self) -> Any:
        """A ``networkx.MultiDiGraph`` copy (surface names on nodes, relation/sources on edges)."""
        try:
            import networkx as nx
        except ImportError as exc:  # pragma: no cover - exercised only without networkx
            raise ImportError("to_networkx needs networkx: pip install 'neocorrag[viz]'") from exc
        out = nx.MultiDiGraph()
        for key, name in self.surface.items():
            out.add_node(key, label=name)
        for triple in self.triples:
            out.add_edge(
                normalize_entity(triple.subject),
                normalize_entity(triple.object),
                relation=triple.relation,
                source_ids=triple.source_ids,
            )
        return out
