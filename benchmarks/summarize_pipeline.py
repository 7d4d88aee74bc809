"""The open-corpus pipeline benchmark's table (issue 54): per data set and pooled over the
report halves, each method's Recall@5, Chain@5, non-gold documents to the reader, reader
tokens and F1 (when a reader ran), the paired bootstrap interval of each against plain
top-5 (``none``), and the median seconds of its own work next to the retrieval's.

    python benchmarks/summarize_pipeline.py runs/p54c/musique-dev-report \\
        runs/p54c/hotpotqa-dev-report runs/p54c/2wiki-dev-report [--metric f1 ...]

Each argument is an ``neocorrag eval`` out folder (its ``results.json``). Methods are paired
with ``none`` question by question within a run; pooled rows concatenate the pairs.
"""

from __future__ import annotations

import argparse
import json
import statistics
from collections.abc import Sequence
from pathlib import Path

from neocorrag_core.eval.metrics import paired_bootstrap

RATES = ("recall", "chain", "f1", "em", "hit")


def load(run: str) -> dict[str, dict[str, dict]]:
    results = json.loads((Path(run) / "results.json").read_text(encoding="utf-8"))
    return {m: {r["qid"]: r for r in rows} for m, rows in results["per_question"].items()}


def own_seconds(record: dict) -> float:
    """The method's own work: its time minus the searches it sent (EviReform's residual
    searches are retrieval, counted apart)."""
    timings = record.get("timings", {})
    method = float(timings.get("method", 0.0))
    searched = sum(v for k, v in timings.items() if k.endswith(".search") and "evireform" in k)
    return max(method - searched, 0.0)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+")
    parser.add_argument("--metric", action="append", default=None)
    args = parser.parse_args(argv)
    metrics = args.metric or ["recall", "chain", "aid"]
    runs = {Path(r).name: load(r) for r in args.runs}
    methods = [m for m in next(iter(runs.values())) if m != "none"]
    pooled: dict[str, dict[str, list[tuple[float, float]]]] = {}
    pooled_tokens: dict[str, list[float]] = {}
    print(
        "| data | method | " + " | ".join(metrics) + " | reader tokens | own s (median) "
        "| retrieve s (median) |"
    )
    print("|---|---|" + "---:|" * (len(metrics) + 3))
    for name, run in runs.items():
        base = run["none"]
        for method in ["none", *methods]:
            rows = run.get(method, {})
            qids = [q for q in base if q in rows]
            if not qids:  # the method did not run on this data set
                continue
            cells = []
            for metric in metrics:
                values = [float(rows[q][metric] or 0.0) for q in qids]
                baseline = [float(base[q][metric] or 0.0) for q in qids]
                pooled.setdefault(method, {}).setdefault(metric, []).extend(
                    zip(values, baseline, strict=True)
                )
                cells.append(_cell(metric, values, baseline, method))
            tokens = [float(rows[q].get("reader_prompt_tokens") or 0) for q in qids]
            pooled_tokens.setdefault(method, []).extend(tokens)
            own = statistics.median(own_seconds(rows[q]) for q in qids)
            retrieve = statistics.median(float(rows[q]["timings"].get("retrieve", 0)) for q in qids)
            print(
                f"| {name} ({len(qids)}) | {method} | "
                + " | ".join(cells)
                + f" | {_tokens(tokens)} | {own:.3f} | {retrieve:.3f} |"
            )
    print()
    print("| pooled | method | " + " | ".join(metrics) + " | reader tokens (of none's) |")
    print("|---|---|" + "---:|" * (len(metrics) + 1))
    base_tokens = statistics.fmean(pooled_tokens.get("none") or [0.0])
    for method, by_metric in pooled.items():
        cells = []
        for metric in metrics:
            pairs = by_metric[metric]
            cells.append(_cell(metric, [a for a, _ in pairs], [b for _, b in pairs], method))
        tokens = pooled_tokens.get(method) or [0.0]
        share = f" ({statistics.fmean(tokens) / base_tokens:.0%})" if base_tokens else ""
        cells.append(_tokens(tokens) + (share if method != "none" and any(tokens) else ""))
        print(f"| all ({len(by_metric[metrics[0]])}) | {method} | " + " | ".join(cells) + " |")
    return 0


def _tokens(tokens: list[float]) -> str:
    """Mean reader prompt tokens, or "-" when no reader ran (``--reader none``)."""
    return f"{statistics.fmean(tokens):.0f}" if any(tokens) else "-"


def _cell(metric: str, values: list[float], baseline: list[float], method: str) -> str:
    scale = 100.0 if metric in RATES else 1.0
    mean = statistics.fmean(values) * scale if values else 0.0
    if method == "none" or not values:
        return f"{mean:.1f}" if scale > 1 else f"{mean:.2f}"
    interval = paired_bootstrap(values, baseline)
    low, high = interval.low * scale, interval.high * scale
    if scale > 1:
        return f"{mean:.1f} ({interval.mean * scale:+.1f} [{low:+.1f}, {high:+.1f}])"
    return f"{mean:.2f} ({interval.mean:+.2f} [{low:+.2f}, {high:+.2f}])"


if __name__ == "__main__":
    raise SystemExit(main())
