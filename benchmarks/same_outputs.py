"""Same outputs before and after a change: what the default refinement keeps, per question.

Runs the drop-in default (``EvidenceChainMiner`` with the adapters' ``DefaultTripleSource``:
spaCy triples through a triple store, the bundled MiniLM, ``MinerConfig()``) on the dense
top-k of every report-half question of the three dev files, and writes, per question, the
kept passages (id, reason, the text handed on), the chains and the fallback. Run it on two
versions of the code (or on a cold and a warm store) and compare:

    python benchmarks/same_outputs.py --store /tmp/s.sqlite --out /tmp/after-cold.json
    python benchmarks/same_outputs.py --store /tmp/s.sqlite --out /tmp/after-warm.json
    PYTHONPATH=/tmp/base python benchmarks/same_outputs.py --store /tmp/b.sqlite \\
        --out /tmp/before.json                 # /tmp/base: a worktree of the old commit
    python benchmarks/same_outputs.py --compare /tmp/before.json /tmp/after-warm.json

``--pipeline`` runs the composed pipeline instead (``EvidencePipeline``: EviReform, then the
refiner, on the same engine) over a dense search of each file's pooled passages, and writes
EviReform's queries and top-k with the refined passages.

Only the public API is used, so the script runs on older versions too. ``--compare`` exits
1 and lists the questions that differ, else prints how many questions matched.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data"
DEV_FILES = {
    "musique-dev": DATA / "musique" / "kag_musique_dev_100.json",
    "hotpotqa-dev": DATA / "hotpotqa" / "meve_hotpotqa_dev_first100.json",
    "2wiki-dev": DATA / "2wikimultihopqa" / "migres_2wiki_dev_200.jsonl",
}


def run(store: str, k: int, limit: int | None) -> dict[str, dict[str, object]]:
    from neocorrag_core import EvidenceChainMiner, MinerConfig
    from neocorrag_core.eval.datasets import load_qa
    from neocorrag_core.eval.retrieval import Retriever
    from neocorrag_core.eval.splits import in_split
    from neocorrag_core.models import resolve_embedder
    from neocorrag_core.triples import DefaultTripleSource

    embedder = resolve_embedder(None)
    miner = EvidenceChainMiner(
        MinerConfig(), embedder=embedder, triple_source=DefaultTripleSource(store=store)
    )
    retriever = Retriever("dense", embedder=embedder)
    out: dict[str, dict[str, object]] = {}
    for name, path in DEV_FILES.items():
        examples, _ = load_qa(path)
        examples = in_split(examples, "report")[:limit]
        started = time.perf_counter()
        for example in examples:
            passages = retriever.retrieve(example, k)
            result = miner.mine(example.question, passages)
            out[f"{name}/{example.id}"] = {
                "kept": [[kp.passage.id, kp.reason.value, kp.passage.text] for kp in result.kept],
                "chains": [chain.text for chain in result.chains],
                "fallback": result.fallback,
                "candidates": result.num_candidates,
            }
        print(
            f"{name}: {len(examples)} questions in {time.perf_counter() - started:.1f} s",
            file=sys.stderr,
        )
    return out


def run_pipeline(store: str, k: int, limit: int | None) -> dict[str, dict[str, object]]:
    from neocorrag_core import EvidenceChainMiner, MinerConfig
    from neocorrag_core.eval.datasets import load_qa
    from neocorrag_core.eval.retrieval import Retriever
    from neocorrag_core.eval.splits import in_split
    from neocorrag_core.models import resolve_embedder
    from neocorrag_core.pipeline import EvidencePipeline
    from neocorrag_core.triples import DefaultTripleSource

    embedder = resolve_embedder(None)
    miner = EvidenceChainMiner(
        MinerConfig(), embedder=embedder, triple_source=DefaultTripleSource(store=store)
    )
    pipeline = EvidencePipeline(miner)
    out: dict[str, dict[str, object]] = {}
    for name, path in DEV_FILES.items():
        examples, _ = load_qa(path)
        pooled = list({p.id: p for e in examples for p in e.passages}.values())
        retriever = Retriever("dense", embedder=embedder, pool="corpus", corpus=pooled)
        examples = in_split(examples, "report")[:limit]
        started = time.perf_counter()
        for example in examples:
            result = pipeline.retrieve(example.question, retriever.search_fn(example), k)
            found = result.reformulation
            out[f"{name}/{example.id}"] = {
                "queries": [q.text for q in found.queries] if found else [],
                "retrieved": [p.id for p in result.retrieved],
                "kept": [
                    [kp.passage.id, kp.reason.value, kp.passage.text]
                    for kp in (result.mining.kept if result.mining else [])
                ],
                "chains": [c.text for c in result.mining.chains] if result.mining else [],
            }
        print(
            f"{name}: {len(examples)} questions in {time.perf_counter() - started:.1f} s",
            file=sys.stderr,
        )
    return out


def compare(before: Path, after: Path) -> int:
    a = json.loads(before.read_text(encoding="utf-8"))
    b = json.loads(after.read_text(encoding="utf-8"))
    differ = [q for q in sorted(set(a) | set(b)) if a.get(q) != b.get(q)]
    for qid in differ:
        print(f"differs: {qid}")
        for field in ("queries", "retrieved", "kept", "chains", "fallback", "candidates"):
            x = (a.get(qid) or {}).get(field)
            y = (b.get(qid) or {}).get(field)
            if x != y:
                print(f"  {field}:\n    before {x}\n    after  {y}")
    print(f"{len(set(a) & set(b)) - len(differ)} of {len(set(a) | set(b))} questions identical")
    return 1 if differ else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--store", help="triple store file (a fresh path: a cold store)")
    parser.add_argument("--out", type=Path, help="where the outputs go (JSON)")
    parser.add_argument("--k", type=int, default=5, help="passages retrieved per question")
    parser.add_argument("--limit", type=int, default=None, help="questions per file")
    parser.add_argument("--compare", nargs=2, type=Path, metavar=("BEFORE", "AFTER"))
    parser.add_argument(
        "--pipeline", action="store_true", help="the composed pipeline over each file's pool"
    )
    args = parser.parse_args()
    if args.compare:
        return compare(*args.compare)
    if not args.store or not args.out:
        parser.error("--store and --out are needed to run (or --compare A B)")
    outputs = (run_pipeline if args.pipeline else run)(args.store, args.k, args.limit)
    args.out.write_text(json.dumps(outputs, indent=1, ensure_ascii=False), encoding="utf-8")
    print(f"{len(outputs)} questions written to {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
