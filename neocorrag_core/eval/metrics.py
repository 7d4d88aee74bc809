"""Metrics shared by every report (definitions in DESIGN.md, "Metrics").

Per question: answer EM/F1 (SQuAD normalization, max over aliases; defined in
:mod:`neocorrag_core.answer_match`) and, over the
passages a method hands to the reader, Recall/Hit/Chain@k, the passage count
(ATD) and the non-gold count (AID). Per method: means, RCR@k, and paired
bootstrap intervals of differences against a baseline method.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass

import numpy as np

# One definition of answer matching, shared with the calibrator's label rule.
from neocorrag_core.answer_match import exact_match, f1_score, normalize_answer


def recall_at_k(ids: Sequence[str], gold: Collection[str], k: int) -> float:
    """Fraction of the gold passages among the first ``k`` ids (0 when there is no gold)."""
    if not gold:
        return 0.0
    return len(set(ids[:k]) & set(gold)) / len(set(gold))


def hit_at_k(ids: Sequence[str], gold: Collection[str], k: int) -> float:
    """1.0 when at least one gold passage is among the first ``k`` ids."""
    return float(bool(set(ids[:k]) & set(gold)))


def chain_at_k(ids: Sequence[str], gold: Collection[str], k: int) -> float:
    """1.0 when every gold passage is among the first ``k`` ids."""
    return float(bool(gold) and set(gold) <= set(ids[:k]))


def irrelevant_count(ids: Sequence[str], gold: Collection[str]) -> int:
    """How many of the passages given to the reader are not gold (one question's AID term)."""
    gold_set = set(gold)
    return sum(1 for pid in ids if pid not in gold_set)


def rcr(f1_mean: float, recall_mean: float) -> float:
    """RCR@k = F1 / Recall@k over the corpus means (0 where recall is 0), as in Table 1."""
    return f1_mean / recall_mean if recall_mean > 0 else 0.0


def rcr_per_question(f1: Sequence[float], recall: Sequence[float]) -> float:
    """Mean of the per-question ratios F1 / Recall@k, each 0 where that recall is 0."""
    ratios = [f / r if r > 0 else 0.0 for f, r in zip(f1, recall, strict=True)]
    return float(np.mean(ratios)) if ratios else 0.0


@dataclass(frozen=True)
class BootstrapInterval:
    """Mean paired difference (method - baseline) and its percentile interval."""

    mean: float
    low: float
    high: float
    n: int
    confidence: float = 0.95

    @property
    def excludes_zero(self) -> bool:
        """True when the interval supports a difference (it does not contain 0)."""
        return self.low > 0 or self.high < 0

    def to_dict(self) -> dict[str, float | int | bool]:
        """Plain dict for results.json."""
        return {
            "mean": self.mean,
            "low": self.low,
            "high": self.high,
            "n": self.n,
            "confidence": self.confidence,
            "excludes_zero": self.excludes_zero,
        }


def paired_bootstrap(
    values: Sequence[float],
    baseline: Sequence[float],
    *,
    resamples: int = 2000,
    seed: int = 0,
    confidence: float = 0.95,
) -> BootstrapInterval:
    """Paired bootstrap of mean(values - baseline): questions resampled with replacement.

    The same seed gives the same interval; both sequences must be aligned per question.
    """
    a, b = np.asarray(values, dtype=float), np.asarray(baseline, dtype=float)
    if a.shape != b.shape:
        raise ValueError(f"paired bootstrap needs aligned values, got {a.shape} and {b.shape}")
    if a.size == 0:
        raise ValueError("paired bootstrap needs at least one question")
    if resamples < 1:
        raise ValueError(f"resamples must be >= 1, got {resamples}")
    diff = a - b
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, diff.size, size=(resamples, diff.size))
    means = diff[picks].mean(axis=1)
    tail = (1.0 - confidence) / 2.0
    low, high = np.quantile(means, [tail, 1.0 - tail])
    return BootstrapInterval(
        float(diff.mean()), float(low), float(high), int(diff.size), confidence
    )


__all__ = [
    "BootstrapInterval",
    "chain_at_k",
    "exact_match",
    "f1_score",
    "hit_at_k",
    "irrelevant_count",
    "normalize_answer",
    "paired_bootstrap",
    "rcr",
    "rcr_per_question",
    "recall_at_k",
]
