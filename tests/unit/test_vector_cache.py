"""Vectors computed once: the embedder's persistent cache in the triple store (issue 52),
and an embedder that misbehaves never poisons it (issue 55)."""

from __future__ import annotations

import logging
import multiprocessing
import sqlite3
from pathlib import Path

import numpy as np
import pytest

from neocorrag_core import EmbedderError, EvidenceChainMiner, MinerConfig, Passage, Triple
from neocorrag_core.models import TextEmbedder, text_key
from neocorrag_core.triples import DefaultTripleSource, TripleStore
from neocorrag_core.triples.store_schema import DOCUMENTS_DDL, SCHEMA_1_DDL
from neocorrag_core.triples.vectors import embed_graph_texts, graph_texts


class Encoder:
    """Deterministic hashed bag-of-characters vectors; records what it was asked."""

    def __init__(self, dim: int = 16, bad: str | None = None) -> None:
        self.dim = dim
        self.seen: list[str] = []
        self.bad = bad  # "nan", "raise", "shape" for one call, then healthy again

    def __call__(self, texts: list[str]) -> np.ndarray:
        self.seen.extend(texts)
        bad, self.bad = self.bad, None
        if bad == "raise":
            raise RuntimeError("the model server is down")
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            for ch in text.encode("utf-8", "surrogatepass"):
                out[row, ch % self.dim] += 1.0
            out[row, 0] += 1.0
        if bad == "nan":
            out[0, 0] = np.nan
        if bad == "shape":
            return out[:, :3]
        return out


def embedder(identity: str | None = "test-bow@1", **kw: object) -> tuple[TextEmbedder, Encoder]:
    enc = Encoder(**kw)  # type: ignore[arg-type]
    return TextEmbedder(enc, name="bow", identity=identity), enc


# -- the persistent cache -------------------------------------------------------------------


def test_vectors_are_computed_once_and_read_back_by_a_new_embedder(tmp_path: Path) -> None:
    store = TripleStore(tmp_path / "s.sqlite")
    first, enc1 = embedder()
    texts = ["Paris", "Paris capital of France", "France"]
    want = first.embed(texts, cache=store)
    assert enc1.seen == texts
    store.close()

    reopened = TripleStore(tmp_path / "s.sqlite")  # a fresh process: nothing in memory
    second, enc2 = embedder()
    got = second.embed([*texts, "new"], cache=reopened)
    assert enc2.seen == ["new"]  # only the text never seen
    np.testing.assert_allclose(got[:3], want, rtol=0, atol=0)
    assert second.cache_info().stored_hits == 3
    assert reopened.vector_summary()["test-bow@1"]["vectors"] == 4


def test_another_embedder_never_reads_the_vectors(tmp_path: Path) -> None:
    store = TripleStore(tmp_path / "s.sqlite")
    embedder("model-a")[0].embed(["Paris"], cache=store)
    other, enc = embedder("model-b")
    other.embed(["Paris"], cache=store)
    assert enc.seen == ["Paris"]
    assert set(store.vector_summary()) == {"model-a", "model-b"}


def test_an_embedder_without_identity_never_touches_the_cache(tmp_path: Path) -> None:
    store = TripleStore(tmp_path / "s.sqlite")
    anonymous, enc = embedder(identity=None)
    anonymous.embed(["Paris"], cache=store)
    assert store.vector_summary() == {}
    assert enc.seen == ["Paris"]


def test_vectors_are_bounded_in_bytes_least_recently_used_first(tmp_path: Path) -> None:
    row = 16 * 2 + 96  # what the bound counts per float16 vector of width 16
    store = TripleStore(tmp_path / "s.sqlite", max_vector_bytes=10 * row)
    emb, _ = embedder()
    emb.embed([f"text {i}" for i in range(8)], cache=store)
    conn = sqlite3.connect(tmp_path / "s.sqlite")
    conn.execute("UPDATE vectors SET used = used - 5")  # the first eight are older
    conn.commit()
    conn.close()
    emb.embed([f"text {i}" for i in range(8, 14)], cache=store)
    kept = store.vector_summary()["test-bow@1"]
    assert kept["vectors"] <= 10 and kept["vectors"] >= 6
    assert store.evicted_vectors() == 14 - kept["vectors"]  # counted, for index's warning
    fresh, enc = embedder()
    fresh.embed([f"text {i}" for i in range(8, 14)], cache=store)
    assert enc.seen == []  # the newest survived the eviction


