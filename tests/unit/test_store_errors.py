"""TripleStore failures: damaged files are refused and left untouched, read-only stores are
read, and two indexers of one store take turns (the lock survives ``kill -9``)."""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import signal
import sqlite3
import threading
import time
from pathlib import Path

import pytest

from neocorrag_core.errors import ConfigError, StoreError
from neocorrag_core.triples import CachedTripleSource, ExtractorKey, TripleStore
from neocorrag_core.triples.store import StoreSchemaError
from neocorrag_core.types import Passage, Triple

KEY = ExtractorKey("fake", "1")
IS_ROOT = hasattr(os, "geteuid") and os.geteuid() == 0


def passage(i: int) -> Passage:
    return Passage(f"p{i}", text=f"Entity {i} is related to Entity {i + 1}.", title=f"T{i}")


def triples_of(p: Passage) -> list[Triple]:
    n = int(p.title[1:])
    return [Triple(f"Entity {n}", "related to", f"Entity {n + 1}")]


class CountingExtractor:
    """Fake extractor: one triple per passage; counts the passages it was asked about."""

    extractor_id = "fake"
    version = "1"

    def __init__(self) -> None:
        self.seen: list[str] = []

    def extract(self, passages):
        self.seen.extend(p.id for p in passages)
        return [triples_of(p) for p in passages]


def built_store(path: Path, n: int = 300) -> Path:
    """A real store of ``n`` passages (several pages), closed so the WAL is checkpointed."""
    with TripleStore(path) as store:
        store.put_many([(passage(i), triples_of(passage(i))) for i in range(n)], KEY)
    return path


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _not_sqlite(path: Path) -> None:
    path.write_bytes(b"these are my notes, not a database\n" * 200)


