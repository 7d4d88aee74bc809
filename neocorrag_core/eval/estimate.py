"""A rough time estimate before an eval run starts, and a ``--limit`` for a first look.

The figures are seconds per question measured on a 2-core laptop CPU in the benchmark's
runs (``benchmarks/results/eval/*/report.md``, "Cost per question": method seconds and read
seconds, warm triple store); a cold store (spaCy extracting what it sees first) adds
about a second per question to each refining method. A chat model's own time is unknown
before it answers, so the estimate counts its calls instead.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

METHOD_SECONDS = {
    "none": 0.0,
    "evireform": 0.7,
    "evireform-refined": 1.0,
    "graph": 0.5,
    "belief": 6.0,
    "belief-composed": 8.0,
}
"""Seconds a method's own work takes per question (refiner variants: :data:`REFINER_SECONDS`;
a method not listed: :data:`OTHER_SECONDS`)."""
REFINER_SECONDS = 0.3
OTHER_SECONDS = 1.0
RETRIEVAL_SECONDS = 0.1
"""The built-in retrieval per question (a user's own search takes what it takes)."""
READER_SECONDS = {"0.5b": 2.2, "1.5b": 6.5}
"""Seconds per answer of the bundled readers (greedy, 20 new tokens at most)."""
FIRST_LOOK_SECONDS = 180.0
"""What a first look should take: the suggested ``--limit`` fits in it."""


@dataclass(frozen=True)
class Estimate:
    """What a run has left to do, and about how long it takes."""

    questions: int
    runs: int
    """(question, method) records left."""
    seconds: float
    """Estimated seconds of the work the estimate knows (retrieval, methods, a local reader)."""
    chat_answers: int
    """Answers a chat model will write (its time is not in :attr:`seconds`)."""

    def per_question(self) -> float:
        """Estimated seconds per question."""
        return self.seconds / self.questions if self.questions else 0.0

    def first_look(self) -> int:
        """Questions that fit in :data:`FIRST_LOOK_SECONDS` (at least 5)."""
        per = self.per_question()
        return max(5, int(FIRST_LOOK_SECONDS // per)) if per > 0 else self.questions

    def message(self) -> str:
        """One line for the terminal."""
        text = (
            f"about {_duration(self.seconds)} for {self.questions} question(s), "
            f"{self.runs} method run(s) (a rough figure for a 2-core laptop CPU"
        )
        if self.chat_answers:
            text += f"; plus your chat model's time for {self.chat_answers} answer(s)"
        text += ")"
        limit = self.first_look()
        if limit < self.questions:
            about = _duration(limit * self.per_question())
            text += f". For a first look: --limit {limit} (about {about})"
        return f"neocorrag eval: {text}."


def estimate(todo: Sequence[tuple[Any, Sequence[str]]], reader: Any) -> Estimate:
    """The :class:`Estimate` of ``todo`` (question, methods left) with ``reader`` answering
    (a local :class:`~neocorrag_core.eval.reader.Reader`, a chat reader, or none)."""
    from neocorrag_core.eval.reader import ChatReader, Reader

    per_answer = 0.0
    if isinstance(reader, Reader):
        per_answer = READER_SECONDS["1.5b" if "1.5" in reader.name else "0.5b"]
    chat = isinstance(reader, ChatReader)
    seconds, runs, answers = 0.0, 0, 0
    for _, methods in todo:
        seconds += RETRIEVAL_SECONDS
        for name in methods:
            runs += 1
            answers += 1
            seconds += _method_seconds(name) + per_answer
    return Estimate(len(todo), runs, seconds, answers if chat else 0)


def _method_seconds(name: str) -> float:
    if name in METHOD_SECONDS:
        return METHOD_SECONDS[name]
    if name.startswith("neocorrag-"):
        return REFINER_SECONDS
    return OTHER_SECONDS


def _duration(seconds: float) -> str:
    if seconds < 90:
        return f"{max(1, math.ceil(seconds))} s"
    if seconds < 5400:
        return f"{math.ceil(seconds / 60)} min"
    return f"{seconds / 3600:.1f} h"


__all__ = ["Estimate", "estimate"]
