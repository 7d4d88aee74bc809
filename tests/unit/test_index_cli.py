"""``neocorrag index``: index a small corpus with spaCy, re-run extracts nothing, then mine.

Vectors: ``--no-vectors``, or a tiny sentence-transformers folder where they are checked (the
default, the bundled MiniLM, is for ``tests/integration``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("spacy")

from conftest import bag_of_words_embedder
from tiny_models import save_tiny_embedder

from neocorrag_core import EvidenceChainMiner, MinerConfig
from neocorrag_core.cli.app import main
from neocorrag_core.indexing.corpus import load_corpus
from neocorrag_core.triples import (
    CachedTripleSource,
    SpacyTripleExtractor,
    TripleStore,
)

CORPUS = [
    {"title": "Van Hook Township", "text": "Van Hook Township is located in Mountrail County."},
    {
        "title": "Mountrail County",
        "text": "Mountrail County is a county in North Dakota. Its county seat is Stanley.",
    },
    {"title": "Stanley", "text": "Stanley is a city in North Dakota. It was founded in 1902."},
    {"title": "Paris", "text": "Paris is the capital of France."},
]


class NoExtraction:
    """Stands in for the extractor after indexing: any extraction is a test failure."""

    def __init__(self, real: SpacyTripleExtractor) -> None:
        self.extractor_id, self.version = real.extractor_id, real.version

    def extract(self, passages):
        raise AssertionError(f"extracted {len(passages)} passages that should be stored")


def run_index(tmp_path: Path, capsys, *extra: str, vectors: tuple[str, ...] = ()) -> str:
    """``neocorrag index`` on ``CORPUS``; ``vectors``: the vector options (none stored by
    default)."""
    corpus = tmp_path / "corpus.json"
    corpus.write_text(json.dumps(CORPUS), encoding="utf-8")
    store = tmp_path / "store.sqlite"
    vectors = vectors or ("--no-vectors",)
    code = main(["index", str(corpus), "--store", str(store), "--quiet", *vectors, *extra])
    assert code == 0
    return capsys.readouterr().out


def test_index_then_rerun_then_mine_from_the_store(tmp_path: Path, capsys) -> None:
    embedder = ("--embedder", str(save_tiny_embedder(tmp_path / "tiny_embedder")))
    out = run_index(tmp_path, capsys, "--batch-size", "3", vectors=embedder)
    assert "passages total 4 | already stored 0 | extracted now 4" in out
    assert "vectors computed 0 " not in out  # the texts' vectors, stored beside the triples
    out = run_index(tmp_path, capsys, vectors=embedder)
    assert "passages total 4 | already stored 4 | extracted now 0 | triples written 0" in out
    assert "vectors computed 0 " in out  # stored once

    store = TripleStore(tmp_path / "store.sqlite")
    (stats,) = store.stats().values()
    assert stats["passages"] == 4 and stats["triples"] > 0
    source = CachedTripleSource(store, NoExtraction(SpacyTripleExtractor()))
    miner = EvidenceChainMiner(
        MinerConfig(decoding="none", tau_edge=0.1, tau_boost=0.1),
        embedder=bag_of_words_embedder(),
        triple_source=source,
    )
    passages = load_corpus(tmp_path / "corpus.json").passages
    result = miner.mine("Which county is Van Hook Township located in?", passages)
    assert source.stats.hits == 4
    assert result.chains, result.fallback
    assert any("Mountrail County" in chain.text for chain in result.chains)


def test_index_warns_when_the_store_evicts_vectors_while_indexing(
    tmp_path: Path, capsys, monkeypatch
) -> None:
    embedder = ("--embedder", str(save_tiny_embedder(tmp_path / "tiny_embedder")))
    monkeypatch.setenv("NEOCORRAG_MAX_VECTOR_BYTES", "1000")  # a handful of vectors
    corpus = tmp_path / "corpus.json"
    corpus.write_text(json.dumps(CORPUS), encoding="utf-8")
    store = tmp_path / "store.sqlite"
    args = ["index", str(corpus), "--store", str(store), "--quiet", "--batch-size", "1"]
    assert main([*args, *embedder]) == 0
    err = capsys.readouterr().err
    evicted = TripleStore(store).evicted_vectors()
    assert evicted > 0
    assert f"{evicted} vectors, the least recently used, were evicted while indexing" in err
    assert "NEOCORRAG_MAX_VECTOR_BYTES=" in err
    monkeypatch.setenv("NEOCORRAG_MAX_VECTOR_BYTES", str(2**30))  # as the warning says
    assert main([*args, *embedder]) == 0  # the stored passages' missing vectors filled
    captured = capsys.readouterr()
    assert "evicted" not in captured.err
    assert "vectors computed 0 " not in captured.out


def test_index_with_room_for_every_vector_does_not_warn(tmp_path: Path, capsys) -> None:
    embedder = ("--embedder", str(save_tiny_embedder(tmp_path / "tiny_embedder")))
    corpus = tmp_path / "corpus.json"
    corpus.write_text(json.dumps(CORPUS), encoding="utf-8")
    store = tmp_path / "store.sqlite"
    assert main(["index", str(corpus), "--store", str(store), "--quiet", *embedder]) == 0
    assert "evicted" not in capsys.readouterr().err
    assert TripleStore(store).evicted_vectors() == 0


def test_index_resumes_after_a_partial_run(tmp_path: Path, capsys) -> None:
    out = run_index(tmp_path, capsys, "--limit", "2")
    assert "extracted now 2" in out
    out = run_index(tmp_path, capsys)
    assert "already stored 2 | extracted now 2" in out


def test_index_reports_bad_input_without_a_traceback(tmp_path: Path, capsys) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"foo": 1}', encoding="utf-8")
    assert main(["index", str(bad), "--store", str(tmp_path / "s.sqlite"), "-q"]) == 2
    assert "cannot tell the format" in capsys.readouterr().err
    assert main(["index", str(tmp_path / "missing.json"), "-q"]) == 2
    with pytest.raises(SystemExit):
        main(["index", str(bad), "--batch-size", "0"])


def test_index_streams_json_lines_and_reports_duplicates(tmp_path: Path, capsys) -> None:
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("".join(json.dumps(row) + "\n" for row in CORPUS + CORPUS[:2]))
    store = tmp_path / "store.sqlite"
    args = ["index", str(corpus), "--store", str(store), "-q", "--engine", "local", "--no-vectors"]
    assert main([*args, "--chunk-size", "3", "--batch-size", "2"]) == 0
    captured = capsys.readouterr()
    assert "passages total 4 | already stored 0 | extracted now 4" in captured.out
    assert "passages format, streamed line by line" in captured.err
    assert "4 unique passages read, 2 duplicates dropped" in captured.err
    assert "without text skipped" not in captured.err
    (stats,) = TripleStore(store).stats().values()
    assert stats["passages"] == 4


def test_index_reports_rows_it_skipped_and_a_bad_number(tmp_path: Path, capsys) -> None:
    corpus = tmp_path / "corpus.json"
    corpus.write_text(json.dumps([*CORPUS, {"title": "B", "text": 42}, 7]))
    store = tmp_path / "store.sqlite"
    args = ["index", str(corpus), "--store", str(store), "-q", "--engine", "local", "--no-vectors"]
    assert main(args) == 0
    assert "duplicates dropped, 2 rows without text skipped" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["index", str(corpus), "--chunk-size", "abc"])
    assert "must be a whole number, got 'abc'" in capsys.readouterr().err


@pytest.mark.parametrize("model", ["nope", "no_such.pipeline"])
def test_index_with_a_missing_spacy_pipeline_leaves_no_store(
    tmp_path: Path, capsys, model: str
) -> None:
    corpus = tmp_path / "c.jsonl"
    corpus.write_text(json.dumps({"id": "a", "text": "Paris is in France."}) + "\n")
    store = tmp_path / "t.sqlite"
    code = main(["index", str(corpus), "--spacy-model", model, "--store", str(store), "-q"])
    assert code == 2
    assert f"spaCy pipeline {model!r} is not installed" in capsys.readouterr().err
    assert not store.exists()


def test_index_with_a_missing_lm_folder_leaves_no_store(tmp_path: Path, capsys) -> None:
    corpus = tmp_path / "c.jsonl"
    corpus.write_text(json.dumps({"id": "a", "text": "Paris is in France."}) + "\n")
    store = tmp_path / "t.sqlite"
    args = ["index", str(corpus), "--extractor", "llm", "--lm", str(tmp_path / "no-lm")]
    assert main([*args, "--store", str(store), "-q"]) == 2
    assert "No model folder at" in capsys.readouterr().err
    assert not store.exists()


def test_check_spacy_pipeline_accepts_what_spacy_can_load(tmp_path: Path) -> None:
    from neocorrag_core.triples.spacy_extractor import check_spacy_pipeline

    check_spacy_pipeline("blank:en")
    check_spacy_pipeline(str(tmp_path))  # a pipeline folder
    check_spacy_pipeline("json")  # any importable package: spaCy loads it by its load()
