"""``RefinedAnswerGenerator``: the answer generator reads the NeocorRAG-refined evidence, the
workspace keeps every passage."""

from __future__ import annotations

import asyncio

import pytest
from adapter_fixtures import CORPUS, MINER_CONFIG, QUERY
from conftest import HashedBagOfWords
from test_belief_chains import Relevance, Writer

from neocorrag_core import ConfigError, EvidenceChainMiner, MinerConfig, Passage
from neocorrag_core.belief import (
    AnswerabilityCalibrator,
    BeliefConfig,
    BeliefController,
    DraftAnswer,
    RefinedAnswerGenerator,
    Usage,
    VerifierReply,
)
from neocorrag_core.belief.chains import CHAIN_PASSAGE_ID, CHAIN_PASSAGE_TITLE
from neocorrag_core.errors import ModelCallError
from neocorrag_core.eval.belief_methods import method_version
from neocorrag_core.eval.refiners import MINER_OUTPUT_VERSION

PASSAGES = [Passage(id=i, title=t, text=x, metadata={"triples": tr}) for i, t, x, tr in CORPUS]


def miner(chain_format: str = "none") -> EvidenceChainMiner:
    config = MinerConfig(**{**MINER_CONFIG, "chain_format": chain_format})
    return EvidenceChainMiner(config, embedder=HashedBagOfWords())


class Recording:
    """A scripted generator that records the passages it was shown."""

    def __init__(self) -> None:
        self.seen: list[list[Passage]] = []

    def answer(self, question, passages):
        self.seen.append(list(passages))
        return DraftAnswer("Stanley", confidence=0.9), Usage(10 * len(passages), 2)


def test_the_generator_reads_the_kept_passages_only():
    # The fixture's hand-checked refinement (adapter_fixtures): p1 and p2 by rank, p4 for
    # the chain's second hop; p3 and p5 are noise.
    inner = Recording()
    draft, usage = RefinedAnswerGenerator(inner, miner()).answer(QUERY, PASSAGES)
    assert draft == DraftAnswer("Stanley", confidence=0.9)
    [shown] = inner.seen
    assert [p.id for p in shown] == ["p1", "p2", "p4"]
    assert shown == miner().mine(QUERY, PASSAGES).passages
    assert usage == Usage(30, 2)  # three passages shown, no LM tokens for mining


def test_a_chain_block_is_shown_last_when_the_miner_writes_one():
    """Last, so a generator that shows at most the workspace's size cuts the block, never
    a passage."""
    inner = Recording()
    RefinedAnswerGenerator(inner, miner("linking")).answer(QUERY, PASSAGES)
    [shown] = inner.seen
    assert shown[-1].id == CHAIN_PASSAGE_ID and shown[-1].title == CHAIN_PASSAGE_TITLE
    assert "Van Hook Township - located in -> Mountrail County - capital -> Stanley" in (
        shown[-1].text
    )
    assert [p.id for p in shown[:-1]] == ["p1", "p2", "p4"]


def test_without_passages_nothing_is_mined():
    class NoMining(EvidenceChainMiner):
        def mine(self, query, passages, **overrides):
            raise AssertionError("mined an empty workspace")

    inner = Recording()
    _, usage = RefinedAnswerGenerator(inner, NoMining()).answer(QUERY, [])
    assert inner.seen == [[]] and usage == Usage(0, 2)


def test_the_miners_lm_tokens_are_added():
    class CountingMiner(EvidenceChainMiner):
        def mine(self, query, passages, **overrides):
            result = super().mine(query, passages, **overrides)
            result.prompt_tokens, result.generated_tokens = 70, 9
            return result

    counting = CountingMiner(MinerConfig(**MINER_CONFIG), embedder=HashedBagOfWords())
    _, usage = RefinedAnswerGenerator(Recording(), counting).answer(QUERY, PASSAGES)
    assert usage == Usage(10 * 4 + 70, 2 + 9)  # the linking block and three passages


class Verifier:
    def __init__(self) -> None:
        self.seen: list[list[Passage]] = []

    def verify(self, question, passages, draft_answer):
        self.seen.append(list(passages))
        return VerifierReply(support=0.9, conflict=0.1, uncertainty=0.2, gap=0.1), Usage(5, 1)


