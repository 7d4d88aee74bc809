"""The evidence workspace: the one place where a question's evidence set changes.

Retrieval adds, verification drops; every change is logged, and a dropped passage id is
remembered so that a later search cannot silently bring the misleading passage back.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from neocorrag_core.types import Passage

from .types import Mutation


@dataclass(frozen=True)
class Added:
    """What one :meth:`EvidenceWorkspace.add` did with a search's passages."""

    new: tuple[str, ...]
    """Ids added to the workspace."""
    known: tuple[str, ...]
    """Ids already in it (not added twice)."""
    refused: tuple[str, ...]
    """Ids dropped earlier in the episode (never re-admitted)."""
    over_capacity: tuple[str, ...]
    """Ids left out because the workspace was full."""

    @property
    def novelty(self) -> float:
        """Share of the returned passages that were new to the episode (0.0 when none came back)."""
        returned = len(self.new) + len(self.known) + len(self.refused) + len(self.over_capacity)
        fresh = len(self.new) + len(self.over_capacity)
        return fresh / returned if returned else 0.0


class EvidenceWorkspace:
    """The mutable passage set of one question, in the order passages arrived.

    Args:
        capacity: at most this many passages are kept; later arrivals beyond it are
            reported in :attr:`Added.over_capacity` and not kept.
    """

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._passages: dict[str, Passage] = {}
        self._dropped: dict[str, str] = {}
        self._log: list[Mutation] = []

    @property
    def passages(self) -> list[Passage]:
        """The kept passages, oldest first."""
        return list(self._passages.values())

    @property
    def ids(self) -> tuple[str, ...]:
        """The kept passage ids, oldest first."""
        return tuple(self._passages)

    @property
    def dropped(self) -> dict[str, str]:
        """Every dropped id with the reason it was dropped."""
        return dict(self._dropped)

    @property
    def log(self) -> list[Mutation]:
        """Every mutation, in order."""
        return list(self._log)

    @property
    def has_room(self) -> bool:
        """Whether a search's new passages would be kept (fewer than ``capacity`` held)."""
        return len(self._passages) < self.capacity

    def __len__(self) -> int:
        return len(self._passages)

    def add(self, passages: Sequence[Passage], *, step: int, reason: str) -> Added:
        """Admit a search's passages: new ones are kept, dropped ids are refused."""
        new: list[str] = []
        known: list[str] = []
        refused: list[str] = []
        full: list[str] = []
        for passage in passages:
            pid = passage.id
            if pid in self._dropped:
                refused.append(pid)
            elif pid in self._passages or pid in new:
                known.append(pid)
            elif len(self._passages) >= self.capacity:
                full.append(pid)
            else:
                self._passages[pid] = passage
                new.append(pid)
        if new:
            self._log.append(Mutation("add", tuple(new), step, reason))
        return Added(tuple(new), tuple(known), tuple(refused), tuple(full))

    def drop(self, ids: Iterable[str], *, step: int, reason: str) -> tuple[str, ...]:
        """Remove passages (unknown ids are ignored) and remember them; returns what went."""
        gone = tuple(dict.fromkeys(pid for pid in ids if pid in self._passages))
        for pid in gone:
            del self._passages[pid]
            self._dropped[pid] = reason
        if gone:
            self._log.append(Mutation("drop", gone, step, reason))
        return gone


__all__ = ["Added", "EvidenceWorkspace"]