def _truncated(path: Path) -> None:
    data = built_store(path).read_bytes()
    path.write_bytes(data[: len(data) // 2])


def _garbled_schema_page(path: Path) -> None:
    data = built_store(path).read_bytes()
    path.write_bytes(data[:100] + b"\xa5" * 3000 + data[3100:])  # header kept, page 1 lost


def _garbled_header(path: Path) -> None:
    data = built_store(path).read_bytes()
    path.write_bytes(b"\x00" * 16 + data[16:])


def _foreign_database(path: Path) -> None:
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE invoices (id INTEGER PRIMARY KEY, total REAL)")
        conn.execute("INSERT INTO invoices VALUES (1, 9.5)")
    conn.close()


DAMAGES = {
    "not-sqlite": _not_sqlite,
    "truncated": _truncated,
    "garbled-schema-page": _garbled_schema_page,
    "garbled-header": _garbled_header,
    "another-programs-database": _foreign_database,
}


@pytest.mark.parametrize("damage", list(DAMAGES))
def test_a_damaged_store_is_refused_and_left_byte_for_byte(tmp_path: Path, damage: str) -> None:
    path = tmp_path / "t.sqlite"
    DAMAGES[damage](path)
    before = digest(path)
    for read_only in (None, True):
        with pytest.raises(StoreError) as caught:
            TripleStore(path, read_only=read_only)
        message = str(caught.value)
        assert str(path) in message and "NEOCORRAG_CACHE / --store" in message
        if damage == "another-programs-database":  # someone's data: not "delete it"
            assert "not a neocorrag triple store (it holds the tables invoices)" in message
            assert "delete" not in message
        else:
            # never "delete it": the file may not be ours; check says what it is
            assert "damaged" in message and "store check" in message
            assert "delete" not in message
        assert "\n" not in message
        assert isinstance(caught.value, OSError)  # what callers caught before the family
    assert digest(path) == before


def test_a_store_damaged_while_in_use_fails_reads_and_writes_with_store_error(
    tmp_path: Path,
) -> None:
    path = built_store(tmp_path / "t.sqlite")
    store = TripleStore(path)
    store.close()  # the next call reconnects, as a new thread or process would
    _not_sqlite(path)
    before = digest(path)
    calls = [
        lambda: store.get_many([passage(1)], KEY),
        lambda: store.contains([passage(1)], KEY),
        lambda: store.put_many([(passage(1), triples_of(passage(1)))], KEY),
        lambda: store.find_entity("Entity 1"),
        store.stats,
    ]
    for call in calls:
        with pytest.raises(StoreError, match="is damaged or is not a neocorrag triple store"):
            call()
    assert digest(path) == before


def test_an_empty_file_is_a_new_store(tmp_path: Path) -> None:
    path = tmp_path / "t.sqlite"
    path.touch()  # e.g. made by tempfile: SQLite reads it as an empty database
    with TripleStore(path) as store:
        store.put_many([(passage(1), triples_of(passage(1)))], KEY)
        assert store.contains([passage(1)], KEY) == [True]


def test_other_schema_is_a_store_error_and_still_a_value_error(tmp_path: Path) -> None:
    path = built_store(tmp_path / "t.sqlite", n=1)
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE meta SET value = '999' WHERE key = 'schema'")
    conn.close()
    for read_only in (None, True):
        with pytest.raises(StoreSchemaError, match="schema 999") as caught:
            TripleStore(path, read_only=read_only)
        assert isinstance(caught.value, StoreError) and isinstance(caught.value, ValueError)


def test_compressor_over_a_damaged_store_raises_store_error(tmp_path: Path) -> None:
    pytest.importorskip("langchain_core")
    from adapter_fixtures import CORPUS, MINER_CONFIG, QUERY
    from conftest import HashedBagOfWords
    from langchain_core.documents import Document

    from neocorrag_integrations.langchain import NeocorRAGCompressor

    path = built_store(tmp_path / "t.sqlite", n=1)
    store = TripleStore(path)
    compressor = NeocorRAGCompressor(
        embedder=HashedBagOfWords(),
        decoding="none",
        miner_config=MINER_CONFIG,
        triple_source=CachedTripleSource(store, CountingExtractor()),
    )
    store.close()
    _not_sqlite(path)
    before = digest(path)
    documents = [
        Document(id=pid, page_content=text, metadata={"title": t}) for pid, t, text, _ in CORPUS
    ]
    with pytest.raises(StoreError, match=str(path)):
        compressor.compress_documents(documents, QUERY)
    assert digest(path) == before


# -- read-only stores ------------------------------------------------------------------------


def test_read_only_store_reads_and_refuses_writes(tmp_path: Path) -> None:
    path = built_store(tmp_path / "t.sqlite", n=3)
    before = digest(path)
    store = TripleStore(path, read_only=True)
    assert store.read_only and "read_only=True" in repr(store)
    assert store.get_many([passage(1), passage(9)], KEY)[1] is None
    assert store.get_many([passage(1)], KEY)[0] == [
        Triple("Entity 1", "related to", "Entity 2", ("p1",))
    ]
    assert store.contains([passage(2), passage(9)], KEY) == [True, False]
    assert store.stats() == {"fake@1": {"passages": 3, "triples": 3}}
    assert store.find_entity("entity 2")
    with pytest.raises(StoreError, match="open read-only"):
        store.put_many([(passage(9), triples_of(passage(9)))], KEY)
    # Other threads open their own read-only connections.
    seen: list[object] = []
    thread = threading.Thread(target=lambda: seen.append(store.stats()))
    thread.start()
    thread.join()
    assert seen == [store.stats()]
    store.close()
    assert digest(path) == before


def test_read_only_store_is_never_created(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match=r"no triple store at .*neocorrag index"):
        TripleStore(tmp_path / "missing.sqlite", read_only=True)
    assert not (tmp_path / "missing.sqlite").exists()
    with pytest.raises(ConfigError, match="in-memory"):
        TripleStore(":memory:", read_only=True)


@pytest.mark.skipif(IS_ROOT, reason="root writes through chmod; read_only=True is tested above")
def test_unwritable_store_and_folder_are_detected_and_read(tmp_path: Path) -> None:
    folder = tmp_path / "shared"
    folder.mkdir()
    path = built_store(folder / "t.sqlite", n=3)
    before = digest(path)
    path.chmod(0o444)
    folder.chmod(0o555)  # no -wal / -shm can be made: the store is read as immutable
    try:
        store = TripleStore(path)
        assert store.read_only
        assert store.contains([passage(1)], KEY) == [True]
        with pytest.raises(StoreError, match="read-only"):
            store.put_many([(passage(9), [])], KEY)
        store.close()
    finally:
        folder.chmod(0o755)
        path.chmod(0o644)
    assert digest(path) == before


def test_cached_source_over_a_read_only_store_extracts_misses_without_storing(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = built_store(tmp_path / "t.sqlite", n=2)
    before = digest(path)
    extractor = CountingExtractor()
    source = CachedTripleSource(TripleStore(path, read_only=True), extractor)
    again = Passage("again", text=passage(5).text, title=passage(5).title)
    with caplog.at_level(logging.WARNING, logger="neocorrag_core.triples.store"):
        out = source.triples_for([passage(0), passage(5), again])
        out2 = source.triples_for([passage(6)])
    assert out == [
        [Triple("Entity 0", "related to", "Entity 1", ("p0",))],
        [Triple("Entity 5", "related to", "Entity 6", ("p5",))],
        [Triple("Entity 5", "related to", "Entity 6", ("again",))],
    ]
    assert out2 == [[Triple("Entity 6", "related to", "Entity 7", ("p6",))]]
    assert extractor.seen == ["p5", "p6"]  # the duplicate text once; the stored one never
    assert (source.stats.hits, source.stats.extracted, source.stats.triples_written) == (1, 2, 0)
    warnings = [r for r in caplog.records if "read-only" in r.getMessage()]
    assert len(warnings) == 1  # once per source, not per call
    with pytest.raises(StoreError, match="read-only"):
        source.extract_and_store([passage(7)])
    assert digest(path) == before


# -- one indexer at a time -------------------------------------------------------------------


def test_indexer_lock_is_released_when_its_holder_is_killed(tmp_path: Path) -> None:
    if not hasattr(os, "fork"):
        pytest.skip("needs fork")
    store = TripleStore(tmp_path / "t.sqlite")
    ready_r, ready_w = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover - the child holds the lock until it is killed
        try:
            with store.indexer_lock():
                os.write(ready_w, b"1")
                time.sleep(60)
        finally:
            os._exit(0)
    os.close(ready_w)
    try:
        assert os.read(ready_r, 1) == b"1"
        waited_for: list[int | None] = []
        acquired = threading.Event()

        def second() -> None:
            with store.indexer_lock(on_wait=waited_for.append):
                acquired.set()

        thread = threading.Thread(target=second, daemon=True)
        thread.start()
        deadline = time.monotonic() + 10
        while not waited_for and time.monotonic() < deadline:
            time.sleep(0.01)
        assert waited_for == [child]  # the waiting run is told who holds the lock
        assert not acquired.is_set()
        os.kill(child, signal.SIGKILL)  # no cleanup runs: the OS drops the lock
        os.waitpid(child, 0)
        assert acquired.wait(10)
        thread.join(10)
    finally:
        os.close(ready_r)
        with contextlib.suppress(ProcessLookupError, ChildProcessError):
            os.kill(child, signal.SIGKILL)
            os.waitpid(child, 0)
    # Free again: a third run takes it without waiting.
    with store.indexer_lock(on_wait=lambda pid: pytest.fail(f"waited for {pid}")):
        pass


def test_read_only_choice_survives_pickling(tmp_path: Path) -> None:
    import pickle

    path = built_store(tmp_path / "t.sqlite", n=1)
    clone = pickle.loads(pickle.dumps(TripleStore(path, read_only=True)))
    assert clone.read_only and clone.contains([passage(0)], KEY) == [True]
    assert not pickle.loads(pickle.dumps(TripleStore(path))).read_only


def test_switching_a_new_store_to_wal_waits_out_a_concurrent_creator(tmp_path, monkeypatch):
    # SQLite refuses the journal-mode switch at once (no busy wait) while another process
    # creates the same store; the open retries within the timeout instead of failing.
    original = TripleStore._conn
    refusals = [2]

    class Busy:
        def __init__(self, conn):
            self.conn = conn

        def execute(self, sql, *args):
            if sql.startswith("PRAGMA journal_mode") and refusals[0]:
                refusals[0] -= 1
                raise sqlite3.OperationalError("database is locked")
            return self.conn.execute(sql, *args)

    monkeypatch.setattr(TripleStore, "_conn", lambda self: Busy(original(self)))
    store = TripleStore(tmp_path / "new.sqlite", timeout=5)
    assert refusals == [0] and store.schema_version > 0
