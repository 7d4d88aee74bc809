"""Fitting the answerability calibrator on episodes: labelled rows, L2 selection, a report.

A row is one measured step of one episode: its diagnostics, and whether the draft answer
measured at that step is right (:data:`LABEL_RULE`: token F1 against the gold answers
>= 0.5, the target of BeliefRAG's appendix A.3). Steps that measured nothing (empty
``draft_answer``) give no row.

Rows are split by question, never by step (the steps of one question are alike, so
splitting them would leak): benchmark questions by
:func:`~neocorrag_core.eval.splits.calibration_split_of` (the ``tune`` half into ``train``
and ``dev``; ``report``-half questions are dropped and counted), a user's own questions by
the same hash over all of them. :func:`fit_and_select` fits one model per L2 strength on
``train``, keeps the one with the lowest ``dev`` log loss (the quantity the logistic model
minimizes, and it punishes confident mistakes, which is what makes the controller stop
early), and ships that model as fitted on ``train`` alone, so its ``dev`` numbers stay
held out apart from choosing one hyperparameter.

One call refits on your own data: :func:`fit_from_episodes` (``BeliefResult`` objects and
their gold answers), or :func:`fit_from_results` (``neocorrag eval`` result files).
"""

from __future__ import annotations

import datetime
import hashlib
import itertools
import json
import math
import warnings
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from neocorrag_core.errors import InputError

from .calibrator import (
    ANSWERABILITY_FEATURES,
    AnswerabilityCalibrator,
    _scored_arrays,
    brier_score,
    expected_calibration_error,
    reliability_bins,
)
from .types import FEATURE_NAMES, VERIFIER_NAMES, BeliefResult

SUCCESS_F1 = 0.5
LABEL_RULE = "right = SQuAD token F1 (max over the gold aliases) of the step's draft answer >= 0.5"
DEFAULT_L2_GRID = (0.01, 0.1, 1.0, 10.0, 100.0)
SELECTED_BY = "dev log loss (ties: the stronger L2)"
ECE_BINS = 10
PRIOR_FILE = "answerability_prior.json"
TARGETS = ("answerability", "after_search")
"""What a fit predicts: the answer now is right, or the answer after one more search is."""
SEARCH_ACTIONS = ("retrieve", "rewrite")
AFTER_SEARCH_RULE = (
    "right = the draft answer of the next measured step (after this step's search) has "
    "SQuAD token F1 >= 0.5"
)


@dataclass(frozen=True)
class CalibrationRow:
    """One measured step: its diagnostics, and whether its draft answer is right."""

    qid: str
    step: int
    features: dict[str, float]
    label: int
    f1: float


# -- rows ---------------------------------------------------------------------------------


def rows_from_trajectories(
    records: Iterable[Mapping[str, Any]],
    *,
    success_f1: float = SUCCESS_F1,
    target: str = "answerability",
) -> list[CalibrationRow]:
    """Labelled rows from per-question records (``neocorrag eval``'s ``per_question``).

    Each record needs ``qid``, ``answers`` (the gold strings) and ``info.trajectory`` (the
    controller's step dicts, :meth:`Step.as_dict`). ``target="answerability"``: each step
    with a non-empty ``draft_answer`` gives one row labelled 1 when ``f1_score(draft,
    answers) >= success_f1``. ``target="after_search"``: each such step whose action was a
    search (``retrieve`` / ``rewrite``) gives its diagnostics with the label of the next
    step that measured a draft (the answer after that search): the rows of the model in
    the fitted retrieval value. Raises :class:`InputError` naming the record when one is
    malformed, and when no row results.
    """
    if not 0.0 < success_f1 <= 1.0:
        raise InputError(f"success_f1 must be in (0, 1], got {success_f1}")
    if target not in TARGETS:
        raise InputError(f"target must be one of {', '.join(TARGETS)}, got {target!r}")
    rows: list[CalibrationRow] = []
    count = 0
    for count, record in enumerate(records, start=1):
        measured = _measured_steps(record, count, success_f1)
        if target == "answerability":
            rows.extend(row for row, _ in measured)
            continue
        for (row, action), (after, _) in itertools.pairwise(measured):
            if action in SEARCH_ACTIONS:
                rows.append(replace(row, label=after.label, f1=after.f1))
    if not rows:
        what = (
            "measured a draft answer"
            if target == "answerability"
            else "measured a draft answer, searched, and measured again"
        )
        raise InputError(
            f"no step of the {count} record(s) {what}: nothing to fit on "
            "(were they made by the belief controller, with draft answers recorded?)"
        )
    return rows


