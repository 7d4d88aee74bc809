"""``neocorrag eval --vector-store``: the pooled corpus in a persistent Chroma collection,
built once, reopened after, ranking as the exact search does on a small corpus."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("chromadb")

from conftest import HashedBagOfWords

from neocorrag_core.eval.datasets import QAExample
from neocorrag_core.eval.retrieval import Retriever
from neocorrag_core.eval.runner import EvalSettings
from neocorrag_core.eval.vector_store import ChromaIndex
from neocorrag_core.models import resolve_embedder
from neocorrag_core.types import Passage

CORPUS = [
    Passage(f"p{i}", text, title)
    for i, (title, text) in enumerate(
        [
            ("Oslo", "Oslo is the capital of Norway."),
            ("Bergen", "Bergen is a city on the west coast of Norway."),
            ("Leeds", "Leeds is a city in West Yorkshire, England."),
            ("Jane Roe", "Jane Roe is a film director born in Oslo."),
            ("Film X", "Film X is a 1999 drama directed by Jane Roe."),
        ]
    )
]


def _example(question: str) -> QAExample:
    return QAExample("q", question, ("x",), tuple(CORPUS), frozenset({"p0"}))


def test_the_store_ranks_as_the_exact_search_and_is_reused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    embedder = resolve_embedder(HashedBagOfWords())
    exact = Retriever("dense", embedder=embedder, pool="corpus", corpus=CORPUS)
    stored = Retriever(
        "dense", embedder=embedder, pool="corpus", corpus=CORPUS, vector_store=tmp_path
    )
    for question in ("What is the capital of Norway?", "Who directed Film X?"):
        want = exact.retrieve(_example(question), 2)
        got = stored.retrieve(_example(question), 2)
        assert [p.id for p in got] == [p.id for p in want]
        assert [p.score for p in got] == pytest.approx([p.score for p in want], abs=1e-3)

    # A second retriever (a later run) opens the same collection instead of adding again.
    def no_adding(*args: object) -> None:
        raise AssertionError("the collection was built again")

    monkeypatch.setattr(ChromaIndex, "_add", no_adding)
    again = Retriever(
        "dense", embedder=embedder, pool="corpus", corpus=CORPUS, vector_store=tmp_path
    )
    assert [p.id for p in again.retrieve(_example("Which city is in England?"), 1)] == ["p2"]


def test_the_vector_store_needs_the_pooled_dense_search(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="--pool corpus"):
        EvalSettings(data="d.json", out=str(tmp_path), vector_store=str(tmp_path))
