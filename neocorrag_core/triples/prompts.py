"""Prompts and output schemas of the two-step LLM extraction (entities, then triples).

Bump ``PROMPT_VERSION`` whenever the wording, the example or a schema changes: it is part
of the store key, so triples made with older prompts are not served for the new ones.
"""

from __future__ import annotations

import json
from typing import Any

PROMPT_VERSION = "1"

# Strings are unbounded on purpose: length-bounded strings inside bounded arrays make
# outlines-core's index blow up (minutes, gigabytes) on a 150k-token vocabulary. Output
# length is bounded by max_new_tokens instead, and truncated output is salvaged.
_STRING = {"type": "string", "minLength": 1}

ENTITY_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"entities": {"type": "array", "items": _STRING}},
    "required": ["entities"],
    "additionalProperties": False,
}

# Triples as 3-string arrays: a third of the tokens of {"subject": ..} objects.
TRIPLE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "triples": {
            "type": "array",
            "items": {"type": "array", "items": _STRING, "minItems": 3, "maxItems": 3},
        }
    },
    "required": ["triples"],
    "additionalProperties": False,
}

_ENTITY_SYSTEM = (
    "You find the named entities in a passage for a knowledge graph. List every person, "
    "organisation, place, creative work, event, date and number that the passage names, "
    "each once, spelled exactly as in the passage. Answer with JSON only: "
    '{"entities": ["...", "..."]}.'
)

_TRIPLE_SYSTEM = (
    "You turn a passage into knowledge-graph facts. Write each fact as "
    "[subject, relation, object]. Subjects and objects should be the listed named entities "
    "(use the full name; replace he, she, it, they and 'the film' with the entity meant). "
    "Relations are short verb phrases such as 'directed by' or 'born in'. Cover every fact "
    'the passage states. Answer with JSON only: {"triples": [["...", "...", "..."]]}.'
)

# One worked example per step (our own text), so small models see the exact format.
_EXAMPLE_PASSAGE = (
    "Title: Maria Lindqvist\n"
    "Maria Lindqvist (born 4 March 1951) is a Swedish architect. She designed the Harbour "
    "Library in Gothenburg, which opened in 1989."
)
_EXAMPLE_ENTITIES = [
    "Maria Lindqvist",
    "4 March 1951",
    "Swedish",
    "Harbour Library",
    "Gothenburg",
    "1989",
]
_EXAMPLE_TRIPLES = [
    ["Maria Lindqvist", "born on", "4 March 1951"],
    ["Maria Lindqvist", "nationality", "Swedish"],
    ["Maria Lindqvist", "profession", "architect"],
    ["Maria Lindqvist", "designed", "Harbour Library"],
    ["Harbour Library", "located in", "Gothenburg"],
    ["Harbour Library", "opened in", "1989"],
]


def _passage_block(title: str, text: str) -> str:
    return f"Title: {title}\n{text}" if title else text


def entity_messages(title: str, text: str) -> list[dict[str, str]]:
    """Chat messages of step 1: the named entities of one passage."""
    return [
        {"role": "system", "content": _ENTITY_SYSTEM},
        {"role": "user", "content": _EXAMPLE_PASSAGE},
        {"role": "assistant", "content": json.dumps({"entities": _EXAMPLE_ENTITIES})},
        {"role": "user", "content": _passage_block(title, text)},
    ]


def triple_messages(title: str, text: str, entities: list[str]) -> list[dict[str, str]]:
    """Chat messages of step 2: triples of one passage, built on its named entities."""

    def user(passage: str, ents: list[str]) -> str:
        return f"{passage}\n\nNamed entities: {json.dumps(ents, ensure_ascii=False)}"

    return [
        {"role": "system", "content": _TRIPLE_SYSTEM},
        {"role": "user", "content": user(_EXAMPLE_PASSAGE, _EXAMPLE_ENTITIES)},
        {"role": "assistant", "content": json.dumps({"triples": _EXAMPLE_TRIPLES})},
        {"role": "user", "content": user(_passage_block(title, text), entities)},
    ]
