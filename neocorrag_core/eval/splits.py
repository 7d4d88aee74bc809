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

The shipped calibrators are fitted on the ``tune`` half only, split once more by the
calibration hash (:func:`~neocorrag_core.belief.fitting.calibration_part`); that
within-tune split is the development lab's (``neocorrag_lab.fitting``), so report-half
numbers of a method that uses a calibrator stay held out.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from typing import Literal, TypeVar

Split = Literal["tune", "report"]
SALT = "neocorrag-dev-v1"
SPLITS: tuple[Split, ...] = ("tune", "report")

T = TypeVar("T")


def split_of(question_id: str) -> Split:
    """The half ``question_id`` belongs to."""
    digest = hashlib.sha256(f"{SALT}:{question_id}".encode()).digest()
    return "tune" if digest[0] % 2 == 0 else "report"


def in_split(items: Iterable[T], split: Split | None, *, key: str = "id") -> list[T]:
    """The items (objects with an ``id`` attribute) of ``split``; all of them for ``None``."""
    if split is None:
        return list(items)
    if split not in SPLITS:
        raise ValueError(f"split must be one of {', '.join(SPLITS)}, got {split!r}")
    return [item for item in items if split_of(str(getattr(item, key))) == split]


__all__ = ["SALT", "SPLITS", "Split", "in_split", "split_of"]
