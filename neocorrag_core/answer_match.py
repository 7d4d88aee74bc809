"""Matching a short answer against gold answers: SQuAD normalization, exact match, token F1.

One definition for the two places that score answers: the benchmark's EM/F1
(:mod:`neocorrag_core.eval.metrics` re-exports these) and the label rule of the
answerability calibrator's fit (:mod:`neocorrag_core.belief.fitting`: a draft answer is
right at token F1 >= 0.5).
"""

from __future__ import annotations

import re
import string
from collections import Counter
from collections.abc import Sequence

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


__all__ = ["exact_match", "f1_score", "normalize_answer"]
