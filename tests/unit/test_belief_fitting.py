"""Refitting the answerability calibrator on your own data: rows and labels, the one-call
fits (one L2 strength, a held-out dev part), scores. The shipped files' L2 selection, the
report half and the fit script are the lab's (``tests/lab/test_lab_fitting.py``)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from fitting_fixtures import DAY, record, row, step, synthetic_records

from neocorrag_core.belief import (
    Action,
    Belief,
    BeliefResult,
    CalibrationRow,
    Decision,
    Diagnostics,
    Step,
    fit_from_episodes,
    fit_from_records,
    fit_split,
    rows_from_trajectories,
)
from neocorrag_core.belief.fitting import DEFAULT_L2, calibration_part, log_loss, prompt_versions
from neocorrag_core.errors import InputError

# -- rows and labels ----------------------------------------------------------------------


def test_rows_label_each_measured_step_by_the_f1_of_its_draft():
    steps = [
        step(0, "", 0.5),
        step(1, "Paris", 0.8, answer_confidence=0.9),  # F1 2/3 against "Paris, France"
        step(2, "London", 0.3, answer_confidence=None),
        step(3, "the Paris France", 0.9),  # normalized: exact
    ]
    rows = rows_from_trajectories([record("a", steps, answers=("Paris, France", "Lutetia"))])
    assert [(r.qid, r.step, r.label) for r in rows] == [("a", 1, 1), ("a", 2, 0), ("a", 3, 1)]
    assert rows[0].f1 == pytest.approx(2 / 3)
    assert rows[0].features == {
        "relevance": 0.6,
        "novelty": 0.5,
        "cost": 0.2,
        "support": 0.8,
        "conflict": 0.1,
        "uncertainty": pytest.approx(0.2),
        "gap": 0.5,
        "answer_confidence": 0.9,
    }
    assert "answer_confidence" not in rows[1].features  # not measured: left out, not zero
    strict = rows_from_trajectories([record("a", steps, ("Paris, France",))], success_f1=0.7)
    assert [r.label for r in strict] == [0, 0, 1]


def test_after_search_rows_pair_a_searching_step_with_the_next_measured_answer():
    verify = {**step(3, "Mountrail County", 0.4), "action": "verify"}
    steps = [
        step(0, "", 0.5),  # the first search: nothing measured, no row
        step(1, "Mountrail County", 0.2),  # searched; the next measured draft is right
        step(2, "Stanley", 0.9),  # searched; the next measured draft is wrong
        verify,  # not a search: no row, though a measured step follows
        {**step(4, "Stanley", 0.7), "action": "stop"},  # the last: nothing after it
    ]
    rows = rows_from_trajectories([record("a", steps)], target="after_search")
    assert [(r.step, r.label) for r in rows] == [(1, 1), (2, 0)]
    assert rows[0].features["support"] == 0.2  # the features are the searching step's
    assert rows[1].f1 == 0.0  # and the F1 is that of the answer after the search
    with pytest.raises(InputError, match="searched, and measured again"):
        rows_from_trajectories([record("a", steps[:2])], target="after_search")
    with pytest.raises(InputError, match="target"):
        rows_from_trajectories([record("a", steps)], target="later")


def test_fit_from_records_fits_the_after_search_model_too():
    ids = [f"q{i}" for i in range(40)]  # a user's questions: every one is split
    records = synthetic_records(ids, seed=3)
    model, report = fit_from_records(records, target="after_search", date=DAY)
    assert model.meta["target"] == "after_search"
    assert "next measured step" in model.meta["label_rule"] == report["label_rule"]
    assert report["fitted"]["train"]["rows"] == 2 * len(
        [q for q in ids if calibration_part(q) == "train"]
    )  # three measured steps per question: two of them have a measured answer after
    assert model.version.startswith("fit-20240501-")


@pytest.mark.parametrize(
    ("records", "message"),
    [
        ([{"qid": "a", "info": {"trajectory": []}}], "lacks answers"),
        ([record("a", [step(1, "x", 0.5)], answers=())], "answers must be"),
        ([{"qid": "a", "answers": ["x"], "info": {}}], "info.trajectory"),
        ([record("a", [step(0, "", 0.5)]), record("b", [])], "no step of the 2 record"),
        ([record("a", [step(1, "x", 0.5, gap="high")])], "gap is 'high'"),
        ([record("a", [{"step": 1, "draft_answer": "x"}])], "no diagnostics"),
        (["not a record"], "record 1 is not an object"),
        ([record("a", [{**step(1, "x", 0.5), "step": "one"}])], "step='one', not an integer"),
        ([record("a", [{**step(1, "x", 0.5), "step": None}])], "step=None, not an integer"),
        ([record("a", [{**step(1, "x", 0.5), "step": True}])], "step=True, not an integer"),
        ([], "no step of the 0 record"),
    ],
)
def test_malformed_records_are_clear_input_errors(records, message):
    with pytest.raises(InputError, match=message):
        rows_from_trajectories(records)


# -- fitting ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        (row("d0", 0, support=math.nan), r"dev row 0 \(qid 'd0', step 1\): feature support is nan"),
        (row("d0", 0, support=math.inf), "feature support is inf"),
        (row("d0", 0, support="0.5"), "feature support is '0.5', not a number"),
        (row("d0", 2, support=0.5), "label is 2, not 0 or 1"),
        (row("d0", True, support=0.5), "label is True, not 0 or 1"),
        ({"support": 0.5}, "dev row 0 is dict, not a CalibrationRow"),
    ],
)
def test_bad_rows_are_refused_before_any_fit(bad, message):
    train = [row(f"t{i}", i % 2, support=0.2 + 0.6 * (i % 2) + 0.01 * i) for i in range(20)]
    dev = [row(f"d{i}", i % 2, support=0.3 + 0.4 * (i % 2)) for i in range(1, 10)]
    with pytest.raises(InputError, match=message):
        fit_split(train, [bad, *dev], date=DAY)


def test_one_class_or_empty_splits_are_refused():
    both = [row("a", 1, support=0.9), row("b", 0, support=0.1)]
    with pytest.raises(InputError, match="every one of the 2 train rows is a right answer"):
        fit_split([row("a", 1, support=0.9), row("b", 1, support=0.8)], both)
    with pytest.raises(InputError, match="dev split has no rows"):
        fit_split(both, [])
    # One L2 strength: a dev part of one class is only scored.
    calibrator, report = fit_split(both, [row("c", 0, support=0.2)], date=DAY)
    assert report["fitted"]["dev"]["base_rate"] == 0.0 and calibrator.features == ("support",)


def test_fit_from_episodes_refits_on_a_users_results_in_one_call():
    rng = np.random.default_rng(4)
    results, answers = [], []
    for i in range(60):
        steps = []
        for s in range(3):
            support = float(rng.uniform(0, 1))
            right = rng.uniform() < support
            steps.append(
                Step(
                    index=s,
                    diagnostics=Diagnostics(0.5, 0.5, 0.1 * s, support, 0.1, 0.5, 0.5),
                    belief=Belief(),
                    answerability=0.5,
                    retrieval_value=0.2,
                    decision=Decision(Action.RETRIEVE, "test"),
                    draft_answer="Stanley" if right else "Bismarck",
                )
            )
        results.append(
            BeliefResult(f"question {i}?", "Stanley", False, Action.STOP, [], steps=steps)
        )
        answers.append(["Stanley"])
    calibrator, report = fit_from_episodes(results, answers)
    rows = report["fitted"]["train"]["rows"] + report["fitted"]["dev"]["rows"]
    assert rows == 180  # every question is used: a user's questions have no report half
    assert calibrator.meta["source"] == "fit_from_episodes"
    assert calibrator.meta["l2"] == DEFAULT_L2 and report["l2"] == DEFAULT_L2
    assert calibrator.meta["split"]["calibration_salt"] == "neocorrag-calib-v1"
    # The prompts through which the diagnostics were measured are part of its provenance.
    assert calibrator.meta["prompt_versions"] == prompt_versions()
    assert set(prompt_versions()) == {"answer", "verifier", "rewrite"}
    # dev is held out: scored, never fitted on.
    dev_questions = {f"question {i}?" for i in range(60)}
    dev_questions = {q for q in dev_questions if calibration_part(q) == "dev"}
    assert report["fitted"]["dev"]["questions"] == len(dev_questions)
    assert set(report["fitted"]["dev"]) >= {"brier", "ece", "log_loss", "reliability"}
    stronger, _ = fit_from_episodes(results, answers, l2=100.0)
    assert stronger.meta["l2"] == 100.0 and stronger.weights != calibrator.weights
    assert 0.0 <= calibrator.predict(results[0].steps[0].diagnostics) <= 1.0
    with pytest.raises(InputError, match="one answers list"):
        fit_from_episodes(results, answers[:-1])


def test_log_loss_matches_its_definition():
    assert log_loss([0.8, 0.25], [1, 0]) == pytest.approx(-(math.log(0.8) + math.log(0.75)) / 2)
    assert math.isfinite(log_loss([0.0, 1.0], [1, 0]))  # clipped, not infinite


@pytest.mark.parametrize(
    ("probabilities", "outcomes", "message"),
    [
        ([0.1, 0.2, 0.3], [1], "3 probabilities but 1 outcomes"),  # used to broadcast
        ([math.nan, 0.5], [1, 0], "finite numbers in"),
        ([1.5], [1], "finite numbers in"),
        ([0.5], [2], r"outcomes\[0\] is 2"),
    ],
)
def test_log_loss_checks_its_input(probabilities, outcomes, message):
    with pytest.raises(InputError, match=message):
        log_loss(probabilities, outcomes)


def test_a_fit_on_episodes_without_verifier_diagnostics_warns():
    def local_row(i: int) -> CalibrationRow:
        # Local diagnostics only, as a step of verify="auto" that skipped the verifier.
        right = int(i % 3 == 0)
        return CalibrationRow(f"q{i}", 1, {"relevance": 0.1 * (i % 10)}, right, float(right))

    with pytest.warns(UserWarning, match="verify='always'"):
        calibrator, _ = fit_split(
            [local_row(i) for i in range(30)], [local_row(i) for i in range(9)]
        )
    assert calibrator.features == ("relevance",)


def test_the_calibration_part_is_a_salted_hash_of_the_question_id():
    import hashlib

    ids = [str(i) for i in range(600)]
    for qid in ids[:50]:
        byte = hashlib.sha256(f"neocorrag-calib-v1:{qid}".encode()).digest()[0]
        assert calibration_part(qid) == ("dev" if byte % 3 == 0 else "train")
    dev = [q for q in ids if calibration_part(q) == "dev"]
    assert 0.2 < len(dev) / len(ids) < 0.45  # about a third


def test_the_product_fit_never_imports_the_benchmark_harness():
    import subprocess
    import sys

    code = (
        "import sys, neocorrag_core.belief.fitting; "
        "bad = sorted(m for m in sys.modules if m.startswith(('neocorrag_core.eval', "
        "'neocorrag_lab'))); print(bad); sys.exit(1 if bad else 0)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd="/")
    assert done.returncode == 0, done.stdout + done.stderr