def _measured_steps(record: Any, count: int, success_f1: float) -> list[tuple[CalibrationRow, str]]:
    """The steps of one record that measured a draft answer: a row each (labelled by that
    draft), with the step's action."""
    # Imported here: loading the controller package must not load the benchmark harness.
    from neocorrag_core.eval.metrics import f1_score

    qid, answers, trajectory = _record_parts(record, count)
    out: list[tuple[CalibrationRow, str]] = []
    for position, step in enumerate(trajectory):
        if not isinstance(step, Mapping):
            raise InputError(f"record {count} (qid {qid!r}): step {position} is not an object")
        draft = step.get("draft_answer") or ""
        if not isinstance(draft, str):
            raise InputError(f"record {count} (qid {qid!r}): draft_answer is not text")
        if not draft.strip():
            continue
        index = step.get("step", position)
        if isinstance(index, bool) or not isinstance(index, int):
            raise InputError(
                f"record {count} (qid {qid!r}): step {position} has step={index!r}, not an integer"
            )
        f1 = f1_score(draft, answers)
        row = CalibrationRow(
            qid=qid,
            step=index,
            features=_features(step.get("diagnostics"), f"record {count} (qid {qid!r})"),
            label=int(f1 >= success_f1),
            f1=f1,
        )
        out.append((row, str(step.get("action", ""))))
    return out


def _record_parts(record: Any, index: int) -> tuple[str, list[str], list[Any]]:
    where = f"record {index}"
    if not isinstance(record, Mapping):
        raise InputError(f"{where} is not an object")
    missing = [key for key in ("qid", "answers", "info") if key not in record]
    if missing:
        raise InputError(f"{where} lacks {', '.join(missing)}")
    qid = str(record["qid"])
    answers = record["answers"]
    if not isinstance(answers, list) or not answers or not all(isinstance(a, str) for a in answers):
        raise InputError(f"{where} (qid {qid!r}): answers must be a non-empty list of strings")
    info = record["info"]
    trajectory = info.get("trajectory") if isinstance(info, Mapping) else None
    if not isinstance(trajectory, list):
        raise InputError(
            f"{where} (qid {qid!r}) has no info.trajectory list: is it a belief-controller "
            "method's record?"
        )
    return qid, answers, trajectory


def _features(diagnostics: Any, where: str) -> dict[str, float]:
    if not isinstance(diagnostics, Mapping):
        raise InputError(f"{where}: a step with a draft answer has no diagnostics object")
    out: dict[str, float] = {}
    for name in FEATURE_NAMES:
        value = diagnostics.get(name)
        if value is None:
            continue  # not measured (answer_confidence with a framework LLM): the mean is used
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise InputError(f"{where}: diagnostic {name} is {value!r}, not a number")
        if not math.isfinite(value):
            raise InputError(f"{where}: diagnostic {name} is not finite")
        out[name] = float(value)
    return out


# -- scores -------------------------------------------------------------------------------


def log_loss(probabilities: Sequence[float], outcomes: Sequence[bool | int]) -> float:
    """Mean negative log-likelihood of the 0/1 outcomes (probabilities clipped to 1e-15).

    Raises :class:`InputError` unless there is one outcome (0 / 1) per probability and
    every probability is a finite number in ``[0, 1]``."""
    p, y = _scored_arrays(probabilities, outcomes, "log_loss")
    p = np.clip(p, 1e-15, 1 - 1e-15)
    if not len(p):
        return 0.0
    return float(-np.mean(y * np.log(p) + (1 - y) * np.log(1 - p)))


def evaluate(calibrator: AnswerabilityCalibrator, rows: Sequence[CalibrationRow]) -> dict[str, Any]:
    """Sizes, base rate, Brier, ECE (10 bins), log loss and reliability bins on ``rows``."""
    return _scores([calibrator.predict(r.features) for r in rows], rows)


def _scores(probabilities: Sequence[float], rows: Sequence[CalibrationRow]) -> dict[str, Any]:
    labels = [r.label for r in rows]
    return {
        "questions": len({r.qid for r in rows}),
        "rows": len(rows),
        "base_rate": float(np.mean(labels)) if labels else 0.0,
        "brier": brier_score(probabilities, labels),
        "ece": expected_calibration_error(probabilities, labels, ECE_BINS),
        "log_loss": log_loss(probabilities, labels),
        "reliability": reliability_bins(probabilities, labels, ECE_BINS),
    }


