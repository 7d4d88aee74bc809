"""Fit the answerability calibrator on ``neocorrag eval`` runs of the belief controller.

Input: one or more ``results.json`` of runs on the ``tune`` half (the file, or the run
folder holding it), made so that the controller keeps searching and every step is
measured, e.g.::

    neocorrag eval --data ../shared/data/musique/... --split tune --methods belief \\
        --belief answer_threshold=1.0 --belief verify=always --out runs/belief-tune-musique

Each step with a draft answer is a row labelled by ``neocorrag_core.belief.fitting``'s
rule (token F1 >= 0.5 against the gold answers); questions are split into train and dev
by ``neocorrag_lab.fitting.calibration_split_of`` (report-half questions dropped); L2 is
chosen by dev log loss (``neocorrag_lab.fitting.fit_and_select``); the model fitted on
train is written as a versioned coefficient file. Also writes a JSON report (Brier, ECE,
log loss per split, for the fitted model, the shipped prior and a constant) and a
reliability plot, and prints the metrics as a Markdown table for docs/belief.md::

    python benchmarks/fit_calibrator.py --results runs/belief-tune-musique/results.json \\
        --out neocorrag_core/belief/data/answerability.json \\
        --report benchmarks/results/calibrator.json \\
        --plot benchmarks/results/calibrator_reliability.png
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from neocorrag_core.belief.fitting import SUCCESS_F1, TARGETS
from neocorrag_core.errors import InputError, NeocorragError

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the lab and the sibling scripts
from neocorrag_lab.fitting import DEFAULT_L2_GRID, fit_from_results
from summarize_results import missing_records

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = "benchmarks/fit_calibrator.py"


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--results",
        action="append",
        required=True,
        metavar="PATH",
        help="an eval run's results.json, or its folder (repeatable)",
    )
    parser.add_argument(
        "--method", default="belief", help="the method key in per_question (default: belief)"
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=ROOT / "neocorrag_core/belief/data/answerability.json",
        help="the coefficient file to write",
    )
    parser.add_argument("--report", type=Path, default=ROOT / "benchmarks/results/calibrator.json")
    parser.add_argument(
        "--plot",
        type=Path,
        default=ROOT / "benchmarks/results/calibrator_reliability.png",
        help="the reliability plot (PNG; needs matplotlib)",
    )
    parser.add_argument("--no-plot", action="store_true", help="skip the plot")
    parser.add_argument(
        "--l2",
        type=float,
        nargs="+",
        default=list(DEFAULT_L2_GRID),
        help="the L2 strengths to select from on dev",
    )
    parser.add_argument(
        "--success-f1",
        type=float,
        default=SUCCESS_F1,
        help="a draft answer is right at token F1 >= this",
    )
    parser.add_argument("--version", default=None, help="override fit-<date>-<hash>")
    parser.add_argument(
        "--target",
        choices=TARGETS,
        default="answerability",
        help="answerability (the calibrator) or after_search (the answer after one more "
        "search: the retrieval value's model, written to belief/data/after_search.json)",
    )
    return parser.parse_args(argv)


def markdown_table(report: dict[str, Any]) -> str:
    """The metrics per model and split, as a Markdown table."""
    lines = [
        "| model | split | questions | steps | right (base rate) | Brier | ECE (10 bins) "
        "| log loss |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    models = (
        (f"fitted `{report['version']}` (L2 {report['l2']:g})", report["fitted"]),
        (f"prior `{report['prior']['version']}`", report["prior"]),
        ("constant at the train base rate", report["base_rate_constant"]),
    )
    for name, scores in models:
        for split in ("train", "dev"):
            s = scores[split]
            lines.append(
                f"| {name} | {split} | {s['questions']} | {s['rows']} | {s['base_rate']:.3f} "
                f"| {s['brier']:.4f} | {s['ece']:.4f} | {s['log_loss']:.4f} |"
            )
    return "\n".join(lines)


def plot_reliability(report: dict[str, Any], path: Path) -> None:
    """Observed rate against mean prediction per bin on dev (fitted and prior), the
    diagonal of perfect calibration, and the rows per bin underneath."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # after use(): the backend must be chosen first

    fig, (top, bottom) = plt.subplots(
        2, 1, figsize=(5.5, 6.5), sharex=True, gridspec_kw={"height_ratios": [3, 1]}
    )
    top.plot([0, 1], [0, 1], linestyle="--", color="grey", linewidth=1, label="perfect")
    series = (
        ("fitted", report["version"], report["fitted"]["dev"], "#4c72b0", "o"),
        ("prior", report["prior"]["version"], report["prior"]["dev"], "#dd8452", "s"),
    )
    width = 0.04
    for offset, (kind, version, scores, color, marker) in zip((-1, 1), series, strict=True):
        bins = scores["reliability"]
        label = f"{kind} {version}: Brier {scores['brier']:.3f}, ECE {scores['ece']:.3f}"
        top.plot(
            [b["predicted"] for b in bins],
            [b["observed"] for b in bins],
            marker=marker,
            color=color,
            label=label,
        )
        for b in bins:
            top.annotate(
                str(b["count"]),
                (b["predicted"], b["observed"]),
                fontsize=6,
                color=color,
                xytext=(3, 3),
                textcoords="offset points",
            )
        bottom.bar(
            [(b["low"] + b["high"]) / 2 + offset * width / 2 for b in bins],
            [b["count"] for b in bins],
            width=width,
            color=color,
        )
    dev = report["fitted"]["dev"]
    top.set_ylabel("observed share of right answers")
    top.set_title(
        f"Answerability reliability on dev ({dev['questions']} questions, {dev['rows']} steps)",
        fontsize=9,
    )
    top.set_xlim(0, 1)
    top.set_ylim(-0.02, 1.06)
    top.grid(alpha=0.3)
    top.legend(fontsize=7, loc="upper left")
    bottom.set_xlabel("predicted answerability (10 equal-width bins)")
    bottom.set_ylabel("steps")
    bottom.grid(alpha=0.3)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)


def results_paths(given: Sequence[str]) -> list[str]:
    """Each ``--results`` as a results.json path (a run folder's own); ``InputError`` saying
    how to get one that is not there (the committed runs' are not in the tree)."""
    paths = []
    for path in given:
        if Path(path).is_dir():
            path = str(Path(path) / "results.json")
        if not Path(path).is_file():
            raise InputError(f"{path}: no such file; {missing_records(path)}")
        paths.append(path)
    return paths


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        calibrator, report = fit_from_results(
            results_paths(args.results),
            method=args.method,
            target=args.target,
            success_f1=args.success_f1,
            l2_grid=args.l2,
            version=args.version,
            meta={"script": SCRIPT},
        )
    except NeocorragError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    try:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        calibrator.save(args.out)
        args.report.parent.mkdir(parents=True, exist_ok=True)
        args.report.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    except OSError as exc:
        print(
            f"error: cannot write {exc.filename or args.out}: {exc.strerror or exc}",
            file=sys.stderr,
        )
        return 2
    print(f"wrote {args.out} ({calibrator.version}) and {args.report}")
    if report["report_half_dropped"]:
        print(f"dropped {report['report_half_dropped']} report-half question(s)")
    if not args.no_plot:
        try:
            plot_reliability(report, args.plot)
            print(f"wrote {args.plot}")
        except ImportError as exc:
            print(f"plot skipped ({exc}); pip install 'neocorrag[viz]'", file=sys.stderr)
    print()
    print(markdown_table(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
