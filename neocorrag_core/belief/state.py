"""The belief update: diagnostics -> the six-dimensional evidence state, in logit space.

Each inferred dimension is ``sigmoid(bias + sum_f w_f * logit(f))`` over the diagnostics
``f``, blended with the previous belief in logit space; cost is observed, not inferred.
The coefficients below are **unfitted priors** (BeliefRAG, appendix A.2, ships unfitted
defaults too): signs follow what each diagnostic means, magnitudes were set by hand so
that a strongly supported, conflict-free workspace reads as sufficient and reliable. The
controller's stopping decision does not rest on them: it uses the fitted answerability
calibrator (:mod:`neocorrag_core.belief.calibrator`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from .types import BELIEF_NAMES, Belief, Diagnostics

# A logit is unbounded at 0 and 1; diagnostics from a small verifier often are exactly 0 or 1.
_EPS = 0.02

PRIOR_COEFFICIENTS: Mapping[str, tuple[float, Mapping[str, float]]] = {
    "sufficiency": (0.0, {"support": 0.8, "gap": -0.5, "uncertainty": -0.3, "relevance": 0.2}),
    "reliability": (0.0, {"relevance": 0.5, "conflict": -0.6, "support": 0.3}),
    "conflict": (0.0, {"conflict": 1.0}),
    "uncertainty": (0.0, {"uncertainty": 0.7, "support": -0.2, "answer_confidence": -0.5}),
    "gap": (0.0, {"gap": 0.8, "support": -0.3}),
}
"""``dimension -> (bias, {diagnostic: weight})`` on logits of the diagnostics (priors)."""


def logit(p: float) -> float:
    """``log(p / (1 - p))`` with ``p`` clipped to ``[0.02, 0.98]``."""
    q = min(max(float(p), _EPS), 1.0 - _EPS)
    return math.log(q / (1.0 - q))


def sigmoid(z: float) -> float:
    """The logistic function, safe for large ``|z|``."""
    if z >= 0:
        return 1.0 / (1.0 + math.exp(-z))
    e = math.exp(z)
    return e / (1.0 + e)


def implied_belief(
    diagnostics: Diagnostics,
    coefficients: Mapping[str, tuple[float, Mapping[str, float]]] = PRIOR_COEFFICIENTS,
) -> Belief:
    """The belief the diagnostics alone imply (no history). A diagnostic that was not
    measured (``answer_confidence`` of a framework LLM) contributes nothing."""
    features = diagnostics.features()
    values: dict[str, float] = {}
    for name in BELIEF_NAMES:
        if name == "cost":
            continue
        bias, weights = coefficients[name]
        z = bias + sum(w * logit(features[f]) for f, w in weights.items() if f in features)
        values[name] = sigmoid(z)
    return Belief(**values, cost=min(max(diagnostics.cost, 0.0), 1.0))


def update_belief(
    previous: Belief | None,
    diagnostics: Diagnostics,
    *,
    blend: float,
    coefficients: Mapping[str, tuple[float, Mapping[str, float]]] = PRIOR_COEFFICIENTS,
) -> Belief:
    """The new belief: the implied one blended with ``previous`` in logit space
    (``blend`` = weight of the previous belief; ``None``: no history)."""
    implied = implied_belief(diagnostics, coefficients)
    if previous is None or blend == 0.0:
        return implied
    values = {
        name: sigmoid(
            blend * logit(getattr(previous, name)) + (1.0 - blend) * logit(getattr(implied, name))
        )
        for name in BELIEF_NAMES
        if name != "cost"
    }
    return Belief(**values, cost=implied.cost)


__all__ = ["PRIOR_COEFFICIENTS", "implied_belief", "logit", "sigmoid", "update_belief"]