# -- fitting ------------------------------------------------------------------------------


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
    file is the default) and a constant at the train base rate.

    Raises :class:`InputError` when a split is empty or holds one class only: a logistic
    model fitted on one class says nothing (its bias runs off to infinity), and a dev set of
    one class cannot tell the L2 strengths apart (with a single L2 strength it is only
    scored, and allowed).
    """
    grid = sorted({float(v) for v in l2_grid})
    if not grid or not all(math.isfinite(v) and v >= 0 for v in grid):
        raise InputError(f"l2_grid must hold finite values >= 0, got {list(l2_grid)}")
    _check_rows("train", train_rows)
    # With one L2 strength there is nothing to select, so a dev split of one class can
    # still be scored (Brier, ECE); with several it could not tell them apart.
    _check_rows("dev", dev_rows, one_class_ok=len(grid) == 1)
    present = {name for row in train_rows for name in row.features}
    unknown = sorted(set(features) - set(FEATURE_NAMES))
    if unknown:
        raise InputError(f"unknown feature(s) {unknown}; known: {list(FEATURE_NAMES)}")
    unverified = sum(1 for row in train_rows if not set(VERIFIER_NAMES) & set(row.features))
    if unverified * 2 > len(train_rows) and set(VERIFIER_NAMES) & set(features):
        warnings.warn(
            f"{unverified} of {len(train_rows)} train rows have no verifier diagnostics (the "
            "verifier was skipped: verify='auto'), so the fit cannot learn what the verifier "
            "says; collect the episodes with BeliefConfig(verify='always')",
            stacklevel=2,
        )
    features = tuple(name for name in FEATURE_NAMES if name in present and name in features)
    if not features:
        raise InputError("the train rows carry no diagnostics to fit on")
    train_x = [r.features for r in train_rows]
    train_y = [r.label for r in train_rows]

    dev_y = [r.label for r in dev_rows]
    models: dict[float, AnswerabilityCalibrator] = {}
    candidates: list[dict[str, float]] = []
    for l2 in grid:
        models[l2] = AnswerabilityCalibrator.fit(
            train_x, train_y, features=features, l2=l2, version="candidate"
        )
        dev_p = [models[l2].predict(r.features) for r in dev_rows]
        candidates.append(
            {
                "l2": l2,
                "dev_log_loss": log_loss(dev_p, dev_y),
                "dev_brier": brier_score(dev_p, dev_y),
            }
        )
    chosen = min(candidates, key=lambda c: (c["dev_log_loss"], -c["l2"]))
    best = models[chosen["l2"]]

    fitted = {"train": evaluate(best, train_rows), "dev": evaluate(best, dev_rows)}
    prior = prior if prior is not None else hand_set_prior()
    base = fitted["train"]["base_rate"]
    version = version or _version(train_rows, dev_rows, date)
    summary = {
        split: {k: v for k, v in scores.items() if k != "reliability"}
        for split, scores in fitted.items()
    }
    calibrator = replace(
        best,
        version=version,
        meta={
            "fitted": True,
            "label_rule": LABEL_RULE,
            "l2": chosen["l2"],
            "selected_by": SELECTED_BY,
            "refit_on": "train only",
            **summary,
            **dict(meta or {}),
        },
    )
    report = {
        "version": version,
        "features": list(features),
        "label_rule": dict(meta or {}).get("label_rule", LABEL_RULE),
        "selected_by": SELECTED_BY,
        "l2": chosen["l2"],
        "l2_grid": candidates,
        "fitted": fitted,
        "prior": {
            "version": prior.version,
            "train": evaluate(prior, train_rows),
            "dev": evaluate(prior, dev_rows),
        },
        "base_rate_constant": {
            "probability": base,
            "train": _scores([base] * len(train_rows), train_rows),
            "dev": _scores([base] * len(dev_rows), dev_rows),
        },
        "meta": dict(meta or {}),
    }
    return calibrator, report


def hand_set_prior() -> AnswerabilityCalibrator:
    """The unfitted prior shipped in ``belief/data/answerability_prior.json``."""
    text = resources.files("neocorrag_core.belief").joinpath("data").joinpath(PRIOR_FILE)
    return AnswerabilityCalibrator.from_dict(
        json.loads(text.read_text(encoding="utf-8")), origin=PRIOR_FILE
    )


def _check_rows(split: str, rows: Sequence[CalibrationRow], one_class_ok: bool = False) -> None:
    """Each row a :class:`CalibrationRow` labelled 0 or 1 whose features are finite numbers
    (a feature not measured is left out of ``features``, as :func:`rows_from_trajectories`
    leaves it), and both classes present unless ``one_class_ok``."""
    if isinstance(rows, (str, bytes)) or not isinstance(rows, Sequence):
        raise InputError(f"the {split} rows must be a list of CalibrationRow")
    if not rows:
        raise InputError(f"the {split} split has no rows: give more questions")
    for i, r in enumerate(rows):
        where = f"{split} row {i}"
        if not isinstance(r, CalibrationRow):
            raise InputError(f"{where} is {type(r).__name__}, not a CalibrationRow")
        where += f" (qid {r.qid!r}, step {r.step})"
        if isinstance(r.label, bool) or r.label not in (0, 1):
            raise InputError(f"{where}: label is {r.label!r}, not 0 or 1")
        if not isinstance(r.features, Mapping):
            raise InputError(f"{where}: features is not a mapping of name -> number")
        for name, value in r.features.items():
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise InputError(f"{where}: feature {name} is {value!r}, not a number")
            if not math.isfinite(value):
                raise InputError(
                    f"{where}: feature {name} is {value}; leave a feature that was not "
                    "measured out of the row instead"
                )
    right = sum(r.label for r in rows)
    if right in (0, len(rows)) and not one_class_ok:
        kind = "right" if right else "wrong"
        raise InputError(
            f"every one of the {len(rows)} {split} rows is a {kind} answer: a calibrator "
            "cannot be fitted or selected on one class (give more questions, change "
            "the success rule, or give one L2 strength so that dev is only scored)"
        )


def _version(
    train_rows: Sequence[CalibrationRow],
    dev_rows: Sequence[CalibrationRow],
    date: datetime.date | None,
) -> str:
    digest = hashlib.sha256()
    for split, rows in (("train", train_rows), ("dev", dev_rows)):
        for r in sorted(rows, key=lambda r: (r.qid, r.step)):
            line = [split, r.qid, r.step, r.label, sorted(r.features.items())]
            digest.update(json.dumps(line).encode())
    day = date or datetime.datetime.now(datetime.timezone.utc).date()
    return f"fit-{day:%Y%m%d}-{digest.hexdigest()[:8]}"


def _split_note(within_tune: bool) -> dict[str, str]:
    from neocorrag_core.eval.splits import CALIBRATION_SALT, SALT

    scope = f"tune-half questions only (salt {SALT})" if within_tune else "all questions"
    return {
        "calibration_salt": CALIBRATION_SALT,
        "rule": f"{scope}; dev when sha256(calibration_salt:id)[0] % 3 == 0, else train; "
        "split by question, not by step",
    }


# -- one call -----------------------------------------------------------------------------


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
    the answer after one more search, see :func:`rows_from_trajectories`).
    """
    from neocorrag_core.eval.splits import calibration_split_of, split_of

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


