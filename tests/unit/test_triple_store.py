"""TripleStore and CachedTripleSource: round trip, keys, normalization, concurrency, resume."""

from __future__ import annotations

import multiprocessing
import sqlite3
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from neocorrag_core.triples import CachedTripleSource, ExtractorKey, TripleStore
from neocorrag_core.types import Passage, Triple

KEY = ExtractorKey("fake", "1")


def passage(i: int, pid: str | None = None) -> Passage:
    return Passage(pid or f"p{i}", text=f"Entity {i} is related to Entity {i + 1}.", title=f"T{i}")


def triples_of(p: Passage) -> list[Triple]:
    n = p.title[1:]
    return [Triple(f"Entity {n}", "related to", f"Entity {int(n) + 1}")]


class CountingExtractor:
    """Fake extractor: one triple per passage; records every passage it was asked about."""

    extractor_id = "fake"
    version = "1"

    def __init__(self) -> None:
        self.seen: list[str] = []
        self.lock = threading.Lock()

    def extract(self, passages):
        with self.lock:
            self.seen.extend(p.id for p in passages)
        return [triples_of(p) for p in passages]


def test_round_trip_sets_source_ids_to_the_asking_passage(tmp_path: Path) -> None:
    store = TripleStore(tmp_path / "t.sqlite")
    p = passage(1)
    assert store.get_many([p], KEY) == [None]
    written = store.put_many([(p, triples_of(p))], KEY)
    assert written == 1
    again = Passage("other-id", text=p.text, title=p.title)
    [got] = store.get_many([again], KEY)
    assert got == [Triple("Entity 1", "related to", "Entity 2", ("other-id",))]


def test_passage_without_triples_is_stored_as_done(tmp_path: Path) -> None:
    store = TripleStore(tmp_path / "t.sqlite")
    p = passage(1)
    store.put_many([(p, [])], KEY)
    assert store.get_many([p], KEY) == [[]]
    assert store.contains([p, passage(2)], KEY) == [True, False]


def test_key_includes_extractor_id_version_and_title(tmp_path: Path) -> None:
    store = TripleStore(tmp_path / "t.sqlite")
    p = passage(1)
    store.put_many([(p, triples_of(p))], KEY)
    assert store.get_many([p], ExtractorKey("fake", "2")) == [None]
    assert store.get_many([p], ExtractorKey("other", "1")) == [None]
    retitled = Passage(p.id, text=p.text, title="Another title")
    assert store.get_many([retitled], KEY) == [None]
    # Whitespace differences are not a different passage.
    spaced = Passage(p.id, text="  " + p.text.replace(" ", "\n  "), title=p.title)
    assert store.get_many([spaced], KEY)[0] is not None


def test_entities_are_cleaned_deduplicated_and_keep_their_surface_form(tmp_path: Path) -> None:
    store = TripleStore(tmp_path / "t.sqlite")
    p = passage(1)
    raw = [
        Triple("  Marie   Curie ", "discovered", "Polonium"),
        Triple("marie curie", "Discovered", "polonium."),  # same fact, other spelling
        Triple("Marie Curie", "born in", "Warsaw"),
        Triple("Warsaw", "is", "warsaw"),  # self-loop after normalization
        Triple("", "is", "empty"),
    ]
    assert store.put_many([(p, raw)], KEY) == 2
    [got] = store.get_many([p], KEY)
    assert [t.key() for t in got] == [
        ("Marie Curie", "discovered", "Polonium"),
        ("Marie Curie", "born in", "Warsaw"),
    ]
    assert {t.object for t in store.find_entity("MARIE CURIE")} == {"Polonium", "Warsaw"}
    assert store.find_entity("warsaw", ExtractorKey("fake", "9")) == []


def test_stored_entity_keys_keep_their_accents(tmp_path: Path) -> None:
    # Stored keys predate accent folding (no schema step folds them): an accented name is
    # found as written, as in stores made before, and not by its unaccented spelling.
    store = TripleStore(tmp_path / "t.sqlite")
    store.put_many([(passage(1), [Triple("Aschenbrödel", "composed by", "Johann Strauss")])], KEY)
    assert [t.subject for t in store.find_entity("ASCHENBRÖDEL")] == ["Aschenbrödel"]
    assert store.find_entity("Aschenbrodel") == []


def test_first_writer_wins(tmp_path: Path) -> None:
    store = TripleStore(tmp_path / "t.sqlite")
    p = passage(1)
    store.put_many([(p, triples_of(p))], KEY)
    assert store.put_many([(p, [Triple("X", "r", "Y")])], KEY) == 0
    assert store.get_many([p], KEY)[0][0].subject == "Entity 1"