def controller(generator, verifier, refiner=None, **config) -> BeliefController:
    calibrator = AnswerabilityCalibrator(
        features=("support",), weights=(4.0,), bias=0.0, means=(0.5,), scales=(0.25,), version="t"
    )
    return BeliefController(
        verifier=verifier,
        generator=generator,
        writer=Writer(),
        relevance=Relevance(),
        calibrator=calibrator,
        config=BeliefConfig(k=5, verify="always", **config),
        miner=refiner or miner(),
    )


def test_in_an_episode_only_the_answer_prompt_is_refined():
    inner, verifier = Recording(), Verifier()
    result = controller(inner, verifier, refine_answer="all").run(
        QUERY, lambda query, k: PASSAGES[:k]
    )
    assert result.answer == "Stanley"
    assert [p.id for p in result.evidence] == [p.id for p in PASSAGES]  # nothing dropped
    assert inner.seen and all([p.id for p in s] == ["p1", "p2", "p4"] for s in inner.seen)
    assert verifier.seen and all(s == PASSAGES for s in verifier.seen)
    # The trajectory says what the answer read, beside the workspace.
    measured = [s for s in result.trajectory if s["draft_answer"]]
    assert measured and all(s["answer_ids"] == ["p1", "p2", "p4"] for s in measured)
    assert all(s["evidence_ids"] == [p.id for p in PASSAGES] for s in measured)
    assert all(s["answer_ids"] == [] for s in result.trajectory if not s["draft_answer"])


def test_without_refinement_the_answer_reads_the_workspace():
    result = controller(Recording(), Verifier()).run(QUERY, lambda query, k: PASSAGES[:k])
    measured = [s for s in result.trajectory if s["draft_answer"]]
    assert measured and all(s["answer_ids"] == s["evidence_ids"] for s in measured)


def test_a_failing_miner_is_named_and_leaves_nothing_behind():
    class Broken(EvidenceChainMiner):
        def mine(self, query, passages, **overrides):
            raise RuntimeError("spaCy model missing")

    ctrl = controller(Recording(), Verifier(), refiner=Broken(), refine_answer="all")
    with pytest.raises(ModelCallError, match="answer refiner failed: RuntimeError: spaCy"):
        ctrl.run(QUERY, lambda query, k: PASSAGES[:k])
    assert ctrl.run(QUERY, lambda query, k: PASSAGES[:k], refine_answer="none").answer


def test_by_default_and_per_call_the_generator_reads_what_the_mode_says():
    inner = Recording()
    ctrl = controller(inner, Verifier())
    ctrl.run(QUERY, lambda query, k: PASSAGES[:k])
    assert [p.id for p in inner.seen[-1]] == [p.id for p in PASSAGES]  # "none": every passage
    ctrl.run(QUERY, lambda query, k: PASSAGES[:k], refine_answer="all")
    assert [p.id for p in inner.seen[-1]] == ["p1", "p2", "p4"]


def test_first_search_mode_refines_the_first_search_and_shows_later_passages_whole():
    """Search 1 (the question) returns p1-p3, search 2 returns p4 and p5. The miner sees
    only p1-p3 and keeps p1, p2 (by rank); p4 and p5 are shown whole, though p5 is noise."""
    inner = Recording()

    def search(query, k):
        return PASSAGES[:3] if query == QUERY else PASSAGES[3:]

    result = controller(inner, Verifier(), refine_answer="first-search", min_searches=2).run(
        QUERY, search
    )
    assert result.retrieval_rounds >= 2
    assert [p.id for p in result.evidence] == ["p1", "p2", "p3", "p4", "p5"]
    assert [p.id for p in inner.seen[0]] == ["p1", "p2", "p4", "p5"]
    assert inner.seen[0][2] == PASSAGES[3] and inner.seen[0][3] == PASSAGES[4]  # whole


def test_first_search_mode_refines_nothing_when_the_first_search_returned_nothing():
    """The next-hop search is not "the first search" because the question's own found
    nothing: its passages are shown whole."""
    inner = Recording()

    def search(query, k):
        return [] if query == QUERY else PASSAGES

    ctrl = controller(inner, Verifier(), refine_answer="first-search", min_searches=2)
    result = ctrl.run(QUERY, search)
    assert result.retrieval_rounds >= 2 and inner.seen
    assert [p.id for p in inner.seen[0]] == [p.id for p in PASSAGES]


