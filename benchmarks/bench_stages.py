"""Per-stage latency and peak memory of the miner on MuSiQue (../shared/data).

For each question the passages are its own paragraphs ranked by dense cosine (MiniLM):
5 = the top-5, 20 = all 20, 50 = its 20 plus the 30 nearest passages of the pooled
corpus (other questions' paragraphs). Triples are HippoRAG's GPT-3.5 OpenIE output.

Stage a (query entities + embedding + graph + search) is timed on the second call for
each question, i.e. with every triple text already embedded, as in a warm service.
Decoding modes run each in its own process so peak RSS is per mode.

    python benchmarks/bench_stages.py                      # all modes, default sizes
    python benchmarks/bench_stages.py --modes none --questions 100
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data" / "musique"


def _pct(values: list[float], q: float) -> float:
    return float(np.percentile(values, q)) if values else float("nan")


def build_cases(embedder, questions: list[dict], corpus: list[dict], sizes: list[int]):
    """(question, {size: ranked passages}) for every question, retrieval done once."""
    from neocorrag_core.rendering import render_passages
    from neocorrag_core.types import Passage

    corpus_passages = [Passage(f"c{i}", d["text"], d["title"]) for i, d in enumerate(corpus)]
    corpus_vecs = embedder.embed(render_passages(corpus_passages))
    cases = []
    for q in questions:
        own = [Passage(str(p["idx"]), p["paragraph_text"], p["title"]) for p in q["paragraphs"]]
        own_texts = {p.text for p in own}
        qv = embedder.embed([q["question"]])[0]
        own_vecs = embedder.embed(render_passages(own))
        ranked = [own[i] for i in np.argsort(-(own_vecs @ qv), kind="stable")]
        by_size = {}
        for size in sizes:
            if size <= len(ranked):
                by_size[size] = ranked[:size]
                continue
            extra = []
            for i in np.argsort(-(corpus_vecs @ qv), kind="stable"):
                if corpus_passages[i].text not in own_texts:
                    extra.append(corpus_passages[i])
                if len(ranked) + len(extra) >= size:
                    break
            pool = ranked + extra
            pool_vecs = embedder.embed(render_passages(pool))
            by_size[size] = [pool[i] for i in np.argsort(-(pool_vecs @ qv), kind="stable")]
        cases.append((q["question"], by_size))
    return cases


def worker(args: argparse.Namespace) -> dict:
    """Run one decoding mode over all sizes; returns its measurements."""
    import torch

    from neocorrag_core import EvidenceChainMiner, MinerConfig
    from neocorrag_core.models import resolve_embedder
    from neocorrag_core.triples import OpenIETripleSource

    torch.set_num_threads(args.threads)
    questions = json.loads((DATA / "hipporag_musique_train_100.json").read_text())
    corpus = json.loads((DATA / "hipporag_musique_train_corpus.json").read_text())
    openie = OpenIETripleSource.from_file(DATA / "hipporag_musique_train_openie_gpt35.json")
    embedder = resolve_embedder()
    limit = args.questions if args.mode == "none" else args.lm_questions
    cases = build_cases(embedder, questions[:limit], corpus, args.sizes)
    miner = EvidenceChainMiner(
        MinerConfig(decoding=args.mode), embedder=embedder, triple_source=openie
    )
    load_s = 0.0
    if args.mode != "none":
        started = time.perf_counter()
        _ = miner.lm
        load_s = time.perf_counter() - started
    rows = []
    for size in args.sizes:
        stage_a, decode, total, prompt, generated, cands, triples = [], [], [], [], [], [], []
        fallbacks = 0
        for question, by_size in cases:
            passages = by_size[size]
            miner.mine(question, passages, decoding="none")  # warm the embedding cache
            result = miner.mine(question, passages)
            t = result.timings
            stage_a.append(sum(t.get(k, 0.0) for k in ("graph", "entities", "embed", "search")))
            decode.append(t.get("decode", 0.0))
            total.append(t["total"])
            prompt.append(result.prompt_tokens)
            generated.append(result.generated_tokens)
            cands.append(result.num_candidates)
            triples.append(sum(len(ts) for ts in openie.triples_for(passages)))
            fallbacks += result.fallback is not None
        rows.append(
            {
                "mode": args.mode,
                "passages": size,
                "questions": len(cases),
                "triples_mean": statistics.mean(triples),
                "candidates_mean": statistics.mean(cands),
                "fallbacks": fallbacks,
                "stage_a_ms_p50": 1000 * _pct(stage_a, 50),
                "stage_a_ms_p90": 1000 * _pct(stage_a, 90),
                "stage_a_ms_max": 1000 * max(stage_a),
                "decode_s_mean": statistics.mean(decode),
                "decode_s_p90": _pct(decode, 90),
                "total_s_mean": statistics.mean(total),
                "prompt_tokens_mean": statistics.mean(prompt),
                "generated_tokens_mean": statistics.mean(generated),
            }
        )
    peak_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {"mode": args.mode, "lm_load_s": load_s, "peak_rss_mib": peak_mib, "rows": rows}


def to_markdown(results: list[dict]) -> str:
    """One table row per (mode, passages)."""
    lines = [
        "| decoding | passages | questions | triples | candidates | stage a p50 / p90 / max (ms) "
        "| decode mean / p90 (s) | LM tokens prompt / generated | peak RSS (MiB) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for res in results:
        for r in res["rows"]:
            lines.append(
                f"| {r['mode']} | {r['passages']} | {r['questions']} | {r['triples_mean']:.0f} "
                f"| {r['candidates_mean']:.1f} | {r['stage_a_ms_p50']:.1f} / "
                f"{r['stage_a_ms_p90']:.1f} / {r['stage_a_ms_max']:.1f} "
                f"| {r['decode_s_mean']:.2f} / {r['decode_s_p90']:.2f} "
                f"| {r['prompt_tokens_mean']:.0f} / {r['generated_tokens_mean']:.0f} "
                f"| {res['peak_rss_mib']:.0f} |"
            )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description="Per-stage latency and peak memory.")
    parser.add_argument(
        "--modes", nargs="+", default=["none", "beam", "rank"], choices=["none", "beam", "rank"]
    )
    parser.add_argument("--sizes", nargs="+", type=int, default=[5, 20, 50])
    parser.add_argument("--questions", type=int, default=100, help="questions for mode none")
    parser.add_argument("--lm-questions", type=int, default=10, help="questions for beam/rank")
    parser.add_argument("--threads", type=int, default=2, help="torch threads")
    parser.add_argument("--out", type=Path, default=ROOT / "bench_out" / "stages.json")
    parser.add_argument("--mode", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.mode:  # worker process
        print(json.dumps(worker(args)))
        return
    results = []
    for mode in args.modes:
        cmd = [
            sys.executable,
            __file__,
            "--mode",
            mode,
            "--sizes",
            *map(str, args.sizes),
            "--questions",
            str(args.questions),
            "--lm-questions",
            str(args.lm_questions),
            "--threads",
            str(args.threads),
        ]
        print(f"running decoding={mode} ...", file=sys.stderr, flush=True)
        env = dict(os.environ, HF_HUB_OFFLINE="1")
        done = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
        if done.returncode != 0:
            sys.exit(f"worker for {mode} failed:\n{done.stderr[-3000:]}")
        res = json.loads(done.stdout.strip().splitlines()[-1])
        print(
            f"  LM load {res['lm_load_s']:.1f} s, peak RSS {res['peak_rss_mib']:.0f} MiB",
            file=sys.stderr,
        )
        results.append(res)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=1))
    print(to_markdown(results))


if __name__ == "__main__":
    main()
