"""Triple store at scale (issue 62, item 4): build time, file size, query-time lookups and
least-recently-used eviction of a synthetic store with the dev sets' statistics.

Each size gets a new store, filled through the product's own indexing loop
(:func:`~neocorrag_core.indexing.driver.index_corpus` with the local engine, ``--batch-size``
passages per transaction as ``neocorrag index`` writes them): per batch
``TripleStore.put_many``, then ``embed_graph_texts``, whose embedder reads the store's
vector cache (``get_vectors``) and writes what it lacks (``put_vectors``, which evicts the
least recently used vectors past the byte bound). The script writes no SQL of its own: the
numbers are the product's.

**What is synthetic.** The passages and their triples come from a seeded generator (passage
``i`` is always the same, so a query can rebuild any of them), streamed: one chunk of the
driver's at a time is held. The rates are those of the open corpus's spaCy store
(``runs/g/triples.sqlite``, 6,999 passages, measured with the product's
``graph_texts``/``fact_texts_of``): 11.2 triples per passage (negative binomial, about 1 %
without triples), 13.5 names per passage used over 22.5 name slots, 3.7 sentences (facts)
of about 120 characters, 28.4 texts to embed per passage (each passage's own, unique) and
23.6 once shared names are counted once. A name is the passage's own with probability 0.52
(about the share of the corpus's name mentions that are single-passage names), else drawn
from a Zipf law (a = 1.3) over a vocabulary of 8.6 names per passage, as in
``benchmarks/bench_graph.py``. **The vectors are random** (normal, L2-normalised, 384 wide,
stored as float16 like MiniLM's): no model runs; the encoder's cost is measured by
``benchmarks/bench_embed_backend.py``. The time spent generating passages and random vectors
is reported apart from the store's.

Per size it reports:

* **build**: wall seconds of the indexing run; of it the seconds inside the store's calls
  (``contains``, ``put_many``, ``get_vectors``, ``put_vectors``), and the product's seconds
  (all but the generator and the encoder stub: the store, cleaning, text keys, the
  embedder's bookkeeping); passages per second of store time in the first and the last
  tenth of the batches (how the writes slow down as the b-trees grow);
* **file**: bytes of the SQLite file, ``-wal`` and ``-shm`` after the store is closed (the
  last connection checkpoints the WAL), bytes per passage, vectors written and kept;
* **lookups**: median and p95 ms of what a query over k stored passages reads, for k = 5
  and k = 50 random passages over ``--calls`` calls, from a fresh ``TripleStore`` on the
  file and a fresh embedder each call (its in-memory cache empty, so every vector comes
  from the store): the triples (``triples_per_passage`` over a ``CachedTripleSource``, as
  the miner reads them) and the vectors of their graph texts and of their facts
  (``TextEmbedder.missing`` with the store as cache, what the miner and EviReform read).
  SQLite's page cache starts empty; the OS file cache is warm from the build (not dropped);
* **eviction** under the byte bound (``--max-vector-bytes``, default the product's:
  ``NEOCORRAG_MAX_VECTOR_BYTES`` or 4 GiB): how often it ran and what it cost (the store's
  ``_evict_vectors`` is timed, not changed), store seconds per batch before and after the
  bound was first reached, and the texts a k = 5 query would have to embed again on the
  oldest tenth of the passages against the newest tenth.

Run (the 1M store reaches the 4 GiB bound; give ``--dir`` a disk with ~10 GB free)::

    python benchmarks/bench_store_scale.py --passages 10000 100000 1000000 \\
        --out benchmarks/results/store_scale.json
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
from neocorrag_lab.cli_args import at_least_one, at_least_zero

from neocorrag_core.indexing.driver import index_corpus
from neocorrag_core.indexing.local import LocalEngine
from neocorrag_core.indexing.stream import DEFAULT_CHUNK_SIZE
from neocorrag_core.models.embedder import TextEmbedder
from neocorrag_core.triples import store_vectors
from neocorrag_core.triples.base import triples_per_passage
from neocorrag_core.triples.store import CachedTripleSource, TripleStore
from neocorrag_core.triples.vectors import fact_texts_of, graph_texts
from neocorrag_core.types import Passage, Triple

TRIPLES_PER_PASSAGE = 11.2
TRIPLE_SPREAD = 3.0
"""Shape of the negative binomial of triples per passage: deciles 3..21 (the corpus: 4..21),
about 1 % of passages without triples (the corpus: 68 of 6,999)."""
NAMES_PER_SLOT = 0.66
"""Names drawn per subject/object slot; after two draws of one shared name collapse, a
passage uses 13.4 names over 22.7 slots (the corpus: 13.5 over 22.5)."""
OWN_SHARE = 0.52
"""A name is the passage's own (named nowhere else) with this probability; with the rates
above, 28.5 texts per passage and 23.5 unique per passage at 7,000 passages (the corpus:
28.4 and 23.6)."""
ZIPF_A = 1.3
ENTITIES_PER_PASSAGE = 8.6
"""The shared names' vocabulary grows with the corpus, as in ``bench_graph.py``."""
FACTS_PER_PASSAGE = 3.74
SENTENCE_CHARS = 120
DIM = 384
IDENTITY = "bench:random-384"
LOOKUP_KS = (5, 50)

