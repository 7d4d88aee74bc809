"""``neocorrag store check`` / ``repair`` (issue 55): a damaged store is diagnosed, and what
can still be read of it is salvaged into a new store, the damaged file kept byte for byte.

The stores here are real: entries and vectors written through ``TripleStore``, the WAL
folded into the file, then pages in the middle of the file overwritten with garbage (page 1,
the header and table list, kept), as a failing disk or a bad copy leaves them.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
from pathlib import Path

import numpy as np
import pytest

from neocorrag_core.cli.app import main
from neocorrag_core.cli.store import _human_bytes
from neocorrag_core.errors import StoreError
from neocorrag_core.triples.indexer_lock import hold_indexer_lock
from neocorrag_core.triples.store import ExtractorKey, TripleStore, text_sha256
from neocorrag_core.triples.store_repair import (
    RepairRefused,
    check_store,
    repair_store,
)
from neocorrag_core.types import Passage, Triple

KEY = ExtractorKey("fake", "1")
EMBEDDER = "emb:test"
N = 600


def passage(i: int) -> Passage:
    return Passage(f"doc{i}", f"Entity {i} is related to Entity {i + 1}.", f"T{i}")


def triples_of(i: int) -> list[Triple]:
    return [Triple(f"Entity {i}", f"relation {j}", f"Thing {i}.{j}") for j in range(i % 3 + 1)]


def vectors() -> dict[bytes, np.ndarray]:
    rng = np.random.default_rng(7)
    return {rng.bytes(16): rng.standard_normal(64).astype(np.float32) for _ in range(N)}


def checkpoint(path: Path) -> int:
    """Fold the WAL into the file; the file's page count."""
    conn = sqlite3.connect(path)
    try:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        return int(conn.execute("PRAGMA page_count").fetchone()[0])
    finally:
        conn.close()


def build(path: Path) -> tuple[int, int]:
    """A store of N entries (with document ids) and N vectors; the last page of the
    entries and the last page of the file (vectors are written after the entries)."""
    with TripleStore(path) as store:
        store.put_many([(passage(i), triples_of(i)) for i in range(N)], KEY, link_ids=True)
        entries_end = checkpoint(path)
        store.put_vectors(EMBEDDER, vectors())
    return entries_end, checkpoint(path)


def garble(path: Path, first_page: int, count: int) -> None:
    """Overwrite ``count`` pages from ``first_page`` (1-based) with garbage."""
    assert first_page > 1  # page 1 (header, table list) is kept
    page = int.from_bytes(path.read_bytes()[16:18], "big")  # the header's page size
    with open(path, "r+b") as fh:
        fh.seek((first_page - 1) * page)
        fh.write(b"\xa5" * page * count)


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def entries(path: Path) -> dict[tuple[str, str, str], tuple[tuple, list[tuple]]]:
    """Every entry of a healthy store as its raw rows: passages row, triples rows."""
    conn = sqlite3.connect(f"{path.absolute().as_uri()}?mode=ro", uri=True)
    try:
        out = {}
        for row in conn.execute("SELECT * FROM passages"):
            rows = conn.execute(
                "SELECT * FROM triples WHERE text_sha256 = ? AND extractor = ? AND version = ? "
                "ORDER BY position",
                row[:3],
            ).fetchall()
            out[row[:3]] = (row, rows)
        return out
    finally:
        conn.close()


def stored_vectors(path: Path) -> dict[tuple[str, bytes], bytes]:
    conn = sqlite3.connect(f"{path.absolute().as_uri()}?mode=ro", uri=True)
    try:
        return {
            (e, k): v for e, k, v in conn.execute("SELECT embedder, text_key, vector FROM vectors")
        }
    finally:
        conn.close()


