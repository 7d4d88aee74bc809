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
import numbers
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from neocorrag_core.errors import ConfigError, InputError

from .types import FEATURE_NAMES, Diagnostics

ANSWERABILITY_FEATURES = (
    "support",
    "gap",
    "uncertainty",
    "relevance",
    "conflict",
    "answer_confidence",
)
"""What the calibrator is fitted on by default: the evidence and the answer, not ``cost`` or
``novelty``. Those two describe the search protocol, and the fit's episodes are forced to
keep searching (``answer_threshold=1.0``), so how they relate to a right answer there would
not carry over to the controller's own episodes."""

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
        """The probability that the generator's answer is right, in ``[0, 1]``.

        A feature that is absent, ``None`` or NaN is taken at its training mean (as
        :meth:`fit` takes it), so it shifts nothing; a value that is not a finite number
        raises :class:`~neocorrag_core.errors.InputError`."""
        values = diagnostics.features() if isinstance(diagnostics, Diagnostics) else diagnostics
        z = self.bias
        for name, w, mean, scale in zip(
            self.features, self.weights, self.means, self.scales, strict=True
        ):
            x = _feature_value(values, name)
            if x is not None:
                z += w * (x - mean) / scale
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
            x = _feature_value(values, name)
            if x is not None:
                term = w * (x - mean) / scale
                low, high = low + term, high + term
        return _sigmoid(low), _sigmoid(high)

    # -- files --------------------------------------------------------------------------

    @classmethod
    def load(
        cls, path: str | Path | None = None, *, shipped: str = DEFAULT_FILE
    ) -> AnswerabilityCalibrator:
        """Read a coefficient file; ``None``: the file called ``shipped`` that comes with
        neocorrag (:data:`DEFAULT_FILE`, or :data:`AFTER_SEARCH_FILE` for the model of
        the answer after one more search; :func:`shipped_files` lists them all).

        Raises :class:`~neocorrag_core.errors.InputError` naming the file and the field when
        it cannot be read or is not a valid coefficient file."""
        if path is None:
            available = shipped_files()
            if shipped not in available:
                raise InputError(
                    f"no shipped calibrator file {shipped!r}; shipped: {', '.join(available)}"
                )
            origin = f"neocorrag_core/belief/data/{shipped}"
            source: Any = _data_dir().joinpath(shipped)
        else:
            origin = str(path)
            source = Path(path)
        try:
            raw = source.read_text(encoding="utf-8")
        except OSError as exc:
            raise InputError(
                f"cannot read the calibrator file {origin}: {exc.strerror or exc}"
            ) from None
        except UnicodeDecodeError as exc:
            raise InputError(
                f"{origin} is not UTF-8 text ({exc.reason} at byte {exc.start})"
            ) from None
        try:
            data = json.loads(raw)
        except (json.JSONDecodeError, RecursionError) as exc:
            raise InputError(f"{origin} is not JSON: {exc}") from None
        return cls.from_dict(data, origin=origin)

    @classmethod
    def from_dict(cls, data: Any, *, origin: str = "calibrator") -> AnswerabilityCalibrator:
        """Build from the JSON structure :meth:`to_dict` writes, validated: ``features`` a
        list of distinct names from :data:`~neocorrag_core.belief.types.FEATURE_NAMES`,
        ``weights`` / ``means`` / ``scales`` lists of finite numbers of the same length,
        ``bias`` a finite number, ``version`` a non-empty string, ``meta`` an object;
        :class:`~neocorrag_core.errors.InputError` naming the field otherwise."""
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise InputError(f"{origin} is not a neocorrag answerability calibrator file")
        format_version = data.get("format_version")
        # 1.0 is 1 (a file written by hand or by another JSON writer); true is not.
        if not _is_number(format_version) or format_version != FORMAT_VERSION:
            raise InputError(
                f"{origin} has format_version {format_version!r}; this neocorrag "
                f"reads format_version {FORMAT_VERSION} only"
            )
        missing = [key for key in _FILE_KEYS if key not in data]
        if missing:
            raise InputError(f"{origin}: malformed calibrator (lacks {', '.join(missing)})")
        features = data["features"]
        if not isinstance(features, list):
            raise InputError(
                f"{origin}: features must be a list of diagnostic names, got {_show(features)}"
            )
        names = _feature_names(features, f"{origin}: features")
        columns = {
            key: _number_list(data[key], key, origin) for key in ("weights", "means", "scales")
        }
        bias = data["bias"]
        if not _is_number(bias) or not math.isfinite(bias):
            raise InputError(f"{origin}: bias must be a finite number, got {_show(bias)}")
        version = data["version"]
        if _is_number(version):  # a version written as a number ("version": 3) reads as text
            version = str(version)
        if not isinstance(version, str) or not version.strip():
            raise InputError(
                f"{origin}: version must be a non-empty string or a number, got {_show(version)}"
            )
        meta = data.get("meta")
        if meta is not None and not isinstance(meta, dict):
            raise InputError(f"{origin}: meta must be an object, got {_show(meta)}")
        try:
            return cls(
                features=names,
                weights=columns["weights"],
                bias=float(bias),
                means=columns["means"],
                scales=columns["scales"],
                version=version,
                meta=dict(meta or {}),
            )
        except ConfigError as exc:
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
        features: Sequence[str] = ANSWERABILITY_FEATURES,
        l2: float = 1.0,
        version: str = "user-fit",
        meta: Mapping[str, Any] | None = None,
    ) -> AnswerabilityCalibrator:
        """Fit on episodes' diagnostics and whether the generator was right (1) or not (0).

        L2-regularized logistic regression (Newton's method; the bias is not penalized) on
        standardized features; a row missing a feature (absent, ``None`` or NaN) takes the
        feature's mean, as :meth:`predict` does.

        Args:
            rows: :class:`Diagnostics` or mappings of feature name -> number.
            outcomes: one per row: ``1`` / ``True`` (right) or ``0`` / ``False`` (wrong);
                both must occur (a logistic model fitted on one class says nothing).
            features: distinct names from
                :data:`~neocorrag_core.belief.types.FEATURE_NAMES` (default
                :data:`ANSWERABILITY_FEATURES`, what the shipped files are fitted on).
            l2: the L2 strength, a finite number >= 0.

        Raises :class:`~neocorrag_core.errors.InputError` naming the bad argument.
        """
        names = _feature_names(features, "fit: features")
        if not _is_number(l2) or not math.isfinite(l2) or l2 < 0:
            raise InputError(f"fit: l2 must be a finite number >= 0, got {_show(l2)}")
        row_list = _as_list(rows, "rows")
        y = _outcomes(_as_list(outcomes, "outcomes"), "fit")
        if len(row_list) != len(y) or not row_list:
            raise InputError(
                f"fit needs one outcome per row, and at least one row (got {len(row_list)} "
                f"rows and {len(y)} outcomes)"
            )
        right = int(y.sum())
        if right in (0, len(y)):
            kind = "right (1)" if right else "wrong (0)"
            raise InputError(
                f"fit: every one of the {len(y)} outcomes is {kind}: a logistic model cannot "
                "be fitted on one class (give episodes with both right and wrong answers)"
            )
        x = _matrix(row_list, names)
        measured = ~np.isnan(x)
        counts = measured.sum(axis=0)
        # A feature no row carries gets mean 0, scale 1 and weight 0: it shifts nothing.
        means = np.where(counts > 0, np.nansum(x, axis=0) / np.maximum(counts, 1), 0.0)
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
            if not np.isfinite(beta).all() or float(np.abs(step).max()) < 1e-8:
                break
        if not np.isfinite(beta).all():
            raise InputError(
                f"fit did not converge with l2={l2:g} (the features separate the outcomes "
                "perfectly?): give l2 > 0"
            )
        return cls(
            features=names,
            weights=tuple(float(b) for b in beta[1:]),
            bias=float(beta[0]),
            means=tuple(float(m) for m in means),
            scales=tuple(float(s) for s in scales),
            version=version,
            meta=dict(meta or {}),
        )


