"""``EvidenceGraph``: entities as nodes, triples as edges that remember their source passages."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from neocorrag_core.types import Triple

# A run of combining diacritical marks (U+0300-U+036F) on a Basic Latin..Latin Extended-B base.
_LATIN_ACCENTS = re.compile("(?<=[A-Za-z\u00c0-\u024f])[\u0300-\u036f]+")
# Stripped from both ends of a name. str.strip, not a regex: "[...]+$" tried at every offset
# of a long run of these characters is quadratic (". " * 16000 took 19 s), and passage texts
# and questions are normalized too, not only short entity names.
_EDGE_CHARS = " \"'`“”‘’.,;:!?()[]{}"


def _fold_latin_accents(text: str) -> str:
    """``text`` without the accents on Latin letters ("Aschenbrödel" -> "Aschenbrodel").

    Questions and passages spell the same name with and without diacritics (MuSiQue asks
    about "Aschenbrodel", the passage is titled "Aschenbrödel"). Only combining diacritics
    right after a Latin letter go: in Devanagari or Arabic the marks are part of the word.
    """
    if text.isascii():
        return text
    return unicodedata.normalize("NFC", _LATIN_ACCENTS.sub("", unicodedata.normalize("NFD", text)))


_MEMO: ContextVar[dict[tuple[str, bool], str] | None] = ContextVar(
    "neocorrag_normalize_memo", default=None
)


@contextmanager
def normalization_memo() -> Iterator[None]:
    """Remember :func:`normalize_entity`'s keys for the length of one call (this thread or
    task only): a call's graph, links, focus and entity matching normalize the same few
    hundred names over a thousand times. Outside such a block nothing is remembered."""
    token = _MEMO.set({})
    try:
        yield
    finally:
        _MEMO.reset(token)


def normalize_entity(name: str, *, fold_accents: bool = True) -> str:
    """Matching key of an entity: NFKC, Latin accents folded, case-folded, collapsed spaces,
    outer punctuation stripped.

    Only used to decide which mentions are the same node; the surface form is kept
    for display and for the chain text. ``fold_accents=False`` is the key before accents
    were folded, which the triple store's stored entity keys still use. Memoised inside a
    :func:`normalization_memo` block (the miner opens one per call).
    """
    memo = _MEMO.get()
    if memo is None:
        return _normalized(name, fold_accents)
    key = (name, fold_accents)
    found = memo.get(key)
    if found is None:
        found = memo[key] = _normalized(name, fold_accents)
    return found


def _normalized(name: str, fold_accents: bool) -> str:
    text = unicodedata.normalize("NFKC", name)
    if fold_accents:
        text = _fold_latin_accents(text)
    text = " ".join(text.split())  # the only whitespace left is single inner spaces
    return text.strip(_EDGE_CHARS).casefold()


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