def readable_whole(path: Path, original: dict) -> set[tuple[str, str, str]]:
    """The entries a reader can still read whole from a damaged file, key by key: what
    any repair must keep (independent of how the repair reads)."""
    conn = sqlite3.connect(f"{path.absolute().as_uri()}?mode=ro", uri=True)
    out = set()
    try:
        for key, (row, rows) in original.items():
            try:
                got = conn.execute(
                    "SELECT * FROM passages WHERE text_sha256 = ? AND extractor = ? "
                    "AND version = ?",
                    key,
                ).fetchone()
                got_rows = conn.execute(
                    "SELECT * FROM triples WHERE text_sha256 = ? AND extractor = ? "
                    "AND version = ? ORDER BY position",
                    key,
                ).fetchall()
            except sqlite3.DatabaseError:
                continue
            if got == row and got_rows == rows:
                out.add(key)
    finally:
        conn.close()
    return out


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["store", *argv])
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.fixture
def damaged(tmp_path: Path) -> tuple[Path, dict, dict]:
    """A store with garbage over 16 pages in the middle of its entries (passages, triples,
    document ids and their indexes are interleaved there): its path, and the original
    entries and vectors."""
    path = tmp_path / "triples.sqlite"
    entries_end, _ = build(path)
    original, original_vectors = entries(path), stored_vectors(path)
    garble(path, entries_end // 2 - 8, 16)
    return path, original, original_vectors


# -- check --------------------------------------------------------------------------------


def test_check_reports_damaged_pages_with_the_fix_and_exit_1(
    damaged: tuple[Path, dict, dict], capsys: pytest.CaptureFixture[str]
) -> None:
    path, _, _ = damaged
    before = sha(path)
    verdict = check_store(path)
    assert verdict.status == "damaged" and not verdict.ok
    assert verdict.check == "integrity_check" and verdict.problems
    assert "integrity_check found" in verdict.cause
    assert f"neocorrag store repair --store {path}" in verdict.fix and "delete" in verdict.fix

    code, out, _ = run(capsys, "check", "--store", str(path))
    assert code == 1
    assert out.startswith(f"DAMAGED: {path}")
    assert "cause:" in out and f"`neocorrag store repair --store {path}`" in out
    code, out, _ = run(capsys, "check", "--quick", "--json", "--store", str(path))
    assert code == 1
    assert '"status": "damaged"' in out and '"check": "quick_check"' in out
    assert sha(path) == before  # read-only: the damaged bytes are never touched


def test_stats_reports_a_damaged_store_and_points_at_check_and_repair(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "triples.sqlite"
    _, pages = build(path)
    garble(path, 2, pages - 1)  # every page but the first: stats cannot count anything
    code, out, err = run(capsys, "stats", "--store", str(path))
    assert code == 1 and out == ""
    assert "is damaged" in err
    assert f"`neocorrag store check --store {path}`" in err
    assert f"`neocorrag store repair --store {path}`" in err
    code, out, _ = run(capsys, "stats", "--json", "--store", str(path))
    assert code == 1 and '"status": "damaged"' in out


def test_check_on_a_healthy_store_is_ok_and_says_what_it_holds(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "triples.sqlite"
    build(path)
    before = sha(path)
    verdict = check_store(path)
    assert verdict.ok and verdict.schema == 3 and verdict.summary is not None
    assert verdict.summary["passages"] == N and verdict.summary["vectors"][EMBEDDER]["vectors"] == N
    code, out, _ = run(capsys, "check", "--store", str(path))
    assert code == 0
    assert out.startswith(f"OK: {path} is a healthy triple store")
    assert f"passages   {N}" in out
    size = _human_bytes(sum(len(v) for v in stored_vectors(path).values()))
    assert f"{EMBEDDER}  {N} vectors, {size}" in out
    code, out, _ = run(capsys, "stats", "--store", str(path))  # stats shows vectors too
    assert code == 0 and f"vectors    {N} ({size})" in out
    assert sha(path) == before


def test_a_file_that_is_not_sqlite_is_not_a_store(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "notes.txt"
    path.write_bytes(b"these are my notes, not a database\n" * 200)
    before = sha(path)
    verdict = check_store(path)
    assert verdict.status == "not-a-store"
    assert "SQLite header" in verdict.cause
    code, out, _ = run(capsys, "check", "--store", str(path))
    assert code == 1 and out.startswith(f"NOT A STORE: {path}")
    code, _, err = run(capsys, "repair", "--store", str(path))
    assert code == 2 and "is not a neocorrag triple store" in err
    code, _, err = run(capsys, "stats", "--store", str(path))
    assert code == 1 and "store check --store" in err and "store repair" not in err
    assert sha(path) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]  # no lock, no copy


def test_another_programs_database_is_not_a_store_and_never_repaired(tmp_path: Path) -> None:
    path = tmp_path / "app.sqlite"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE invoices (id INTEGER PRIMARY KEY, total REAL)")
    conn.close()
    verdict = check_store(path)
    assert verdict.status == "not-a-store" and "invoices" in verdict.cause
    assert "someone's data" in verdict.fix and "delete" not in verdict.fix
    before = sha(path)
    with pytest.raises(RepairRefused):
        repair_store(path, force=True)
    assert sha(path) == before


def test_check_of_a_missing_store_is_exit_2_and_creates_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "nope.sqlite"
    code, out, err = run(capsys, "check", "--store", str(path))
    assert code == 2 and out == "" and "there is no file at" in err
    code, _, err = run(capsys, "repair", "--store", str(path))
    assert code == 2 and "nothing to repair" in err
    assert list(tmp_path.iterdir()) == []


# -- repair -------------------------------------------------------------------------------


def test_repair_salvages_every_readable_entry_and_keeps_the_damaged_file(
    damaged: tuple[Path, dict, dict], capsys: pytest.CaptureFixture[str]
) -> None:
    path, original, original_vectors = damaged
    must_keep = readable_whole(path, original)
    assert 0 < len(must_keep) < N  # the damage hit entries, and left some readable
    damaged_sha = sha(path)
    code, out, _ = run(capsys, "repair", "--store", str(path))
    assert code == 0, out
    main_aside = [
        p
        for p in path.parent.iterdir()
        if ".damaged-" in p.name and not p.name.endswith(("-wal", "-shm", "-journal"))
    ]
    assert len(main_aside) == 1
    assert sha(main_aside[0]) == damaged_sha  # moved, never written
    assert f"the damaged file is kept as {main_aside[0]}" in out
    assert "nothing needs a restart" in out

    salvaged = entries(path)
    assert must_keep <= set(salvaged)  # everything a reader could still read whole
    for key, rows in salvaged.items():  # and nothing but whole, unchanged entries
        assert rows == original[key]
    assert stored_vectors(path) == original_vectors  # the damage was not in the vectors
    assert check_store(path).ok
    with TripleStore(path) as store:  # the new store serves the salvaged triples
        some = next(i for i in range(N) if (text_sha256(passage(i)), "fake", "1") in salvaged)
        assert [t.key() for t in store.get_many([passage(some)], KEY)[0] or []] == [
            t.key() for t in triples_of(some)
        ]
        # Document id links are copied wherever readable: a salvaged passage is found by id.
        assert store.document_hashes([passage(some).id])
    assert f"salvaged {len(salvaged)} entries" in out


def test_repair_reports_counts_and_a_store_open_elsewhere_sees_the_new_file(
    damaged: tuple[Path, dict, dict],
) -> None:
    path, _, _ = damaged
    # A store opened before the damage, as a running process would have it.
    elsewhere = TripleStore(path, read_only=True)
    report = repair_store(path)
    assert report.check.status == "damaged"
    assert report.entries_salvaged == len(entries(path)) < N
    assert report.entries_salvaged + report.entries_lost <= N
    assert report.triples_salvaged == sum(len(rows) for _, rows in entries(path).values())
    assert report.vectors_salvaged == N and report.vectors_lost == 0 and report.vectors_listed
    assert Path(report.old_file).name.startswith("triples.sqlite.damaged-")
    with pytest.raises(StoreError) as caught:
        elsewhere.count()
    assert caught.value.kind == "removed"  # it notices the replaced file, never writes it


def test_repair_steps_over_damaged_vector_pages(tmp_path: Path) -> None:
    path = tmp_path / "triples.sqlite"
    entries_end, pages = build(path)
    original, original_vectors = entries(path), stored_vectors(path)
    middle = (entries_end + pages) // 2
    garble(path, middle - 1, 3)  # three pages of vectors
    assert check_store(path).status == "damaged"
    report = repair_store(path)
    assert report.entries_salvaged == N and report.entries_lost == 0
    assert entries(path) == original
    salvaged = stored_vectors(path)
    assert all(original_vectors[k] == v for k, v in salvaged.items())
    # Three pages hold ~40 of these vectors: the scan resumes past them, it does not stop.
    assert N * 0.8 <= len(salvaged) < N
    assert report.vectors_salvaged == len(salvaged)
    with TripleStore(path) as store:
        stats = store.summary().vectors[EMBEDDER]
    assert stats["vectors"] == len(salvaged)
    assert stats["bytes"] == sum(len(v) for v in salvaged.values())


def test_a_damaged_schema_record_is_repaired_whole(tmp_path: Path) -> None:
    path = tmp_path / "triples.sqlite"
    build(path)
    original, original_vectors = entries(path), stored_vectors(path)
    garble(path, 2, 1)  # page 2: the meta table (schema version, vector byte count)
    verdict = check_store(path)
    assert verdict.status == "damaged" and "schema version cannot be read" in verdict.cause
    with pytest.raises(StoreError):
        TripleStore(path)  # what every run met before
    report = repair_store(path)
    assert report.entries_lost == 0 and report.entries_listed
    assert entries(path) == original and stored_vectors(path) == original_vectors
    with TripleStore(path) as store:
        assert store.schema_version == 3 and store.count() == N


def test_a_healthy_store_is_not_repaired_without_force(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "triples.sqlite"
    build(path)
    original, original_vectors, before = entries(path), stored_vectors(path), sha(path)
    code, _, err = run(capsys, "repair", "--store", str(path))
    assert code == 2 and "nothing to repair (--force rebuilds it anyway)" in err
    assert sha(path) == before
    assert not [p for p in tmp_path.iterdir() if ".damaged-" in p.name or ".replaced-" in p.name]
    code, out, _ = run(capsys, "repair", "--force", "--store", str(path))
    assert code == 0 and "the old file is kept as" in out
    assert entries(path) == original and stored_vectors(path) == original_vectors
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith("triples.sqlite.replaced-")]


def test_repair_refuses_while_an_indexer_holds_the_store(
    damaged: tuple[Path, dict, dict], capsys: pytest.CaptureFixture[str]
) -> None:
    path, _, _ = damaged
    before = sha(path)
    with hold_indexer_lock(Path(f"{path}.lock"), str(path)):  # `neocorrag index` running
        code, _, err = run(capsys, "repair", "--store", str(path))
    assert code == 2
    assert f"another process (pid {os.getpid()}) is indexing into it" in err
    assert sha(path) == before
    assert not [p for p in path.parent.iterdir() if ".damaged-" in p.name or ".tmp" in p.name]


def test_repair_refuses_a_folder_it_cannot_write(
    damaged: tuple[Path, dict, dict], monkeypatch: pytest.MonkeyPatch
) -> None:
    path, _, _ = damaged
    before = sha(path)
    real_access = os.access

    def access(target: object, mode: int, **kwargs: object) -> bool:
        if Path(str(target)) == path.parent and mode & os.W_OK:
            return False
        return real_access(target, mode, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "access", access)
    with pytest.raises(RepairRefused, match="is not writable") as caught:
        repair_store(path)
    assert caught.value.kind == "read-only"
    assert sha(path) == before
