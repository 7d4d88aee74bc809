"""A two-hop question whose second hop only a relation-aware query reaches: the first
passage states "His father was Thomas Stanley" (no triple extractor needed) and names a
co-star, a bridge that leads nowhere."""

from __future__ import annotations

from neocorrag_core.types import Passage

FATHER_QUESTION = "Where was the father of Edward Smith born?"
ACTOR = Passage(
    "actor",
    "Edward Smith was an English actor who worked with Laurence Olivier. "
    "His father was Thomas Stanley.",
    "Edward Smith",
)
COSTAR = Passage("costar", "Laurence Olivier was an English actor.", "Laurence Olivier")
FATHER = Passage("father", "Thomas Stanley was born in Leeds.", "Thomas Stanley")