RELATIONS = (
    "born in", "directed", "member of", "located in", "won", "married", "played for",
    "founded", "released", "wrote", "produced", "starred in", "is a", "part of", "died in",
    "succeeded", "joined", "owned by", "named after", "based in", "led", "signed with",
    "composed", "studied at", "works for", "capital of", "sister of", "acquired", "hosted",
    "built",
)  # fmt: skip
WORDS = (
    "the", "and", "later", "during", "after", "with", "former", "national", "second", "first",
    "series", "season", "award", "album", "film", "river", "club", "league", "county", "state",
    "company", "station", "church", "school", "army", "party", "team", "record", "studio",
    "several", "years", "novel", "opera", "museum", "bridge", "village", "district", "tour",
    "critics", "release", "version", "early", "major", "original", "final", "local", "public",
    "through", "under", "between",
)  # fmt: skip


# -- the synthetic corpus --------------------------------------------------------------------


def synthetic_passage(index: int, passages: int, seed: int = 0) -> tuple[Passage, list[Triple]]:
    """Passage ``index`` of a ``passages``-passage synthetic corpus and its triples: the same
    for the same arguments, so a query can rebuild any stored passage."""
    rng = np.random.default_rng((seed, index))
    count = int(
        rng.negative_binomial(TRIPLE_SPREAD, TRIPLE_SPREAD / (TRIPLE_SPREAD + TRIPLES_PER_PASSAGE))
    )
    names = _names(rng, index, count, passages)
    pid = f"p{index}"
    triples = _triples(rng, names, count, pid)
    sentences = 1 + int(rng.poisson(FACTS_PER_PASSAGE - 1))
    text = " ".join(_sentence(rng, names) for _ in range(sentences))
    return Passage(id=pid, text=text, title=f"{names[0]} ({index})"), triples


def _names(rng: np.random.Generator, index: int, count: int, passages: int) -> list[str]:
    want = max(2, min(2 * count, round(NAMES_PER_SLOT * 2 * count)))
    own = rng.random(want) < OWN_SHARE
    vocabulary = max(1, int(passages * ENTITIES_PER_PASSAGE))
    shared = rng.zipf(ZIPF_A, size=want) % vocabulary
    chosen = (
        f"Local {index}-{j}" if own[j] else f"Entity {shared[j]} {WORDS[shared[j] % len(WORDS)]}"
        for j in range(want)
    )
    return list(dict.fromkeys(chosen))  # two draws of one shared name are one name


def _triples(rng: np.random.Generator, names: list[str], count: int, pid: str) -> list[Triple]:
    """``count`` triples whose subjects and objects use every name at least once."""
    if count == 0:
        return []
    slots = np.concatenate([np.arange(len(names)), rng.integers(0, len(names), 2 * count)])
    slots = slots[: 2 * count]
    rng.shuffle(slots)
    relations = rng.integers(0, len(RELATIONS), count)
    out = []
    for i in range(count):
        s, o = int(slots[2 * i]), int(slots[2 * i + 1])
        if s == o:
            o = (o + 1) % len(names)
        out.append(Triple(names[s], RELATIONS[relations[i]], names[o], (pid,)))
    return out