_FILE_KEYS = ("version", "features", "weights", "bias", "means", "scales")


def _data_dir() -> Any:
    return resources.files("neocorrag_core.belief").joinpath("data")


def shipped_files() -> list[str]:
    """The coefficient files that come with neocorrag (``load(shipped=...)`` names)."""
    return sorted(entry.name for entry in _data_dir().iterdir() if entry.name.endswith(".json"))


def _is_number(value: Any) -> bool:
    """A real number that is not a bool (JSON ``true`` is not a coefficient)."""
    return isinstance(value, numbers.Real) and not isinstance(value, (bool, np.bool_))


def _show(value: Any, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "..."


def _list_like(value: Any) -> bool:
    """An iterable of items: not a string (an iterable of characters) or a mapping (of keys)."""
    return isinstance(value, Iterable) and not isinstance(value, (str, bytes, Mapping))


def _feature_names(features: Any, where: str) -> tuple[str, ...]:
    """``features`` as a tuple of distinct known names, else an InputError naming them."""
    if not _list_like(features):
        raise InputError(f"{where} must be a list of diagnostic names, got {_show(features)}")
    names = tuple(features)
    odd = [f for f in names if not isinstance(f, str)]
    if odd:
        raise InputError(f"{where}: {_show(odd[0])} is not a diagnostic name")
    if not names:
        raise InputError(f"{where} is empty; give some of {list(FEATURE_NAMES)}")
    unknown = [f for f in names if f not in FEATURE_NAMES]
    if unknown:
        raise InputError(f"{where}: unknown feature(s) {unknown}; known: {list(FEATURE_NAMES)}")
    repeated = sorted({f for f in names if names.count(f) > 1})
    if repeated:
        raise InputError(f"{where}: {repeated} listed more than once")
    return names


def _number_list(value: Any, key: str, origin: str) -> tuple[float, ...]:
    if not isinstance(value, list):
        raise InputError(f"{origin}: {key} must be a list of numbers, got {_show(value)}")
    for item in value:
        if not _is_number(item) or not math.isfinite(item):
            raise InputError(f"{origin}: {key} holds {_show(item)}, not a finite number")
    return tuple(float(v) for v in value)


def _as_list(values: Any, what: str, where: str = "fit") -> list[Any]:
    if not _list_like(values):
        raise InputError(f"{where}: {what} must be a list, got {_show(values)}")
    return list(values)


def _outcomes(outcomes: Iterable[Any], where: str) -> Any:
    """The outcomes as a float array of 0 and 1; InputError at the first other value."""
    values = []
    for i, outcome in enumerate(outcomes):
        if isinstance(outcome, (bool, np.bool_)) or (
            isinstance(outcome, numbers.Real) and outcome in (0, 1)
        ):
            values.append(float(outcome))
            continue
        raise InputError(
            f"{where}: outcomes[{i}] is {_show(outcome)}; an outcome is 1 / True (right) or "
            "0 / False (wrong)"
        )
    return np.asarray(values, float)


def _feature_value(values: Mapping[str, Any], name: str) -> float | None:
    """A row's value of ``name``: ``None`` when not measured (absent, ``None`` or NaN)."""
    x = values.get(name)
    if x is None:
        return None
    if not _is_number(x):
        raise InputError(f"diagnostic {name} is {_show(x)}, not a number")
    value = float(x)
    if math.isnan(value):
        return None
    if math.isinf(value):
        raise InputError(f"diagnostic {name} is {value}, not a finite number")
    return value


def _sigmoid(z: float) -> float:
    return 1.0 / (1.0 + math.exp(-z)) if z >= 0 else math.exp(z) / (1.0 + math.exp(z))


def _matrix(rows: Sequence[Any], features: Sequence[str]) -> Any:
    out = np.full((len(rows), len(features)), np.nan)
    for i, row in enumerate(rows):
        if isinstance(row, Diagnostics):
            values: Mapping[str, Any] = row.features()
        elif isinstance(row, Mapping):
            values = row
        else:
            raise InputError(
                f"fit: rows[{i}] is {_show(row)}, not Diagnostics or a mapping of features"
            )
        for j, name in enumerate(features):
            try:
                value = _feature_value(values, name)
            except InputError as exc:
                raise InputError(f"fit: rows[{i}]: {exc}") from None
            if value is not None:
                out[i, j] = value
    return out


def _scored_arrays(
    probabilities: Sequence[float], outcomes: Sequence[bool | int], what: str
) -> tuple[Any, Any]:
    """Probabilities and 0/1 outcomes as float arrays, checked for a score ``what``: one
    outcome per probability, every probability a finite number in ``[0, 1]``, every
    outcome 0 / 1 / ``False`` / ``True``; :class:`~neocorrag_core.errors.InputError`
    otherwise."""
    p_list = _as_list(probabilities, "probabilities", what)
    o_list = _as_list(outcomes, "outcomes", what)
    for value in p_list:
        if not _is_number(value) or not 0.0 <= value <= 1.0:  # NaN fails the comparison
            raise InputError(
                f"{what}: probabilities must be finite numbers in [0, 1], got {_show(value)}"
            )
    y = _outcomes(o_list, what)
    if len(p_list) != len(y):
        raise InputError(f"{what}: {len(p_list)} probabilities but {len(y)} outcomes")
    return np.asarray(p_list, float), y


def brier_score(probabilities: Sequence[float], outcomes: Sequence[bool | int]) -> float:
    """Mean squared error of the probabilities against the 0/1 outcomes."""
    p, y = _scored_arrays(probabilities, outcomes, "brier_score")
    return float(np.mean((p - y) ** 2)) if len(p) else 0.0


def reliability_bins(
    probabilities: Sequence[float], outcomes: Sequence[bool | int], bins: int = 10
) -> list[dict[str, float]]:
    """Equal-width bins of predicted probability: count, mean prediction, observed rate.

    Bin ``b`` holds ``b / bins <= p < (b + 1) / bins`` (the last one includes 1.0); a
    probability on an edge (0.3, 0.7) is in the bin it starts, whatever the float error of
    ``p * bins``."""
    if isinstance(bins, bool) or not isinstance(bins, numbers.Integral) or bins < 1:
        raise InputError(f"reliability_bins: bins must be an integer >= 1, got {_show(bins)}")
    bins = int(bins)
    p, y = _scored_arrays(probabilities, outcomes, "reliability_bins")
    index = np.clip(np.floor(p * bins + 1e-9), 0, bins - 1).astype(int)
    out = []
    for b in range(bins):
        inside = index == b
        if inside.any():
            out.append(
                {
                    "low": b / bins,
                    "high": (b + 1) / bins,
                    "count": int(inside.sum()),
                    "predicted": float(p[inside].mean()),
                    "observed": float(y[inside].mean()),
                }
            )
    return out


def expected_calibration_error(
    probabilities: Sequence[float], outcomes: Sequence[bool | int], bins: int = 10
) -> float:
    """ECE: the count-weighted mean |predicted - observed| over equal-width bins
    (:func:`reliability_bins`)."""
    table = reliability_bins(probabilities, outcomes, bins)
    total = sum(row["count"] for row in table)
    if not total:
        return 0.0
    return float(
        sum(row["count"] * abs(row["predicted"] - row["observed"]) for row in table) / total
    )


__all__ = [
    "AFTER_SEARCH_FILE",
    "ANSWERABILITY_FEATURES",
    "DEFAULT_FILE",
    "SHIPPED_MODELS",
    "AnswerabilityCalibrator",
    "brier_score",
    "expected_calibration_error",
    "preset_key",
    "reliability_bins",
    "shipped_files",
    "shipped_pair",
]
