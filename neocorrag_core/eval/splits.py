"""The documented dev split: half of every data set's questions to tune on, half to report.

A question's half is fixed by a salted hash of its id: ``tune`` when the first byte of
``sha256("neocorrag-dev-v1:" + id)`` is even, ``report`` when it is odd. Settings are
chosen on ``tune``; numbers that claim to generalise are measured on ``report``
(``neocorrag eval --split report``).

The half is independent of the rows' order only for files whose rows carry an id
(``_id`` or ``id``). A row without one is named by its position, ``row<index>``
(:func:`~neocorrag_core.eval.datasets.load_qa`), so reordering, filtering or prepending
rows of such a file moves questions between the halves: its split is that of the file
as it is. The bundled ``meve_hotpotqa_dev_first100.json`` has no ids; its published
tune/report halves are those of the file as shipped (the naming is kept so they stay
valid).

Calibrators (the answerability model, ``neocorrag_core.belief.fitting``) split the
``tune`` half once more, by a second salted hash: ``dev`` when the first byte of
``sha256("neocorrag-calib-v1:" + id)`` is divisible by 3 (about a third of the tune
questions), ``train`` otherwise. Coefficients are fitted on ``train`` and selected on
``dev``; the ``report`` half is never used to fit or select them, so report-half numbers
of a method that uses a calibrator stay held out.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from typing import Literal, TypeVar

Split = Literal["tune", "report"]
SALT = "neocorrag-dev-v1"
SPLITS: tuple[Split, ...] = ("tune", "report")

CalibrationSplit = Literal["train", "dev"]
CALIBRATION_SALT = "neocorrag-calib-v1"
CALIBRATION_SPLITS: tuple[CalibrationSplit, ...] = ("train", "dev")

T = TypeVar("T")


def split_of(question_id: str) -> Split:
    """The half ``question_id`` belongs to."""
    digest = hashlib.sha256(f"{SALT}:{question_id}".encode()).digest()
    return "tune" if digest[0] % 2 == 0 else "report"


def calibration_split_of(question_id: str, *, within_tune: bool = True) -> CalibrationSplit:
    """The calibration part (``train`` or ``dev``) of a ``tune``-half question.

    Raises ``ValueError`` for a ``report``-half question: those never train or select a
    calibrator. ``within_tune=False`` applies the same second hash to any id, for a user's
    own questions, which have no report half.
    """
    if within_tune and split_of(question_id) != "tune":
        raise ValueError(
            f"question {question_id!r} is in the report half; calibrators are fitted and "
            "selected on the tune half only"
        )
    digest = hashlib.sha256(f"{CALIBRATION_SALT}:{question_id}".encode()).digest()
    return "dev" if digest[0] % 3 == 0 else "train"


def in_split(items: Iterable[T], split: Split | None, *, key: str = "id") -> list[T]:
    """The items (objects with an ``id`` attribute) of ``split``; all of them for ``None``."""
    if split is None:
        return list(items)
    if split not in SPLITS:
        raise ValueError(f"split must be one of {', '.join(SPLITS)}, got {split!r}")
    return [item for item in items if split_of(str(getattr(item, key))) == split]


__all__ = [
    "CALIBRATION_SALT",
    "CALIBRATION_SPLITS",
    "SALT",
    "SPLITS",
    "CalibrationSplit",
    "Split",
    "calibration_split_of",
    "in_split",
    "split_of",
]
