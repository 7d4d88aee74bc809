"""The CLI's errors are one line and exit code 2; data files are named when they are wrong;
two ``neocorrag index`` runs on one store never extract a passage twice."""

from __future__ import annotations

import hashlib
import json
import os
import threading
from pathlib import Path

import pytest

import neocorrag_core.cli.app as cli
import neocorrag_core.cli.index as cli_index
import neocorrag_core.triples.indexer_lock as lock_module
import neocorrag_core.triples.store as store_module
from neocorrag_core import __version__
from neocorrag_core.errors import InputError, NeocorragError
from neocorrag_core.formats import DataFormatError, read_json_or_lines
from neocorrag_core.triples import TripleStore
from neocorrag_core.types import Triple

IS_ROOT = hasattr(os, "geteuid") and os.geteuid() == 0

CORPUS = [{"title": f"T{i}", "text": f"Entity {i} is related to Entity {i + 1}."} for i in range(6)]


class CountingExtractor:
    """Stands in for spaCy in ``neocorrag index``: one triple per passage, calls counted."""

    extractor_id = "fake"
    version = "1"
    seen: list[str]  # shared by every instance of one test (set by the fixture)
    on_extract = staticmethod(lambda: None)

    def __init__(self, args: object = None) -> None:
        pass

    def extract(self, passages):
        self.on_extract()
        self.seen.extend(p.title for p in passages)
        return [[Triple(p.title, "has", p.text.split()[1])] for p in passages]


@pytest.fixture
def fake_extractor(monkeypatch: pytest.MonkeyPatch) -> type[CountingExtractor]:
    monkeypatch.setattr(CountingExtractor, "seen", [], raising=False)
    monkeypatch.setattr(cli_index, "_make_extractor", CountingExtractor)
    return CountingExtractor


def corpus_file(tmp_path: Path) -> Path:
    path = tmp_path / "corpus.json"
    path.write_text(json.dumps(CORPUS), encoding="utf-8")
    return path


def one_line_error(capsys: pytest.CaptureFixture[str], command: str) -> str:
    err = capsys.readouterr().err.strip()
    assert "Traceback" not in err
    assert len(err.splitlines()) == 1, err
    assert err.startswith(f"neocorrag {command}: error: ")
    return err


# -- main(): one line, exit code 2 -------------------------------------------------------------


@pytest.mark.parametrize(
    "error",
    [
        NeocorragError("a plain neocorrag error\nwith a second line"),
        InputError("bad input"),
        store_module.StoreError("the store is broken"),
        OSError("disk trouble"),
        ValueError("bad value"),
    ],
)
def test_every_neocorrag_error_is_one_line_and_exit_2(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], error: Exception
) -> None:
    def fail(args: object) -> int:
        raise error

    monkeypatch.setattr(cli, "run_doctor", fail)
    assert cli.main(["doctor"]) == 2
    err = one_line_error(capsys, "doctor")
    assert str(error).splitlines()[0] in err


def test_version_still_works(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as caught:
        cli.main(["--version"])
    assert caught.value.code == 0
    assert capsys.readouterr().out.strip() == f"neocorrag {__version__}"


# -- demo --data: the shape is checked, the file is named ----------------------------------------


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        ({"foo": 1}, "a JSON object with keys ['foo']"),
        ([], "an empty list of questions"),
        ({"questions": 5}, 'a "questions" entry that is a JSON number'),
        ([1, 2], "question 1 is a JSON number, not an object"),
        ([{"paragraphs": []}], 'question 1 has no "question" text'),
        ([{"question": "q"}], 'question 1 has no "paragraphs" list'),
        ([{"question": "q", "paragraphs": ["text"]}], "paragraph 1 is a JSON string"),
        ([{"question": "q", "paragraphs": [{"text": "x"}]}], 'paragraph 1 has no "id"'),
        ([{"question": "q", "paragraphs": [{"id": 1, "title": "x"}]}], 'no "text" string'),
        (
            [{"question": "q", "paragraphs": [{"id": 1, "text": "x", "triples": "a,b,c"}]}],
            '"triples" that are not a list',
        ),
    ],
)
def test_demo_data_of_the_wrong_shape_names_the_file_and_the_shape(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: object, problem: str
) -> None:
    data = tmp_path / "demo.json"
    data.write_text(json.dumps(content), encoding="utf-8")
    with pytest.raises(DataFormatError) as caught:
        cli.load_demo_questions(data)
    assert problem in str(caught.value)
    assert str(data) in str(caught.value) and "the demo reads" in str(caught.value)
    assert cli.main(["demo", "--data", str(data)]) == 2  # before any model is loaded
    err = one_line_error(capsys, "demo")
    assert problem in err and str(data) in err


