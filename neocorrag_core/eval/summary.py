"""A run's results: per-method means over the questions every method finished, paired
bootstrap comparisons with the baselines, and the files written from them (results.json,
report.md, the plots).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np

from neocorrag_core.eval import metrics as M
from neocorrag_core.eval.datasets import LoadReport, QAExample
from neocorrag_core.eval.records import ResultCache
from neocorrag_core.eval.settings import BASELINE, ITERATIVE, EvalSettings

logger = logging.getLogger(__name__)


def aggregate(records: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Means over questions of every per-question metric, RCR@k and cost summaries."""
    n = len(records)

    def mean(key: str) -> float:
        return float(np.mean([r[key] for r in records])) if n else 0.0

    # Retrieval scores are over the questions that name gold passages (a user's own file
    # may name none for some or all; records written before ``has_gold`` all did).
    golden = [r for r in records if r.get("has_gold", True)]

    def gold_mean(key: str) -> float:
        return float(np.mean([r[key] for r in golden])) if golden else 0.0

    stages: dict[str, float] = {}
    for r in records:
        for stage, seconds in r["timings"].items():
            stages[stage] = stages.get(stage, 0.0) + seconds / n
    f1 = [r["f1"] for r in records]
    recall = [r["recall"] for r in records]
    return {
        "questions": n,
        "with_gold": len(golden),
        "recall": gold_mean("recall"),
        "hit": gold_mean("hit"),
        "chain": gold_mean("chain"),
        "atd": mean("atd"),
        "aid": gold_mean("aid"),
        "empty": mean("empty"),
        "abstention": float(np.mean([bool(r.get("abstained")) for r in records])) if n else 0.0,
        "evidence_recall": _mean_known(r.get("evidence_recall") for r in records),
        "retrieval_rounds": _mean_known(r.get("retrieval_rounds") for r in records),
        "total_tokens": _mean_known(r.get("total_tokens") for r in records),
        "final_actions": _count(r["info"].get("final_action") for r in records),
        "em": mean("em"),
        "f1": mean("f1"),
        "rcr": M.rcr(mean("f1"), mean("recall")),
        "rcr_per_question": M.rcr_per_question(f1, recall) if n else 0.0,
        "reader_tokens": mean("reader_prompt_tokens") + mean("reader_generated_tokens"),
        "method_tokens": mean("method_prompt_tokens") + mean("method_generated_tokens"),
        "method_prompt_tokens": mean("method_prompt_tokens"),
        "method_generated_tokens": mean("method_generated_tokens"),
        "seconds": stages,
        "peak_rss_mb": max((r["peak_rss_mb"] for r in records), default=0.0),
        "fallbacks": _count(r["info"].get("fallback") for r in records),
        "first_pool_complete": _mean_known(r.get("first_pool_complete") for r in records),
        "pool_complete": _mean_known(r.get("pool_complete") for r in records),
        "query_sources": _sum_sources(r.get("query_sources") for r in records),
        "residual_rounds": _mean_known(r["info"].get("rounds") for r in records),
        "gold_lost_at": _sum_counts(r.get("gold_lost_at") for r in records),
        "gold_kept_by": _sum_counts(r.get("gold_kept_by") for r in records),
    }


def _sum_counts(values: Any) -> dict[str, int] | None:
    """Per-key sums of the count dicts that exist (None when no record had one)."""
    total: dict[str, int] | None = None
    for counts in values:
        if counts is None:
            continue
        total = total or {}
        for key, n in counts.items():
            total[key] = total.get(key, 0) + n
    return total


def _sum_sources(values: Any) -> dict[str, dict[str, int]] | None:
    """Per-source sums of :func:`query_sources` counts (None when no record had any)."""
    total: dict[str, dict[str, int]] | None = None
    for sources in values:
        if sources is None:
            continue
        total = total or {}
        for kind, counts in sources.items():
            row = total.setdefault(kind, {})
            for key, n in counts.items():
                row[key] = row.get(key, 0) + n
    return total


def _mean_known(values: Any) -> float | None:
    """Mean of the values that are not None (None when there are none)."""
    known = [v for v in values if v is not None]
    return float(np.mean(known)) if known else None


def _count(values: Any) -> dict[str, int]:
    counts: dict[str, int] = {}
    for value in values:
        if value:
            counts[value] = counts.get(value, 0) + 1
    return counts


def summarize(
    examples: Sequence[QAExample],
    settings: EvalSettings,
    cache: ResultCache,
    load_report: LoadReport,
) -> dict[str, Any]:
    """results.json content: settings, data report, per-method aggregates, bootstrap CIs."""
    ids = [e.id for e in examples]
    per_method = {
        m: [cache.load(m)[q] for q in ids if q in cache.load(m)] for m in settings.methods
    }
    # Compare only questions every method finished, so all rows describe the same questions.
    complete = [q for q in ids if all(q in cache.load(m) for m in settings.methods)]
    aggregates = {m: aggregate([cache.load(m)[q] for q in complete]) for m in settings.methods}
    comparisons = _compare(
        settings, cache, complete, BASELINE, ("f1", "aid", "em", "recall", "chain")
    )
    against_iterative = _compare(
        settings, cache, complete, ITERATIVE, ("f1", "em", "evidence_recall", "total_tokens")
    )
    return {
        "settings": asdict(settings),
        "data": {
            "path": load_report.path,
            "format": load_report.format,
            "rows_read": load_report.rows,
            "loaded": load_report.loaded,
            "skipped": dict(load_report.skipped),
        },
        "questions_compared": len(complete),
        "methods": aggregates,
        "comparisons": comparisons,
        "comparisons_iterative": against_iterative,
        "per_question": per_method,
    }


def _compare(
    settings: EvalSettings,
    cache: ResultCache,
    complete: Sequence[str],
    baseline: str,
    keys: Sequence[str],
) -> dict[str, Any]:
    """Paired bootstrap intervals of every other method's per-question ``keys`` minus the
    baseline's (empty when the baseline was not run)."""
    if baseline not in settings.methods or not complete:
        return {}
    base = cache.load(baseline)
    out: dict[str, Any] = {}
    for m in settings.methods:
        if m == baseline:
            continue
        rows = cache.load(m)
        out[m] = {
            key: M.paired_bootstrap(
                [float(rows[q].get(key) or 0.0) for q in complete],
                [float(base[q].get(key) or 0.0) for q in complete],
                resamples=settings.bootstrap,
                seed=settings.seed,
            ).to_dict()
            for key in keys
        }
    return out


def write_outputs(results: dict[str, Any], out: Path, *, plots: bool = True) -> None:
    """results.json, report.md and (with matplotlib) the PNG plots."""
    from neocorrag_core.eval.report import render_report

    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json.dumps(results, indent=2, ensure_ascii=False))
    (out / "report.md").write_text(render_report(results), encoding="utf-8")
    if plots:
        try:
            from neocorrag_core.eval.plots import write_plots
        except ImportError as exc:
            logger.warning("plots skipped (%s); pip install 'neocorrag[viz]'", exc)
            return
        write_plots(results, out)
