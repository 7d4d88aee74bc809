"""The answerability calibrator: a logistic model over the diagnostics that predicts
whether the generator's answer will be right.

Its target is operational (BeliefRAG, appendix A.3): "the frozen generator answers
correctly" (token F1 >= 0.5 against the gold answer), which can include what the generator
knows without the evidence. Coefficients live in a small versioned JSON file that names
the data split and the script that fitted them; :meth:`AnswerabilityCalibrator.fit` refits
on a user's own episodes in one call.
"""

from __future__ import annotations

import json
import math
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from neocorrag_core.errors import ConfigError, InputError

from .types import DIAGNOSTIC_NAMES, Diagnostics

FORMAT = "neocorrag-answerability"
FORMAT_VERSION = 1
DEFAULT_FILE = "answerability.json"
"""The shipped answerability model (in ``neocorrag_core/belief/data``)."""
AFTER_SEARCH_FILE = "after_search.json"
"""The shipped model of the answer's chance of being right after one more search, the
fitted part of the retrieval value (:func:`~neocorrag_core.belief.rules.retrieval_value`)."""


SHIPPED_MODELS: dict[str, tuple[str, str]] = {
    "default": (DEFAULT_FILE, AFTER_SEARCH_FILE),
    "qwen-1.5b": ("answerability-qwen-1.5b.json", "after_search-qwen-1.5b.json"),
}
"""Bundled generator preset (``resolve_lm`` name) -> its (answerability, after-search)
files in ``neocorrag_core/belief/data``, each fitted on that generator's own episodes
(BeliefRAG fits per backbone)."""


def preset_key(lm: Any) -> str:
    """The bundled preset name of the generator ``lm``: ``"default"`` for ``None``, the
    name for a string, ``""`` (no preset) for anything else."""
    return "default" if lm is None else lm if isinstance(lm, str) else ""


def shipped_pair(lm: Any) -> tuple[AnswerabilityCalibrator, AnswerabilityCalibrator] | None:
    """The shipped answerability and after-search models fitted for the generator ``lm``:
    ``None`` (the bundled default) or a bundled preset name; ``None`` when no file was
    fitted for it (another model, a framework LLM)."""
    files = SHIPPED_MODELS.get(preset_key(lm))
    if files is None:
        return None
    return (
        AnswerabilityCalibrator.load(shipped=files[0]),
        AnswerabilityCalibrator.load(shipped=files[1]),
    )