def test_bundled_demo_data_passes_the_shape_check() -> None:
    assert len(cli.load_demo_questions()) >= 1


def test_demo_gold_ids_match_passage_ids_when_the_file_gives_numbers() -> None:
    # Passage ids are strings (str(p["id"])); gold ids given as numbers must match them.
    item = {"paragraphs": [{"id": 1, "is_supporting": True}, {"id": "2"}, {"id": 3}]}
    assert cli._gold_ids(item) == {"1"}


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b'[{"question": "q",', "is neither JSON (Expecting"),
        (b"\xff\x00garbage", "is not UTF-8 text (byte 0)"),
        (b"\xff\xfe[\x00]\x00", "is UTF-16 text, not UTF-8"),
        (b"", "is empty"),
    ],
)
def test_unreadable_files_are_named_by_demo_and_index(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: bytes, message: str
) -> None:
    bad = tmp_path / "bad.json"
    bad.write_bytes(content)
    assert cli.main(["demo", "--data", str(bad)]) == 2
    err = one_line_error(capsys, "demo")
    assert message in err and str(bad) in err
    assert cli.main(["index", str(bad), "--store", str(tmp_path / "s.sqlite"), "-q"]) == 2
    err = one_line_error(capsys, "index")
    assert message in err and str(bad) in err


def test_data_files_with_a_bom_position_or_line_separator(tmp_path: Path) -> None:
    bom = tmp_path / "bom.json"
    bom.write_bytes(b"\xef\xbb\xbf" + json.dumps(CORPUS[:1]).encode())
    assert read_json_or_lines(bom) == CORPUS[:1]
    # U+2028 may stand unescaped in a JSON string; it must not split a JSON line.
    lines = tmp_path / "rows.jsonl"
    lines.write_text('{"title": "A", "text": "one\u2028two"}\n{"title": "B", "text": "x"}\n')
    assert [row["text"] for row in read_json_or_lines(lines)] == ["one\u2028two", "x"]
    broken = tmp_path / "broken.jsonl"
    broken.write_text('{"title": "A"}\n{"title": \n')
    with pytest.raises(DataFormatError, match=r"broken.jsonl: line 2 does not parse.*column"):
        read_json_or_lines(broken)
    with pytest.raises(OSError, match="cannot read the corpus file"):
        read_json_or_lines(tmp_path, what="corpus file")  # a folder


def test_corpus_without_text_names_the_file(tmp_path: Path) -> None:
    from neocorrag_core.indexing.corpus import load_corpus

    empty = tmp_path / "empty.json"
    empty.write_text('[{"title": "A", "text": " "}]', encoding="utf-8")
    with pytest.raises(DataFormatError, match=f"{empty}: no passage with text"):
        load_corpus(empty)


# -- neocorrag index: damaged and read-only stores -----------------------------------------------


def test_index_into_a_damaged_store_fails_in_one_line_and_leaves_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], fake_extractor: type[CountingExtractor]
) -> None:
    store = tmp_path / "store.sqlite"
    store.write_bytes(b"not a database at all\n" * 100)
    before = hashlib.sha256(store.read_bytes()).hexdigest()
    args = ["index", str(corpus_file(tmp_path)), "--store", str(store), "-q", "--no-vectors"]
    assert cli.main(args) == 2
    err = one_line_error(capsys, "index")
    assert str(store) in err and "store check" in err and "delete" not in err
    assert hashlib.sha256(store.read_bytes()).hexdigest() == before
    assert fake_extractor.seen == []


