"""Refitting the answerability calibrator on your own episodes, in one call.

A row is one measured step of one episode: its diagnostics, and whether the draft answer
measured at that step is right (:data:`LABEL_RULE`: token F1 against the gold answers
>= 0.5, the target of BeliefRAG's appendix A.3). Steps that measured nothing (empty
``draft_answer``) give no row.

Rows are split by question, never by step (the steps of one question are alike, so
splitting them would leak): :func:`calibration_part` puts about a third of the questions
in ``dev`` by a salted hash of their id, the rest in ``train``. :func:`fit_from_episodes`
(``BeliefResult`` objects and their gold answers) and :func:`fit_from_records`
(per-question records, e.g. a ``neocorrag eval`` run's ``per_question[method]``) fit one
L2-regularized logistic model on ``train`` and score it on both parts (Brier, ECE, log
loss, reliability bins), so its ``dev`` numbers are held out.

The fitted calibrator's ``meta`` names the label rule, the split, the L2 strength, the
scores and the prompt versions of neocorrag's LM components (:func:`prompt_versions`):
the diagnostics it was fitted on are measured through those prompts, so a file is valid
for them.

How the shipped files are fitted (the L2 strength selected on ``dev`` over a grid, the
comparison with the hand-set prior and a constant, benchmark questions split within the
``tune`` half only, reading eval result files, the reliability plot) is the development
lab's (``benchmarks/neocorrag_lab/fitting.py``, ``benchmarks/fit_calibrator.py``), built
on the functions here.
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
from typing import Any, Literal

import numpy as np

from neocorrag_core.answer_match import f1_score
from neocorrag_core.errors import InputError

from .answer import ANSWER_PROMPT_VERSION
from .calibrator import (
    ANSWERABILITY_FEATURES,
    AnswerabilityCalibrator,
    _scored_arrays,
    brier_score,
    expected_calibration_error,
    reliability_bins,
)
from .types import FEATURE_NAMES, VERIFIER_NAMES, BeliefResult
from .verifier import VERIFIER_PROMPT_VERSION
from .writer import REWRITE_PROMPT_VERSION

SUCCESS_F1 = 0.5
LABEL_RULE = "right = SQuAD token F1 (max over the gold aliases) of the step's draft answer >= 0.5"
DEFAULT_L2 = 1.0
"""The L2 strength of a one-call fit (that of :meth:`AnswerabilityCalibrator.fit`)."""
ECE_BINS = 10
TARGETS = ("answerability", "after_search")
"""What a fit predicts: the answer now is right, or the answer after one more search is."""
SEARCH_ACTIONS = ("retrieve", "rewrite")
AFTER_SEARCH_RULE = (
    "right = the draft answer of the next measured step (after this step's search) has "
    "SQuAD token F1 >= 0.5"
)
CALIBRATION_SALT = "neocorrag-calib-v1"
"""The salt of the train/dev split of a fit's questions (:func:`calibration_part`)."""

CalibrationPart = Literal["train", "dev"]
CALIBRATION_PARTS: tuple[CalibrationPart, ...] = ("train", "dev")


@dataclass(frozen=True)
class CalibrationRow:
    """One measured step: its diagnostics, and whether its draft answer is right."""

    qid: str
    step: int
    features: dict[str, float]
    label: int
    f1: float


def prompt_versions() -> dict[str, str]:
    """The versions of the prompts through which neocorrag's LM components measure the
    diagnostics and the draft answer a calibrator is fitted on (answer, verifier, query
    rewrite); recorded in a fitted calibrator's ``meta``."""
    return {
        "answer": ANSWER_PROMPT_VERSION,
        "verifier": VERIFIER_PROMPT_VERSION,
        "rewrite": REWRITE_PROMPT_VERSION,
    }


def calibration_part(question_id: str) -> CalibrationPart:
    """The part of a fit a question's rows go to: ``dev`` when the first byte of
    ``sha256("neocorrag-calib-v1:" + id)`` is divisible by 3 (about a third), else
    ``train``."""
    digest = hashlib.sha256(f"{CALIBRATION_SALT}:{question_id}".encode()).digest()
    return "dev" if digest[0] % 3 == 0 else "train"


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
    return row_scores([calibrator.predict(r.features) for r in rows], rows)