def test_a_read_only_store_serves_vectors_and_stores_none(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite"
    embedder()[0].embed(["Paris"], cache=TripleStore(path))
    shared = TripleStore(path, read_only=True)
    emb, enc = embedder()
    emb.embed(["Paris", "Lyon"], cache=shared)
    assert enc.seen == ["Lyon"]
    assert shared.vector_summary()["test-bow@1"]["vectors"] == 1


def make_v2_store(path: Path) -> Path:
    conn = sqlite3.connect(path)
    for script in (SCHEMA_1_DDL, DOCUMENTS_DDL):
        conn.executescript(script)
    conn.execute("INSERT INTO meta VALUES ('schema', '2')")
    conn.commit()
    conn.close()
    return path


def test_a_schema_2_store_migrates_and_one_open_read_only_works_without_vectors(
    tmp_path: Path,
) -> None:
    old = make_v2_store(tmp_path / "old.sqlite")
    read_only = TripleStore(old, read_only=True)
    assert read_only.schema_version == 2
    emb, enc = embedder()
    emb.embed(["Paris"], cache=read_only)  # no vectors table: computed, not stored
    assert enc.seen == ["Paris"] and read_only.vector_summary() == {}
    store = TripleStore(old)  # writable: migrated
    assert store.schema_version == 3
    embedder()[0].embed(["Paris"], cache=store)
    assert store.vector_summary()["test-bow@1"]["vectors"] == 1


def _write_vectors(path: str, start: int, barrier: object) -> None:
    store = TripleStore(path)
    emb = TextEmbedder(Encoder(), name="bow", identity="test-bow@1")
    barrier.wait(60)  # type: ignore[attr-defined]
    emb.embed([f"shared {i}" for i in range(start, start + 40)], cache=store)


def test_concurrent_writers_store_each_vector_once(tmp_path: Path) -> None:
    path = str(tmp_path / "s.sqlite")
    TripleStore(path).close()
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(3)
    workers = [ctx.Process(target=_write_vectors, args=(path, s, barrier)) for s in (0, 20, 30)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(120)
    assert [w.exitcode for w in workers] == [0, 0, 0]
    summary = TripleStore(path).vector_summary()["test-bow@1"]
    assert summary["vectors"] == 70  # 0..69, overlaps stored once
    conn = sqlite3.connect(path)
    (counted,) = conn.execute("SELECT value FROM meta WHERE key = 'vector_bytes'").fetchone()
    assert int(counted) == 70 * (16 * 2 + 96)


# -- the engines read them --------------------------------------------------------------------


class OneTripleExtractor:
    extractor_id = "test:one"
    version = "1"

    def extract(self, passages):
        return [[Triple(p.title, "is in", "Europe", (p.id,))] for p in passages]

    triples_for = extract


PASSAGES = [
    Passage("p1", "Paris is the capital of France.", "Paris"),
    Passage("p2", "Lyon is a city in France.", "Lyon"),
    Passage("p3", "Oslo is the capital of Norway.", "Oslo"),
]


def test_a_query_over_stored_passages_embeds_only_the_question(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite"
    question = "Which capital is in Europe?"
    emb, enc = embedder()
    source = DefaultTripleSource(store=path, extractor=OneTripleExtractor())
    first = EvidenceChainMiner(MinerConfig(), embedder=emb, triple_source=source)
    before = first.mine(question, PASSAGES)
    assert "Paris is in Europe" in enc.seen  # first sight: extracted, embedded, stored

    # A fresh engine (a new process): its triples and their vectors come from the store.
    emb2, enc2 = embedder()
    source2 = DefaultTripleSource(store=path, extractor=OneTripleExtractor())
    again = EvidenceChainMiner(MinerConfig(), embedder=emb2, triple_source=source2)
    after = again.mine(question, PASSAGES)
    graph = set(graph_texts(source2.triples_for(PASSAGES)))
    assert enc2.seen and not graph & set(enc2.seen), enc2.seen
    assert question in enc2.seen
    assert [k.passage.id for k in after.kept] == [k.passage.id for k in before.kept]
    assert [c.text for c in after.chains] == [c.text for c in before.chains]


def test_metadata_triples_get_the_same_persistent_cache(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite"
    given = [
        Passage(p.id, p.text, p.title, metadata={"triples": [[p.title, "is in", "Europe"]]})
        for p in PASSAGES
    ]
    emb, _ = embedder()
    EvidenceChainMiner(
        embedder=emb, triple_source=DefaultTripleSource(store=path, extractor=OneTripleExtractor())
    ).mine("Which capital?", given)
    emb2, enc2 = embedder()
    EvidenceChainMiner(
        embedder=emb2, triple_source=DefaultTripleSource(store=path, extractor=OneTripleExtractor())
    ).mine("Which capital?", given)
    assert "Oslo is in Europe" not in enc2.seen


def test_embed_graph_texts_stores_what_a_query_embeds(tmp_path: Path) -> None:
    store = TripleStore(tmp_path / "s.sqlite")
    emb, enc = embedder()
    triples = [[Triple("A" * 150, "rel", "B")], [Triple("B", "rel", "C")]]
    assert embed_graph_texts(emb, store, triples) == len(graph_texts(triples))
    assert embed_graph_texts(emb, store, triples) == 0  # all stored already
    capped = "A" * 99  # the graph caps names at 100 characters: the capped form is stored
    assert any(t.startswith(capped[:90]) and len(t) <= 101 for t in enc.seen)


# -- an embedder that misbehaves ---------------------------------------------------------------


@pytest.mark.parametrize("bad", ["nan", "shape", "raise"])
def test_a_bad_reply_is_rejected_before_caching_and_a_recovered_embedder_serves(
    tmp_path: Path, bad: str
) -> None:
    store = TripleStore(tmp_path / "s.sqlite")
    emb, enc = embedder()
    emb.embed(["Oslo"])  # a healthy first reply: the width is known (16)
    enc.bad = bad
    with pytest.raises(EmbedderError, match="'bow'"):
        emb.embed(["Paris", "Lyon"], cache=store)
    assert emb.cache_info().size == 1 and store.vector_summary() == {}
    out = emb.embed(["Paris", "Lyon"], cache=store)  # the encoder recovered
    assert np.isfinite(out).all() and out.shape == (2, 16)
    assert enc.seen.count("Paris") == 2  # asked again: the bad reply was not kept


def test_a_raising_embedder_is_a_documented_error_from_the_engine() -> None:
    emb, _ = embedder(bad="raise")
    miner = EvidenceChainMiner(embedder=emb)
    given = [Passage("p", "Paris.", "Paris", metadata={"triples": [["Paris", "in", "France"]]})]
    with pytest.raises(EmbedderError, match="model server is down"):
        miner.mine("Where is Paris?", given)


def test_stored_vectors_of_another_width_or_not_finite_are_not_used(tmp_path: Path) -> None:
    store = TripleStore(tmp_path / "s.sqlite")
    store.put_vectors("test-bow@1", {text_key("Paris"): np.full(16, np.nan, np.float32)})
    store.put_vectors("test-bow@1", {text_key("Lyon"): np.ones(5, np.float32)})
    emb, enc = embedder()
    emb.embed(["Oslo"])  # width 16 known
    out = emb.embed(["Paris", "Lyon"], cache=store)
    assert enc.seen == ["Oslo", "Paris", "Lyon"] and np.isfinite(out).all()


def test_the_memory_cache_is_bounded_in_bytes() -> None:
    emb = TextEmbedder(Encoder(dim=16), cache_bytes=5 * (16 * 4 + 120))
    emb.embed(["x" * 300_000, *[f"t{i}" for i in range(9)]])
    info = emb.cache_info()
    assert info.size == 5 and info.bytes <= info.max_bytes
    # Keys are digests: a 300 KB text costs 16 bytes of key, not 300 KB.


def test_a_failing_cache_is_skipped_with_one_warning(caplog: pytest.LogCaptureFixture) -> None:
    from neocorrag_core.errors import StoreError

    class Broken:
        def get_vectors(self, embedder_id, keys):
            raise StoreError("disk I/O error", kind="other")

        def put_vectors(self, embedder_id, vectors):
            raise StoreError("disk I/O error", kind="other")

    emb, enc = embedder()
    with caplog.at_level(logging.WARNING, logger="neocorrag_core.models.embedder"):
        emb.embed(["a"], cache=Broken())
        emb.embed(["b"], cache=Broken())
    assert enc.seen == ["a", "b"]
    assert (
        len([r for r in caplog.records if "vector cache" in r.getMessage()]) == 2
    )  # one per cache


def test_warm_up_loads_the_embedder_and_opens_the_store(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite"
    emb, enc = embedder()
    source = DefaultTripleSource(store=path, extractor=OneTripleExtractor())
    miner = EvidenceChainMiner(MinerConfig(), embedder=emb, triple_source=source)
    assert not path.exists()
    miner.warm_up()
    assert path.exists() and enc.seen == ["warm up"]
    assert source.vectors.healthy
