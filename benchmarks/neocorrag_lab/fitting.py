"""How the shipped calibrator files are fitted: L2 selection on dev, reports, eval runs.

The product refits a calibrator on a user's own episodes in one call
(:func:`neocorrag_core.belief.fitting.fit_from_episodes`: one L2 strength, scored on a
held-out part). The shipped files are fitted here, on benchmark runs, with what a
release needs beyond that:

* benchmark questions are split within the ``tune`` half only
  (:func:`calibration_split_of`: ``report``-half questions are dropped and counted, so
  report-half numbers of a method that uses a calibrator stay held out), then into
  ``train`` and ``dev`` by the product's calibration hash;
* :func:`fit_and_select` fits one model per L2 strength on ``train`` and keeps the one
  with the lowest ``dev`` log loss (the quantity the logistic model minimizes, and it
  punishes confident mistakes, which is what makes the controller stop early); the kept
  model is the one fitted on ``train`` alone, so its ``dev`` numbers stay held out apart
  from choosing one hyperparameter;
* its report compares the fit with the hand-set prior (:func:`hand_set_prior`) and a
  constant at the train base rate, per split;
* :func:`fit_from_results` reads ``neocorrag eval`` result files and names each in the
  file's ``meta``. ``benchmarks/fit_calibrator.py`` writes the file, the report and the
  reliability plot.
"""

from __future__ import annotations

import datetime
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from neocorrag_core.belief.calibrator import (
    ANSWERABILITY_FEATURES,
    AnswerabilityCalibrator,
    brier_score,
)
from neocorrag_core.belief.fitting import (
    AFTER_SEARCH_RULE,
    CALIBRATION_SALT,
    SUCCESS_F1,
    CalibrationPart,
    CalibrationRow,
    calibration_part,
    checked_features,
    evaluate,
    fit_checked,
    log_loss,
    row_scores,
    rows_from_trajectories,
)
from neocorrag_core.errors import InputError
from neocorrag_core.eval.splits import SALT, split_of

DEFAULT_L2_GRID = (0.01, 0.1, 1.0, 10.0, 100.0)
SELECTED_BY = "dev log loss (ties: the stronger L2)"
PRIOR_FILE = "answerability_prior.json"
"""The hand-set prior shipped in ``neocorrag_core/belief/data``."""


def calibration_split_of(question_id: str, *, within_tune: bool = True) -> CalibrationPart:
    """The calibration part (``train`` or ``dev``) of a ``tune``-half question.

    Raises ``ValueError`` for a ``report``-half question: those never train or select a
    calibrator. ``within_tune=False`` applies the same second hash to any id
    (:func:`~neocorrag_core.belief.fitting.calibration_part`).
    """
    if within_tune and split_of(question_id) != "tune":
        raise ValueError(
            f"question {question_id!r} is in the report half; calibrators are fitted and "
            "selected on the tune half only"
        )
    return calibration_part(question_id)


def hand_set_prior() -> AnswerabilityCalibrator:
    """The unfitted prior shipped in ``belief/data/answerability_prior.json``."""
    return AnswerabilityCalibrator.load(shipped=PRIOR_FILE)


