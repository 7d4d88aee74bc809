"""One method against a baseline over the questions of several ``neocorrag eval`` runs
pooled together: per run and pooled, both means, the difference and its paired bootstrap
interval (the eval's own: 2,000 resamples, seed 0).

A held-out half holds 41-68 questions, so one question moves a percentage by 1.5-2.5
points and a goal stated for a data *source* ("+10 Chain@5 on MuSiQue") is read more
reliably from every held-out question of that source than from one file's half. Pool
only runs of one method setting and one protocol (the same ``--split``, ``--pool``,
reader): the script pairs each question's method record with its baseline record of the
same run, and pools the pairs. For example, EviReform on both MuSiQue files' report
halves::

    python benchmarks/pooled_comparison.py \\
        benchmarks/results/eval/evireform-musique-report \\
        benchmarks/results/eval/evireform-musique-dev-report \\
        --method evireform --baseline none --metric chain --metric recall

A run is a folder holding the ``results.json`` that ``neocorrag eval`` writes (or that
file itself), or, without one, the folder's ``cache/*.jsonl`` records (the same records).
The runs under ``benchmarks/results/eval/`` commit neither: restore them first
(benchmarks/results/README.md; the error names the command). ``--split report`` (or
``tune``) keeps only the questions of that hash half (``neocorrag_core.eval.splits``), for
a run made on a whole file. Rate metrics (recall, chain, f1, ...) are printed in points;
counts (aid, total_tokens, ...) as they are, with the method's mean over the baseline's.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from neocorrag_core.errors import InputError
from neocorrag_core.eval.metrics import paired_bootstrap
from neocorrag_core.eval.splits import SPLITS, split_of
from neocorrag_core.formats import read_json_or_lines

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the sibling scripts
from summarize_results import cached_results, missing_records

RATES = frozenset({"recall", "hit", "chain", "f1", "em", "evidence_recall", "empty"})
"""Per-question values in [0, 1], printed as points (x100)."""


@dataclass(frozen=True)
class Paired:
    """One run's aligned per-question values of a metric: the method's and the baseline's."""

    run: str
    method: tuple[float, ...]
    baseline: tuple[float, ...]


def load_results(run: str) -> object:
    """The results of ``run``: its ``results.json`` (a folder of ``neocorrag eval``, or the
    file), or, for a folder without one, ``{"per_question": ...}`` from its cache."""
    path = Path(run)
    if path.is_dir():
        if not (path / "results.json").is_file():
            cached = cached_results(path)
            if cached is None:
                raise InputError(
                    f"{run}: no results.json or cache/*.jsonl there; {missing_records(run)}"
                )
            return cached
        path = path / "results.json"
    if not path.is_file():
        raise InputError(f"{run}: no results.json there; {missing_records(run)}")
    try:
        return read_json_or_lines(path, what="results.json")
    except (OSError, InputError) as exc:
        raise InputError(f"{path}: not readable as JSON ({exc})") from exc


def paired_values(
    run: str,
    results: object,
    method: str,
    baseline: str,
    metric: str,
    split: str | None = None,
) -> Paired:
    """The per-question values of ``metric`` for ``method`` and ``baseline`` in one run's
    results, in the baseline's question order. Every question of either must be in both.
    ``split``: only the questions of that hash half (``"tune"`` or ``"report"``)."""
    per_question = results.get("per_question") if isinstance(results, dict) else None
    if not isinstance(per_question, dict):
        raise InputError(f"{run}: results.json has no per_question table")
    records = {}
    for name in (method, baseline):
        if name not in per_question:
            raise InputError(
                f"{run}: no method {name!r} (it has {', '.join(sorted(per_question))})"
            )
        rows = per_question[name]
        if not isinstance(rows, list) or not all(
            isinstance(row, dict) and isinstance(row.get("qid"), str) for row in rows
        ):
            raise InputError(f"{run}: the records of {name!r} are not rows with a 'qid'")
        records[name] = {row["qid"]: row for row in rows}
        if len(records[name]) != len(rows):
            raise InputError(f"{run}: {name!r} holds a question twice")
    if records[method].keys() != records[baseline].keys():
        raise InputError(f"{run}: {method!r} and {baseline!r} answered different questions")
    qids = [qid for qid in records[baseline] if split is None or split_of(qid) == split]
    if not qids:
        half = f" in the {split} half" if split else ""
        raise InputError(f"{run}: no question answered by {baseline!r}{half}")
    columns = []
    for name in (method, baseline):
        values = [records[name][qid].get(metric) for qid in qids]
        if any(not isinstance(v, (int, float)) or math.isnan(v) for v in values):
            raise InputError(f"{run}: {name!r} has no numeric {metric!r} for every question")
        columns.append(tuple(float(v) for v in values))
    return Paired(run, columns[0], columns[1])


def comparison_rows(pairs: Sequence[Paired], metric: str) -> list[str]:
    """Markdown rows, one per run and a pooled one: questions, baseline mean, method mean,
    the difference with its 95 % paired bootstrap interval (and method / baseline for counts)."""
    scale = 100.0 if metric in RATES else 1.0
    groups = [(p.run, p.method, p.baseline) for p in pairs]
    if len(pairs) > 1:
        groups.append(
            (
                "**pooled**",
                tuple(v for p in pairs for v in p.method),
                tuple(v for p in pairs for v in p.baseline),
            )
        )
    rows = []
    for name, method, baseline in groups:
        interval = paired_bootstrap(method, baseline)
        base_mean, method_mean = sum(baseline) / len(baseline), sum(method) / len(method)
        ratio = ""
        if metric not in RATES:
            ratio = f" | {method_mean / base_mean:.2f}x" if base_mean else " | –"
        rows.append(
            f"| {name} | {interval.n} | {scale * base_mean:.2f} | {scale * method_mean:.2f} | "
            f"{scale * interval.mean:+.2f} [{scale * interval.low:+.2f}, "
            f"{scale * interval.high:+.2f}]{ratio} |"
        )
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "runs", nargs="+", help="neocorrag eval output folders (results.json or cache/)"
    )
    parser.add_argument("--method", required=True)
    parser.add_argument("--baseline", required=True)
    parser.add_argument(
        "--metric", action="append", required=True, help="a per-question field, e.g. chain"
    )
    parser.add_argument("--split", choices=SPLITS, help="only the questions of this hash half")
    args = parser.parse_args(argv)
    try:
        loaded = [(run, load_results(run)) for run in args.runs]
        tables = {
            metric: [
                paired_values(run, res, args.method, args.baseline, metric, args.split)
                for run, res in loaded
            ]
            for metric in args.metric
        }
    except InputError as exc:
        parser.error(str(exc))
    for metric, pairs in tables.items():
        counts = metric not in RATES
        print(f"\n{metric}: {args.method} against {args.baseline}")
        print(
            f"| run | questions | {args.baseline} | {args.method} | difference (95 %) |"
            + (" method / baseline |" if counts else "")
        )
        print("|---|---:|---:|---:|---|" + ("---:|" if counts else ""))
        for row in comparison_rows(pairs, metric):
            print(row)
    return 0


if __name__ == "__main__":
    sys.exit(main())
