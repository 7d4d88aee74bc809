"""``neocorrag index --engine ray``: Ray Data actors store exactly the local engine's triples,
every passage once; a second run starts no actor and extracts nothing; an actor's error
comes back as the neocorrag error that says what to fix.

One local Ray (2 CPUs) for the module; the engine reuses it and leaves it running.
"""

from __future__ import annotations

import json
import logging
import sqlite3
from pathlib import Path

import pytest

pytest.importorskip("spacy")
pytest.importorskip("ray.data")

import ray

from neocorrag_core.errors import MissingDependencyError
from neocorrag_core.indexing import index_corpus, make_engine
from neocorrag_core.indexing.corpus import open_corpus
from neocorrag_core.triples import TripleStore

CITIES = ["Oslo", "Lyon", "Porto", "Graz", "Turin", "Ghent", "Bergen"]


@pytest.fixture(scope="module", autouse=True)
def local_ray():
    ray.init(num_cpus=2, include_dashboard=False, logging_level=logging.ERROR)
    yield
    ray.shutdown()


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """40 distinct passages with names, places and dates, as JSON lines (plus duplicates)."""
    rows = []
    for i in range(40):
        name = f"Person {i} Berg"
        text = (
            f"{name} was born in {CITIES[i % 7]} in {1800 + i}. He founded the Dahl "
            f"Company in {CITIES[(i + 3) % 7]}. His sister is Anna Costa."
        )
        rows.append({"title": name, "text": text})
    path = tmp_path_factory.mktemp("ray") / "corpus.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows + rows[:5]), encoding="utf-8")
    return path


def stored(store: TripleStore, path: Path, key) -> dict[str, list[tuple[str, str, str]]]:
    passages = list(open_corpus(path))
    found = store.get_many(passages, key)
    assert all(f is not None for f in found)
    return {p.id: [t.key() for t in f or []] for p, f in zip(passages, found, strict=True)}


def test_ray_stores_exactly_the_local_triples_once_and_resumes(
    corpus: Path, tmp_path: Path
) -> None:
    local_store = TripleStore(tmp_path / "local.sqlite")
    local = make_engine("local", "spacy", batch_size=4)
    index_corpus(open_corpus(corpus), local_store, local, batch_size=4, show_progress=False)

    ray_store = TripleStore(tmp_path / "ray.sqlite")
    engine = make_engine("ray", "spacy", workers=2, batch_size=4)
    report = index_corpus(open_corpus(corpus), ray_store, engine, batch_size=4)
    assert (report.passages, report.extracted) == (40, 40)
    assert ray.is_initialized()  # a Ray found running is left running
    expected = stored(local_store, corpus, local.key)
    assert sum(map(len, expected.values())) > 40
    assert stored(ray_store, corpus, engine.key) == expected
    with sqlite3.connect(tmp_path / "ray.sqlite") as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        count, distinct = conn.execute(
            "SELECT COUNT(*), COUNT(DISTINCT text_sha256) FROM passages"
        ).fetchone()
    assert count == distinct == 40

    # Everything is stored: no dataset is built, so no actor starts.
    again = make_engine("ray", "spacy", workers=2, batch_size=4)
    report = index_corpus(open_corpus(corpus), ray_store, again, show_progress=False)
    assert (report.already_stored, report.extracted, report.triples_written) == (40, 0, 0)


def test_an_actor_error_comes_back_as_the_neocorrag_error(corpus: Path, tmp_path: Path) -> None:
    store = TripleStore(tmp_path / "s.sqlite")
    engine = make_engine("ray", "spacy:no_such_spacy_pipeline_xyz", workers=1, batch_size=8)
    with pytest.raises(MissingDependencyError, match=r"no_such_spacy_pipeline_xyz.*pip install"):
        index_corpus(open_corpus(corpus, limit=8), store, engine, show_progress=False)
    assert store.stats() == {}