def fit_and_select(
    train_rows: Sequence[CalibrationRow],
    dev_rows: Sequence[CalibrationRow],
    *,
    l2_grid: Sequence[float] = DEFAULT_L2_GRID,
    features: Sequence[str] = ANSWERABILITY_FEATURES,
    prior: AnswerabilityCalibrator | None = None,
    version: str | None = None,
    meta: Mapping[str, Any] | None = None,
    date: datetime.date | None = None,
) -> tuple[AnswerabilityCalibrator, dict[str, Any]]:
    """Fit one calibrator per L2 strength on ``train``, keep the lowest ``dev`` log loss.

    ``features``: the diagnostics fitted on (default :data:`ANSWERABILITY_FEATURES`; those
    no train row carries are left out).

    The kept model is the one fitted on ``train`` only. Returns it (version
    ``fit-<YYYYMMDD>-<hash of the rows>`` unless ``version`` is given; its ``meta`` holds
    the rule, the split, the selection and the metrics, plus ``meta``) and a report: per
    split the sizes, base rate, Brier, ECE, log loss and reliability bins, for the fitted
    model, the ``prior`` (default: the hand-set :func:`hand_set_prior`, even once a fitted
    file is the default) and a constant at the train base rate, and the dev scores of every
    L2 strength.

    Raises :class:`InputError` when a split is empty or holds one class only: a logistic
    model fitted on one class says nothing (its bias runs off to infinity), and a dev set of
    one class cannot tell the L2 strengths apart (with a single L2 strength it is only
    scored, and allowed).
    """
    grid = sorted({float(v) for v in l2_grid})
    if not grid or not all(math.isfinite(v) and v >= 0 for v in grid):
        raise InputError(f"l2_grid must hold finite values >= 0, got {list(l2_grid)}")
    # With one L2 strength there is nothing to select, so a dev split of one class can
    # still be scored (Brier, ECE); with several it could not tell them apart.
    chosen_features = checked_features(
        train_rows, dev_rows, features, one_class_dev_ok=len(grid) == 1
    )
    train_x = [r.features for r in train_rows]
    train_y = [r.label for r in train_rows]
    dev_y = [r.label for r in dev_rows]
    candidates: list[dict[str, float]] = []
    for l2 in grid:
        model = AnswerabilityCalibrator.fit(
            train_x, train_y, features=chosen_features, l2=l2, version="candidate"
        )
        dev_p = [model.predict(r.features) for r in dev_rows]
        candidates.append(
            {
                "l2": l2,
                "dev_log_loss": log_loss(dev_p, dev_y),
                "dev_brier": brier_score(dev_p, dev_y),
            }
        )
    chosen = min(candidates, key=lambda c: (c["dev_log_loss"], -c["l2"]))
    calibrator, fitted = fit_checked(
        train_rows,
        dev_rows,
        chosen_features,
        l2=chosen["l2"],
        version=version,
        meta=meta,
        date=date,
    )
    calibrator = replace(calibrator, meta={**calibrator.meta, "selected_by": SELECTED_BY})
    prior = prior if prior is not None else hand_set_prior()
    base = fitted["fitted"]["train"]["base_rate"]
    report = {
        **fitted,
        "selected_by": SELECTED_BY,
        "l2_grid": candidates,
        "prior": {
            "version": prior.version,
            "train": evaluate(prior, train_rows),
            "dev": evaluate(prior, dev_rows),
        },
        "base_rate_constant": {
            "probability": base,
            "train": row_scores([base] * len(train_rows), train_rows),
            "dev": row_scores([base] * len(dev_rows), dev_rows),
        },
    }
    return calibrator, report


def _split_note(within_tune: bool) -> dict[str, str]:
    scope = f"tune-half questions only (salt {SALT})" if within_tune else "all questions"
    return {
        "calibration_salt": CALIBRATION_SALT,
        "rule": f"{scope}; dev when sha256(calibration_salt:id)[0] % 3 == 0, else train; "
        "split by question, not by step",
    }


