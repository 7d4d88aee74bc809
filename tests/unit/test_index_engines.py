"""``neocorrag index`` engines and streaming: the process pool stores exactly the local
engine's triples, JSON lines are streamed in bounded chunks with duplicates dropped, a run
killed with SIGKILL or stopped with Ctrl-C resumes with nothing lost or stored twice, and a
missing Ray is a one-line error. (The Ray engine: tests/integration/test_index_ray.py.)"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

import neocorrag_core.cli.index as cli_index
import neocorrag_core.indexing.corpus as corpus_module
from neocorrag_core.cli.app import main
from neocorrag_core.errors import MissingDependencyError
from neocorrag_core.indexing import LocalEngine, index_corpus, make_engine
from neocorrag_core.indexing.corpus import CorpusFormatError, load_corpus, open_corpus
from neocorrag_core.triples import TripleStore
from neocorrag_core.triples.store import ExtractorKey, text_sha256
from neocorrag_core.types import Passage, Triple

FIRST = ["Anna", "Boris", "Clara", "David", "Elena", "Felix", "Greta", "Hugo"]
LAST = ["Berg", "Costa", "Dahl", "Ernst", "Fischer"]
CITIES = ["Oslo", "Lyon", "Porto", "Graz", "Turin", "Ghent", "Bergen"]


def synthetic_rows(n: int) -> list[dict[str, str]]:
    """``n`` distinct encyclopedic passages with names, places and dates spaCy parses."""
    rows = []
    for i in range(n):
        name = f"{FIRST[i % 8]} {LAST[(i // 8) % 5]} {i}"
        city, other = CITIES[i % 7], CITIES[(i + 3) % 7]
        text = (
            f"{name} was born in {city} in {1800 + i % 200}. She founded the "
            f"{LAST[i % 5]} Company in {other}. Her brother is {FIRST[(i + 1) % 8]} Dahl."
        )
        rows.append({"title": name, "text": text})
    return rows


def write_jsonl(path: Path, rows: list[dict[str, str]]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


class Counting:
    """A fast stand-in extractor: one triple per passage, every extracted title recorded."""

    extractor_id, version = "counting", "1"

    def __init__(self, interrupt_at: int | None = None) -> None:
        self.seen: list[str] = []
        self.interrupt_at = interrupt_at

    def extract(self, passages):
        if self.interrupt_at is not None and len(self.seen) >= self.interrupt_at:
            raise KeyboardInterrupt
        self.seen.extend(p.title for p in passages)
        return [[Triple(p.title, "mentions", p.text.split()[-1])] for p in passages]


def stored_rows(path: Path) -> tuple[list[tuple], str]:
    """(passages rows: hash, extractor, num_triples), integrity_check, read by plain SQLite."""
    with sqlite3.connect(path) as conn:
        rows = conn.execute("SELECT text_sha256, extractor, num_triples FROM passages").fetchall()
        (check,) = conn.execute("PRAGMA integrity_check").fetchone()
        orphans = conn.execute(
            "SELECT COUNT(*) FROM triples t LEFT JOIN passages p USING "
            "(text_sha256, extractor, version) WHERE p.text_sha256 IS NULL"
        ).fetchone()[0]
        miscounted = conn.execute(
            "SELECT COUNT(*) FROM passages p WHERE num_triples != (SELECT COUNT(*) FROM "
            "triples t WHERE t.text_sha256 = p.text_sha256 AND t.extractor = p.extractor "
            "AND t.version = p.version)"
        ).fetchone()[0]
    assert (orphans, miscounted) == (0, 0)
    return rows, check


def triples_by_passage(store: TripleStore, passages: list[Passage], key: ExtractorKey) -> dict:
    found = store.get_many(passages, key)
    assert all(f is not None for f in found), "a passage is missing from the store"
    return {p.id: [t.key() for t in f or []] for p, f in zip(passages, found, strict=True)}


# -- streaming ---------------------------------------------------------------------------


def test_json_lines_are_streamed_with_load_corpus_ids_and_duplicates_dropped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rows = synthetic_rows(300)
    with_dups = rows[:100] + rows[:30] + rows[100:] + [{"title": "empty", "text": "  "}]
    path = write_jsonl(tmp_path / "corpus.jsonl", with_dups)
    expected = load_corpus(path)
    # Streamed means never parsed whole: the whole-file reader must not be called.
    monkeypatch.setattr(corpus_module, "read_json_or_lines", pytest.fail)
    stream = open_corpus(path)
    assert (stream.format, stream.streamed) == ("passages", True)
    passages = list(stream)
    assert [(p.id, p.title, p.text) for p in passages] == [
        (p.id, p.title, p.text) for p in expected.passages
    ]
    assert (stream.passages, stream.duplicates) == (300, expected.duplicates) == (300, 30)
    with pytest.raises(RuntimeError, match="read already"):
        list(stream)
    limited = open_corpus(path, limit=120)
    assert [p.id for p in limited] == [p.id for p in expected.passages[:120]]


def test_json_lines_without_the_suffix_and_question_formats_are_streamed(tmp_path: Path) -> None:
    questions = [
        {"id": f"q{i}", "question": "?", "paragraphs": [{"title": "T", "paragraph_text": t}]}
        for i, t in enumerate(["Oslo is a city.", "Lyon is a city.", "Oslo is a city."])
    ]
    path = write_jsonl(tmp_path / "musique.json", questions)
    stream = open_corpus(path)
    assert (stream.format, stream.streamed) == ("musique", True)
    assert [p.text for p in stream] == ["Oslo is a city.", "Lyon is a city."]
    assert stream.duplicates == 1


def test_a_json_document_is_read_whole_with_the_same_passages(tmp_path: Path) -> None:
    rows = synthetic_rows(20)
    path = tmp_path / "corpus.json"
    path.write_text(json.dumps(rows, indent=2), encoding="utf-8")
    stream = open_corpus(path)
    assert (stream.format, stream.streamed) == ("passages", False)
    assert [p.id for p in stream] == [p.id for p in load_corpus(path).passages]
    one_line = tmp_path / "one.json"
    one_line.write_text(json.dumps(rows), encoding="utf-8")
    assert open_corpus(one_line).streamed is False


def test_a_bad_line_is_named_when_the_stream_reaches_it(tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text('{"title": "A", "text": "Oslo is a city."}\n{"title": \n', encoding="utf-8")
    with pytest.raises(CorpusFormatError, match=r"bad.jsonl: line 2 does not parse.*column"):
        list(open_corpus(path))
    empty = write_jsonl(tmp_path / "blank.jsonl", [{"title": "A", "text": " "}])
    with pytest.raises(CorpusFormatError, match="no passage with text"):
        list(open_corpus(empty))
    with pytest.raises(CorpusFormatError, match="cannot tell the format"):
        open_corpus(write_jsonl(tmp_path / "odd.jsonl", [{"foo": 1}]))  # raised up front


# -- the driver: chunks, resumption, Ctrl-C ------------------------------------------------


def test_the_driver_stores_every_passage_once_across_chunks_and_resumes(tmp_path: Path) -> None:
    rows = synthetic_rows(40)
    path = write_jsonl(tmp_path / "corpus.jsonl", rows + rows[:10])
    store = TripleStore(tmp_path / "store.sqlite")
    first = Counting()
    report = index_corpus(
        open_corpus(path, limit=25), store, LocalEngine(first), batch_size=3, chunk_size=7
    )
    assert (report.passages, report.already_stored, report.extracted) == (25, 0, 25)
    second = Counting()
    report = index_corpus(
        open_corpus(path),
        store,
        LocalEngine(second),
        batch_size=3,
        chunk_size=7,
        show_progress=False,
    )
    assert (report.passages, report.already_stored, report.extracted) == (40, 25, 15)
    assert sorted(first.seen + second.seen) == sorted(row["title"] for row in rows)
    third = Counting()
    report = index_corpus(open_corpus(path), store, LocalEngine(third), chunk_size=7)
    assert (report.extracted, report.triples_written, third.seen) == (0, 0, [])
    rows_stored, check = stored_rows(tmp_path / "store.sqlite")
    assert check == "ok" and len(rows_stored) == len({r[0] for r in rows_stored}) == 40


def test_ctrl_c_keeps_what_was_written_and_the_same_command_resumes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    rows = synthetic_rows(30)
    corpus, store = write_jsonl(tmp_path / "c.jsonl", rows), tmp_path / "s.sqlite"
    args = ["index", str(corpus), "--store", str(store), "-q", "--no-vectors", "--batch-size", "4"]
    stopping = Counting(interrupt_at=12)  # Ctrl-C during the fourth batch
    monkeypatch.setattr(cli_index, "_make_extractor", lambda args: stopping)
    assert main(args) == 130
    captured = capsys.readouterr()
    assert "extracted now 12" in captured.out
    assert "run the same command again to resume" in captured.err
    resuming = Counting()
    monkeypatch.setattr(cli_index, "_make_extractor", lambda args: resuming)
    assert main(args) == 0
    assert "already stored 12 | extracted now 18" in capsys.readouterr().out
    assert sorted(stopping.seen + resuming.seen) == sorted(row["title"] for row in rows)


def test_engine_flags_are_checked(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    corpus = write_jsonl(tmp_path / "c.jsonl", synthetic_rows(2))
    base = ["index", str(corpus), "--store", str(tmp_path / "s.sqlite"), "-q"]
    assert main([*base, "--workers", "2"]) == 2
    assert "--workers and --address apply to --engine process or ray" in capsys.readouterr().err
    assert main([*base, "--engine", "process", "--address", "ray://x:1"]) == 2
    assert "use it with --engine ray" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main([*base, "--engine", "process", "--workers", "0"])


def test_missing_ray_is_one_clear_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray now raises ImportError
    monkeypatch.setitem(sys.modules, "ray.data", None)
    corpus, store = write_jsonl(tmp_path / "c.jsonl", synthetic_rows(2)), tmp_path / "s.sqlite"
    with pytest.raises(MissingDependencyError, match=r"pip install 'neocorrag\[ray\]'"):
        make_engine("ray", "spacy")
    assert main(["index", str(corpus), "--store", str(store), "-q", "--engine", "ray"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("neocorrag index: error: ") and len(err.splitlines()) == 1
    assert "pip install 'neocorrag[ray]'" in err
    assert not store.exists()  # failed before anything was opened


# -- joined extraction calls ----------------------------------------------------------------


class Batching(Counting):
    """Counting, with a model batch: the local engine joins store batches up to it."""

    def __init__(self, batch_size: int) -> None:
        super().__init__()
        self.batch_size = batch_size
        self.calls: list[int] = []

    def extract(self, passages):
        self.calls.append(len(passages))
        return super().extract(passages)


def test_grouped_joins_whole_batches_up_to_a_size() -> None:
    from neocorrag_core.indexing.stream import grouped

    batches = [[1, 2], [3, 4], [5], [6, 7], [8]]
    assert grouped(batches, 4) == [[[1, 2], [3, 4]], [[5], [6, 7], [8]]]
    assert grouped(batches, 1) == [[b] for b in batches]
    assert grouped(batches, 100) == [batches]
    assert grouped([], 4) == []


def test_the_local_engine_joins_batches_and_writes_each_on_its_own(tmp_path: Path) -> None:
    rows = synthetic_rows(23)
    path = write_jsonl(tmp_path / "corpus.jsonl", rows)
    extractor = Batching(batch_size=8)
    engine = LocalEngine(extractor)
    batches = [list(open_corpus(path))[i : i + 3] for i in range(0, 23, 3)]
    out = list(engine.run(batches))
    assert [b for b, _ in out] == batches  # every batch back, in order, with its own triples
    assert all(
        [t.subject for t in found] == [p.title]
        for b, ts in out
        for p, found in zip(b, ts, strict=True)
    )
    assert extractor.calls == [9, 9, 5]  # joined: 3 batches of 3, then the rest
    report = index_corpus(
        open_corpus(path),
        TripleStore(tmp_path / "s.sqlite"),
        LocalEngine(Batching(8)),
        batch_size=3,
        show_progress=False,
    )
    assert (report.extracted, report.triples_written) == (23, 23)


def test_the_spacy_extractor_reads_64_passages_per_call_in_every_engine() -> None:
    from neocorrag_core.indexing.base import SPACY_EXTRACT_SIZE, extract_size, extractor_for

    spacy_extractor = extractor_for("spacy", 16)
    assert spacy_extractor.batch_size == SPACY_EXTRACT_SIZE == 64  # type: ignore[attr-defined]
    assert extractor_for("spacy", 100).batch_size == 100  # type: ignore[attr-defined]
    assert extract_size(Counting(), 16) == 16  # others keep the store batch (an LLM's memory)
    assert make_engine("local", "spacy", batch_size=16).extract_size == 64  # type: ignore[attr-defined]


# -- real spaCy: the process pool, SIGKILL ---------------------------------------------------


def test_the_process_pool_stores_exactly_the_local_triples(tmp_path: Path) -> None:
    pytest.importorskip("spacy")
    path = write_jsonl(tmp_path / "corpus.jsonl", synthetic_rows(40))
    passages = list(open_corpus(path))
    local, pooled = TripleStore(tmp_path / "local.sqlite"), TripleStore(tmp_path / "pool.sqlite")
    engine = make_engine("local", "spacy", batch_size=4)
    index_corpus(open_corpus(path), local, engine, batch_size=4, show_progress=False)
    pool = make_engine("process", "spacy", workers=2, batch_size=4)
    assert pool.key == engine.key
    report = index_corpus(open_corpus(path), pooled, pool, batch_size=4, show_progress=False)
    assert (report.passages, report.extracted) == (40, 40)
    expected = triples_by_passage(local, passages, engine.key)
    assert sum(map(len, expected.values())) > 40  # spaCy found real triples
    assert triples_by_passage(pooled, passages, pool.key) == expected
    rows, check = stored_rows(tmp_path / "pool.sqlite")
    assert check == "ok" and len(rows) == len({r[0] for r in rows}) == 40
    again = make_engine("process", "spacy", workers=2, batch_size=4)
    report = index_corpus(open_corpus(path), pooled, again, show_progress=False)
    assert (report.already_stored, report.extracted) == (40, 0)


def test_a_worker_error_reaches_the_cli_as_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("spacy")
    corpus, store = write_jsonl(tmp_path / "c.jsonl", synthetic_rows(3)), tmp_path / "s.sqlite"
    args = ["index", str(corpus), "--store", str(store), "-q", "--engine", "process"]
    assert main([*args, "--workers", "1", "--spacy-model", "no_such_spacy_pipeline_xyz"]) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.startswith("neocorrag index: error: ") and "no_such_spacy_pipeline_xyz" in err
    assert "pip install 'neocorrag[spacy]'" in err


def test_a_run_killed_with_sigkill_resumes_with_nothing_lost_or_doubled(tmp_path: Path) -> None:
    pytest.importorskip("spacy")
    rows = synthetic_rows(400)
    corpus, store = write_jsonl(tmp_path / "c.jsonl", rows), tmp_path / "s.sqlite"
    args = ["index", str(corpus), "--store", str(store), "-q", "--no-vectors"]
    log = (tmp_path / "killed.log").open("wb")
    # One passage per transaction, so the run is mid-way for a long time; the cwd keeps a
    # checkout's package off sys.path when the installed one is tested.
    run = subprocess.Popen(
        [sys.executable, "-m", "neocorrag_core.cli.app", *args, "--batch-size", "1"],
        cwd=tmp_path,
        stdout=log,
        stderr=log,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )
    try:
        stored = 0
        deadline = time.monotonic() + 300  # a generous bound for a loaded machine
        while stored == 0 and run.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
            try:
                with sqlite3.connect(f"file:{store}?mode=ro", uri=True) as conn:
                    stored = conn.execute("SELECT COUNT(*) FROM passages").fetchone()[0]
            except sqlite3.Error:
                pass  # not created yet
        assert run.poll() is None, (tmp_path / "killed.log").read_text()
        run.send_signal(signal.SIGKILL)
    finally:
        run.kill()
        run.wait()
        log.close()
    assert run.returncode == -signal.SIGKILL
    assert main(args) == 0
    rows_stored, check = stored_rows(store)
    assert check == "ok"
    expected = {text_sha256(p) for p in open_corpus(corpus)}
    hashes = [row[0] for row in rows_stored]
    assert len(hashes) == len(set(hashes)) == len(rows) and set(hashes) == expected


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"workers": 0}, "workers must be >= 1"),
        ({"workers": -2}, "workers must be >= 1"),
        ({"batch_size": 0}, "batch_size must be >= 1"),
    ],
)
def test_make_engine_refuses_counts_below_one_before_anything_starts(kwargs, message):
    from neocorrag_core.errors import ConfigError
    from neocorrag_core.indexing import make_engine

    for name in ("local", "process"):
        with pytest.raises(ConfigError, match=message):
            make_engine(name, "spacy", **kwargs)
