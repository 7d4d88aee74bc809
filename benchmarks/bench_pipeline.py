"""What the composed pipeline costs per question on a warm store, next to the plain search.

The open corpus (every passage of ../shared/data, as ``neocorrag eval --pool corpus``) in the
persistent Chroma collection that ``neocorrag eval --vector-store DIR`` built; the
report-half questions of the three dev files. A first pass fills the triple store (triples
and their vectors: what the ingestion would have written); the timed passes then alternate,
question by question, the plain top-5 search and ``EvidencePipeline.retrieve`` (EviReform,
then the refiner) on the same search, so machine noise hits both alike; before each call the
embedder's in-memory cache is emptied, so every question is new to it (the plain search
embeds the question; the pipeline its question and residual queries). The pipeline's own
work is its wall time minus the time spent in the searches it calls.

    python benchmarks/bench_pipeline.py --corpus /tmp/open_corpus.json \\
        --vector-store runs/chroma-open --store /tmp/bench-pipeline.sqlite --limit 20
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

from neocorrag_core.chains.miner import EvidenceChainMiner
from neocorrag_core.eval.datasets import load_corpus, load_qa
from neocorrag_core.eval.retrieval import Retriever
from neocorrag_core.eval.splits import in_split
from neocorrag_core.evireform import EvidenceReformulator
from neocorrag_core.models import resolve_embedder
from neocorrag_core.pipeline import EvidencePipeline
from neocorrag_core.triples import DefaultTripleSource
from neocorrag_core.types import Passage

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
DEV_FILES = (
    DATA / "musique" / "kag_musique_dev_100.json",
    DATA / "hotpotqa" / "meve_hotpotqa_dev_first100.json",
    DATA / "2wikimultihopqa" / "migres_2wiki_dev_200.jsonl",
)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", required=True)
    parser.add_argument("--vector-store", required=True)
    parser.add_argument("--store", required=True, help="triple store file (filled by pass 1)")
    parser.add_argument("--limit", type=int, default=20, help="questions per dev file")
    parser.add_argument("--repeats", type=int, default=2, help="timed passes")
    parser.add_argument("-k", type=int, default=5)
    args = parser.parse_args()

    embedder = resolve_embedder(None)
    corpus = load_corpus(args.corpus)
    retriever = Retriever(
        "dense",
        embedder=embedder,
        pool="corpus",
        corpus=corpus,
        vector_store=Path(args.vector_store),
    )
    miner = EvidenceChainMiner(
        embedder=embedder, triple_source=DefaultTripleSource(store=args.store)
    )
    reformulator = EvidenceReformulator(
        models=miner.models, triple_source=miner.triple_source, vectors=miner.vectors
    )
    pipeline = EvidencePipeline(miner, reformulator)
    examples = [e for path in DEV_FILES for e in in_split(load_qa(path)[0], "report")[: args.limit]]

    searched = [0.0]
    base = retriever.search_fn(examples[0])  # the pooled search: the example only names it

    def search(query: str, k: int) -> list[Passage]:  # the eval's Chroma search, timed
        started = time.perf_counter()
        try:
            return base(query, k)
        finally:
            searched[0] += time.perf_counter() - started

    print(f"{len(examples)} questions; pass 1 fills the store ...", flush=True)
    for example in examples:
        pipeline.retrieve(example.question, search, args.k)

    plain: list[float] = []
    own: list[float] = []
    total: list[float] = []
    for _ in range(args.repeats):
        for example in examples:
            # Each call sees its question for the first time, as in production: the
            # embedder's in-memory cache is emptied (the store's vectors stay), so the plain
            # search embeds the question and the pipeline its question and residual queries.
            embedder.clear_cache()
            started = time.perf_counter()
            search(example.question, args.k)
            plain.append(time.perf_counter() - started)
            searched[0] = 0.0
            embedder.clear_cache()
            started = time.perf_counter()
            pipeline.retrieve(example.question, search, args.k)
            elapsed = time.perf_counter() - started
            total.append(elapsed)
            own.append(elapsed - searched[0])
    med = statistics.median
    print(f"plain search      median {med(plain) * 1000:7.1f} ms")
    print(f"pipeline total    median {med(total) * 1000:7.1f} ms  ({med(total) / med(plain):.1f}x)")
    print(f"pipeline own work median {med(own) * 1000:7.1f} ms  ({med(own) / med(plain):.1f}x)")
    ratios = [o / p for o, p in zip(own, plain, strict=True)]
    print(f"own / plain per question: median {med(ratios):.1f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
