"""A cache never breaks a query (issue 55): store faults after the store opened.

The default triple source keeps serving when its store fails later (deleted, replaced,
damaged pages, a full disk): one warning naming the file, the work already done is used,
the file is tried again later and never written while damaged.
"""

from __future__ import annotations

import hashlib
import logging
import os
import sqlite3
from pathlib import Path

import pytest

from neocorrag_core import EvidenceChainMiner, MinerConfig, Passage, Triple
from neocorrag_core.errors import StoreError
from neocorrag_core.models import TextEmbedder
from neocorrag_core.triples import DefaultTripleSource, TripleStore
from neocorrag_core.triples.resilient import ResilientStore
from neocorrag_core.triples.store import ExtractorKey

STORE_LOG = "neocorrag_core.triples.store"


class CountingExtractor:
    extractor_id = "test:counting"
    version = "1"

    def __init__(self) -> None:
        self.seen: list[str] = []

    def extract(self, passages):
        self.seen.extend(p.id for p in passages)
        return [[Triple(p.title, "mentions", p.text.split()[0], (p.id,))] for p in passages]

    triples_for = extract


def passages(*names: str) -> list[Passage]:
    return [Passage(n, f"{n.upper()} is a word.", f"Title {n}") for n in names]


def source_at(path: Path, extractor: CountingExtractor) -> DefaultTripleSource:
    source = DefaultTripleSource(store=path, extractor=extractor)
    source.vectors.retry_seconds = 0.0  # try the file again at once
    return source


def warnings_of(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]


def test_a_store_deleted_while_open_serves_the_call_and_is_created_again(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "s.sqlite"
    extractor = CountingExtractor()
    source = source_at(path, extractor)
    source.triples_for(passages("a"))
    path.unlink()  # before this fix: later writes went to the unlinked file, lost silently
    with caplog.at_level(logging.WARNING, logger=STORE_LOG):
        out = source.triples_for(passages("b"))
    assert [t.key() for t in out[0]] == [("Title b", "mentions", "B")]
    messages = warnings_of(caplog)
    assert len(messages) == 1 and "was deleted" in messages[0] and str(path) in messages[0]
    # Tried again: a new file at the path, and what comes next is stored in it.
    source.triples_for(passages("c"))
    assert path.exists()
    assert TripleStore(path).count() >= 1


def test_a_store_replaced_while_open_is_reopened(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite"
    extractor = CountingExtractor()
    source = source_at(path, extractor)
    source.triples_for(passages("a"))
    other = tmp_path / "other.sqlite"
    replacement = TripleStore(other)
    replacement.put_many([(passages("z")[0], [Triple("Z", "is", "zed")])], key())
    replacement.close()  # the last connection: its write-ahead log goes into the file
    for companion in ("-wal", "-shm"):  # a store file is replaced with its companions
        Path(f"{path}{companion}").unlink(missing_ok=True)
    os.replace(other, path)
    out = source.triples_for(passages("z"))  # the call is served either way
    assert out[0]
    again = source.triples_for(passages("z"))
    assert [t.key() for t in again[0]] == [("Z", "is", "zed")]  # the new file is read


def _damage(path: Path) -> None:
    """Overwrite every page but the first (the header and schema) with garbage."""
    size = path.stat().st_size
    with open(path, "r+b") as fh:
        fh.seek(4096)
        fh.write(b"\xa5" * (size - 4096))


def test_damaged_pages_after_open_degrade_and_the_file_is_never_written_again(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "s.sqlite"
    extractor = CountingExtractor()
    source = source_at(path, extractor)
    source.triples_for(passages(*"abcdefgh"))
    store = source.vectors.store
    assert store is not None
    plain = sqlite3.connect(path)
    plain.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # everything into the main file
    plain.close()
    _damage(path)
    store.close()  # its next read opens a connection that sees the damaged pages
    before = hashlib.sha256(path.read_bytes()).hexdigest()
    with caplog.at_level(logging.WARNING, logger=STORE_LOG):
        out = source.triples_for(passages("a", "x"))
        source.triples_for(passages("y"))
    assert all(out)  # served: the damaged store's passages are extracted again in memory
    messages = warnings_of(caplog)
    assert len(messages) == 1 and "neocorrag store check" in messages[0], messages
    assert hashlib.sha256(path.read_bytes()).hexdigest() == before


def test_a_full_disk_keeps_what_was_extracted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "s.sqlite"
    extractor = CountingExtractor()
    source = source_at(path, extractor)
    source.vectors.retry_seconds = 3600.0
    source.triples_for(passages("a"))

    def full(*args: object, **kwargs: object) -> int:
        raise StoreError("cannot write triples to the store: database or disk is full", kind="full")

    store = source.vectors.store
    monkeypatch.setattr(store, "put_many", full)
    monkeypatch.setattr(store, "put_vectors", full)
    with caplog.at_level(logging.WARNING, logger=STORE_LOG):
        first = source.triples_for(passages("b", "c"))
        second = source.triples_for(passages("b", "c"))
    assert first == second and all(first)
    assert extractor.seen == ["a", "b", "c"]  # not extracted twice: kept in memory
    assert len(warnings_of(caplog)) == 1


def test_a_query_through_the_miner_never_fails_because_of_the_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import numpy as np

    path = tmp_path / "s.sqlite"
    source = source_at(path, CountingExtractor())
    source.vectors.retry_seconds = 3600.0
    embedder = TextEmbedder(
        lambda texts: np.ones((len(texts), 4)) + np.arange(len(texts))[:, None],
        identity="test@1",
    )
    miner = EvidenceChainMiner(MinerConfig(), embedder=embedder, triple_source=source)
    miner.mine("What is A?", passages("a", "b"))

    def broken(*args: object, **kwargs: object) -> object:
        raise StoreError("disk I/O error", kind="other")

    store = source.vectors.store
    for name in ("get_many", "put_many", "get_vectors", "put_vectors"):
        monkeypatch.setattr(store, name, broken)
    result = miner.mine("What is A?", passages("a", "b", "c"))
    assert result.kept


def test_resilient_store_reports_its_state(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    store = ResilientStore(blocker / "s.sqlite", retry_seconds=3600)
    assert store.get_many(passages("a"), key()) == [None]
    assert not store.healthy and "cannot create" in str(store.last_error)
    assert store.put_many([(passages("a")[0], [Triple("A", "is", "b")])], key())
    assert store.get_many(passages("a"), key())[0]


def key() -> ExtractorKey:
    return ExtractorKey.of(CountingExtractor())


def test_a_damaged_store_is_used_again_once_repaired(tmp_path: Path) -> None:
    from neocorrag_core.triples.store_repair import repair_store

    path = tmp_path / "s.sqlite"
    source = source_at(path, CountingExtractor())
    source.triples_for(passages(*"abcdefgh"))
    store = source.vectors.store
    assert store is not None
    plain = sqlite3.connect(path)
    plain.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    plain.close()
    _damage(path)
    store.close()
    source.triples_for(passages("x"))
    assert not source.vectors.healthy  # damaged: left alone
    source.triples_for(passages("y"))
    assert not source.vectors.healthy  # still the damaged file: not tried again
    repair_store(str(path), force=True)
    source.triples_for(passages("z"))  # another file took its place: opened
    assert source.vectors.healthy
    assert TripleStore(path).contains(passages("z"), key()) == [True]