def _sentence(rng: np.random.Generator, names: list[str]) -> str:
    """One fact sentence of about :data:`SENTENCE_CHARS` characters, ending in a full stop."""
    a, b = (names[int(i)] for i in rng.integers(0, len(names), 2))
    target = int(np.clip(rng.normal(SENTENCE_CHARS, 40), 40, 260))
    parts = [
        a,
        RELATIONS[int(rng.integers(len(RELATIONS)))],
        b,
        "in",
        str(rng.integers(1800, 2024)),
    ]
    size = sum(len(p) + 1 for p in parts)
    for w in rng.integers(0, len(WORDS), 60):
        if size >= target:
            break
        parts.append(WORDS[w])
        size += len(WORDS[w]) + 1
    return " ".join(parts) + "."


class ReplayExtractor:
    """Hands the driver the synthetic triples of the passages the stream generated (it holds
    one driver chunk of them at a time); a query never gets here (every passage is stored)."""

    extractor_id = "bench:synthetic"
    version = "1"

    def __init__(self, batch_size: int) -> None:
        self.batch_size = batch_size
        self.pending: dict[str, list[Triple]] = {}

    def extract(self, passages: Sequence[Passage]) -> list[list[Triple]]:
        return [self.pending.pop(p.id) for p in passages]


class RandomEncoder:
    """The encoder stub: random unit vectors, :data:`DIM` wide; its time is kept apart."""

    def __init__(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)
        self.seconds = 0.0

    def __call__(self, texts: list[str]) -> np.ndarray:
        started = time.perf_counter()
        vectors = self.rng.standard_normal((len(texts), DIM), dtype=np.float32)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        self.seconds += time.perf_counter() - started
        return vectors


def never_encode(texts: list[str]) -> np.ndarray:
    raise AssertionError(f"a lookup must not encode; asked for {len(texts)} texts")


# -- instrumenting the store (timers around its calls; its behaviour is unchanged) ------------