def test_async_episodes_refine_as_sync_ones_do():
    sync_seen, async_seen = Recording(), Recording()

    def search(query, k):
        return PASSAGES[:3] if query == QUERY else PASSAGES[3:]

    async def asearch(query, k):
        return search(query, k)

    settings = {"refine_answer": "first-search", "min_searches": 2}
    done = controller(sync_seen, Verifier(), **settings).run(QUERY, search)
    adone = asyncio.run(controller(async_seen, Verifier(), **settings).arun(QUERY, asearch))
    assert sync_seen.seen == async_seen.seen and done.answer == adone.answer
    assert [p.id for p in sync_seen.seen[0]] == ["p1", "p2", "p4", "p5"]


def test_the_eval_refines_with_the_runs_triples_or_else_the_default_source():
    from neocorrag_core.eval.belief_methods import answer_miner
    from neocorrag_core.eval.protocol import BuildContext
    from neocorrag_core.triples import DefaultTripleSource, OpenIETripleSource

    paris = [("Paris", "capital of", "France")]
    source = OpenIETripleSource({"Paris is the capital of France.": paris})
    with_file = EvidenceChainMiner(triple_source=source)
    assert answer_miner(BuildContext(miner=with_file)) is with_file
    metadata_only = EvidenceChainMiner(MinerConfig(top_n=1))
    own = answer_miner(BuildContext(miner=metadata_only))
    assert isinstance(own.triple_source, DefaultTripleSource)
    assert own.models is metadata_only.models and own.config == metadata_only.config


def test_passages_kept_whole_are_not_mined():
    seen: list[list[str]] = []

    class Spy(EvidenceChainMiner):
        def mine(self, query, passages, **overrides):
            seen.append([p.id for p in passages])
            return super().mine(query, passages, **overrides)

    spy = Spy(MinerConfig(**{**MINER_CONFIG, "chain_format": "none"}), embedder=HashedBagOfWords())
    generator = RefinedAnswerGenerator(Recording(), spy)
    shown, _ = generator.refined(QUERY, PASSAGES, keep_whole=("p4", "p5"))
    assert seen == [["p1", "p2", "p3"]]
    assert [p.id for p in shown] == ["p1", "p2", "p4", "p5"]
    everything, usage = generator.refined(QUERY, PASSAGES, keep_whole=[p.id for p in PASSAGES])
    assert everything == PASSAGES and usage == Usage() and len(seen) == 1


def test_an_unknown_mode_is_a_config_error():
    with pytest.raises(ConfigError, match="refine_answer"):
        BeliefConfig(refine_answer="some")
    with pytest.raises(ConfigError, match="refine_answer"):
        BeliefConfig(refine_answer=True)


def test_bad_construction_is_a_config_error():
    with pytest.raises(ConfigError, match="AnswerGenerator"):
        RefinedAnswerGenerator(object())
    with pytest.raises(ConfigError, match="EvidenceChainMiner"):
        RefinedAnswerGenerator(Recording(), miner="neocorrag")


def test_the_benchmark_method_is_rerun_when_the_miner_or_the_refinement_changes():
    from neocorrag_core.eval.belief_methods import REFINED_ANSWER_VERSION, controller_version

    # The lab's belief-refined / -refined-first / -unrefined are these overrides.
    version = controller_version({"refine_answer": "all"})
    assert version.startswith(method_version("belief"))
    assert MINER_OUTPUT_VERSION in version and REFINED_ANSWER_VERSION in version
    assert MINER_OUTPUT_VERSION not in method_version("belief")
    assert REFINED_ANSWER_VERSION in controller_version({"refine_answer": "first-search"})
    assert REFINED_ANSWER_VERSION not in controller_version({"refine_answer": "none"}, "qwen-1.5b")
    # --belief reaches the controller methods' version too.
    assert REFINED_ANSWER_VERSION in method_version("belief", "default", {"refine_answer": "all"})