def row_scores(probabilities: Sequence[float], rows: Sequence[CalibrationRow]) -> dict[str, Any]:
    """:func:`evaluate`'s numbers for given ``probabilities``, one per row (e.g. those of a
    constant)."""
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


def checked_features(
    train_rows: Sequence[CalibrationRow],
    dev_rows: Sequence[CalibrationRow],
    features: Sequence[str] = ANSWERABILITY_FEATURES,
    *,
    one_class_dev_ok: bool = True,
) -> tuple[str, ...]:
    """Check the two parts of a fit and return the features to fit on: those of
    ``features`` that a train row carries, in :data:`FEATURE_NAMES` order.

    Raises :class:`InputError` when a part is empty, a row is malformed, an unknown
    feature is named, no feature is left, or a part holds one class only (a logistic
    model fitted on one class says nothing; a ``dev`` part of one class is allowed when
    ``one_class_dev_ok``: it is then only scored). Warns when most train rows lack the
    verifier's diagnostics (episodes run with ``verify="auto"``).
    """
    check_rows("train", train_rows)
    check_rows("dev", dev_rows, one_class_ok=one_class_dev_ok)
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
            stacklevel=3,
        )
    chosen = tuple(name for name in FEATURE_NAMES if name in present and name in features)
    if not chosen:
        raise InputError("the train rows carry no diagnostics to fit on")
    return chosen


def fit_checked(
    train_rows: Sequence[CalibrationRow],
    dev_rows: Sequence[CalibrationRow],
    features: Sequence[str],
    *,
    l2: float = DEFAULT_L2,
    version: str | None = None,
    meta: Mapping[str, Any] | None = None,
    date: datetime.date | None = None,
) -> tuple[AnswerabilityCalibrator, dict[str, Any]]:
    """Fit one model on ``train`` at ``l2`` over ``features`` (rows and features already
    checked by :func:`checked_features`) and score it on both parts.

    Returns the calibrator (version ``fit-<YYYYMMDD>-<hash of the rows>`` unless
    ``version`` is given; its ``meta`` holds the label rule, the L2 strength, the train
    and dev scores, :func:`prompt_versions`, plus ``meta``) and a report: ``version``,
    ``features``, ``label_rule``, ``l2``, ``fitted`` (per part: sizes, base rate, Brier,
    ECE, log loss, reliability bins) and ``meta``.
    """
    model = AnswerabilityCalibrator.fit(
        [r.features for r in train_rows],
        [r.label for r in train_rows],
        features=features,
        l2=l2,
        version="candidate",
    )
    fitted = {"train": evaluate(model, train_rows), "dev": evaluate(model, dev_rows)}
    version = version or fit_version(train_rows, dev_rows, date)
    summary = {
        part: {k: v for k, v in scores.items() if k != "reliability"}
        for part, scores in fitted.items()
    }
    calibrator = replace(
        model,
        version=version,
        meta={
            "fitted": True,
            "label_rule": LABEL_RULE,
            "l2": float(l2),
            "refit_on": "train only",
            **summary,
            "prompt_versions": prompt_versions(),
            **dict(meta or {}),
        },
    )
    report = {
        "version": version,
        "features": list(features),
        "label_rule": dict(meta or {}).get("label_rule", LABEL_RULE),
        "l2": float(l2),
        "fitted": fitted,
        "meta": dict(meta or {}),
    }
    return calibrator, report


def fit_split(
    train_rows: Sequence[CalibrationRow],
    dev_rows: Sequence[CalibrationRow],
    *,
    l2: float = DEFAULT_L2,
    features: Sequence[str] = ANSWERABILITY_FEATURES,
    version: str | None = None,
    meta: Mapping[str, Any] | None = None,
    date: datetime.date | None = None,
) -> tuple[AnswerabilityCalibrator, dict[str, Any]]:
    """Fit on ``train`` at one L2 strength and score on ``train`` and ``dev``
    (:func:`checked_features`, then :func:`fit_checked`); ``dev`` may hold one class (it is
    only scored)."""
    chosen = checked_features(train_rows, dev_rows, features)
    return fit_checked(train_rows, dev_rows, chosen, l2=l2, version=version, meta=meta, date=date)


def check_rows(split: str, rows: Sequence[CalibrationRow], one_class_ok: bool = False) -> None:
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


