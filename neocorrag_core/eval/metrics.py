"""Metrics shared by every report (definitions in DESIGN.md, "Metrics").

Per question: answer EM/F1 (SQuAD normalization, max over aliases) and, over the
passages a method hands to the reader, Recall/Hit/Chain@k, the passage count
(ATD) and the non-gold count (AID). Per method: means, RCR@k, and paired
bootstrap intervals of differences against a baseline method.
"""

from __future__ import annotations

import re
import string
from collections import Counter
from collections.abc import Collection, Sequence
from dataclasses import dataclass

import numpy as np

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCTUATION = frozenset(string.punctuation)


def normalize_answer(text: str) -> str:
    """SQuAD normalization: lowercase, drop punctuation and articles, collapse spaces."""
    text = "".join(ch for ch in str(text).lower() if ch not in _PUNCTUATION)
    return " ".join(_ARTICLES.sub(" ", text).split())


def exact_match(prediction: str, answers: Sequence[str]) -> float:
    """1.0 when the normalized prediction equals any normalized answer, else 0.0."""
    pred = normalize_answer(prediction)
    return float(any(pred == normalize_answer(a) for a in answers))


def _token_f1(prediction: str, answer: str) -> float:
    pred, gold = normalize_answer(prediction).split(), normalize_answer(answer).split()
    if not pred or not gold:
        return float(pred == gold)
    common = sum((Counter(pred) & Counter(gold)).values())
    if common == 0:
        return 0.0
    precision, recall = common / len(pred), common / len(gold)
    return 2 * precision * recall / (precision + recall)


def f1_score(prediction: str, answers: Sequence[str]) -> float:
    """SQuAD token F1, the maximum over the answer aliases."""
    return max((_token_f1(prediction, a) for a in answers), default=0.0)


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
