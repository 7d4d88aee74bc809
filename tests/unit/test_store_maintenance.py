"""Store maintenance for a real index: schema migration, document ids, delete, counts,
JSON-lines export/import, readers while a writer indexes, and ``neocorrag store``."""

from __future__ import annotations

import hashlib
import io
import json
import logging
import multiprocessing
import random
import sqlite3
import time
from pathlib import Path

import pytest

from neocorrag_core.chains.graph import normalize_entity
from neocorrag_core.cli.app import main
from neocorrag_core.errors import InputError, StoreError
from neocorrag_core.triples.store import (
    SCHEMA_VERSION,
    ExtractorKey,
    StoreSchemaError,
    TripleStore,
    text_sha256,
)
from neocorrag_core.triples.store_jsonl import import_jsonl
from neocorrag_core.types import Passage, Triple

KEY = ExtractorKey("fake", "1")
OTHER = ExtractorKey("other", "2")

# The schema 1 tables exactly as neocorrag wrote them before schema 2.
V1_DDL = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE passages (
    text_sha256 TEXT NOT NULL, extractor TEXT NOT NULL, version TEXT NOT NULL,
    num_triples INTEGER NOT NULL, created REAL NOT NULL,
    PRIMARY KEY (text_sha256, extractor, version)
);
CREATE TABLE triples (
    text_sha256 TEXT NOT NULL, extractor TEXT NOT NULL, version TEXT NOT NULL,
    position INTEGER NOT NULL, subject TEXT NOT NULL, relation TEXT NOT NULL,
    object TEXT NOT NULL, subject_key TEXT NOT NULL, object_key TEXT NOT NULL,
    PRIMARY KEY (text_sha256, extractor, version, position)
);
CREATE INDEX triples_by_subject ON triples (subject_key);
CREATE INDEX triples_by_object ON triples (object_key);
INSERT INTO meta VALUES ('schema', '1');
"""


def passage(i: int, pid: str | None = None) -> Passage:
    return Passage(pid or f"p{i}", text=f"Entity {i} is related to Entity {i + 1}.", title=f"T{i}")


def triples_of(i: int) -> list[Triple]:
    """``i % 4 + 1`` distinct triples (the readers' test counts them per passage)."""
    return [Triple(f"Entity {i}", f"relation {j}", f"Thing {i}.{j}") for j in range(i % 4 + 1)]


def filled(path: Path, n: int = 5, key: ExtractorKey = KEY) -> TripleStore:
    store = TripleStore(path)
    store.put_many([(passage(i), triples_of(i)) for i in range(n)], key, link_ids=True)
    return store


def make_v1_store(path: Path, n: int = 3) -> Path:
    """A schema 1 store built by hand (as an older neocorrag left it: WAL mode, no ids)."""
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.executescript(V1_DDL)
    for i in range(n):
        digest = text_sha256(passage(i))
        rows = triples_of(i)
        conn.execute(
            "INSERT INTO passages VALUES (?, ?, ?, ?, ?)", (digest, "fake", "1", len(rows), 0.0)
        )
        for pos, t in enumerate(rows):
            conn.execute(
                "INSERT INTO triples VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    digest,
                    "fake",
                    "1",
                    pos,
                    t.subject,
                    t.relation,
                    t.object,
                    normalize_entity(t.subject),
                    normalize_entity(t.object),
                ),
            )
    conn.commit()
    conn.close()
    return path


def schema_of(path: Path) -> str:
    conn = sqlite3.connect(path)
    try:
        return str(conn.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone()[0])
    finally:
        conn.close()


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# -- schema 2 and migration -------------------------------------------------------------------


