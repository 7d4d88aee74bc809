"""Lab probe for issue 61: graph consolidation's retrieval on the open corpus, settings varied.

Runs the plain top-k and EviReform once per question (their pools kept in ``--cache``),
then ranks with the corpus graph under each setting given, printing Recall@k, Chain@k,
non-gold documents and the pool-complete rate, per pool (plain top-``--pool-size``, and
EviReform's expanded pool)::

    python benchmarks/graph_probe.py --data ../shared/data/musique/kag_musique_dev_100.json \
      --corpus runs/g/open_corpus.json --store runs/g/triples.sqlite --split tune \
      --cache runs/g/musique-tune.json --grid damping=0.5,0.7 passage_weight=0.05,0.2
"""

from __future__ import annotations

import argparse
import itertools
import json
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

from neocorrag_core.chains.miner import EvidenceChainMiner
from neocorrag_core.eval.datasets import load_corpus, load_qa
from neocorrag_core.eval.metrics import chain_at_k, irrelevant_count, recall_at_k
from neocorrag_core.eval.retrieval import Retriever
from neocorrag_core.eval.splits import in_split
from neocorrag_core.evireform import EvidenceReformulator
from neocorrag_core.graph import CorpusGraphCache, GraphConsolidator, GraphSettings
from neocorrag_core.models.bundled import default_cache_dir
from neocorrag_core.triples.keys import text_sha256
from neocorrag_core.triples.spacy_extractor import SpacyTripleExtractor
from neocorrag_core.triples.store import CachedTripleSource, TripleStore


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--data", required=True)
    parser.add_argument("--corpus", required=True)
    parser.add_argument("--store", required=True)
    parser.add_argument("--split", default="tune")
    parser.add_argument("--limit", type=int, default=None)
    parser.add_argument("--k", type=int, default=5)
    parser.add_argument("--pool-size", type=int, default=20)
    parser.add_argument("--cache", required=True)
    parser.add_argument("--grid", nargs="*", default=[])
    parser.add_argument("--names-only", action="store_true")
    parser.add_argument("--hub-power", type=float, default=0.0)
    parser.add_argument("--fuse", type=float, default=0.0)
    parser.add_argument("--first-weight", type=float, default=1.0)
    args = parser.parse_args()

    examples = in_split(load_qa(args.data)[0], args.split)[: args.limit]
    corpus = load_corpus(args.corpus)
    by_id = {p.id: p for p in corpus}
    by_hash = {text_sha256(p): p for p in corpus}
    store = TripleStore(args.store)
    source = CachedTripleSource(store, SpacyTripleExtractor())
    miner = EvidenceChainMiner(triple_source=source)
    retriever = Retriever(
        "dense",
        embedder=miner.embedder,
        pool="corpus",
        corpus=corpus,
        vector_cache=default_cache_dir() / "eval-vectors",
    )
    cache_path = Path(args.cache)
    cache = json.loads(cache_path.read_text()) if cache_path.is_file() else {}
    reformulator = EvidenceReformulator(
        models=miner.models, triple_source=source, vectors=miner.vectors
    )
    for ex in examples:
        if ex.id in cache:
            continue
        search = retriever.search_fn(ex)
        plain = search(ex.question, args.pool_size)
        found = reformulator.retrieve(ex.question, search, args.k)
        cache[ex.id] = {
            "plain": [[p.id, p.score] for p in plain],
            "evireform_top": [r.passage.id for r in found.passages],
            "evireform_pool": [[p.id, p.score] for p in found.pool],
        }
        cache_path.write_text(json.dumps(cache))
    graphs = CorpusGraphCache(store, source.key, names_only=args.names_only)
    graph = graphs.get()
    if args.hub_power:
        from scipy import sparse

        counts = np.maximum(graph.entity_passage_counts, 1.0)
        scale = sparse.diags(counts**-args.hub_power)
        incidence = graph.passage_entities @ scale  # into a common entity: less likely
        links = scale @ graph.entity_links @ scale
        adjacency = sparse.bmat([[links, incidence.T], [incidence, None]], format="csr")
        degree = np.asarray(adjacency.sum(axis=0)).ravel()
        inverse = np.divide(1.0, degree, out=np.zeros_like(degree), where=degree > 0)
        object.__setattr__(graph, "transition", (adjacency @ sparse.diags(inverse)).tocsc())

    def fetch(hashes, graph):
        return {h: by_hash[h] for h in hashes if h in by_hash}

    def pool_of(rows):
        return [replace(by_id[pid], score=score) for pid, score in rows]

    def report(name, rows):
        arr = np.array(rows)
        print(
            f"{name:60s} R@k {100 * arr[:, 0].mean():5.1f}  C@k {100 * arr[:, 1].mean():5.1f}  "
            f"noise {arr[:, 2].mean():4.2f}  pool-complete {100 * arr[:, 3].mean():5.1f}"
        )

    k = args.k
    base = {"plain top-k": [], "evireform top-k": []}
    for ex in examples:
        c = cache[ex.id]
        plain_ids = [pid for pid, _ in c["plain"]]
        pool_ids = [pid for pid, _ in c["evireform_pool"]]
        for name, ids, pool in (
            ("plain top-k", plain_ids[:k], plain_ids[:k]),
            ("evireform top-k", c["evireform_top"], pool_ids),
        ):
            base[name].append(
                (
                    recall_at_k(ids, ex.gold_ids, k),
                    chain_at_k(ids, ex.gold_ids, k),
                    irrelevant_count(ids[:k], ex.gold_ids),
                    float(ex.gold_ids <= set(pool)),
                )
            )
    print(f"{len(examples)} questions ({args.split})")
    for name, rows in base.items():
        report(name, rows)
    grid = [g.split("=", 1) for g in args.grid]
    keys = [g[0] for g in grid]
    values = [[float(v) for v in g[1].split(",")] for g in grid]
    for combo in itertools.product(*values) if grid else [()]:
        changes = dict(zip(keys, combo, strict=True))
        if "facts" in changes:
            changes["facts"] = int(changes["facts"])
        settings = GraphSettings(**changes)
        consolidator = GraphConsolidator(
            graphs,
            triple_source=source,
            embedder=lambda: miner.embedder,
            vectors=miner.vectors,
            settings=settings,
        )
        for pool_name in ("plain", "evireform_pool"):
            rows, spent = [], 0.0
            for ex in examples:
                pool = pool_of(cache[ex.id][pool_name])
                t = time.perf_counter()
                chosen = consolidator.select(ex.question, pool, 3 * k, fetch=fetch)
                spent += time.perf_counter() - t
                ids = [p.id for p in chosen.passages]
                if pool_name == "evireform_pool" and args.fuse:
                    first = cache[ex.id]["evireform_top"]
                    fused: dict[str, float] = {}
                    for rank, pid in enumerate(first):
                        fused[pid] = fused.get(pid, 0.0) + args.first_weight / (args.fuse + rank)
                    for rank, pid in enumerate(ids):
                        fused[pid] = fused.get(pid, 0.0) + 1.0 / (args.fuse + rank)
                    ids = sorted(fused, key=lambda x: -fused[x])
                ids = ids[:k]
                union = set(ids) | {p.id for p in pool}
                rows.append(
                    (
                        recall_at_k(ids, ex.gold_ids, k),
                        chain_at_k(ids, ex.gold_ids, k),
                        irrelevant_count(ids, ex.gold_ids),
                        float(ex.gold_ids <= union),
                    )
                )
            report(f"graph[{pool_name}] {changes} {1000 * spent / len(examples):.0f}ms", rows)


if __name__ == "__main__":
    main()
