"""LoadOnce: the one load-once mechanism (models, extractors, adapters)."""

from __future__ import annotations

import copy
import pickle
import threading
import time

import pytest

from neocorrag_core.once import LoadOnce


def test_concurrent_first_calls_build_once_and_share_the_value():
    slot: LoadOnce[object] = LoadOnce()
    calls = []

    def factory() -> object:
        calls.append(1)
        time.sleep(0.05)  # widen the window in which a second build could start
        return object()

    start = threading.Barrier(8)
    seen = []

    def ask() -> None:
        start.wait()
        seen.append(slot.get(factory))

    threads = [threading.Thread(target=ask) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(calls) == 1
    assert len({id(v) for v in seen}) == 1
    assert slot.loaded and slot.peek() is seen[0]


def test_a_failing_factory_leaves_the_slot_empty_for_a_retry():
    slot: LoadOnce[int] = LoadOnce()

    def broken() -> int:
        raise RuntimeError("no model")

    with pytest.raises(RuntimeError):
        slot.get(broken)
    assert not slot.loaded
    assert slot.get(lambda: 3) == 3


def test_pickled_and_copied_slots_are_empty():
    slot: LoadOnce[list[int]] = LoadOnce()
    slot.get(lambda: [1, 2])
    for clone in (pickle.loads(pickle.dumps(slot)), copy.deepcopy(slot), copy.copy(slot)):
        assert not clone.loaded
        assert clone.get(lambda: [3]) == [3]
    assert slot.peek() == [1, 2]


def test_set_and_clear():
    slot: LoadOnce[str] = LoadOnce()
    slot.set("given")
    assert slot.get(lambda: "built") == "given"
    slot.clear()
    assert slot.get(lambda: "built") == "built"
