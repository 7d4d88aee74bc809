"""Wall-time bookkeeping shared by the engines."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def timed(timings: dict[str, float], stage: str) -> Iterator[None]:
    """Add the wall time of the ``with`` body to ``timings[stage]`` (seconds)."""
    started = time.perf_counter()
    try:
        yield
    finally:
        timings[stage] = timings.get(stage, 0.0) + time.perf_counter() - started


__all__ = ["timed"]
