"""What the controller asks of models: the verifier, the answer generator, the query writers
and the relevance scorer, as small protocols with plain return values.

The controller never reaches into a model. Local-LM and chat-model
(:class:`~neocorrag_core.lm.chat.ChatModel`) implementations live in their own modules;
tests plug in scripted ones. Every model call reports its :class:`Usage`, so the episode's
token accounting is one sum.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, TypeVar, runtime_checkable

from neocorrag_core.types import Passage


@dataclass(frozen=True)
class Usage:
    """Tokens one model call read and wrote (prompts include every context they show)."""

    prompt_tokens: int = 0
    generated_tokens: int = 0

    @property
    def total(self) -> int:
        """Prompt plus generated tokens."""
        return self.prompt_tokens + self.generated_tokens

    def __add__(self, other: Usage) -> Usage:
        """The tokens of both calls (a wrapper's own model use plus the wrapped call's)."""
        return Usage(
            self.prompt_tokens + other.prompt_tokens,
            self.generated_tokens + other.generated_tokens,
        )


T = TypeVar("T")


@dataclass
class UsageTally:
    """Tokens of the model calls of one episode (or one benchmark question) so far."""

    prompt: int = 0
    generated: int = 0

    def call(self, outcome: tuple[T, Usage]) -> T:
        """Count one component call's ``(value, Usage)`` and hand back its value."""
        value, usage = outcome
        self.prompt += int(usage.prompt_tokens)
        self.generated += int(usage.generated_tokens)
        return value

    @property
    def total(self) -> int:
        """Prompt plus generated tokens."""
        return self.prompt + self.generated


@dataclass(frozen=True)
class VerifierReply:
    """The verifier's judgment of the current evidence (validated; numbers in ``[0, 1]``).

    ``drop_ids`` only names passages that are in the evidence shown; anything else the
    model wrote is discarded when the reply is validated.
    """

    support: float
    conflict: float
    uncertainty: float
    gap: float
    missing_fact: str = ""
    drop_ids: tuple[str, ...] = ()


@dataclass(frozen=True)
class DraftAnswer:
    """A short answer from the current evidence, and the generator's confidence in it
    (mean token probability; ``None`` when the model does not expose log-probabilities)."""

    text: str
    confidence: float | None = None


@runtime_checkable
class Verifier(Protocol):
    """One structured call: support, conflict, uncertainty, gap and passages to drop."""

    def verify(
        self, question: str, passages: Sequence[Passage], draft_answer: str
    ) -> tuple[VerifierReply, Usage]:
        """Judge ``passages`` as evidence for ``question`` (and the draft answer)."""
        ...


@runtime_checkable
class AnswerGenerator(Protocol):
    """Answers the question from the evidence (best effort when the evidence lacks it)."""

    def answer(self, question: str, passages: Sequence[Passage]) -> tuple[DraftAnswer, Usage]:
        """A short answer to ``question`` from ``passages``."""
        ...


@runtime_checkable
class QueryWriter(Protocol):
    """Writes the next search query for the missing fact; ``None`` means SUFFICIENT."""

    def next_query(
        self,
        question: str,
        passages: Sequence[Passage],
        missing_fact: str,
        asked: Sequence[str],
    ) -> tuple[str | None, Usage]:
        """A query for what the evidence still lacks, or ``None`` if nothing is missing."""
        ...

    def rewrite(self, question: str, last_query: str, asked: Sequence[str]) -> tuple[str, Usage]:
        """A reworded query that targets the same need differently (never one of ``asked``)."""
        ...


@runtime_checkable
class EntityQueryWriter(Protocol):
    """A query writer that can also write a query without a model call (optional)."""

    def entity_query(self, question: str, passages: Sequence[Passage], asked: Sequence[str]) -> str:
        """A query for the next hop built from the evidence alone (a bridge entity the
        question does not name, with the relation the question still asks for); never
        one of ``asked``, never empty."""
        ...


@runtime_checkable
class RelevanceScorer(Protocol):
    """Calibrated relevance of the evidence to the question, in ``[0, 1]`` (local, no LM)."""

    def relevance(self, question: str, passages: Sequence[Passage]) -> float:
        """How relevant the passages are to the question, as a probability-like score."""
        ...


__all__ = [
    "AnswerGenerator",
    "DraftAnswer",
    "EntityQueryWriter",
    "QueryWriter",
    "RelevanceScorer",
    "Usage",
    "UsageTally",
    "Verifier",
    "VerifierReply",
]
