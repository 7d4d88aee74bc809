"""The controller's baselines and ablations (the lab) on tiny models: every method answers
by itself, ends with a typed action, honours the caps, and is compared with ``iterative``;
their records carry versions."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from eval_fixtures import run, settings_for
from neocorrag_lab import belief_variants
from neocorrag_lab.belief_variants import BELIEF_VARIANTS, method_version

from neocorrag_core.belief import BeliefConfig
from neocorrag_core.eval import belief_methods
from neocorrag_core.eval.belief_methods import MINER_OUTPUT_VERSION, REFINED_ANSWER_VERSION
from neocorrag_core.eval.registry import method_versions

pytestmark = pytest.mark.usefixtures("one_torch_thread")

METHODS = ("belief", *BELIEF_VARIANTS)
CAPS = {"max_rounds": 2, "max_evidence": 6, "max_tokens": 6000}


def test_every_method_answers_itself_within_the_caps(tmp_path, tiny_lm):
    # One question keeps the seven methods' tiny-model episodes cheap; the branches are
    # covered by the controller's own tests.
    settings = settings_for(tmp_path, METHODS, belief_overrides=CAPS, plots=False, limit=1)
    results = run(settings, tiny_lm)
    assert results["questions_compared"] == 1
    config = BeliefConfig().with_overrides(**CAPS)
    for name in METHODS:
        for record in results["per_question"][name]:
            assert record["reader_prompt_tokens"] == 0, name  # the runner's reader never ran
            assert record["info"]["final_action"] in {"answer", "stop", "abstain"}, name
            assert record["retrieval_rounds"] <= config.max_rounds, name
            assert len(record["context_ids"]) <= config.max_evidence, name
            assert record["total_tokens"] == (
                record["method_prompt_tokens"] + record["method_generated_tokens"]
            )
            if record["abstained"]:
                assert record["f1"] == 0.0 and record["prediction"] == ""
    closed = results["per_question"]["closed-book"]
    assert all(r["context_ids"] == [] and r["retrieval_rounds"] == 0 for r in closed)
    single = results["per_question"]["single-shot"]
    assert all(r["context_ids"] == r["retrieved_ids"] for r in single)
    for record in results["per_question"]["belief"]:
        steps = record["info"]["trajectory"]
        assert steps and steps[-1]["action"] == record["info"]["final_action"]
        assert all(step["reason"] for step in steps)
        # The first search is the question itself, served from the shared top-k.
        assert set(steps[0]["retrieved_ids"]) == set(record["retrieved_ids"])
        dropped = {i for m in record["info"]["mutations"] if m["kind"] == "drop" for i in m["ids"]}
        assert not dropped & set(record["context_ids"])
    assert set(results["comparisons_iterative"]) == set(METHODS) - {"iterative"}
    assert results["comparisons"] == {}  # `none` was not run
    agg = results["methods"]["belief"]
    assert 0.0 <= agg["abstention"] <= 1.0 and agg["total_tokens"] > 0
    report = (Path(settings.out) / "report.md").read_text()
    assert "Methods that answer by themselves" in report and "against `iterative`" in report
    saved = json.loads((Path(settings.out) / "results.json").read_text())
    assert saved["settings"]["belief_overrides"] == CAPS


def test_a_record_of_another_method_version_is_run_again(tmp_path, tiny_lm, monkeypatch):
    settings = settings_for(tmp_path, ("closed-book",), plots=False, limit=1)
    done: list[str] = []
    run(settings, tiny_lm, on_record=lambda r: done.append(r["method_version"]))
    assert done == [method_version("closed-book")]
    run(settings, tiny_lm, on_record=lambda r: done.append(r["method_version"]))
    assert len(done) == 1  # same prompts: the cached record stands
    monkeypatch.setattr(belief_variants, "ANSWER_PROMPT_VERSION", "answer-test")
    run(settings, tiny_lm, on_record=lambda r: done.append(r["method_version"]))
    assert done[1:] == ["answer-test"]  # a changed prompt reruns the record


def test_the_ablations_versions_follow_the_controllers(monkeypatch):
    class Fitted:
        version = "fit-test"

    assert "calibrator" not in method_version("iterative")
    monkeypatch.setattr(belief_methods.AnswerabilityCalibrator, "load", lambda **_: Fitted())
    belief = belief_methods.method_version("belief")
    assert belief.endswith("after-search fit-test verify-auto-1")
    # The paper's loop measures as the records before the verifier gate did: same version.
    assert method_version("belief-always-verify").endswith("after-search fit-test")
    assert method_version("belief-chains") == f"{belief} {MINER_OUTPUT_VERSION}"
    refined = f"{belief} {MINER_OUTPUT_VERSION} {REFINED_ANSWER_VERSION}"
    assert method_version("belief-refined") == refined
    assert REFINED_ANSWER_VERSION not in method_version("belief-unrefined", "qwen-1.5b")
    # Every controller method and baseline declares its version.
    assert set(method_versions(("none", *METHODS))) == set(METHODS)
    # Methods with no fitted model do not depend on the reader's files or its preset.
    assert method_version("iterative", "qwen-1.5b") == method_version("iterative")
    assert "preset" not in method_version("iterative", "qwen-1.5b")
