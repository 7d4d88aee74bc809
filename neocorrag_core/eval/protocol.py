"""The one contract every benchmark method follows: plain data in, plain data out.

A method gets a :class:`MethodInput` (the question, the shared retrieved top-k, and the
same search that produced it, for methods that retrieve again) and returns a
:class:`MethodOutput` (what the reader sees and what producing it cost). Factories build
methods from a :class:`BuildContext`; the registry (``registry``) maps names to factories.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from neocorrag_core.cost import Cost
from neocorrag_core.types import Passage

if TYPE_CHECKING:
    from neocorrag_core.chains.miner import EvidenceChainMiner

SearchFn = Callable[[str, int], list[Passage]]
"""``search(query, k)``: the benchmark's retrieval (per-question or corpus pool)."""


@dataclass(frozen=True)
class MethodInput:
    """What a method is given for one question."""

    question: str
    passages: Sequence[Passage]
    """The shared retrieved top-k, best first (every method sees the same)."""
    search: SearchFn
    """The retrieval that produced ``passages``; methods that search again call it."""
    k: int
    """How many passages the retrieval step returned (the size of the top-k)."""
    qid: str | None = None
    """The question's id in the data file (the runner sets it; questions may share a text)."""


@dataclass
class MethodOutput(Cost):
    """What a method gives the reader, and what producing it cost (:class:`Cost`)."""

    passages: list[Passage]
    chain_text: str = ""
    info: dict[str, Any] = field(default_factory=dict)
    """Method-specific details recorded with the result (fallbacks, counts, ...)."""
    answer: str | None = None
    """Set by methods that answer by themselves (the evidence-state controller and its
    baselines): the runner then records this answer and does not call its reader."""
    abstained: bool = False
    """The method declined to answer (scored as a wrong answer)."""

    @property
    def answered(self) -> bool:
        """Whether the method answered (or abstained) itself."""
        return self.answer is not None or self.abstained


class Method(Protocol):
    """Turns a question's retrieved passages into the reader's context."""

    name: str

    def refine(self, call: MethodInput) -> MethodOutput:
        """The reader's context for ``call.question``."""
        ...


@dataclass
class BuildContext:
    """What factories build methods from; methods built together share one context.

    ``shared`` lets methods of one run share work: e.g. every neocorrag variant reads the
    same mining memo, and every EviReform variant the same reformulation loop.
    """

    miner: EvidenceChainMiner
    embeddings_threshold: float = 0.5
    evireform_overrides: dict[str, Any] = field(default_factory=dict)
    belief_overrides: dict[str, Any] = field(default_factory=dict)
    """BeliefConfig fields changed for the evidence-state controller's methods."""
    reader_lm: Any = None
    """The run's reader LM (the answering model of methods that answer by themselves)."""
    reader: str = "default"
    """The ``--reader`` spec the reader LM was resolved from (picks the belief methods'
    fitted models, :data:`~neocorrag_core.belief.calibrator.SHIPPED_MODELS`)."""
    corpus: Sequence[Passage] = ()
    """The run's passages (the pooled corpus, or every question's candidates): where a
    method that chooses passages no search returned (``graph``) takes them from."""
    shared: dict[str, Any] = field(default_factory=dict)


MethodFactory = Callable[[str, BuildContext], Method]
"""``factory(name, context) -> Method``: builds the method registered as ``name``."""


__all__ = [
    "BuildContext",
    "Method",
    "MethodFactory",
    "MethodInput",
    "MethodOutput",
    "SearchFn",
]
