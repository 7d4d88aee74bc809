"""MiniLM on short texts with 1 and 2 torch threads, on an idle and on a loaded machine.

What a query costs the embedder once the passages' vectors are stored: one question (and
its few query entities), a handful of short texts per call. Each size is timed with 1 and
2 intra-op threads alternately, call by call; then again while ``--load`` busy processes
(pure Python loops, one per core) compete for the CPU, as other work on a shared laptop or
server does.

    python benchmarks/bench_threads.py --out benchmarks/results/threads.json
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

SIZES = {"query": 1, "query + entities": 3, "a passage's triples": 30, "a top-20's triples": 300}


def _burn(stop: object) -> None:
    x = 0
    while not stop.is_set():  # type: ignore[attr-defined]
        for i in range(100_000):
            x ^= i


def measure(repeats: int) -> dict[str, dict[str, float]]:
    import torch
    from sentence_transformers import SentenceTransformer

    from neocorrag_core.models import bundled_embedder_path

    model = SentenceTransformer(str(bundled_embedder_path()), device="cpu")
    words = "the film directed by a Norwegian painter born in Oslo capital of Norway".split()
    out: dict[str, dict[str, float]] = {}
    for name, n in SIZES.items():
        times: dict[int, list[float]] = {1: [], 2: []}
        for r in range(repeats):
            texts = [
                " ".join(words[(i + r) % 7 : (i + r) % 7 + 4 + i % 5]) + f" {r}" for i in range(n)
            ]
            for threads in (1, 2):
                torch.set_num_threads(threads)
                started = time.perf_counter()
                model.encode(texts, batch_size=64, show_progress_bar=False)
                times[threads].append(time.perf_counter() - started)
        one, two = statistics.median(times[1]), statistics.median(times[2])
        out[name] = {
            "texts": n,
            "1 thread ms": one * 1000,
            "2 threads ms": two * 1000,
            "1 / 2": one / two,
        }
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path)
    parser.add_argument("--repeats", type=int, default=30)
    parser.add_argument("--load", type=int, default=os.cpu_count() or 2)
    args = parser.parse_args()
    results = {"idle": measure(args.repeats)}
    ctx = multiprocessing.get_context("spawn")
    stop = ctx.Event()
    burners = [ctx.Process(target=_burn, args=(stop,)) for _ in range(args.load)]
    for p in burners:
        p.start()
    try:
        results[f"loaded ({args.load} busy processes)"] = measure(args.repeats)
    finally:
        stop.set()
        for p in burners:
            p.join()
    results["load_avg_at_end"] = os.getloadavg()  # type: ignore[assignment]
    text = json.dumps(results, indent=1)
    print(text)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