def test_a_new_store_is_schema_3_with_documents_and_vectors_tables(tmp_path: Path) -> None:
    store = TripleStore(tmp_path / "t.sqlite")
    assert SCHEMA_VERSION == 3 and store.schema_version == 3
    store.close()
    conn = sqlite3.connect(tmp_path / "t.sqlite")
    columns = [row[1] for row in conn.execute("PRAGMA table_info(documents)")]
    conn.close()
    assert columns == ["doc_id", "text_sha256"]
    conn = sqlite3.connect(tmp_path / "t.sqlite")
    columns = [row[1] for row in conn.execute("PRAGMA table_info(vectors)")]
    conn.close()
    assert columns == ["embedder", "text_key", "vector", "used"]
    assert schema_of(tmp_path / "t.sqlite") == "3"


def test_a_v1_store_opened_writable_is_migrated_and_keeps_its_triples(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = make_v1_store(tmp_path / "v1.sqlite")
    with caplog.at_level(logging.INFO, logger="neocorrag_core.triples.store"):
        store = TripleStore(path)
    assert [r for r in caplog.records if "from schema 1 to 3" in r.getMessage()]
    assert schema_of(path) == "3" and store.schema_version == 3
    assert store.get_many([passage(1)], KEY) == [[Triple(*t.key(), ("p1",)) for t in triples_of(1)]]
    # Document ids work from now on; the old passages were never linked.
    assert store.document_hashes(["p1"]) == {}
    store.put_many([(passage(1), [])], KEY, link_ids=True)  # stored: only the link is added
    assert store.document_hashes(["p1"]) == {"p1": [text_sha256(passage(1))]}
    store.close()
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="neocorrag_core.triples.store"):
        TripleStore(path).close()  # migrated once: nothing to do again
    assert not [r for r in caplog.records if "migrated" in r.getMessage()]


def test_a_v1_store_opened_read_only_is_read_but_has_no_document_ids(tmp_path: Path) -> None:
    path = make_v1_store(tmp_path / "v1.sqlite", n=3)
    before = digest(path)
    store = TripleStore(path, read_only=True)
    assert store.schema_version == 1
    assert store.contains([passage(0), passage(7)], KEY) == [True, False]
    assert store.get_many([passage(2)], KEY)[0] == [
        Triple(*t.key(), ("p2",)) for t in triples_of(2)
    ]
    assert store.count(KEY) == 3
    assert store.stats() == {"fake@1": {"passages": 3, "triples": 2 + 3 + 1}}
    summary = store.summary()
    assert (summary.schema, summary.passages, summary.documents) == (1, 3, None)
    with pytest.raises(StoreError, match="open it writable once"):
        store.document_hashes(["p0"])
    out = io.StringIO()
    assert store.export_jsonl(out) == 3  # readable: exported without document ids
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    assert all(line["document_ids"] == [] for line in lines[1:-1])  # -1: the end marker
    store.close()
    assert digest(path) == before and schema_of(path) == "1"


def test_a_newer_schema_is_refused(tmp_path: Path) -> None:
    path = make_v1_store(tmp_path / "v.sqlite")
    conn = sqlite3.connect(path)
    conn.execute("UPDATE meta SET value = '4' WHERE key = 'schema'")
    conn.commit()
    conn.close()
    for read_only in (None, True):
        with pytest.raises(StoreSchemaError, match=r"schema 4, this version reads 3.*upgrade"):
            TripleStore(path, read_only=read_only)
    assert schema_of(path) == "4"


def _open_at_once(paths: list[str], barrier: object, results: object) -> None:
    for path in paths:
        barrier.wait(60)  # type: ignore[attr-defined]  # all open the same old file together
        try:
            store = TripleStore(path)
            got: object = (store.schema_version, store.count(KEY))
        except Exception as exc:  # reported to the test, which shows it
            got = repr(exc)
        results.put(got)  # type: ignore[attr-defined]