def fit_from_episodes(
    results: Sequence[BeliefResult],
    answers: Sequence[Sequence[str]],
    *,
    ids: Sequence[str] | None = None,
    target: str = "answerability",
    success_f1: float = SUCCESS_F1,
    l2_grid: Sequence[float] = DEFAULT_L2_GRID,
    version: str | None = None,
    meta: Mapping[str, Any] | None = None,
) -> tuple[AnswerabilityCalibrator, dict[str, Any]]:
    """Refit on your own episodes in one call: controller results and their gold answers.

    ``ids`` name the questions for the train/dev split (default: the question texts). Run
    the controller with a high ``answer_threshold`` so that episodes keep searching and
    every step is measured. Use the result with ``BeliefController(..., calibrator=...)``
    or ``calibrator.save(path)``; ``target="after_search"`` fits the retrieval value's
    model from the same episodes (``BeliefController(..., after_search=...)``).
    """
    if len(results) != len(answers) or (ids is not None and len(ids) != len(results)):
        raise InputError("fit_from_episodes needs one answers list (and id) per result")
    names = list(ids) if ids is not None else [r.question for r in results]
    records = [
        {"qid": qid, "answers": list(gold), "info": {"trajectory": result.trajectory}}
        for qid, result, gold in zip(names, results, answers, strict=True)
    ]
    return fit_from_records(
        records,
        within_tune=False,
        target=target,
        success_f1=success_f1,
        l2_grid=l2_grid,
        version=version,
        meta={"source": "fit_from_episodes", **dict(meta or {})},
    )


__all__ = [
    "ANSWERABILITY_FEATURES",
    "DEFAULT_L2_GRID",
    "FEATURE_NAMES",
    "LABEL_RULE",
    "SUCCESS_F1",
    "TARGETS",
    "CalibrationRow",
    "evaluate",
    "fit_and_select",
    "fit_from_episodes",
    "fit_from_records",
    "fit_from_results",
    "hand_set_prior",
    "log_loss",
    "rows_from_trajectories",
]
