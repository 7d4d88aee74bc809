"""Cutting a stream of passages into bounded chunks and batches.

The driver holds one chunk in memory at a time (what it checks against the store and
hands to an engine); a chunk is cut into batches (one extraction call and one store
transaction each). Neither needs the corpus's length.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence, Sized
from itertools import islice
from typing import TypeVar

T = TypeVar("T")
B = TypeVar("B", bound=Sized)

DEFAULT_CHUNK_SIZE = 4096
"""Passages read and dispatched at a time by the local and process engines."""
DEFAULT_RAY_CHUNK_SIZE = 50_000
"""Ray starts its actors (each loads the model) once per chunk: larger chunks amortise that."""


def chunked(items: Iterable[T], size: int) -> Iterator[list[T]]:
    """Consecutive lists of ``size`` items (the last may be shorter), read lazily."""
    if size < 1:
        raise ValueError("chunk size must be at least 1")
    it = iter(items)
    while chunk := list(islice(it, size)):
        yield chunk


def batched(items: Sequence[T], size: int) -> list[list[T]]:
    """``items`` cut into lists of ``size`` (the last may be shorter)."""
    if size < 1:
        raise ValueError("batch size must be at least 1")
    return [list(items[start : start + size]) for start in range(0, len(items), size)]


def grouped(batches: Sequence[B], size: int) -> list[list[B]]:
    """Consecutive ``batches`` joined into groups of at least ``size`` items (the last group
    may hold fewer); a batch is never split. ``size`` <= one batch: one batch per group."""
    groups: list[list[B]] = []
    current: list[B] = []
    count = 0
    for batch in batches:
        current.append(batch)
        count += len(batch)
        if count >= size:
            groups.append(current)
            current, count = [], 0
    if current:
        groups.append(current)
    return groups