def test_processes_opening_a_v1_store_at_once_migrate_it_once(tmp_path: Path) -> None:
    paths = [str(make_v1_store(tmp_path / f"v1-{n}.sqlite", n=4)) for n in range(4)]
    ctx = multiprocessing.get_context("spawn")
    barrier, results = ctx.Barrier(4), ctx.Queue()
    workers = [ctx.Process(target=_open_at_once, args=(paths, barrier, results)) for _ in range(4)]
    for worker in workers:
        worker.start()
    got = [results.get(timeout=120) for _ in range(4 * len(paths))]
    for worker in workers:
        worker.join(60)
    assert got == [(3, 4)] * (4 * len(paths))
    assert [schema_of(Path(path)) for path in paths] == ["3"] * len(paths)


# -- document ids and delete ------------------------------------------------------------------


def test_put_many_and_link_documents_record_document_ids(tmp_path: Path) -> None:
    store = filled(tmp_path / "t.sqlite", n=2)
    h0, h1 = text_sha256(passage(0)), text_sha256(passage(1))
    # The same text ingested again under a new id is linked too (its triples are stored).
    assert store.put_many([(passage(0, "again"), triples_of(0))], KEY, link_ids=True) == 0
    assert store.document_hashes(["p0", "again", "p1", "nope"]) == {
        "p0": [h0],
        "again": [h0],
        "p1": [h1],
    }
    assert store.link_documents([("source-doc", passage(0)), ("source-doc", passage(1))]) == 2
    assert store.link_documents([("source-doc", passage(0))]) == 0  # present already
    assert store.document_hashes(["source-doc"]) == {"source-doc": sorted([h0, h1])}
    # Without link_ids (what query-time extraction does) no id is recorded.
    store.put_many([(passage(7, "made-up #1"), triples_of(7))], KEY)
    assert store.document_hashes(["made-up #1"]) == {}
    with pytest.raises(InputError, match="non-empty string"):
        store.link_documents([("", passage(0))])


def test_delete_by_document_id_keeps_passages_another_id_links(tmp_path: Path) -> None:
    store = filled(tmp_path / "t.sqlite", n=3)
    store.link_documents([("book", passage(0)), ("book", passage(1))])
    report = store.delete(document_ids=["book", "missing"])
    # p0 and p1 are still linked by their own ids: nothing but the links goes.
    assert (report.documents_found, report.documents_not_found) == (1, 1)
    assert (report.links_removed, report.passages_deleted, report.kept_shared) == (2, 0, 2)
    assert store.count(KEY) == 3
    report = store.delete(document_ids=["p0", "p2"])
    assert (report.passages_deleted, report.triples_deleted, report.links_removed) == (
        2,
        len(triples_of(0)) + len(triples_of(2)),
        2,
    )
    assert store.contains([passage(0), passage(1), passage(2)], KEY) == [False, True, False]
    assert store.document_hashes(["p0", "p1", "p2"]) == {"p1": [text_sha256(passage(1))]}
    assert store.find_entity("Entity 0") == []  # the triples are gone, not only the rows


def test_delete_by_hash_and_by_extractor(tmp_path: Path) -> None:
    store = filled(tmp_path / "t.sqlite", n=2)
    store.put_many([(passage(0), triples_of(0)), (passage(1), triples_of(1))], OTHER, link_ids=True)
    h0, h1 = text_sha256(passage(0)), text_sha256(passage(1))
    # With a key only that extractor's rows go; the link stays while other rows remain.
    report = store.delete(document_ids=["p0"], key=OTHER)
    assert (report.passages_deleted, report.links_removed) == (1, 0)
    assert store.contains([passage(0)], KEY) == [True]
    assert store.contains([passage(0)], OTHER) == [False]
    assert store.document_hashes(["p0"]) == {"p0": [h0]}
    report = store.delete(document_ids=["p0"], key=KEY)  # the last rows: the link goes too
    assert (report.passages_deleted, report.links_removed) == (1, 1)
    # An explicit hash drops every extractor's rows and all its links.
    report = store.delete(hashes=[h1, "0" * 64])
    assert (report.passages_deleted, report.links_removed, report.hashes_not_found) == (2, 1, 1)
    assert store.count() == 0 and store.document_hashes(["p1"]) == {}
    assert store.delete() == type(report)()  # nothing asked: nothing done
    with pytest.raises(InputError, match="not one string"):
        store.delete(document_ids="p1")


