"""The evidence-state controller in ``neocorrag eval`` on tiny models: ``belief`` answers by
itself, ends with a typed action, honours the caps, and its records carry a version. Its
baselines and ablations are the lab's (``tests/lab/test_lab_belief.py``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from eval_fixtures import run, settings_for

from neocorrag_core.belief import BeliefConfig
from neocorrag_core.eval import belief_methods
from neocorrag_core.eval.belief_methods import (
    BELIEF_METHODS,
    ENTITY_QUERY_VERSION,
    REFINED_ANSWER_VERSION,
    first_round_search,
    method_version,
)
from neocorrag_core.eval.datasets import QAExample
from neocorrag_core.eval.protocol import MethodInput, MethodOutput
from neocorrag_core.eval.reader import ReaderOutput
from neocorrag_core.eval.refiners import MINER_OUTPUT_VERSION
from neocorrag_core.eval.registry import method_versions
from neocorrag_core.eval.runner import EvalSettings, score_record
from neocorrag_core.types import Passage

pytestmark = pytest.mark.usefixtures("one_torch_thread")

METHODS = BELIEF_METHODS
CAPS = {"max_rounds": 2, "max_evidence": 6, "max_tokens": 6000}


def test_belief_answers_itself_within_the_caps(tmp_path, tiny_lm):
    # One question keeps the tiny-model episode cheap; the branches are covered by the
    # controller's own tests.
    settings = settings_for(tmp_path, METHODS, belief_overrides=CAPS, plots=False, limit=1)
    results = run(settings, tiny_lm)
    assert results["questions_compared"] == 1
    config = BeliefConfig().with_overrides(**CAPS)
    for record in results["per_question"]["belief"]:
        assert record["reader_prompt_tokens"] == 0  # the runner's reader never ran
        assert record["info"]["final_action"] in {"answer", "stop", "abstain"}
        assert record["retrieval_rounds"] <= config.max_rounds
        assert len(record["context_ids"]) <= config.max_evidence
        assert record["total_tokens"] == (
            record["method_prompt_tokens"] + record["method_generated_tokens"]
        )
        if record["abstained"]:
            assert record["f1"] == 0.0 and record["prediction"] == ""
        steps = record["info"]["trajectory"]
        assert steps and steps[-1]["action"] == record["info"]["final_action"]
        assert all(step["reason"] for step in steps)
        # The first search is the question itself, served from the shared top-k.
        assert set(steps[0]["retrieved_ids"]) == set(record["retrieved_ids"])
        dropped = {i for m in record["info"]["mutations"] if m["kind"] == "drop" for i in m["ids"]}
        assert not dropped & set(record["context_ids"])
    assert results["comparisons_iterative"] == {}  # `iterative` (the lab's) was not run
    assert results["comparisons"] == {}  # `none` was not run
    agg = results["methods"]["belief"]
    assert 0.0 <= agg["abstention"] <= 1.0 and agg["total_tokens"] > 0
    report = (Path(settings.out) / "report.md").read_text()
    assert "Methods that answer by themselves" in report
    saved = json.loads((Path(settings.out) / "results.json").read_text())
    assert saved["settings"]["belief_overrides"] == CAPS


def test_an_abstention_scores_zero_even_when_the_gold_matches():
    example = QAExample(
        id="q", question="Who?", answers=("Stanley",), passages=(), gold_ids=frozenset()
    )
    answered = ReaderOutput("Stanley", "Stanley", 0, 0, 0.0)
    kept = score_record(example, "m", [], MethodOutput([], answer="Stanley"), answered, {}, 5)
    assert kept["f1"] == 1.0 and not kept["abstained"]
    nothing = ReaderOutput("", "", 0, 0, 0.0)
    gone = score_record(example, "m", [], MethodOutput([], abstained=True), nothing, {}, 5)
    assert gone["f1"] == 0.0 and gone["em"] == 0.0 and gone["abstained"]


def test_the_question_itself_is_served_from_the_shared_top_k():
    shared = [Passage(id=f"p{i}", text=f"text {i}") for i in range(5)]
    asked: list[tuple[str, int]] = []

    def search(query: str, k: int) -> list[Passage]:
        asked.append((query, k))
        return [Passage(id="new", text="new")]

    call = MethodInput("the question", shared, search, 5)
    wrapped = first_round_search(call)
    assert wrapped("the question", 5) == shared and wrapped("the question", 3) == shared[:3]
    assert asked == []
    assert [p.id for p in wrapped("another query", 5)] == ["new"]
    assert asked == [("another query", 5)]


def test_a_bad_belief_override_is_a_one_line_usage_error(tmp_path):
    with pytest.raises(ValueError, match="--belief"):
        EvalSettings(data="x", out=str(tmp_path), methods=("belief",), belief_overrides={"nope": 1})
    with pytest.raises(ValueError, match="--belief"):
        EvalSettings(
            data="x", out=str(tmp_path), methods=("belief",), belief_overrides={"max_rounds": 0}
        )


def test_a_record_of_another_method_version_is_run_again(tmp_path, tiny_lm, monkeypatch):
    caps = {"max_rounds": 1, "max_tokens": 3000}
    settings = settings_for(tmp_path, ("belief",), belief_overrides=caps, plots=False, limit=1)
    done: list[str] = []
    run(settings, tiny_lm, on_record=lambda r: done.append(r["method_version"]))
    assert done == [method_version("belief")]
    run(settings, tiny_lm, on_record=lambda r: done.append(r["method_version"]))
    assert len(done) == 1  # same prompts: the cached record stands
    monkeypatch.setattr(belief_methods, "ANSWER_PROMPT_VERSION", "answer-test")
    run(settings, tiny_lm, on_record=lambda r: done.append(r["method_version"]))
    assert len(done) == 2 and done[1].startswith("answer-test ")  # a changed prompt reruns it


def test_the_controller_version_names_its_calibrator(monkeypatch):
    class Fitted:
        version = "fit-test"

    before = method_version("belief")
    assert "calibrator" in before
    monkeypatch.setattr(belief_methods.AnswerabilityCalibrator, "load", lambda **_: Fitted())
    assert "calibrator fit-test" in method_version("belief")
    assert method_version("belief").endswith("after-search fit-test verify-auto-1")
    assert method_version("belief") != before
    # The paper's loop measures as the records before the verifier gate did: same version.
    always = belief_methods.controller_version({"verify": "always"})
    assert always.endswith("after-search fit-test")
    # The controller declares its version; the refiner `none` declares none.
    assert set(method_versions(("none", *BELIEF_METHODS))) == set(BELIEF_METHODS)


def test_the_controller_version_names_its_prompts_and_the_eval_only_rules():
    from neocorrag_core.belief.answer import ANSWER_PROMPT_VERSION
    from neocorrag_core.belief.verifier import VERIFIER_PROMPT_VERSION
    from neocorrag_core.belief.writer import REWRITE_PROMPT_VERSION

    version = method_version("belief")
    prompts = f"{ANSWER_PROMPT_VERSION} {VERIFIER_PROMPT_VERSION} {REWRITE_PROMPT_VERSION} "
    assert version.startswith(prompts)
    # A controller whose verifier reads the chain block, or whose generator reads the
    # refined evidence, names the miner's output version (and the refinement rules).
    chains = belief_methods.controller_version({}, reads_chains=True)
    assert chains == f"{version} {MINER_OUTPUT_VERSION}"
    refined = belief_methods.controller_version({"refine_answer": "all"})
    assert refined == f"{version} {MINER_OUTPUT_VERSION} {REFINED_ANSWER_VERSION}"


def test_the_controller_version_follows_the_generators_own_fitted_models(monkeypatch):
    class Fitted:
        def __init__(self, version):
            self.version = version

    own = (Fitted("fit-1.5b"), Fitted("after-1.5b"))
    monkeypatch.setattr(
        belief_methods, "shipped_pair", lambda lm: own if lm == "qwen-1.5b" else None
    )
    monkeypatch.setattr(belief_methods.AnswerabilityCalibrator, "load", lambda **_: Fitted("d"))
    default = method_version("belief")
    assert "calibrator d after-search d" in default
    # A reader with its own pair: its records carry that pair's versions, so fitting a
    # pair for a reader reruns that reader's records and no other reader's.
    assert "calibrator fit-1.5b after-search after-1.5b" in method_version("belief", "qwen-1.5b")
    assert method_versions(["belief"], reader="qwen-1.5b") == {
        "belief": method_version("belief", "qwen-1.5b")
    }
    # Its preset settings (PRESET_SETTINGS) change its episodes: they are named too, and
    # so are the no-LM query rules its scheduled searches (min_searches=2) follow.
    assert method_version("belief", "qwen-1.5b").endswith(
        "preset max_corrections=0 min_searches=2 refine_answer=first-search "
        f"{ENTITY_QUERY_VERSION} {MINER_OUTPUT_VERSION} {REFINED_ANSWER_VERSION}"
    )
    assert "preset" not in default
    assert ENTITY_QUERY_VERSION not in default
    # Scheduled searches asked for with --belief name the query rules too (records of
    # older rules rerun), and --belief min_searches=1 on the preset drops them.
    scheduled = method_version("belief", belief_overrides={"min_searches": 2})
    assert scheduled == f"{default} {ENTITY_QUERY_VERSION}"
    assert method_versions(["belief"], belief_overrides={"min_searches": 2}) == {
        "belief": scheduled
    }
    unscheduled = method_version("belief", "qwen-1.5b", belief_overrides={"min_searches": 1})
    assert ENTITY_QUERY_VERSION not in unscheduled
    assert method_version("belief", "another-lm") == default  # falls back to the default pair
    assert belief_methods.fitted_models("qwen-1.5b") is own


def test_the_controller_of_a_preset_reader_starts_from_its_settings():
    from neocorrag_core import EvidenceChainMiner
    from neocorrag_core.eval.protocol import BuildContext

    def config(**context) -> BeliefConfig:
        miner = EvidenceChainMiner(embedder=lambda texts: [[1.0] for _ in texts])
        method = belief_methods.build("belief", BuildContext(miner, **context))
        return method.controller.config

    assert config(reader="qwen-1.5b").min_searches == 2
    assert config(reader="qwen-1.5b").max_corrections == 0
    told = config(reader="qwen-1.5b", belief_overrides={"min_searches": 1})
    assert told.min_searches == 1 and told.max_corrections == 0
    assert config().min_searches == 1 and config().max_corrections == 2
