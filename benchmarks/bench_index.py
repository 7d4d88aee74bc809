"""``neocorrag index`` throughput per engine: local, a process pool and Ray, with spaCy.

The corpus is the pooled HotpotQA and MuSiQue corpora (``../shared/data``; 2,884 unique
passages), written as JSON lines and streamed as ``neocorrag index`` streams it. Each
engine indexes it into a fresh store (passages/s, wall clock from the call to the last
write, model loading and worker start-up included), then runs again on the same store
(which extracts nothing: its seconds are the cost of checking a corpus that is already
indexed). All engines run in one process, one after the other, so their ratios compare
like with like on a shared machine.

The per-worker model splits each first run into start-up (until the first batch comes
back, less that batch's own extraction), steady extraction (passages/s per worker after
the first batch) and the driver's writes (passages/s of ``put_many``, the single writer).
Assumption, stated in the JSON: workers scale linearly (each has its own CPU; extraction
is CPU-bound and shares nothing), so N workers extract at ``N x per-worker rate`` until
the single writer caps them: ``projected = P / (startup + P / min(N x rate, write rate))``
for a corpus of P passages (Ray starts its actors once per chunk of 50,000).

``--repeat N`` runs every engine N times, the order rotated each round (local, process,
ray; then process, ray, local; ...), and reports each engine's median run and the median
of the per-round ratios to local: the machine is shared, so only ratios within one round
compare like with like.

``--extraction`` measures the spaCy extractor alone, per pipeline configuration, in this
process (``--cpu 0`` pins it to one core: passages per second per core): spaCy's own
``nlp.pipe`` (the extractor before ``FastPipeline``), each of FastPipeline's three
speed-ups alone, all three, and all three with 64 passages per call; the configurations
take turns, ``--repeat`` rounds, and every one must produce the same triples.

    python benchmarks/bench_index.py                 # every passage, ~2,900
    python benchmarks/bench_index.py --limit 200     # a smoke test
    python benchmarks/bench_index.py --repeat 3      # engines, rotated, medians
    python benchmarks/bench_index.py --extraction --cpu 0 --repeat 3
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from neocorrag_core.indexing import ENGINES

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the lab, when not installed
from neocorrag_lab.cli_args import at_least_one

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "data"
CORPORA = (
    SHARED / "hotpotqa" / "hipporag_hotpotqa_train_corpus.json",
    SHARED / "musique" / "hipporag_musique_train_corpus.json",
)
PROJECTED_WORKERS = (1, 2, 4, 8, 16, 32, 64)
PROJECTED_CORPUS = 1_000_000


class Timed:
    """Wraps an engine: when its first and last batches came back, how many passages."""

    def __init__(self, engine: Any) -> None:
        self.engine = engine
        self.name, self.key = engine.name, engine.key
        self.started = time.perf_counter()
        self.first: float | None = None
        self.first_batch = 0
        self.last = self.started
        self.passages = 0

    def describe(self) -> str:
        return str(self.engine.describe())

    def run(self, batches: Sequence[Any]) -> Iterator[tuple[Any, Any]]:
        for batch, triples in self.engine.run(batches):
            now = time.perf_counter()
            if self.first is None:
                self.first, self.first_batch = now, len(batch)
            self.last = now
            self.passages += len(batch)
            yield batch, triples

    def close(self, *, abort: bool = False) -> None:
        self.engine.close(abort=abort)


class TimedStore:
    """The store, with the driver's write time (``put_many``) added up."""

    def __init__(self, store: Any) -> None:
        self._store = store
        self.write_seconds = 0.0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    def put_many(self, items: Any, key: Any) -> int:
        started = time.perf_counter()
        try:
            return int(self._store.put_many(items, key))
        finally:
            self.write_seconds += time.perf_counter() - started


def write_corpus(path: Path, limit: int | None) -> int:
    """The pooled corpora's unique passages (at most ``limit``) as JSON lines."""
    from neocorrag_core.indexing.corpus import load_corpus

    seen: set[str] = set()
    with path.open("w", encoding="utf-8") as out:
        for corpus in CORPORA:
            for p in load_corpus(corpus).passages:
                if p.id in seen:
                    continue
                seen.add(p.id)
                out.write(json.dumps({"title": p.title, "text": p.text}) + "\n")
                if limit is not None and len(seen) >= limit:
                    return len(seen)
    return len(seen)