@dataclass(frozen=True)
class AnswerabilityCalibrator:
    """``P(answer right | diagnostics) = sigmoid(bias + sum_i w_i * (x_i - mean_i) / scale_i)``.

    Args:
        features: diagnostic names (:meth:`Diagnostics.features` keys); a feature missing
            from a step's diagnostics (e.g. ``answer_confidence`` with a framework LLM) is
            taken at its training mean, so it shifts nothing.
        weights / bias / means / scales: the fitted model, on standardized features.
        version: an identifier written into trajectories and reports.
        meta: where the numbers come from (split, script, sizes, Brier, ECE).
    """

    features: tuple[str, ...]
    weights: tuple[float, ...]
    bias: float
    means: tuple[float, ...]
    scales: tuple[float, ...]
    version: str
    meta: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        n = len(self.features)
        if not n or not all(len(v) == n for v in (self.weights, self.means, self.scales)):
            raise ConfigError(
                "AnswerabilityCalibrator: features, weights, means and scales must be "
                "non-empty and of one length"
            )
        values = (*self.weights, *self.means, *self.scales, self.bias)
        if not all(math.isfinite(v) for v in values) or min(self.scales) <= 0:
            raise ConfigError("AnswerabilityCalibrator: coefficients must be finite, scales > 0")

    def predict(self, diagnostics: Diagnostics | Mapping[str, float]) -> float:
        """The probability that the generator's answer is right, in ``[0, 1]``."""
        values = diagnostics.features() if isinstance(diagnostics, Diagnostics) else diagnostics
        z = self.bias
        for name, w, mean, scale in zip(
            self.features, self.weights, self.means, self.scales, strict=True
        ):
            x = values.get(name)
            if x is not None:
                z += w * (float(x) - mean) / scale
        return _sigmoid(z)

    def predict_range(
        self, diagnostics: Diagnostics | Mapping[str, float], free: Collection[str]
    ) -> tuple[float, float]:
        """The lowest and highest probability over every value in ``[0, 1]`` of the
        ``free`` features, the others as in :meth:`predict`.

        The model is monotone in each feature, so each free feature's extremes are at 0
        and 1; the controller uses this to tell whether a measurement it has not taken yet
        (the verifier's) could change its decision.
        """
        values = diagnostics.features() if isinstance(diagnostics, Diagnostics) else diagnostics
        low = high = self.bias
        for name, w, mean, scale in zip(
            self.features, self.weights, self.means, self.scales, strict=True
        ):
            if name in free:
                ends = (w * (0.0 - mean) / scale, w * (1.0 - mean) / scale)
                low, high = low + min(ends), high + max(ends)
                continue
            x = values.get(name)
            if x is not None:
                term = w * (float(x) - mean) / scale
                low, high = low + term, high + term
        return _sigmoid(low), _sigmoid(high)

    # -- files --------------------------------------------------------------------------

    @classmethod
    def load(
        cls, path: str | Path | None = None, *, shipped: str = DEFAULT_FILE
    ) -> AnswerabilityCalibrator:
        """Read a coefficient file; ``None``: the file called ``shipped`` that comes with
        neocorrag (:data:`DEFAULT_FILE`, or :data:`AFTER_SEARCH_FILE` for the model of
        the answer after one more search)."""
        if path is None:
            text = resources.files("neocorrag_core.belief").joinpath("data").joinpath(shipped)
            raw = text.read_text(encoding="utf-8")
            origin = f"neocorrag_core/belief/data/{shipped}"
        else:
            origin = str(path)
            try:
                raw = Path(path).read_text(encoding="utf-8")
            except OSError as exc:
                raise InputError(
                    f"cannot read the calibrator file {origin}: {exc.strerror or exc}"
                ) from None
        try:
            data = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise InputError(f"{origin} is not JSON: {exc}") from None
        return cls.from_dict(data, origin=origin)

    @classmethod
    def from_dict(cls, data: Any, *, origin: str = "calibrator") -> AnswerabilityCalibrator:
        """Build from the JSON structure :meth:`to_dict` writes (validated)."""
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise InputError(f"{origin} is not a neocorrag answerability calibrator file")
        if data.get("format_version") != FORMAT_VERSION:
            raise InputError(
                f"{origin} has format_version {data.get('format_version')!r}; this neocorrag "
                f"reads {FORMAT_VERSION}"
            )
        try:
            return cls(
                features=tuple(str(f) for f in data["features"]),
                weights=tuple(float(w) for w in data["weights"]),
                bias=float(data["bias"]),
                means=tuple(float(m) for m in data["means"]),
                scales=tuple(float(s) for s in data["scales"]),
                version=str(data["version"]),
                meta=dict(data.get("meta") or {}),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise InputError(f"{origin}: malformed calibrator ({exc})") from None

    def to_dict(self) -> dict[str, Any]:
        """The JSON structure of a coefficient file."""
        return {
            "format": FORMAT,
            "format_version": FORMAT_VERSION,
            "version": self.version,
            "features": list(self.features),
            "weights": list(self.weights),
            "bias": self.bias,
            "means": list(self.means),
            "scales": list(self.scales),
            "meta": dict(self.meta),
        }

    def save(self, path: str | Path) -> None:
        """Write the coefficient file (JSON, human-readable)."""
        Path(path).write_text(json.dumps(self.to_dict(), indent=2) + "\n", encoding="utf-8")

    # -- fitting ------------------------------------------------------------------------

    @classmethod
    def fit(
        cls,
        rows: Sequence[Diagnostics | Mapping[str, float]],
        outcomes: Sequence[bool | int],
        *,
        features: Sequence[str] = DIAGNOSTIC_NAMES,
        l2: float = 1.0,
        version: str = "user-fit",
        meta: Mapping[str, Any] | None = None,
    ) -> AnswerabilityCalibrator:
        """Fit on episodes' diagnostics and whether the generator was right (1) or not (0).

        L2-regularized logistic regression (Newton's method; the bias is not penalized) on
        standardized features; a row missing a feature takes the feature's mean.
        """
        if len(rows) != len(outcomes) or not rows:
            raise InputError("fit needs one outcome per row, and at least one row")
        y = np.asarray([float(bool(o)) for o in outcomes])
        x = _matrix(rows, features)
        means = np.nanmean(x, axis=0)
        means = np.where(np.isnan(means), 0.0, means)
        x = np.where(np.isnan(x), means, x)
        scales = x.std(axis=0)
        scales = np.where(scales > 1e-9, scales, 1.0)
        z = (x - means) / scales
        design = np.hstack([np.ones((len(y), 1)), z])
        beta = np.zeros(design.shape[1])
        penalty = np.full(design.shape[1], float(l2))
        penalty[0] = 0.0
        for _ in range(100):
            p = 1.0 / (1.0 + np.exp(-np.clip(design @ beta, -30, 30)))
            grad = design.T @ (p - y) + penalty * beta
            hess = (design * (p * (1 - p))[:, None]).T @ design + np.diag(penalty + 1e-9)
            step = np.linalg.solve(hess, grad)
            beta -= step
            if float(np.abs(step).max()) < 1e-8:
                break
        return cls(
            features=tuple(features),
            weights=tuple(float(b) for b in beta[1:]),
            bias=float(beta[0]),
            means=tuple(float(m) for m in means),
            scales=tuple(float(s) for s in scales),
            version=version,
            meta=dict(meta or {}),
        )


def _sigmoid(z: float) -> float:
    return 1.0 / (1.0 + math.exp(-z)) if z >= 0 else math.exp(z) / (1.0 + math.exp(z))


def _matrix(rows: Sequence[Diagnostics | Mapping[str, float]], features: Sequence[str]) -> Any:
    out = np.full((len(rows), len(features)), np.nan)
    for i, row in enumerate(rows):
        values = row.features() if isinstance(row, Diagnostics) else row
        for j, name in enumerate(features):
            if values.get(name) is not None:
                out[i, j] = float(values[name])
    return out


def brier_score(probabilities: Sequence[float], outcomes: Sequence[bool | int]) -> float:
    """Mean squared error of the probabilities against the 0/1 outcomes."""
    p, y = np.asarray(probabilities, float), np.asarray(outcomes, float)
    return float(np.mean((p - y) ** 2)) if len(p) else 0.0


def reliability_bins(
    probabilities: Sequence[float], outcomes: Sequence[bool | int], bins: int = 10
) -> list[dict[str, float]]:
    """Equal-width bins of predicted probability: count, mean prediction, observed rate."""
    p, y = np.asarray(probabilities, float), np.asarray(outcomes, float)
    out = []
    edges = np.linspace(0.0, 1.0, bins + 1)
    for b in range(bins):
        low, high = edges[b], edges[b + 1]
        inside = (p >= low) & ((p < high) if b < bins - 1 else (p <= high))
        if inside.any():
            out.append(
                {
                    "low": float(low),
                    "high": float(high),
                    "count": int(inside.sum()),
                    "predicted": float(p[inside].mean()),
                    "observed": float(y[inside].mean()),
                }
            )
    return out


def expected_calibration_error(
    probabilities: Sequence[float], outcomes: Sequence[bool | int], bins: int = 10
) -> float:
    """ECE: the count-weighted mean |predicted - observed| over equal-width bins."""
    table = reliability_bins(probabilities, outcomes, bins)
    total = sum(row["count"] for row in table)
    if not total:
        return 0.0
    return float(
        sum(row["count"] * abs(row["predicted"] - row["observed"]) for row in table) / total
    )


__all__ = [
    "AFTER_SEARCH_FILE",
    "DEFAULT_FILE",
    "SHIPPED_MODELS",
    "AnswerabilityCalibrator",
    "brier_score",
    "expected_calibration_error",
    "preset_key",
    "reliability_bins",
    "shipped_pair",
]
