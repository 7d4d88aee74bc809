"""PNG plots of a run: recall vs noise trade-off, F1 with intervals, latency per stage.

Needs matplotlib (the ``viz`` extra); drawn with the non-interactive Agg backend.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # after use(): the backend must be chosen first

PLOT_FILES = ("tradeoff.png", "f1.png", "latency.png")


def curve_family(name: str) -> str | None:
    """Which operating-point curve a method belongs to (drawn as one dashed line)."""
    if name == "none" or name.startswith("top-"):
        return "truncation (top-k)"
    if name.startswith("lc-embeddings-filter"):
        return "EmbeddingsFilter thresholds"
    if name in ("neocorrag-recall", "neocorrag-balanced", "neocorrag-precise"):
        return "neocorrag keep dial"
    return None


def plot_tradeoff(results: dict[str, Any], path: Path) -> None:
    """Recall@k (y) against AID (x): up and to the left is better. The settings of one
    method family (top-k truncation, EmbeddingsFilter thresholds, the keep dial) are
    joined by a dashed line, so a point above another family's line beats it."""
    fig, ax = plt.subplots(figsize=(6.5, 4.5))
    families: dict[str, list[tuple[float, float]]] = {}
    for name, agg in results["methods"].items():
        family = curve_family(name)
        if family is not None:
            families.setdefault(family, []).append((agg["aid"], 100 * agg["recall"]))
    for family, points in families.items():
        if len(points) > 1:
            xs, ys = zip(*sorted(points), strict=True)
            ax.plot(xs, ys, linestyle="--", linewidth=1, alpha=0.6, label=family)
    if any(len(points) > 1 for points in families.values()):
        ax.legend(fontsize=7, loc="lower right")
    for name, agg in results["methods"].items():
        ax.scatter(agg["aid"], 100 * agg["recall"], s=40)
        ax.annotate(
            name,
            (agg["aid"], 100 * agg["recall"]),
            fontsize=7,
            xytext=(4, 3),
            textcoords="offset points",
        )
    k = results["settings"]["top_k"]
    ax.set_xlabel("AID: non-gold passages given to the reader")
    ax.set_ylabel(f"Recall@{k} of the reader's context (%)")
    ax.set_title("Recall vs noise per method")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def plot_f1(results: dict[str, Any], path: Path) -> None:
    """F1 per method; error bars are the bootstrap interval of the difference to 'none'."""
    names = list(results["methods"])
    f1 = [100 * results["methods"][n]["f1"] for n in names]
    lower, upper = [], []
    for name in names:
        ci = results["comparisons"].get(name, {}).get("f1")
        if ci is None:
            lower.append(0.0)
            upper.append(0.0)
        else:  # interval of the difference, drawn around this method's F1
            lower.append(max(0.0, 100 * (ci["mean"] - ci["low"])))
            upper.append(max(0.0, 100 * (ci["high"] - ci["mean"])))
    fig, ax = plt.subplots(figsize=(7, 4.5))
    ax.bar(range(len(names)), f1, yerr=[lower, upper], capsize=3, color="#4c72b0")
    ax.set_xticks(range(len(names)), names, rotation=35, ha="right", fontsize=8)
    ax.set_ylabel("answer F1 (%)")
    ax.set_title("F1 per method (bars: 95% CI of the paired difference to 'none')")
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def plot_latency(results: dict[str, Any], path: Path) -> None:
    """Stacked mean seconds per question: retrieval, the method, the reader."""
    names = list(results["methods"])
    stages = ("retrieve", "method", "read")
    fig, ax = plt.subplots(figsize=(7, 4.5))
    bottom = [0.0] * len(names)
    for stage in stages:
        values = [results["methods"][n]["seconds"].get(stage, 0.0) for n in names]
        ax.bar(range(len(names)), values, bottom=bottom, label=stage)
        bottom = [b + v for b, v in zip(bottom, values, strict=True)]
    ax.set_xticks(range(len(names)), names, rotation=35, ha="right", fontsize=8)
    ax.set_ylabel("seconds per question (mean)")
    ax.set_title("Latency per stage")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def write_plots(results: dict[str, Any], out: Path) -> list[Path]:
    """Write the three PNGs into ``out``; returns their paths."""
    paths = [out / name for name in PLOT_FILES]
    plot_tradeoff(results, paths[0])
    plot_f1(results, paths[1])
    plot_latency(results, paths[2])
    return paths


__all__ = ["PLOT_FILES", "plot_f1", "plot_latency", "plot_tradeoff", "write_plots"]
