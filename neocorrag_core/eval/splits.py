"""The documented dev split: half of every data set's questions to tune on, half to report.

A question's half is fixed by a hash of its id (salted, so it is independent of any
ordering in the file): ``tune`` when the first byte of ``sha256("neocorrag-dev-v1:" + id)``
is even, ``report`` when it is odd. Settings are chosen on ``tune``; numbers that claim
to generalise are measured on ``report`` (``neocorrag eval --split report``).
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
