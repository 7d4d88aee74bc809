"""An engine shared by threads (as the async adapters share it) and pickled with an adapter."""

from __future__ import annotations

import pickle
import threading
import time

from adapter_fixtures import CORPUS, MINER_CONFIG, QUERY
from conftest import HashedBagOfWords

from neocorrag_core import EvidenceChainMiner, MinerConfig, Passage


def passages() -> list[Passage]:
    return [Passage(pid, text, title, metadata={"triples": t}) for pid, title, text, t in CORPUS]


def test_models_load_once_when_many_threads_ask_at_the_same_time(monkeypatch, tiny_lm):
    import neocorrag_core.models.lazy as lazy

    calls = []

    def slow_resolve_lm(spec, **kwargs):
        calls.append(spec)
        time.sleep(0.2)  # widen the window in which a second load could start
        return tiny_lm

    monkeypatch.setattr(lazy, "resolve_lm", slow_resolve_lm)
    miner = EvidenceChainMiner(lm="some/folder")
    start = threading.Barrier(8)
    seen = []

    def ask() -> None:
        start.wait()
        seen.append(miner.lm)

    threads = [threading.Thread(target=ask) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert calls == ["some/folder"]
    assert len(seen) == 8 and all(lm is tiny_lm for lm in seen)


def test_pickling_drops_loaded_models_and_keeps_configuration_and_specs():
    config = MinerConfig(decoding="none", **MINER_CONFIG)
    miner = EvidenceChainMiner(config, embedder=HashedBagOfWords())
    before = miner.mine(QUERY, passages())
    assert miner.models.embedder_loaded
    clone = pickle.loads(pickle.dumps(miner))
    assert not clone.models.embedder_loaded and not clone.models.lm_loaded
    assert clone.config == config
    after = clone.mine(QUERY, passages())
    assert [c.text for c in after.chains] == [c.text for c in before.chains]
    assert [k.passage.id for k in after.kept] == [k.passage.id for k in before.kept]