def test_index_into_a_read_only_store(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    fake_extractor: type[CountingExtractor],
) -> None:
    corpus, store = corpus_file(tmp_path), tmp_path / "store.sqlite"
    args = ["index", str(corpus), "--store", str(store), "-q", "--no-vectors", "--limit", "3"]
    assert cli.main(args) == 0
    capsys.readouterr()
    if IS_ROOT:  # chmod does not stop root: take the read_only=True path instead
        monkeypatch.setattr(store_module, "_decide_read_only", lambda file: True)
    else:
        store.chmod(0o444)
        tmp_path.chmod(0o555)
    try:
        # Everything asked for is stored: nothing to write, so it succeeds.
        assert cli.main(args) == 0
        assert "already stored 3 | extracted now 0" in capsys.readouterr().out
        # Passages missing: a clear one-line error, nothing extracted.
        assert cli.main(args[:-2]) == 2
        err = one_line_error(capsys, "index")
        assert "is read-only, and 3 passage(s) are not in it yet" in err
    finally:
        tmp_path.chmod(0o755)
        store.chmod(0o644)
    assert len(fake_extractor.seen) == 3


# -- two indexers on one store -------------------------------------------------------------------


def test_a_second_indexer_waits_then_extracts_nothing_twice(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    fake_extractor: type[CountingExtractor],
) -> None:
    corpus, store = corpus_file(tmp_path), tmp_path / "store.sqlite"
    TripleStore(store).close()
    second_waits = threading.Event()
    real_lock = lock_module._lock

    def lock(fd: int, path: Path, *, wait: bool) -> bool:
        if wait:  # only a run that found the lock taken blocks
            second_waits.set()
        return real_lock(fd, path, wait=wait)

    def first_batch_waits_for_the_second_run() -> None:
        # The run holding the lock goes on only once the other waits for it: a true overlap.
        assert second_waits.wait(10), "the second run never waited"

    monkeypatch.setattr(lock_module, "_lock", lock)
    monkeypatch.setattr(
        fake_extractor, "on_extract", staticmethod(first_batch_waits_for_the_second_run)
    )
    codes: list[int] = []
    args = ["index", str(corpus), "--store", str(store), "-q", "--no-vectors", "--batch-size", "2"]
    # Started together: whichever takes the lock first extracts (and waits in its first
    # batch until the other is blocked on the lock); the other then finds all stored.
    runs = [threading.Thread(target=lambda: codes.append(cli.main(args))) for _ in range(2)]
    for run in runs:
        run.start()
    for run in runs:
        run.join(20)
    assert codes == [0, 0]
    assert sorted(fake_extractor.seen) == sorted(row["title"] for row in CORPUS)  # each once
    captured = capsys.readouterr()
    assert f"waiting for another indexer (pid {os.getpid()})" in captured.err
    assert "already stored 6 | extracted now 0" in captured.out  # the second run
    assert "already stored 0 | extracted now 6" in captured.out  # the first run


@pytest.mark.parametrize(
    ("argv", "option"),
    [
        (["index", "c.jsonl", "--batch-size", "0"], "--batch-size"),
        (["index", "c.jsonl", "--limit", "-1"], "--limit"),
        (["demo", "--questions", "0"], "--questions"),
        (["demo", "--top-k", "0"], "--top-k"),
        (["eval", "--data", "x.json", "--top-k", "0"], "--top-k"),
    ],
)
def test_a_count_below_one_is_refused_by_its_own_subcommand(
    argv: list[str], option: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        cli.main(argv)
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    # The subcommand's usage and the option's name, not the top-level usage.
    assert f"neocorrag {argv[0]}: error: argument {option}: must be at least 1" in err