def test_other_schema_version_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "t.sqlite"
    TripleStore(path).close()
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE meta SET value = '999' WHERE key = 'schema'")
    with pytest.raises(ValueError, match="schema"):
        TripleStore(path)


def test_memory_store_and_stats() -> None:
    store = TripleStore(":memory:")
    store.put_many([(passage(i), triples_of(passage(i))) for i in range(3)], KEY)
    assert store.stats() == {"fake@1": {"passages": 3, "triples": 3}}


def test_cached_source_extracts_only_missing_passages_once(tmp_path: Path) -> None:
    store = TripleStore(tmp_path / "t.sqlite")
    extractor = CountingExtractor()
    source = CachedTripleSource(store, extractor, batch_size=2)
    first = [passage(i) for i in range(3)]
    duplicate = Passage("dup", text=first[0].text, title=first[0].title)
    out = source.triples_for([*first, duplicate])
    assert extractor.seen == ["p0", "p1", "p2"]  # the duplicate text is extracted once
    assert out[3] == [Triple("Entity 0", "related to", "Entity 1", ("dup",))]
    assert out[0][0].source_ids == ("p0",)
    # Resume: a later call with old and new passages extracts only the new one.
    source2 = CachedTripleSource(TripleStore(tmp_path / "t.sqlite"), extractor)
    source2.triples_for([*first, passage(7)])
    assert extractor.seen[3:] == ["p7"]
    assert (source2.stats.hits, source2.stats.extracted) == (3, 1)


def test_extractor_must_return_one_list_per_passage(tmp_path: Path) -> None:
    class Broken(CountingExtractor):
        def extract(self, passages):
            return []

    source = CachedTripleSource(TripleStore(tmp_path / "t.sqlite"), Broken())
    with pytest.raises(RuntimeError, match="returned 0 lists for 1"):
        source.triples_for([passage(1)])


def test_non_extractor_is_refused(tmp_path: Path) -> None:
    with pytest.raises(TypeError, match="extractor_id"):
        CachedTripleSource(TripleStore(tmp_path / "t.sqlite"), object())  # type: ignore[arg-type]


def test_threads_reading_and_writing_at_once(tmp_path: Path) -> None:
    store = TripleStore(tmp_path / "t.sqlite")
    extractor = CountingExtractor()
    source = CachedTripleSource(store, extractor, batch_size=3)
    passages = [passage(i) for i in range(40)]

    def work(offset: int) -> list[list[Triple]]:
        # Overlapping slices: several threads ask for the same passages at once.
        chunk = passages[offset : offset + 15]
        return source.triples_for(chunk)

    with ThreadPoolExecutor(max_workers=8) as pool:
        results = list(pool.map(work, range(0, 40, 5)))
    for offset, result in zip(range(0, 40, 5), results, strict=True):
        for p, triples in zip(passages[offset : offset + 15], result, strict=True):
            assert triples == [Triple(*triples_of(p)[0].key(), (p.id,))]
    assert store.stats()["fake@1"] == {"passages": 40, "triples": 40}


def _process_worker(path: str, start: int, stop: int) -> int:
    store = TripleStore(path)
    source = CachedTripleSource(store, CountingExtractor(), batch_size=4)
    got = source.triples_for([passage(i) for i in range(start, stop)])
    return sum(len(t) for t in got)


def test_processes_writing_and_reading_the_same_file(tmp_path: Path) -> None:
    path = str(tmp_path / "t.sqlite")
    TripleStore(path).close()
    ctx = multiprocessing.get_context("spawn")
    ranges = [(0, 30), (10, 40), (20, 50), (0, 50)]
    with ctx.Pool(4) as pool:
        counts = pool.starmap(_process_worker, [(path, a, b) for a, b in ranges])
    assert counts == [b - a for a, b in ranges]  # every passage answered with its triple
    assert TripleStore(path).stats()["fake@1"] == {"passages": 50, "triples": 50}


def test_store_pickles_by_path(tmp_path: Path) -> None:
    import pickle

    store = TripleStore(tmp_path / "t.sqlite")
    store.put_many([(passage(1), triples_of(passage(1)))], KEY)
    clone = pickle.loads(pickle.dumps(store))
    assert clone.get_many([passage(1)], KEY)[0] is not None
    with pytest.raises(TypeError, match="in-memory"):
        pickle.dumps(TripleStore(":memory:"))


def test_importing_the_package_loads_no_extractor_dependency() -> None:
    import subprocess
    import sys

    code = (
        "import sys, neocorrag_core, neocorrag_core.triples as t; "
        "t.TripleStore, t.CachedTripleSource; "
        "heavy = [m for m in ('spacy', 'outlines', 'torch') if m in sys.modules]; "
        "assert not heavy, heavy"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