def run_engine(
    name: str, corpus: Path, folder: Path, workers: int, batch_size: int
) -> dict[str, Any]:
    """First run into a fresh store, then a second run on it."""
    from neocorrag_core.indexing import default_chunk_size, index_corpus, make_engine
    from neocorrag_core.indexing.corpus import open_corpus
    from neocorrag_core.triples import TripleStore

    store_path = folder / f"{name}.sqlite"
    chunk = default_chunk_size(name)
    store = TimedStore(TripleStore(store_path))
    pool = workers if name != "local" else None
    engine = Timed(make_engine(name, "spacy", workers=pool, batch_size=batch_size))
    report = index_corpus(
        open_corpus(corpus),
        store,  # type: ignore[arg-type]  # the store, with its writes timed
        engine,
        batch_size=batch_size,
        chunk_size=chunk,
        show_progress=False,
    )
    first_s = report.seconds
    assert engine.first is not None, "nothing was extracted"
    steady_s = max(engine.last - engine.first, 1e-9)
    steady_rate = (engine.passages - engine.first_batch) / steady_s
    per_worker = steady_rate / workers
    startup = max(0.0, (engine.first - engine.started) - batch_size / max(per_worker, 1e-9))
    again = make_engine(name, "spacy", workers=pool, batch_size=batch_size)
    second = index_corpus(
        open_corpus(corpus), TripleStore(store_path), again, chunk_size=chunk, show_progress=False
    )
    stats = TripleStore(store_path).stats()
    return {
        "workers": workers,
        "first_run": {
            "passages": report.passages,
            "extracted": report.extracted,
            "triples_written": report.triples_written,
            "seconds": first_s,
            "passages_per_s": report.extracted / first_s,
            "seconds_to_first_batch": engine.first - engine.started,
            "startup_s": startup,
            "steady_passages_per_s": steady_rate,
            "per_worker_passages_per_s": per_worker,
            "write_seconds": store.write_seconds,
            "driver_write_passages_per_s": report.extracted / max(store.write_seconds, 1e-9),
        },
        "second_run": {"seconds": second.seconds, "extracted": second.extracted},
        "store": stats,
    }


