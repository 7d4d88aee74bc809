"""Corpus graph at scale (issue 61): build time, memory and the walk's time per question on a
synthetic store with the open corpus's triple statistics.

The open corpus (6,999 passages, spaCy triples) has 11.2 triples per passage and 60,403
entities, most named by one passage (median 1, 99th percentile 11, largest 436). The
synthetic rows keep those rates: per passage 11 triples over entities drawn from a Zipf
law scaled with the corpus (``--profile``: see :func:`rows`)::

    python benchmarks/bench_graph.py --passages 10000 100000 --profile open --epsilon 1e-7 3e-7

Prints, per size: rows, entities, build seconds, matrix MB; then, per ``--epsilon``, the
median milliseconds of one ranking (:func:`~neocorrag_core.graph.selection.rank_passages`,
five seed entities) with the global walk (power iteration over every node) and with the
local walk (:func:`~neocorrag_core.graph.propagation.local_pagerank`), run alternately on
the same seeds, their ratio, the local walk's median support (nodes reached), column
entries read and L1 error, for how many questions its top 15 passages (in order) differ
from the global walk's, and the most exact score its picks gave up in such a question (the
share of the global picks' total score: near 0, the two swapped near-ties).
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from neocorrag_core.graph import GraphSettings, build_corpus_graph, rank_passages
from neocorrag_core.graph.propagation import (
    DEFAULT_EPSILON,
    local_pagerank,
    personalized_pagerank,
)

TRIPLES_PER_PASSAGE = 11
ENTITIES_PER_PASSAGE = 8.6  # the open corpus: 60,403 entities over 6,999 passages
LOCAL_SHARE = 0.3
# profile "open": the open corpus's head (largest entity in 436 of 6,999 passages, the
# fifth in 157; 13.4 entities per passage, 7.4 of them its own, 6.0 shared)
OPEN_OWN_SHARE = 1 / 3
OPEN_SHARED_PER_PASSAGE = 6
OPEN_ZIPF = (1.0, 10.0)  # Zipf-Mandelbrot exponent and offset over 2 names per passage
PROFILES = ("zipf", "open")


def rows(passages: int, seed: int = 0, profile: str = "zipf") -> list[tuple[str, str, str]]:
    """Synthetic ``(hash, subject, object)`` rows.

    ``profile="zipf"`` (the first benchmark's): a third of the names are the passage's own
    (named nowhere else), the rest drawn from a Zipf law (exponent 1.3) over a vocabulary
    that grows with the corpus. Its head is far heavier than the open corpus's: the most
    common name is in 98% of the passages (the open corpus's in 6%), so every walk reaches
    the whole graph in two hops.

    ``profile="open"``: the open corpus's rates including its head: each passage names 6
    shared entities drawn from a Zipf-Mandelbrot law (exponent 1, offset 10, over 2 names
    per passage; the most common in 7.7% of 7,000 passages, 5.6% of 100,000) and its own
    names for a third of its triples' slots (p99 of passages per entity: 10, open corpus:
    11).
    """
    rng = np.random.default_rng(seed)
    if profile == "zipf":
        vocabulary = int(passages * ENTITIES_PER_PASSAGE)
        shared = rng.zipf(1.3, size=(passages, TRIPLES_PER_PASSAGE, 2)) % vocabulary
        own = rng.random((passages, TRIPLES_PER_PASSAGE, 2)) < LOCAL_SHARE
    elif profile == "open":
        exponent, offset = OPEN_ZIPF
        ranks = np.arange(1, 2 * passages + 1, dtype=np.float64)
        cumulative = np.cumsum((ranks + offset) ** -exponent)
        names = np.searchsorted(
            cumulative, rng.random((passages, OPEN_SHARED_PER_PASSAGE)) * cumulative[-1]
        )
        pick = rng.integers(0, OPEN_SHARED_PER_PASSAGE, size=(passages, TRIPLES_PER_PASSAGE, 2))
        shared = np.take_along_axis(names, pick.reshape(passages, -1), axis=1).reshape(pick.shape)
        own = rng.random((passages, TRIPLES_PER_PASSAGE, 2)) < OPEN_OWN_SHARE
    else:
        raise ValueError(f"profile must be one of {PROFILES}, got {profile!r}")
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
    parser.add_argument("--epsilon", type=float, nargs="+", default=[DEFAULT_EPSILON])
    parser.add_argument("--limit", type=int, default=15)
    parser.add_argument("--profile", choices=PROFILES, default="zipf")
    args = parser.parse_args()
    exact = GraphSettings(epsilon=0.0)
    for n in args.passages:
        data = rows(n, profile=args.profile)
        started = time.perf_counter()
        graph = build_corpus_graph(data)
        built = time.perf_counter() - started
        print(
            f"{n:>9,} passages  {len(data):>10,} rows  {len(graph.entities):>9,} entities  "
            f"{graph.num_nodes:>10,} nodes  build {built:6.1f} s  "
            f"matrices {graph.nbytes() / 2**20:7.1f} MB  "
            f"largest entity in {graph.entity_passage_counts.max() / n:.1%} of passages "
            f"({args.profile})",
            flush=True,
        )
        del data
        n_e = len(graph.entities)
        rng = np.random.default_rng(1)
        spent: dict[float, list[float]] = {e: [] for e in (0.0, *args.epsilon)}
        reached: dict[float, list[int]] = {e: [] for e in args.epsilon}
        work: dict[float, list[int]] = {e: [] for e in args.epsilon}
        error: dict[float, list[float]] = {e: [] for e in args.epsilon}
        differ = dict.fromkeys(args.epsilon, 0)
        shortfall = dict.fromkeys(args.epsilon, 0.0)
        for q in range(args.queries):
            reset = np.zeros(graph.num_nodes)
            reset[rng.integers(0, len(graph.entities), size=5)] = 1.0
            order = [0.0, *args.epsilon]
            if q % 2:  # alternate which walk runs first
                order.reverse()
            picked = {}
            for epsilon in order:
                settings = GraphSettings(epsilon=epsilon) if epsilon else exact
                t = time.perf_counter()
                picks = rank_passages(graph, reset, settings=settings, limit=args.limit)
                spent[epsilon].append(time.perf_counter() - t)
                picked[epsilon] = [p.passage for p in picks]
            seeds = np.flatnonzero(reset)
            exact_scores = None
            for epsilon in args.epsilon:
                walk = local_pagerank(graph.transition, seeds, reset[seeds], epsilon=epsilon)
                reached[epsilon].append(walk.reached)
                work[epsilon].append(walk.work)
                error[epsilon].append(walk.error)
                if picked[epsilon] != picked[0.0]:
                    differ[epsilon] += 1
                    if exact_scores is None:  # how much exact score the local picks give up
                        exact_scores = personalized_pagerank(graph.transition, reset)[n_e:]
                    best, got = (
                        exact_scores[[graph.passage_index[h] for h in picked[e]]].sum()
                        for e in (0.0, epsilon)
                    )
                    shortfall[epsilon] = max(shortfall[epsilon], 1 - got / best)
        exact_ms = 1000 * statistics.median(spent[0.0])
        for epsilon in args.epsilon:
            local_ms = 1000 * statistics.median(spent[epsilon])
            print(
                f"    epsilon {epsilon:7.1e}  global {exact_ms:8.1f} ms  local {local_ms:7.1f} ms  "
                f"local/global {local_ms / exact_ms:6.3f}  "
                f"support {statistics.median(reached[epsilon]):>9,.0f} nodes  "
                f"work {statistics.median(work[epsilon]):>10,.0f} entries  "
                f"L1 error {statistics.median(error[epsilon]):.3f}  "
                f"top {args.limit} differs {differ[epsilon]}/{args.queries} "
                f"(exact score given up: at most {shortfall[epsilon]:.1e})",
                flush=True,
            )


if __name__ == "__main__":
    main()