def test_count_and_summary(tmp_path: Path) -> None:
    store = filled(tmp_path / "t.sqlite", n=4)
    store.put_many([(passage(0), triples_of(0))], OTHER, link_ids=True)
    store.link_documents([("book", passage(0))])
    assert (store.count(), store.count(KEY), store.count(OTHER)) == (5, 4, 1)
    summary = store.summary()
    assert summary.path == str(tmp_path / "t.sqlite") and summary.schema == 3
    assert summary.file_bytes > 0
    assert (summary.passages, summary.documents) == (5, 5)  # p0..p3 and book
    assert summary.triples == sum(len(triples_of(i)) for i in range(4)) + len(triples_of(0))
    assert summary.extractors == store.stats()
    assert json.loads(json.dumps(summary.to_dict()))["extractors"]["other@2"]["passages"] == 1


# -- export and import ------------------------------------------------------------------------


def test_export_then_import_into_an_empty_store_round_trips(tmp_path: Path) -> None:
    store = filled(tmp_path / "a.sqlite", n=6)
    store.put_many([(passage(2), triples_of(2)), (passage(9), [])], OTHER, link_ids=True)
    store.link_documents([("book", passage(3))])
    dump = tmp_path / "dump.jsonl"
    assert store.export_jsonl(dump) == 8
    lines = dump.read_text(encoding="utf-8").splitlines()
    assert json.loads(lines[0]) == {"neocorrag_triple_store_export": 1, "schema": 3}
    # Written last: the entry count and the sha256 of every line before it.
    checksum = hashlib.sha256("".join(line + "\n" for line in lines[:-1]).encode()).hexdigest()
    assert json.loads(lines[-1]) == {"neocorrag_triple_store_export_end": 8, "sha256": checksum}
    assert {json.loads(line)["text_sha256"] for line in lines[1:-1]} == {
        text_sha256(passage(i)) for i in [*range(6), 9]
    }
    copy = TripleStore(tmp_path / "b.sqlite")
    report = copy.import_jsonl(dump, batch_size=3)
    assert (report.imported, report.skipped_existing, report.invalid) == (8, 0, 0)
    asked = [passage(i) for i in range(10)]
    for key in (KEY, OTHER):
        assert copy.get_many(asked, key) == store.get_many(asked, key)
    assert copy.stats() == store.stats()
    ids = ["p0", "p3", "book", "p9"]
    assert copy.document_hashes(ids) == store.document_hashes(ids)
    # Again: first writer wins, every entry is skipped.
    again = copy.import_jsonl(dump)
    assert (again.imported, again.skipped_existing, again.links_added) == (0, 8, 0)


