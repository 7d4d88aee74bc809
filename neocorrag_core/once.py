"""Load-once: the one mechanism every lazily loaded model, pipeline and engine uses.

Models are heavy and optional, so objects hold a spec and load on first use. The load
must happen once even when several threads (or async tasks in worker threads) ask at
the same time, and a pickled copy (a process pool, a LlamaIndex ingestion worker) must
carry the spec but not the loaded model. :class:`LoadOnce` does exactly that and
nothing else; the owner passes the factory at each call, so the slot itself holds no
reference back to its owner and pickles to an empty slot.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, Generic, TypeVar

T = TypeVar("T")


class LoadOnce(Generic[T]):
    """A value built by the first :meth:`get` and returned by every later one.

    Double-checked under a lock: concurrent first calls run ``factory`` once and all
    receive its value. A factory that raises leaves the slot empty, so the next call
    tries again. Pickling and copying give an empty slot with a fresh lock.
    """

    __slots__ = ("_lock", "_value")

    def __init__(self) -> None:
        self._value: T | None = None
        self._lock = threading.Lock()

    @property
    def loaded(self) -> bool:
        """Whether the value has been built."""
        return self._value is not None

    def get(self, factory: Callable[[], T]) -> T:
        """The value, built by ``factory()`` if this is the first successful call."""
        value = self._value
        if value is None:
            with self._lock:
                value = self._value
                if value is None:
                    value = factory()
                    self._value = value
        return value

    def peek(self) -> T | None:
        """The value if it was built, else ``None`` (never builds it)."""
        return self._value

    def set(self, value: T) -> None:
        """Put an already built value in the slot (e.g. a model the caller passed in)."""
        with self._lock:
            self._value = value

    def clear(self) -> None:
        """Forget the value; the next :meth:`get` builds it again."""
        with self._lock:
            self._value = None

    def __getstate__(self) -> dict[str, Any]:
        return {"empty": True}  # never the value; non-empty so unpickling calls __setstate__

    def __setstate__(self, state: dict[str, Any]) -> None:
        self._value = None
        self._lock = threading.Lock()

    def __deepcopy__(self, memo: dict[int, Any]) -> LoadOnce[T]:
        return LoadOnce()

    def __repr__(self) -> str:
        return f"LoadOnce(loaded={self.loaded})"


__all__ = ["LoadOnce"]
