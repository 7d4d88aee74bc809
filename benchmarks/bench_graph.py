"""Corpus graph at scale (issue 61): build time, memory and the walk's time per question on a
synthetic store with the open corpus's triple statistics.

The open corpus (6,999 passages, spaCy triples) has 11.2 triples per passage and 60,403
entities, most named by one passage (median 1, 99th percentile 11, largest 436). The
synthetic rows keep those rates: per passage 11 triples over entities drawn from a Zipf
law scaled with the corpus::

    python benchmarks/bench_graph.py --passages 10000 100000

Prints, per size: rows, entities, build seconds, matrix MB, and the median milliseconds of
one personalized PageRank walk from five seed entities.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from neocorrag_core.graph import GraphSettings, build_corpus_graph, rank_passages

TRIPLES_PER_PASSAGE = 11
ENTITIES_PER_PASSAGE = 8.6  # the open corpus: 60,403 entities over 6,999 passages
LOCAL_SHARE = 0.3


def rows(passages: int, seed: int = 0) -> list[tuple[str, str, str]]:
    """Synthetic ``(hash, subject, object)`` rows with the open corpus's rates: a third of
    the names are the passage's own (named nowhere else), the rest drawn from a Zipf law
    over a vocabulary that grows with the corpus (a few names in hundreds of passages)."""
    rng = np.random.default_rng(seed)
    vocabulary = int(passages * ENTITIES_PER_PASSAGE)
    shared = rng.zipf(1.3, size=(passages, TRIPLES_PER_PASSAGE, 2)) % vocabulary
    own = rng.random((passages, TRIPLES_PER_PASSAGE, 2)) < LOCAL_SHARE
    out = []
    for p in range(passages):
        digest = f"p{p}"
        for t in range(TRIPLES_PER_PASSAGE):
            s, o = (f"P{p}.{t}.{i}" if own[p, t, i] else f"E{shared[p, t, i]}" for i in range(2))
            out.append((digest, s, o))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--passages", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--queries", type=int, default=20)
    args = parser.parse_args()
    settings = GraphSettings()
    for n in args.passages:
        data = rows(n)
        started = time.perf_counter()
        graph = build_corpus_graph(data)
        built = time.perf_counter() - started
        rng = np.random.default_rng(1)
        spent = []
        for _ in range(args.queries):
            reset = np.zeros(graph.num_nodes)
            reset[rng.integers(0, len(graph.entities), size=5)] = 1.0
            t = time.perf_counter()
            rank_passages(graph, reset, settings=settings, limit=15)
            spent.append(time.perf_counter() - t)
        print(
            f"{n:>9,} passages  {len(data):>10,} rows  {len(graph.entities):>9,} entities  "
            f"build {built:6.1f} s  matrices {graph.nbytes() / 2**20:7.1f} MB  "
            f"walk {1000 * statistics.median(spent):7.1f} ms"
        )


if __name__ == "__main__":
    main()