def test_export_never_replaces_a_database(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = filled(tmp_path / "a.sqlite", n=2)
    other = filled(tmp_path / "b.sqlite", n=1)
    other.close()
    before = (tmp_path / "b.sqlite").read_bytes()
    for target in (tmp_path / "a.sqlite", tmp_path / "b.sqlite"):
        with pytest.raises(InputError, match="is an SQLite database"):
            store.export_jsonl(target)
    assert (tmp_path / "b.sqlite").read_bytes() == before
    assert store.count() == 2  # the store itself is intact
    store.close()
    # The CLI slip `store export my.sqlite` (FILE taken for the store): exit 2, store intact.
    code = main(
        ["store", "export", str(tmp_path / "a.sqlite"), "--store", str(tmp_path / "a.sqlite")]
    )
    assert code == 2 and "is an SQLite database" in capsys.readouterr().err
    assert TripleStore(tmp_path / "a.sqlite").count() == 2
    # An existing export file (not a database) is still replaced, as documented.
    dump = tmp_path / "dump.jsonl"
    dump.write_text("old\n", encoding="utf-8")
    assert TripleStore(tmp_path / "a.sqlite").export_jsonl(dump) == 2


def test_export_of_one_extractor_to_a_stream(tmp_path: Path) -> None:
    store = filled(tmp_path / "a.sqlite", n=3)
    store.put_many([(passage(1), triples_of(1))], OTHER, link_ids=True)
    out = io.StringIO()
    assert store.export_jsonl(out, key=OTHER) == 1
    (line, end) = out.getvalue().splitlines()[1:]
    assert json.loads(end)["neocorrag_triple_store_export_end"] == 1
    entry = json.loads(line)
    assert (entry["extractor"], entry["version"], entry["document_ids"]) == ("other", "2", ["p1"])
    assert entry["triples"] == [list(t.key()) for t in triples_of(1)]


def test_import_skips_invalid_lines_with_one_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    good = {
        "text_sha256": text_sha256(passage(1)),
        "extractor": "fake",
        "version": "1",
        "triples": [["Entity 1", "r", "Entity 2"]],
        "document_ids": ["p1"],
    }
    bad = [
        "not json",
        json.dumps({**good, "text_sha256": "abc"}),
        json.dumps({**good, "triples": [["only", "two"]]}),
        json.dumps({**good, "document_ids": [3]}),
        json.dumps([1, 2]),
    ]
    src = tmp_path / "dump.jsonl"
    lines = [json.dumps({"neocorrag_triple_store_export": 1}), *bad, "", json.dumps(good)]
    end = json.dumps({"neocorrag_triple_store_export_end": 6})  # the 6 non-blank lines
    src.write_text("\n".join([*lines, end]) + "\n", encoding="utf-8")
    store = TripleStore(tmp_path / "t.sqlite")
    with caplog.at_level(logging.WARNING, logger="neocorrag_core.triples.store"):
        report = store.import_jsonl(src)
    assert (report.imported, report.invalid, report.invalid_lines) == (1, 5, (2, 3, 4, 5, 6))
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "line 2, 3, 4, 5, 6" in warnings[0] and str(src) in warnings[0]
    assert store.get_many([passage(1)], KEY) == [[Triple("Entity 1", "r", "Entity 2", ("p1",))]]
    assert store.document_hashes(["p1"]) == {"p1": [good["text_sha256"]]}


@pytest.mark.parametrize(
    "content",
    ["", '{"text_sha256": "x"}\n', "[1]\n", '{"neocorrag_triple_store_export": 9}\n'],
)
def test_import_without_the_header_is_an_input_error_naming_the_file(
    tmp_path: Path, content: str
) -> None:
    src = tmp_path / "notes.jsonl"
    src.write_text(content, encoding="utf-8")
    store = TripleStore(tmp_path / "t.sqlite")
    with pytest.raises(InputError, match=r"notes\.jsonl"):
        store.import_jsonl(src)
    assert store.count() == 0
    with pytest.raises(InputError, match="no export file"):
        store.import_jsonl(tmp_path / "missing.jsonl")


def _exported(tmp_path: Path, n: int = 6) -> tuple[Path, list[str]]:
    """An export of ``n`` passages (``filled``) and its lines, end marker last."""
    dump = tmp_path / "dump.jsonl"
    filled(tmp_path / "a.sqlite", n=n).export_jsonl(dump)
    return dump, dump.read_text(encoding="utf-8").splitlines(keepends=True)


def _cut(lines: list[str], how: str) -> str:
    """An export cut short, the ways a copy or a full disk cuts it."""
    if how == "last lines lost":
        return "".join(lines[:-3])
    if how == "cut mid-line":
        return "".join(lines[:-3]) + lines[-3][:40]
    if how == "end marker lost":
        return "".join(lines[:-1])
    if how == "a middle line lost":
        return "".join(lines[:2] + lines[3:])
    raise AssertionError(how)


CUTS = ["last lines lost", "cut mid-line", "end marker lost", "a middle line lost"]


@pytest.mark.parametrize("how", CUTS)
def test_import_of_a_truncated_export_imports_nothing(tmp_path: Path, how: str) -> None:
    """A cut-off export was imported with no error: every line it still held, silently."""
    _, lines = _exported(tmp_path)
    cut = tmp_path / "cut.jsonl"
    cut.write_text(_cut(lines, how), encoding="utf-8")
    store = TripleStore(tmp_path / "b.sqlite")
    expected = "end marker says 6" if how == "a middle line lost" else "has no end marker"
    with pytest.raises(InputError, match=expected) as caught:
        store.import_jsonl(cut, batch_size=1)  # one transaction per line: still nothing
    message = str(caught.value)
    assert str(cut) in message and "nothing was imported" in message
    assert "--allow-truncated" in message and "\n" not in message
    assert store.count() == 0 and store.document_hashes(["p0", "p1"]) == {}
    # An open file (seekable) likewise.
    with open(cut, encoding="utf-8") as fh, pytest.raises(InputError, match=expected):
        store.import_jsonl(fh)
    assert store.count() == 0


@pytest.mark.parametrize("how", CUTS)
def test_allow_truncated_imports_the_complete_entries_and_says_so(
    tmp_path: Path, how: str, caplog: pytest.LogCaptureFixture
) -> None:
    _, lines = _exported(tmp_path)
    cut = tmp_path / "cut.jsonl"
    cut.write_text(_cut(lines, how), encoding="utf-8")
    store = TripleStore(tmp_path / "b.sqlite")
    with caplog.at_level(logging.WARNING, logger="neocorrag_core.triples.store"):
        report = import_jsonl(store, cut, allow_truncated=True)
    whole = {"last lines lost": 4, "cut mid-line": 4, "end marker lost": 6}.get(how, 5)
    assert (report.imported, report.complete) == (whole, False)
    assert report.invalid == (1 if how == "cut mid-line" else 0)  # the cut line, skipped
    assert store.count() == whole
    assert any(
        str(cut) in r.getMessage() and "end marker" in r.getMessage() for r in caplog.records
    )


def test_an_export_without_an_end_marker_is_refused_with_how_to_import_it(
    tmp_path: Path,
) -> None:
    """What an older neocorrag wrote: header and entries, complete, but no end marker."""
    dump, lines = _exported(tmp_path, n=3)
    old = tmp_path / "old.jsonl"
    old.write_text("".join(lines[:-1]), encoding="utf-8")
    store = TripleStore(tmp_path / "b.sqlite")
    with pytest.raises(InputError, match=r"no end marker.*older neocorrag.*--allow-truncated"):
        store.import_jsonl(old)
    assert store.count() == 0
    assert import_jsonl(store, old, allow_truncated=True).imported == 3
    report = store.import_jsonl(dump)  # the whole export: complete, nothing new
    assert (report.imported, report.skipped_existing, report.complete) == (0, 3, True)


def test_an_empty_store_exports_a_file_that_imports(tmp_path: Path) -> None:
    dump = tmp_path / "empty.jsonl"
    assert TripleStore(tmp_path / "a.sqlite").export_jsonl(dump) == 0
    report = TripleStore(tmp_path / "b.sqlite").import_jsonl(dump)
    assert (report.imported, report.invalid, report.complete) == (0, 0, True)


class _Pipe(io.StringIO):
    """A stream that cannot seek, as stdin from a pipe."""

    def seekable(self) -> bool:
        return False


def test_a_stream_that_cannot_seek_is_checked_before_anything_is_written(
    tmp_path: Path,
) -> None:
    _, lines = _exported(tmp_path)
    store = TripleStore(tmp_path / "b.sqlite")
    with pytest.raises(InputError, match="has no end marker"):
        store.import_jsonl(_Pipe(_cut(lines, "last lines lost")), batch_size=1)
    assert store.count() == 0
    report = store.import_jsonl(_Pipe("".join(lines)))
    assert (report.imported, report.complete) == (6, True)


@pytest.mark.parametrize("how", CUTS)
def test_cli_import_of_a_truncated_export_exits_2_and_leaves_no_store(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], how: str
) -> None:
    _, lines = _exported(tmp_path)
    cut = tmp_path / "cut.jsonl"
    cut.write_text(_cut(lines, how), encoding="utf-8")
    store = tmp_path / "new.sqlite"
    assert main(["store", "import", str(cut), "--store", str(store), "-q"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("neocorrag store: error: ") and err.count("\n") == 1
    assert str(cut) in err and "nothing was imported" in err
    assert not store.exists()
    assert main(["store", "import", str(cut), "--store", str(store), "--allow-truncated"]) == 0
    out = capsys.readouterr().out
    assert "the file is incomplete" in out and "--allow-truncated" in out
    assert TripleStore(store).count() > 0


def test_cli_import_of_a_truncated_stdin_leaves_the_store_as_it_was(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    _, lines = _exported(tmp_path)
    filled(tmp_path / "c.sqlite", n=1).close()
    monkeypatch.setattr("sys.stdin", _Pipe(_cut(lines, "cut mid-line")))
    assert main(["store", "import", "-", "--store", str(tmp_path / "c.sqlite")]) == 2
    assert "has no end marker" in capsys.readouterr().err
    assert TripleStore(tmp_path / "c.sqlite").count() == 1
    monkeypatch.setattr("sys.stdin", _Pipe(_cut(lines, "cut mid-line")))
    assert main(["store", "import", "-", "--store", str(tmp_path / "new.sqlite")]) == 2
    assert not (tmp_path / "new.sqlite").exists()


# -- readers while a writer indexes -----------------------------------------------------------

BATCHES, PER_BATCH = 40, 25


def _indexing_writer(path: str, go: object) -> None:
    go.wait(60)  # type: ignore[attr-defined]
    store = TripleStore(path)
    for b in range(BATCHES):
        ids = range(b * PER_BATCH, (b + 1) * PER_BATCH)
        store.put_many([(passage(i), triples_of(i)) for i in ids], KEY, link_ids=True)


def test_readers_never_see_a_passage_without_all_its_triples(tmp_path: Path) -> None:
    path = tmp_path / "t.sqlite"
    TripleStore(path).close()
    ctx = multiprocessing.get_context("spawn")
    go = ctx.Event()
    writer = ctx.Process(target=_indexing_writer, args=(str(path), go))
    writer.start()
    store = TripleStore(path)
    total = BATCHES * PER_BATCH
    rng = random.Random(0)
    reads, last_count = 0, 0
    go.set()
    deadline = time.monotonic() + 300  # a hung writer fails the test instead of hanging it
    try:
        while True:
            finished = not writer.is_alive()
            sample = rng.sample(range(total), 50)
            got = store.get_many([passage(i) for i in sample], KEY)
            for i, triples in zip(sample, got, strict=True):
                if triples is not None:
                    assert [t.key() for t in triples] == [t.key() for t in triples_of(i)]
            present = store.contains([passage(i) for i in sample], KEY)
            assert all(p for g, p in zip(got, present, strict=True) if g is not None)
            count = store.count(KEY)
            assert last_count <= count <= total and count % PER_BATCH == 0  # whole batches
            last_count = count
            reads += 1
            if finished or time.monotonic() > deadline:
                break
    finally:
        writer.join(60)
    assert writer.exitcode == 0
    assert store.count(KEY) == total and reads > 0
    assert store.get_many([passage(total - 1)], KEY)[0] is not None


# -- neocorrag store ----------------------------------------------------------------------------


def test_cli_stats_export_import_delete(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src, dst = tmp_path / "a.sqlite", tmp_path / "b.sqlite"
    filled(src, n=3).close()
    assert main(["store", "stats", "--store", str(src), "--json"]) == 0
    stats = json.loads(capsys.readouterr().out)
    assert (stats["passages"], stats["documents"], stats["schema"]) == (3, 3, 3)
    assert main(["store", "stats", "--store", str(src)]) == 0
    assert "fake@1  3 passages" in capsys.readouterr().out

    dump = tmp_path / "dump.jsonl"
    assert main(["store", "export", str(dump), "--store", str(src), "-q"]) == 0
    assert "exported 3 entries" in capsys.readouterr().err
    assert main(["store", "export", str(dump), "--store", str(src), "--extractor", "no@1"]) == 0
    assert len(dump.read_text(encoding="utf-8").splitlines()) == 2  # header and end marker
    main(["store", "export", str(dump), "--store", str(src), "--extractor", "fake@1", "-q"])
    capsys.readouterr()
    assert main(["store", "import", str(dump), "--store", str(dst), "-q"]) == 0
    assert "imported 3 entries" in capsys.readouterr().out
    assert TripleStore(dst).stats() == TripleStore(src).stats()

    ids = tmp_path / "ids.txt"
    ids.write_text("p0\n\np1\n", encoding="utf-8")
    assert main(["store", "delete", "--store", str(dst), "--ids-file", str(ids)]) == 0
    assert "deleted 2 stored passage(s)" in capsys.readouterr().out
    assert main(["store", "delete", "--store", str(dst), "--id", "p2", "nope"]) == 0
    assert "1 id(s)/hash(es) not found" in capsys.readouterr().out
    assert TripleStore(dst).count() == 0


def test_cli_errors_are_one_line_with_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "missing.sqlite"
    assert main(["store", "stats", "--store", str(missing)]) == 2
    err = capsys.readouterr().err
    assert (
        err.startswith("neocorrag store: error: there is no triple store at")
        and err.count("\n") == 1
    )
    assert not missing.exists()  # a typo never creates an empty store
    notes = tmp_path / "notes.txt"
    notes.write_text("hello\n", encoding="utf-8")
    assert main(["store", "import", str(notes), "--store", str(tmp_path / "t.sqlite")]) == 2
    assert "notes.txt is not a neocorrag triple store export" in capsys.readouterr().err
    filled(tmp_path / "t.sqlite", n=1).close()
    assert (
        main(["store", "export", "-", "--store", str(tmp_path / "t.sqlite"), "--extractor", "x"])
        == 2
    )
    assert "is not ID@VERSION" in capsys.readouterr().err


def test_cli_import_of_a_missing_file_leaves_no_empty_store(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = tmp_path / "new.sqlite"
    assert main(["store", "import", str(tmp_path / "missing.jsonl"), "--store", str(store)]) == 2
    assert "there is no export file" in capsys.readouterr().err
    assert not store.exists()


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"junk\n", "is not a neocorrag triple store export"),
        (b"\n\n", "it is empty"),
        (b"\xff\xfe junk", "is not UTF-8 text"),
        (b'{"neocorrag_triple_store_export": 99}\n', "of format 99"),
    ],
)
def test_cli_import_of_a_wrong_file_leaves_no_empty_store(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: bytes, message: str
) -> None:
    wrong = tmp_path / "wrong.jsonl"
    wrong.write_bytes(content)
    store = tmp_path / "new.sqlite"
    assert main(["store", "import", str(wrong), "--store", str(store)]) == 2
    assert message in capsys.readouterr().err
    assert not store.exists()


@pytest.mark.parametrize("content", ["garbage\n", ""])
def test_cli_import_of_a_wrong_stdin_leaves_no_empty_store(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    content: str,
) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO(content))
    store = tmp_path / "new.sqlite"
    assert main(["store", "import", "-", "--store", str(store)]) == 2
    assert "triple store export" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_cli_import_of_a_wrong_stdin_keeps_an_existing_store(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    filled(tmp_path / "a.sqlite", n=2).close()
    monkeypatch.setattr("sys.stdin", io.StringIO("garbage\n"))
    assert main(["store", "import", "-", "--store", str(tmp_path / "a.sqlite")]) == 2
    capsys.readouterr()
    assert TripleStore(tmp_path / "a.sqlite").count() == 2
