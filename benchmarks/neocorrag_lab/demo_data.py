"""The bundled demo questions and a plain dense top-k, for the lab's timing scripts.

What ``neocorrag demo`` reads and how it stands in for a user's retriever, rebuilt on the
product's public pieces (its packaged data file, :func:`neocorrag_core.rendering.render_passages`
and an embedder's ``embed``) so the scripts need nothing from the command's internals
(``neocorrag_core.cli``).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from importlib import resources
from typing import Any

from neocorrag_core.rendering import render_passages
from neocorrag_core.types import Passage

DEMO_FILE = "data/demo_questions.json"
"""The bundled MuSiQue sample, inside the ``neocorrag_core`` package."""


def bundled_demo_questions() -> list[dict[str, Any]]:
    """The questions of the bundled demo sample (MuSiQue shape: ``question``,
    ``paragraphs`` with ``id``, ``text``, ``title``, ``is_supporting``, ``triples``)."""
    bundled = resources.files("neocorrag_core").joinpath(DEMO_FILE)
    data = json.loads(bundled.read_text(encoding="utf-8"))
    questions = data.get("questions") if isinstance(data, dict) else data
    if not isinstance(questions, list) or not questions:
        raise ValueError(f"neocorrag_core/{DEMO_FILE} holds no list of questions")
    return questions


def dense_top_k(embedder: Any, question: str, passages: Sequence[Passage], k: int) -> list[Passage]:
    """Plain dense retrieval (cosine of ``title: text``), standing in for the user's retriever."""
    query_vec = embedder.embed([question])[0]
    doc_vecs = embedder.embed(render_passages(passages))
    order = sorted(range(len(passages)), key=lambda i: -float(doc_vecs[i] @ query_vec))
    return [passages[i] for i in order[:k]]


__all__ = ["DEMO_FILE", "bundled_demo_questions", "dense_top_k"]