class StoreTimer:
    """Times the store calls of an indexing run, per batch (a batch starts at ``put_many``)."""

    CALLS = ("contains", "put_many", "get_vectors", "put_vectors")

    def __init__(self, store: TripleStore, total: int) -> None:
        self.seconds = dict.fromkeys(self.CALLS, 0.0)
        self.batches: list[float] = []  # store seconds per batch
        self.batch_passages: list[int] = []
        self.evictions: list[dict[str, float]] = []  # batch, seconds, bytes freed
        self.total = total
        self.started = time.perf_counter()
        for name in self.CALLS:
            setattr(store, name, self._timed(name, getattr(store, name)))

    def _timed(self, name: str, call: Callable[..., Any]) -> Callable[..., Any]:
        def timed(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return call(*args, **kwargs)
            finally:
                spent = time.perf_counter() - started
                self.seconds[name] += spent
                if name == "put_many":
                    self.batches.append(0.0)
                    self.batch_passages.append(len(args[0]))
                    self._progress()
                if self.batches and name != "contains":
                    self.batches[-1] += spent

        return timed

    def _progress(self) -> None:
        step = max(1, self.total // 10)
        done = sum(self.batch_passages)
        if done // step > (done - self.batch_passages[-1]) // step and done < self.total:
            spent = time.perf_counter() - self.started
            print(f"  {done:,}/{self.total:,} passages written, {spent:.0f} s", file=sys.stderr)

    def rate(self, part: slice) -> float:
        """Passages per second of store time over the batches ``part``."""
        seconds = sum(self.batches[part])
        return sum(self.batch_passages[part]) / seconds if seconds else 0.0

    @contextmanager
    def evictions_timed(self) -> Iterator[None]:
        real = store_vectors._evict_vectors

        def timed(conn: Any, at_least: int) -> int:
            started = time.perf_counter()
            freed = real(conn, at_least)
            self.evictions.append(
                {
                    "batch": len(self.batches) - 1,
                    "seconds": time.perf_counter() - started,
                    "bytes_freed": freed,
                }
            )
            return freed

        store_vectors._evict_vectors = timed
        try:
            yield
        finally:
            store_vectors._evict_vectors = real


# -- one size --------------------------------------------------------------------------------


def store_files(path: Path) -> dict[str, int]:
    """Bytes of the store's file and its ``-wal`` / ``-shm`` (0 for one that is absent)."""
    out = {}
    for suffix in ("", "-wal", "-shm"):
        target = Path(f"{path}{suffix}")
        out[suffix.lstrip("-") or "main"] = target.stat().st_size if target.exists() else 0
    return out


def build(path: Path, n: int, args: argparse.Namespace) -> dict[str, Any]:
    """Index ``n`` synthetic passages into a new store at ``path``; what it cost."""
    store = TripleStore(path, max_vector_bytes=args.max_vector_bytes)
    extractor = ReplayExtractor(args.batch_size)
    encoder = RandomEncoder(args.seed)
    embedder = TextEmbedder(encoder, name="random-384", identity=IDENTITY)
    timer = StoreTimer(store, n)
    generated = {"seconds": 0.0, "texts": 0}
    started = time.perf_counter()

    def stream() -> Iterator[Passage]:
        for i in range(n):
            t = time.perf_counter()
            passage, triples = synthetic_passage(i, n, args.seed)
            extractor.pending[passage.id] = triples
            # the texts of this passage alone (the open corpus: 28.4)
            own = set(graph_texts([triples])) | set(fact_texts_of([passage], [triples]))
            generated["texts"] += len(own)
            generated["seconds"] += time.perf_counter() - t
            yield passage

    with timer.evictions_timed():
        report = index_corpus(
            stream(),
            store,
            LocalEngine(extractor),
            batch_size=args.batch_size,
            chunk_size=args.chunk_size,
            show_progress=False,
            embedder=embedder,
        )
    wall = time.perf_counter() - started
    info = embedder.cache_info()
    kept = store.vector_summary().get(IDENTITY, {"vectors": 0, "bytes": 0})
    stats = store.stats().get(f"{extractor.extractor_id}@{extractor.version}", {})
    bound = store.max_vector_bytes
    store.close()  # the last connection checkpoints the WAL into the file
    files = store_files(path)
    total_bytes = sum(files.values())
    tenth = max(1, len(timer.batches) // 10)
    return {
        "build": {
            "seconds": round(wall, 2),
            "store_seconds": round(sum(timer.seconds.values()), 2),
            "store_seconds_by_call": {k: round(v, 2) for k, v in timer.seconds.items()},
            "generate_seconds": round(generated["seconds"], 2),
            "encoder_stub_seconds": round(encoder.seconds, 2),
            "product_seconds": round(wall - generated["seconds"] - encoder.seconds, 2),
            "store_passages_per_second_first_tenth": round(timer.rate(slice(0, tenth)), 1),
            "store_passages_per_second_last_tenth": round(timer.rate(slice(-tenth, None)), 1),
            "store_passages_per_second_by_tenth": [
                round(timer.rate(slice(i * tenth, (i + 1) * tenth if i < 9 else None)), 1)
                for i in range(10)
            ],
            "batch_size": args.batch_size,
            "batches": len(timer.batches),
            "passages": report.passages,
            "extracted": report.extracted,
            "triples_written": report.triples_written,
        },
        "corpus": {
            "passages_stored": stats.get("passages", 0),
            "triples_stored": stats.get("triples", 0),
            "triples_per_passage": round(stats.get("triples", 0) / max(1, n), 2),
            "texts_per_passage": round(generated["texts"] / max(1, n), 2),
            "texts_per_passage_batch_deduplicated": round((info.hits + info.misses) / max(1, n), 2),
            "unique_vectors_per_passage": round(info.encoded / max(1, n), 2),
        },
        "file": {
            "bytes": files,
            "total_bytes": total_bytes,
            "bytes_per_passage": round(total_bytes / max(1, n)),
            "vectors_written": info.encoded,
            "vectors_kept": kept["vectors"],
            "vector_blob_bytes_kept": kept["bytes"],
        },
        "eviction": eviction(timer, bound),
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
    }


def eviction(timer: StoreTimer, bound: int) -> dict[str, Any]:
    """How often the bound made the store evict, what that cost, and the store's seconds per
    batch before the first eviction and after it."""
    events = timer.evictions
    first = int(events[0]["batch"]) if events else len(timer.batches)
    before, after = timer.batches[:first], timer.batches[first:]
    # The batches that evicted are the cost of eviction; "after" shows the rest of them.
    evicting = {int(e["batch"]) for e in events}
    after_quiet = [s for i, s in enumerate(after, start=first) if i not in evicting]
    return {
        "max_vector_bytes": bound,
        "evictions": len(events),
        "eviction_seconds": round(sum(e["seconds"] for e in events), 2),
        "eviction_seconds_max": round(max((e["seconds"] for e in events), default=0.0), 2),
        "vectors_freed_est": int(
            sum(e["bytes_freed"] for e in events) // (2 * DIM + store_vectors.VECTOR_ROW_OVERHEAD)
        ),
        "first_eviction_batch": first if events else None,
        "batch_ms_before_bound": summary_ms(before),
        "batch_ms_after_bound": summary_ms(after),
        "batch_ms_after_bound_without_evicting_batches": summary_ms(after_quiet),
    }


def summary_ms(seconds: Sequence[float]) -> dict[str, float] | None:
    """Median, p95 and max of ``seconds``, in ms (``None`` for none)."""
    if not seconds:
        return None
    ms = np.asarray(seconds) * 1000
    return {
        "n": len(ms),
        "median": round(float(np.median(ms)), 2),
        "p95": round(float(np.percentile(ms, 95)), 2),
        "max": round(float(ms.max()), 2),
    }


def lookups(
    path: Path, n: int, k: int, indices: Sequence[Sequence[int]], args: argparse.Namespace
) -> dict[str, Any]:
    """What a query over the passages ``indices[c]`` reads from the store, per call ``c``: its
    triples, then the vectors of its graph texts and of its facts (fresh embedder: its
    in-memory cache is empty, so every vector is read from the store)."""
    calls = [[synthetic_passage(int(i), n, args.seed)[0] for i in call] for call in indices]
    store = TripleStore(path, max_vector_bytes=args.max_vector_bytes)  # a fresh object
    source = CachedTripleSource(store, ReplayExtractor(args.batch_size))  # type: ignore[arg-type]
    triples_s, vectors_s, total_s, texts, missing = [], [], [], [], []
    try:
        for passages in calls:
            embedder = TextEmbedder(never_encode, name="lookup", identity=IDENTITY)
            t0 = time.perf_counter()
            per_passage = triples_per_passage(source, passages)
            t1 = time.perf_counter()
            graph = graph_texts(per_passage)
            facts = fact_texts_of(passages, per_passage)
            lacking = embedder.missing(graph, cache=store) | embedder.missing(facts, cache=store)
            t2 = time.perf_counter()
            triples_s.append(t1 - t0)
            vectors_s.append(t2 - t1)
            total_s.append(t2 - t0)
            texts.append(len(set(graph) | set(facts)))
            missing.append(len(lacking))
    finally:
        store.close()
    assert source.stats.extracted == 0, "every passage a lookup reads must be stored"
    return {
        "k": k,
        "calls": len(calls),
        "total_ms": summary_ms(total_s),
        "triples_ms": summary_ms(triples_s),
        "vectors_ms": summary_ms(vectors_s),
        "texts_per_call": round(statistics.fmean(texts), 1),
        "missing_per_call": round(statistics.fmean(missing), 2),
        "missing_share": round(sum(missing) / max(1, sum(texts)), 4),
    }


def measure(n: int, args: argparse.Namespace, folder: Path) -> dict[str, Any]:
    """Build, measure and (unless ``--keep``) delete the store of ``n`` passages."""
    path = folder / f"store_scale_{n}.sqlite"
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    print(f"{n:,} passages -> {path}", file=sys.stderr)
    result: dict[str, Any] = {"passages": n, "path": str(path), **build(path, n, args)}
    rng = np.random.default_rng(args.seed + 1)
    result["lookups"] = [
        lookups(
            path,
            n,
            k,
            [rng.choice(n, size=min(k, n), replace=False) for _ in range(args.calls)],
            args,
        )
        for k in LOOKUP_KS
    ]
    tenth = max(5, n // 10)
    oldest = [
        rng.choice(min(tenth, n), size=min(5, n), replace=False) for _ in range(args.lru_calls)
    ]
    newest = [
        n - 1 - rng.choice(min(tenth, n), size=min(5, n), replace=False)
        for _ in range(args.lru_calls)
    ]
    result["eviction"]["oldest_tenth_k5"] = lookups(path, n, 5, oldest, args)
    result["eviction"]["newest_tenth_k5"] = lookups(path, n, 5, newest, args)
    if not args.keep:
        for suffix in ("", "-wal", "-shm"):
            Path(f"{path}{suffix}").unlink(missing_ok=True)
    return result


def table(result: dict[str, Any]) -> str:
    """The printed summary of one size."""
    b, f, c, e = result["build"], result["file"], result["corpus"], result["eviction"]
    lines = [
        f"== {result['passages']:,} passages "
        f"({c['triples_per_passage']} triples, {c['texts_per_passage']} texts, "
        f"{c['unique_vectors_per_passage']} unique vectors per passage)",
        f"build      {b['seconds']:9.1f} s   store {b['store_seconds']:.1f} s, generator "
        f"{b['generate_seconds']:.1f} s, encoder stub {b['encoder_stub_seconds']:.1f} s; "
        f"product (all but generator and stub) {b['product_seconds']:.1f} s; store "
        f"{b['store_passages_per_second_first_tenth']:.0f} -> "
        f"{b['store_passages_per_second_last_tenth']:.0f} passages/s (first -> last tenth)",
        f"file       {f['total_bytes'] / 2**20:9.1f} MiB  {f['bytes_per_passage']:,} B/passage; "
        f"vectors kept {f['vectors_kept']:,} of {f['vectors_written']:,} written",
    ]
    for look in result["lookups"]:
        t = look["total_ms"]
        lines.append(
            f"lookup k={look['k']:<3}  median {t['median']:7.2f} ms  p95 {t['p95']:7.2f} ms  "
            f"(triples {look['triples_ms']['median']:.2f}, vectors "
            f"{look['vectors_ms']['median']:.2f} ms median; {look['texts_per_call']:.0f} texts, "
            f"{look['missing_per_call']} missing)"
        )
    before, after = e["batch_ms_before_bound"], e["batch_ms_after_bound"]
    lines.append(
        f"eviction   bound {e['max_vector_bytes'] / 2**20:,.0f} MiB: {e['evictions']} evictions, "
        f"{e['eviction_seconds']:.1f} s (max {e['eviction_seconds_max']:.1f} s); batch ms median "
        f"{before['median'] if before else '-'} before / "
        f"{after['median'] if after else '-'} after; "
        f"k=5 missing: oldest tenth {e['oldest_tenth_k5']['missing_per_call']} / newest "
        f"{e['newest_tenth_k5']['missing_per_call']} of "
        f"{e['oldest_tenth_k5']['texts_per_call']:.0f} texts"
    )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--passages", type=at_least_one, nargs="+", default=[10_000])
    parser.add_argument("--out", type=Path, help="JSON results (written after each size)")
    parser.add_argument("--dir", type=Path, help="where the stores go (default: a temp folder)")
    parser.add_argument("--keep", action="store_true", help="keep each store after measuring")
    parser.add_argument(
        "--max-vector-bytes",
        type=at_least_zero,
        help="the store's vector bound (default: NEOCORRAG_MAX_VECTOR_BYTES, else 4 GiB)",
    )
    parser.add_argument("--batch-size", type=at_least_one, default=16, help="as neocorrag index")
    parser.add_argument("--chunk-size", type=at_least_one, default=DEFAULT_CHUNK_SIZE)
    parser.add_argument("--calls", type=at_least_one, default=200, help="lookups per k")
    parser.add_argument("--lru-calls", type=at_least_one, default=50)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    out: dict[str, Any] = {
        "command": "python benchmarks/bench_store_scale.py "
        + " ".join(sys.argv[1:] if argv is None else argv),
        "vectors": f"random unit vectors, {DIM} wide, stored float16 (no model ran)",
        "lookups": "fresh TripleStore object and embedder per size/call; OS file cache warm",
        "sizes": [],
    }
    folder = args.dir or Path(tempfile.mkdtemp(prefix="store_scale_"))
    folder.mkdir(parents=True, exist_ok=True)
    try:
        for n in args.passages:
            result = measure(n, args, folder)
            out["sizes"].append(result)
            print(table(result), flush=True)
            if args.out:
                args.out.parent.mkdir(parents=True, exist_ok=True)
                args.out.write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")
    finally:
        if args.dir is None and not args.keep:
            shutil.rmtree(folder, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
