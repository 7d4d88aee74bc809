"""Calibration records and rows for the fitting tests of the product
(``tests/unit/test_belief_fitting.py``) and of the lab (``tests/lab/test_lab_fitting.py``)."""

from __future__ import annotations

import datetime
import math

import numpy as np

from neocorrag_core.belief import CalibrationRow
from neocorrag_core.eval.splits import split_of

DAY = datetime.date(2024, 5, 1)


def diagnostics(support: float, **extra: float | None) -> dict:
    """A step's diagnostics dict with the given support (and any other field)."""
    base = {
        "relevance": 0.6,
        "novelty": 0.5,
        "cost": 0.2,
        "support": support,
        "conflict": 0.1,
        "uncertainty": 1 - support,
        "gap": 0.5,
        "missing_fact": "",
        "drop_ids": [],
    }
    return base | extra


def step(index: int, draft: str, support: float, **extra: float | None) -> dict:
    """A recorded controller step that measured ``draft``."""
    return {
        "step": index,
        "action": "retrieve",
        "diagnostics": diagnostics(support, **extra),
        "answerability": 0.5,
        "draft_answer": draft,
    }


def record(qid: str, steps: list[dict], answers: tuple[str, ...] = ("Stanley",)) -> dict:
    """A per-question eval record of a controller method."""
    return {
        "qid": qid,
        "question": f"question {qid}?",
        "answers": list(answers),
        "prediction": steps[-1]["draft_answer"] if steps else "",
        "f1": 0.0,
        "info": {"trajectory": steps},
    }


def tune_ids(n: int, prefix: str = "q") -> list[str]:
    """``n`` question ids of the tune half (the only ones a benchmark fit uses)."""
    out, i = [], 0
    while len(out) < n:
        if split_of(f"{prefix}{i}") == "tune":
            out.append(f"{prefix}{i}")
        i += 1
    return out


def synthetic_records(ids: list[str], seed: int = 0) -> list[dict]:
    """Three measured steps per question; the draft is right with probability rising in
    support (a logistic truth), so a fitted model must give support a positive weight."""
    rng = np.random.default_rng(seed)
    records = []
    for qid in ids:
        steps = [step(0, "", 0.5)]  # the first step measured nothing: no row
        for s in range(1, 4):
            support = float(rng.uniform(0, 1))
            right = rng.uniform() < 1 / (1 + math.exp(-8 * (support - 0.5)))
            steps.append(step(s, "Stanley" if right else "Mountrail County", support))
        records.append(record(qid, steps))
    return records


def row(qid: str, label: int, **features: float) -> CalibrationRow:
    """A calibration row of step 1."""
    return CalibrationRow(qid=qid, step=1, features=features, label=label, f1=float(label))