def fit_version(
    train_rows: Sequence[CalibrationRow],
    dev_rows: Sequence[CalibrationRow],
    date: datetime.date | None = None,
) -> str:
    """``fit-<YYYYMMDD>-<hash of the rows>``: the version of a fit on these rows (today's
    date, UTC, unless ``date`` is given)."""
    digest = hashlib.sha256()
    for split, rows in (("train", train_rows), ("dev", dev_rows)):
        for r in sorted(rows, key=lambda r: (r.qid, r.step)):
            line = [split, r.qid, r.step, r.label, sorted(r.features.items())]
            digest.update(json.dumps(line).encode())
    day = date or datetime.datetime.now(datetime.timezone.utc).date()
    return f"fit-{day:%Y%m%d}-{digest.hexdigest()[:8]}"


def split_note() -> dict[str, str]:
    """The split of :func:`calibration_part`, as a fitted file's ``meta`` names it."""
    return {
        "calibration_salt": CALIBRATION_SALT,
        "rule": "all questions; dev when sha256(calibration_salt:id)[0] % 3 == 0, else train; "
        "split by question, not by step",
    }


# -- one call -----------------------------------------------------------------------------


def fit_from_records(
    records: Iterable[Mapping[str, Any]],
    *,
    target: str = "answerability",
    success_f1: float = SUCCESS_F1,
    l2: float = DEFAULT_L2,
    version: str | None = None,
    meta: Mapping[str, Any] | None = None,
    date: datetime.date | None = None,
) -> tuple[AnswerabilityCalibrator, dict[str, Any]]:
    """Rows from per-question ``records`` (:func:`rows_from_trajectories`), every question
    split into train and dev by :func:`calibration_part`, then :func:`fit_split`.

    ``target``: ``"answerability"`` (the calibrator) or ``"after_search"`` (the model of
    the answer after one more search, see :func:`rows_from_trajectories`). A
    ``neocorrag eval`` run of the controller on your own questions gives such records:
    ``json.load(open(".../results.json"))["per_question"]["belief"]``.
    """
    rows = rows_from_trajectories(records, success_f1=success_f1, target=target)
    parts: dict[str, list[CalibrationRow]] = {"train": [], "dev": []}
    for row in rows:
        parts[calibration_part(row.qid)].append(row)
    return fit_split(
        parts["train"],
        parts["dev"],
        l2=l2,
        version=version,
        meta={
            "target": target,
            **({"label_rule": AFTER_SEARCH_RULE} if target == "after_search" else {}),
            "success_f1": success_f1,
            "split": split_note(),
            **dict(meta or {}),
        },
        date=date,
    )


def fit_from_episodes(
    results: Sequence[BeliefResult],
    answers: Sequence[Sequence[str]],
    *,
    ids: Sequence[str] | None = None,
    target: str = "answerability",
    success_f1: float = SUCCESS_F1,
    l2: float = DEFAULT_L2,
    version: str | None = None,
    meta: Mapping[str, Any] | None = None,
) -> tuple[AnswerabilityCalibrator, dict[str, Any]]:
    """Refit on your own episodes in one call: controller results and their gold answers.

    ``ids`` name the questions for the train/dev split (default: the question texts). Run
    the controller with a high ``answer_threshold`` so that episodes keep searching and
    every step is measured. Returns the calibrator fitted on ``train`` at ``l2`` and a
    report whose ``report["fitted"]["dev"]`` scores it on the held-out questions. Use the
    result with ``BeliefController(..., calibrator=...)`` or ``calibrator.save(path)``;
    ``target="after_search"`` fits the retrieval value's model from the same episodes
    (``BeliefController(..., after_search=...)``).
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
        target=target,
        success_f1=success_f1,
        l2=l2,
        version=version,
        meta={"source": "fit_from_episodes", **dict(meta or {})},
    )


__all__ = [
    "AFTER_SEARCH_RULE",
    "ANSWERABILITY_FEATURES",
    "CALIBRATION_PARTS",
    "CALIBRATION_SALT",
    "DEFAULT_L2",
    "FEATURE_NAMES",
    "LABEL_RULE",
    "SUCCESS_F1",
    "TARGETS",
    "CalibrationPart",
    "CalibrationRow",
    "calibration_part",
    "check_rows",
    "checked_features",
    "evaluate",
    "fit_checked",
    "fit_from_episodes",
    "fit_from_records",
    "fit_split",
    "fit_version",
    "log_loss",
    "prompt_versions",
    "row_scores",
    "rows_from_trajectories",
    "split_note",
]