def model(results: dict[str, dict[str, Any]], passages: int) -> dict[str, Any]:
    """Projected passages/s for N workers (see the module docstring), per engine."""
    local = results["local"]["first_run"]
    write_rate = min(r["first_run"]["driver_write_passages_per_s"] for r in results.values())
    out: dict[str, Any] = {
        "assumption": (
            "workers scale linearly (one CPU each, CPU-bound extraction, nothing shared) "
            "until the single writer caps them; projected passages/s = P / (startup + "
            "P / min(N x per-worker rate, driver write rate)); Ray starts its actors once per "
            "chunk of 50,000 passages; driver reads (contains) are left out (the second "
            "runs measure them)"
        ),
        "driver_write_passages_per_s": write_rate,
        "per_worker_passages_per_s_local": local["per_worker_passages_per_s"],
        "projections": {},
    }
    for name in ("process", "ray"):
        if name not in results:
            continue
        run = results[name]["first_run"]
        rate, startup = run["per_worker_passages_per_s"], run["startup_s"]
        rows = {}
        for size in (passages, PROJECTED_CORPUS):
            chunks = -(-size // 50_000) if name == "ray" else 1
            rows[str(size)] = {
                str(n): size / (chunks * startup + size / min(n * rate, write_rate))
                for n in PROJECTED_WORKERS
            }
        out["projections"][name] = {
            "per_worker_passages_per_s": rate,
            "startup_s": startup,
            "passages_per_s_by_corpus_size_and_workers": rows,
        }
    return out


EXTRACTION_CONFIGS: dict[str, dict[str, Any]] = {
    # name: SpacyTripleExtractor's fast flag, FastPipeline switches, passages per call
    "spacy nlp.pipe, 16/call (before)": {"fast": False, "size": 16},
    "numpy BLAS only, 16/call": {"blas": True, "size": 16},
    "memoized attribute ruler only, 16/call": {"ruler": True, "size": 16},
    "lazy lemmatizer only, 16/call": {"lemmas": True, "size": 16},
    "FastPipeline, 16/call": {"blas": True, "ruler": True, "lemmas": True, "size": 16},
    "FastPipeline, 64/call (after)": {"blas": True, "ruler": True, "lemmas": True, "size": 64},
}


def load_passages(limit: int | None) -> list[Any]:
    """The pooled corpora's unique passages (at most ``limit``), as ``write_corpus`` orders them."""
    from neocorrag_core.indexing.corpus import load_corpus

    seen: dict[str, Any] = {}
    for corpus in CORPORA:
        for p in load_corpus(corpus).passages:
            seen.setdefault(p.id, p)
    return list(seen.values())[:limit]


def run_extraction(args: argparse.Namespace) -> dict[str, Any]:
    """Extraction only, per configuration, taking turns (see the module docstring)."""
    from neocorrag_core.triples.spacy_extractor import FastPipeline, SpacyTripleExtractor

    if args.cpu is not None:
        os.sched_setaffinity(0, {args.cpu})
    passages = load_passages(args.limit)
    words = sum(len(p.text.split()) for p in passages) / len(passages)
    extractors: dict[str, Any] = {}
    for name, config in EXTRACTION_CONFIGS.items():
        extractor = SpacyTripleExtractor(batch_size=config["size"], fast=config.get("fast", True))
        if extractor.fast:
            switches = {k: config.get(k, False) for k in ("blas", "ruler", "lemmas")}
            extractor._fast.get(lambda e=extractor, s=switches: FastPipeline(e.nlp, **s))
        extractor.extract(passages[:4])  # load outside the clock
        extractors[name] = extractor
    runs: dict[str, list[dict[str, float]]] = {name: [] for name in extractors}
    outputs: dict[str, list[Any]] = {}
    for round_ in range(args.repeat):
        for name, extractor in extractors.items():
            size = EXTRACTION_CONFIGS[name]["size"]
            wall, cpu = time.perf_counter(), time.process_time()
            found = []
            for start in range(0, len(passages), size):
                found.extend(extractor.extract(passages[start : start + size]))
            wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
            runs[name].append(
                {"passages_per_s": len(passages) / wall, "passages_per_cpu_s": len(passages) / cpu}
            )
            outputs.setdefault(name, [[t.key() for t in ts] for ts in found])
            print(name, round_, json.dumps(runs[name][-1]), file=sys.stderr, flush=True)
    before = next(iter(runs))
    table = {}
    for name, rows in runs.items():
        ratios = [
            r["passages_per_cpu_s"] / b["passages_per_cpu_s"]
            for r, b in zip(rows, runs[before], strict=True)
        ]
        table[name] = {
            "median_passages_per_s": statistics.median(r["passages_per_s"] for r in rows),
            "median_passages_per_cpu_s": statistics.median(r["passages_per_cpu_s"] for r in rows),
            "median_ratio_to_before_cpu": statistics.median(ratios),
            "runs": rows,
        }
    reference = outputs[before]
    return {
        "what": "spaCy extraction only, this process, models loaded and warmed up first",
        "passages": len(passages),
        "words_per_passage": words,
        "cpu": args.cpu,
        "rounds": args.repeat,
        "load_average": os.getloadavg(),
        "same_triples_in_every_config": all(out == reference for out in outputs.values()),
        "configs": table,
    }


def run_engines(args: argparse.Namespace, folder: Path, corpus: Path) -> dict[str, Any]:
    """Every engine ``--repeat`` times, the order rotated each round (see the docstring)."""
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in args.engines}
    ratios: dict[str, list[float]] = {name: [] for name in args.engines if name != "local"}
    for round_ in range(args.repeat):
        order = (
            args.engines[round_ % len(args.engines) :] + args.engines[: round_ % len(args.engines)]
        )
        this_round = {}
        for name in order:
            workers = 1 if name == "local" else args.workers
            sub = folder / f"round{round_}"
            sub.mkdir(exist_ok=True)
            this_round[name] = run_engine(name, corpus, sub, workers, args.batch_size)
            print(
                name, round_, json.dumps(this_round[name]["first_run"]), file=sys.stderr, flush=True
            )
        local_rate = this_round["local"]["first_run"]["passages_per_s"]
        for name in ratios:
            ratios[name].append(this_round[name]["first_run"]["passages_per_s"] / local_rate)
        for name, result in this_round.items():
            runs[name].append(result)
    median_runs = {}
    for name, rows in runs.items():
        rates = sorted(rows, key=lambda r: r["first_run"]["passages_per_s"])
        median_runs[name] = {
            **rates[len(rates) // 2],
            "all_rounds_passages_per_s": [r["first_run"]["passages_per_s"] for r in rows],
        }
    return {"engines": median_runs, "ratios": ratios}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--limit", type=at_least_one, default=None, help="first N passages (smoke test)"
    )
    parser.add_argument("--workers", type=at_least_one, default=2, help="process / ray workers")
    parser.add_argument("--batch-size", type=at_least_one, default=16)
    parser.add_argument(
        "--engines", nargs="+", choices=ENGINES, default=["local", "process", "ray"]
    )
    parser.add_argument("--out", type=Path, default=None, help="default: benchmarks/results/")
    parser.add_argument("--repeat", type=at_least_one, default=1, help="rounds (medians)")
    parser.add_argument(
        "--extraction", action="store_true", help="spaCy extraction per pipeline config"
    )
    parser.add_argument("--cpu", type=int, default=None, help="--extraction: pin to this CPU")
    args = parser.parse_args()
    if "local" not in args.engines:
        parser.error("the local engine is the reference of the ratios: keep it in --engines")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    if args.extraction:
        out_path = args.out or ROOT / "benchmarks/results/index_extraction.json"
        found = run_extraction(args)
        found["machine"] = {"cpus": os.cpu_count(), "platform": platform.platform()}
        out_path.parent.mkdir(parents=True, exist_ok=True)
        out_path.write_text(json.dumps(found, indent=2) + "\n", encoding="utf-8")
        for name, row in found["configs"].items():
            print(
                f"{name}: {row['median_passages_per_cpu_s']:.1f} passages/CPU-s, "
                f"{row['median_passages_per_s']:.1f} passages/s wall, "
                f"{row['median_ratio_to_before_cpu']:.2f}x before"
            )
        print(f"same triples in every config: {found['same_triples_in_every_config']}")
        return
    args.out = args.out or ROOT / "benchmarks/results/index.json"

    with tempfile.TemporaryDirectory(prefix="bench-index-") as tmp:
        folder = Path(tmp)
        corpus = folder / "corpus.jsonl"
        passages = write_corpus(corpus, args.limit)
        print(f"{passages} passages, engines {args.engines}", file=sys.stderr, flush=True)
        rounds = run_engines(args, folder, corpus)
        results: dict[str, dict[str, Any]] = rounds["engines"]
    reference = results["local"]
    triples = {name: r["first_run"]["triples_written"] for name, r in results.items()}
    out = {
        "corpus": [str(p.relative_to(ROOT.parent)) for p in CORPORA],
        "passages": passages,
        "limit": args.limit,
        "workers": args.workers,
        "extractor": "spacy",
        "batch_size": args.batch_size,
        "rounds": args.repeat,
        "load_average_at_end": os.getloadavg(),
        "machine": {
            "cpus": os.cpu_count(),
            "platform": platform.platform(),
            "python": platform.python_version(),
        },
        "engines": results,
        "ratios_to_local": {
            name: {
                "passages_per_s": statistics.median(rounds["ratios"][name]),
                "passages_per_s_each_round": rounds["ratios"][name],
                "second_run_seconds": r["second_run"]["seconds"]
                / max(reference["second_run"]["seconds"], 1e-9),
            }
            for name, r in results.items()
            if name != "local"
        },
        "same_triples_written": len(set(triples.values())) == 1,
        "model": model(results, passages),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=2) + "\n", encoding="utf-8")
    print(json.dumps({"ratios_to_local": out["ratios_to_local"], "model": out["model"]}, indent=2))


if __name__ == "__main__":
    main()
