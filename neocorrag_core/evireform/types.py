"""Plain data passed between the EviReform stages and returned to callers."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from neocorrag_core.cost import Cost
from neocorrag_core.types import Passage, Triple

QueryKind = Literal["original", "question", "lm", "entities", "template", "repeat"]
"""Who wrote a query: the question itself, a name of the question that the first search
found nothing about (``"question"``), the LM, a bare bridge entity, a bridge entity with
the question's open relation words (``"template"``), or the repeat control."""


@dataclass(frozen=True)
class Proposition:
    """A retrievable fact: a triple's text (or a passage's lead sentence) and its sources.

    ``entities`` are normalized entity keys (see
    :func:`neocorrag_core.text.entities.normalize_entity`); propositions sharing one are
    neighbours in the propagation step. ``surface_entities`` keep the original spelling for
    bridge-entity queries.
    """

    text: str
    passage_ids: tuple[str, ...]
    entities: tuple[str, ...] = ()
    surface_entities: tuple[str, ...] = ()
    triple: Triple | None = None


@dataclass(frozen=True)
class ReformulationQuery:
    """One query sent to the search: the original question or a residual query."""

    text: str
    kind: QueryKind
    round: int
    """0 for the original question, then the reformulation round that wrote it."""
    bridge: str = ""
    """The bridge entity the query searches from ("" when it names none)."""


@dataclass(frozen=True)
class RankedPassage:
    """A passage of the final ranking, with the query that first retrieved it."""

    passage: Passage
    score: float
    found_by: int
    """Index into :attr:`ReformulationResult.queries` of the first query that returned it."""
    retrieval_ranks: tuple[tuple[int, int], ...] = ()
    """``(query index, 0-based rank)`` for every query whose results held this passage."""


@dataclass
class ReformulationResult(Cost):
    """What :meth:`EvidenceReformulator.retrieve` found for one question, and its cost."""

    question: str
    passages: list[RankedPassage]
    """The final top-k, best first."""
    queries: list[ReformulationQuery]
    """Every query sent to the search, the original question first."""
    evidence: list[Proposition] = field(default_factory=list)
    """Propositions selected as evidence, in selection order over all rounds."""
    pool: list[Passage] = field(default_factory=list, repr=False)
    """Every distinct passage any query returned, in arrival order."""
    first_pool_size: int = 0
    """How many of ``pool`` came from the first retrieval (they come first)."""
    sufficient: bool = False
    """The LM said the selected evidence already answers the question."""
    query_results: list[list[str]] = field(default_factory=list)
    """For each of :attr:`queries`, the passage ids its search returned, in rank order
    (empty for the rerank control's queries, which search nothing)."""
    rounds: int = 0
    """Reformulation rounds that searched again."""
    notes: list[str] = field(default_factory=list)
    """Fallbacks taken (e.g. ``"residual_queries: bridge entities (lm wrote none)"``)."""

    @property
    def first_pool(self) -> list[Passage]:
        """The passages of the first retrieval (the single-shot result)."""
        return self.pool[: self.first_pool_size]

    def found_by_text(self, ranked: RankedPassage) -> str:
        """The text of the query that first retrieved ``ranked``."""
        return self.queries[ranked.found_by].text


__all__ = [
    "Proposition",
    "QueryKind",
    "RankedPassage",
    "ReformulationQuery",
    "ReformulationResult",
]
