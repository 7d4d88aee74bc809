"""What the question still asks for: its relation words that the evidence has not covered.

The rules moved to the shared text layer, :mod:`neocorrag_core.text.relations` (NeocorRAG's
passage focus and BeliefRAG use them too, and NeocorRAG must not import EviReform); this
module keeps their import path.
"""

from __future__ import annotations

from neocorrag_core.text.relations import FUNCTION_WORDS as FUNCTION_WORDS
from neocorrag_core.text.relations import PREFIX as PREFIX
from neocorrag_core.text.relations import Coverage as Coverage
from neocorrag_core.text.relations import coverage as coverage
from neocorrag_core.text.relations import covers as covers
from neocorrag_core.text.relations import open_relation_words as open_relation_words
from neocorrag_core.text.relations import qualify as qualify
from neocorrag_core.text.relations import relation_position as relation_position
from neocorrag_core.text.relations import relation_words as relation_words

__all__ = [
    "FUNCTION_WORDS",
    "PREFIX",
    "Coverage",
    "coverage",
    "covers",
    "open_relation_words",
    "qualify",
    "relation_position",
    "relation_words",
]
