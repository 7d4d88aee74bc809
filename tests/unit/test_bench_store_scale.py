"""benchmarks/bench_store_scale.py: the triple store at scale, on a tiny synthetic store."""

from __future__ import annotations

import json

from benchmark_scripts import load_benchmark

from neocorrag_core.triples import store_vectors

bench = load_benchmark("bench_store_scale")


def test_a_synthetic_passage_is_the_same_every_time_at_the_corpus_rates():
    passage, triples = bench.synthetic_passage(7, 1000)
    assert (passage, triples) == bench.synthetic_passage(7, 1000)
    assert bench.synthetic_passage(8, 1000)[0].text != passage.text
    counts = [len(bench.synthetic_passage(i, 400)[1]) for i in range(400)]
    assert 9.5 < sum(counts) / len(counts) < 13  # the open corpus: 11.2 triples per passage
    assert all(t.subject != t.object for t in triples)


def test_a_tiny_run_measures_build_file_lookups_and_eviction(tmp_path, capsys):
    out = tmp_path / "scale.json"
    argv = ["--passages", "60", "--dir", str(tmp_path / "stores"), "--out", str(out)]
    argv += ["--calls", "3", "--lru-calls", "2", "--max-vector-bytes", "200000"]
    real_evict = store_vectors._evict_vectors
    assert bench.main(argv) == 0
    assert store_vectors._evict_vectors is real_evict  # the timer is taken off again
    (size,) = json.loads(out.read_text())["sizes"]
    assert size["corpus"]["passages_stored"] == 60
    assert size["file"]["vectors_written"] > size["file"]["vectors_kept"] > 0
    assert size["file"]["total_bytes"] > 0 and size["file"]["bytes"]["wal"] == 0
    assert size["eviction"]["evictions"] >= 1
    assert [look["k"] for look in size["lookups"]] == [5, 50]
    oldest, newest = size["eviction"]["oldest_tenth_k5"], size["eviction"]["newest_tenth_k5"]
    assert oldest["missing_per_call"] > newest["missing_per_call"]
    assert not list((tmp_path / "stores").iterdir())  # deleted without --keep
    assert "60 passages" in capsys.readouterr().out