def fit_from_records(
    records: Iterable[Mapping[str, Any]],
    *,
    within_tune: bool = True,
    target: str = "answerability",
    success_f1: float = SUCCESS_F1,
    l2_grid: Sequence[float] = DEFAULT_L2_GRID,
    prior: AnswerabilityCalibrator | None = None,
    version: str | None = None,
    meta: Mapping[str, Any] | None = None,
    date: datetime.date | None = None,
) -> tuple[AnswerabilityCalibrator, dict[str, Any]]:
    """Rows from ``records``, split into train and dev by question, then :func:`fit_and_select`.

    ``within_tune=True`` (benchmark data): questions of the ``report`` half are dropped and
    counted (``report["report_half_dropped"]``); ``False``: all questions are split.
    ``target``: ``"answerability"`` (the calibrator) or ``"after_search"`` (the model of
    the answer after one more search, see
    :func:`~neocorrag_core.belief.fitting.rows_from_trajectories`).
    """
    rows = rows_from_trajectories(records, success_f1=success_f1, target=target)
    dropped = {r.qid for r in rows if within_tune and split_of(r.qid) != "tune"}
    if dropped and len(dropped) == len({r.qid for r in rows}):
        raise InputError(
            f"all {len(dropped)} questions are in the report half, which never trains a "
            "calibrator: run the eval with --split tune"
        )
    parts: dict[str, list[CalibrationRow]] = {"train": [], "dev": []}
    for row in rows:
        if row.qid not in dropped:
            parts[calibration_split_of(row.qid, within_tune=within_tune)].append(row)
    calibrator, report = fit_and_select(
        parts["train"],
        parts["dev"],
        l2_grid=l2_grid,
        prior=prior,
        version=version,
        meta={
            "target": target,
            **({"label_rule": AFTER_SEARCH_RULE} if target == "after_search" else {}),
            "success_f1": success_f1,
            "split": _split_note(within_tune),
            **dict(meta or {}),
        },
        date=date,
    )
    report["report_half_dropped"] = len(dropped)
    return calibrator, report


def fit_from_results(
    paths: Sequence[str | Path],
    *,
    method: str = "belief",
    target: str = "answerability",
    success_f1: float = SUCCESS_F1,
    l2_grid: Sequence[float] = DEFAULT_L2_GRID,
    prior: AnswerabilityCalibrator | None = None,
    version: str | None = None,
    meta: Mapping[str, Any] | None = None,
    date: datetime.date | None = None,
) -> tuple[AnswerabilityCalibrator, dict[str, Any]]:
    """Refit from ``neocorrag eval`` runs: the ``method``'s records of each ``results.json``.

    The calibrator's ``meta`` names each file with its data set, split, LM and overrides
    (plus ``meta``, e.g. the script that called).
    """
    if not paths:
        raise InputError("give at least one results.json")
    records: list[Mapping[str, Any]] = []
    sources = []
    for path in paths:
        results = _read_results(Path(path))
        per_question = results.get("per_question")
        if not isinstance(per_question, Mapping) or method not in per_question:
            known = sorted(per_question) if isinstance(per_question, Mapping) else []
            raise InputError(
                f"{path} has no per-question records of method {method!r} "
                f"(it has: {', '.join(known) or 'none'})"
            )
        if not isinstance(per_question[method], list):
            raise InputError(f"{path}: per_question[{method!r}] is not a list")
        records.extend(per_question[method])
        settings = results.get("settings")
        settings = settings if isinstance(settings, Mapping) else {}
        sources.append(
            {
                "path": str(path),
                "data": settings.get("data"),
                "split": settings.get("split"),
                "lm": settings.get("lm") or "default",
                "reader": settings.get("reader"),
                "records": len(per_question[method]),
                **{
                    key: value
                    for key, value in settings.items()
                    if key.endswith("_overrides") and value
                },
            }
        )
    lms = sorted({str(source["lm"]) for source in sources})
    return fit_from_records(
        records,
        within_tune=True,
        target=target,
        success_f1=success_f1,
        l2_grid=l2_grid,
        prior=prior,
        version=version,
        meta={
            "method": method,
            "lm": lms[0] if len(lms) == 1 else lms,
            "data_files": sources,
            **dict(meta or {}),
        },
        date=date,
    )


def _read_results(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise InputError(f"cannot read {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise InputError(f"{path} is not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except (json.JSONDecodeError, RecursionError) as exc:
        raise InputError(f"{path} is not JSON: {exc}") from None
    if not isinstance(data, dict):
        raise InputError(f"{path} is not a neocorrag eval results.json")
    return data


__all__ = [
    "DEFAULT_L2_GRID",
    "PRIOR_FILE",
    "SELECTED_BY",
    "calibration_split_of",
    "fit_and_select",
    "fit_from_records",
    "fit_from_results",
    "hand_set_prior",
]
