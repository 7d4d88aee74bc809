"""How the shipped calibrator files are fitted (the lab): L2 selection on dev, the comparison
with the prior and a constant, the tune half only, eval result files, the fit and replay
scripts."""

from __future__ import annotations

import hashlib
import json
import math

import numpy as np
import pytest
from benchmark_scripts import load_benchmark
from fitting_fixtures import DAY, record, row, step, synthetic_records, tune_ids
from neocorrag_lab.fitting import (
    calibration_split_of,
    fit_and_select,
    fit_from_records,
    fit_from_results,
)

from neocorrag_core.belief import (
    Action,
    AnswerabilityCalibrator,
    Belief,
    CalibrationRow,
    Decision,
    Diagnostics,
    Step,
    rows_from_trajectories,
)
from neocorrag_core.errors import InputError
from neocorrag_core.eval.splits import split_of


def test_calibration_split_is_a_second_salted_hash_of_the_tune_half_only():
    tune = [str(i) for i in range(600) if split_of(str(i)) == "tune"]
    for qid in tune[:50]:
        byte = hashlib.sha256(f"neocorrag-calib-v1:{qid}".encode()).digest()[0]
        assert calibration_split_of(qid) == ("dev" if byte % 3 == 0 else "train")
    dev = [q for q in tune if calibration_split_of(q) == "dev"]
    assert 0.2 < len(dev) / len(tune) < 0.45  # about a third
    report = next(str(i) for i in range(100) if split_of(str(i)) == "report")
    with pytest.raises(ValueError, match="report half"):
        calibration_split_of(report)
    # A user's own questions have no report half: the same hash applies to every id.
    assert calibration_split_of(report, within_tune=False) in ("train", "dev")
    assert split_of(tune[0]) == "tune"  # the first-level split is unchanged


def test_the_benchmark_fit_fits_the_after_search_model_on_the_tune_half():
    ids = tune_ids(40)
    records = synthetic_records(ids, seed=3)
    model, report = fit_from_records(records, target="after_search", date=DAY)
    assert model.meta["target"] == "after_search"
    assert "next measured step" in model.meta["label_rule"] == report["label_rule"]
    assert report["fitted"]["train"]["rows"] == 2 * len(
        [q for q in ids if calibration_split_of(q) == "train"]
    )  # three measured steps per question: two of them have a measured answer after


# -- fitting and selection ----------------------------------------------------------------


def test_selection_prefers_strong_l2_when_train_separates_but_dev_disagrees():
    # Train: support separates the labels perfectly, so a weak penalty sends the weight
    # towards infinity; dev: the same supports with half the labels swapped.
    train = [row(f"t{i}", int(s > 0.5), support=s) for i, s in enumerate([0.1, 0.2, 0.8, 0.9] * 3)]
    dev = [row(f"d{i}", int(i % 2 == 0), support=s) for i, s in enumerate([0.1, 0.9] * 4)]
    calibrator, report = fit_and_select(train, dev, l2_grid=(0.001, 1.0, 100.0), date=DAY)
    assert report["l2"] == 100.0
    losses = {c["l2"]: c["dev_log_loss"] for c in report["l2_grid"]}
    assert losses[100.0] < losses[1.0] < losses[0.001]
    assert calibrator.meta["l2"] == 100.0 and calibrator.features == ("support",)


def test_selection_prefers_weak_l2_when_dev_follows_train():
    ids = [f"q{i}" for i in range(600)]
    rows = rows_from_trajectories(synthetic_records(ids, seed=1))
    train = [r for r in rows if r.qid in set(ids[:400])]
    dev = [r for r in rows if r.qid in set(ids[400:])]
    calibrator, report = fit_and_select(train, dev, l2_grid=(0.1, 3000.0), date=DAY)
    assert report["l2"] == 0.1
    support = calibrator.weights[calibrator.features.index("support")]
    assert support > 0
    # The chosen model is the one fitted on train: its dev log loss is the grid's minimum.
    assert report["fitted"]["dev"]["log_loss"] == pytest.approx(
        min(c["dev_log_loss"] for c in report["l2_grid"])
    )
    assert report["fitted"]["dev"]["log_loss"] < report["base_rate_constant"]["dev"]["log_loss"]
    assert report["fitted"]["dev"]["rows"] == len(dev)
    assert report["fitted"]["dev"]["questions"] == 200
    assert report["fitted"]["train"]["base_rate"] == pytest.approx(
        np.mean([r.label for r in train])
    )
    assert sum(b["count"] for b in report["fitted"]["dev"]["reliability"]) == len(dev)
    assert set(report["prior"]["dev"]) >= {"brier", "ece", "log_loss", "reliability"}


def test_the_comparison_prior_is_the_hand_set_file_even_after_the_default_changes(monkeypatch):
    from neocorrag_core.belief import calibrator as module

    monkeypatch.setattr(module, "DEFAULT_FILE", "no_such_file.json")
    train = [row(f"t{i}", i % 2, support=0.2 + 0.6 * (i % 2)) for i in range(10)]
    _, report = fit_and_select(train, train, l2_grid=(1.0,), date=DAY)
    assert report["prior"]["version"] == "prior-1"


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
    # One NaN dev row used to make every candidate's dev log loss NaN, and min() then
    # picked the weakest L2 against the tie rule.
    train = [row(f"t{i}", i % 2, support=0.2 + 0.6 * (i % 2) + 0.01 * i) for i in range(20)]
    dev = [row(f"d{i}", i % 2, support=0.3 + 0.4 * (i % 2)) for i in range(1, 10)]
    with pytest.raises(InputError, match=message):
        fit_and_select(train, [bad, *dev], date=DAY)


def test_one_class_or_empty_splits_are_refused():
    both = [row("a", 1, support=0.9), row("b", 0, support=0.1)]
    with pytest.raises(InputError, match="every one of the 2 train rows is a right answer"):
        fit_and_select([row("a", 1, support=0.9), row("b", 1, support=0.8)], both)
    with pytest.raises(InputError, match="dev rows is a wrong answer"):
        fit_and_select(both, [row("c", 0, support=0.2)])
    with pytest.raises(InputError, match="dev split has no rows"):
        fit_and_select(both, [])
    with pytest.raises(InputError, match="l2_grid"):
        fit_and_select(both, both, l2_grid=(-1.0,))


def test_records_split_by_question_and_the_report_half_is_dropped():
    tune = tune_ids(90)
    report_half = [f"r{i}" for i in range(60) if split_of(f"r{i}") == "report"][:5]
    records = synthetic_records(tune + report_half, seed=2)
    calibrator, report = fit_from_records(records, date=DAY)
    assert report["report_half_dropped"] == 5
    fitted = report["fitted"]
    assert fitted["train"]["questions"] + fitted["dev"]["questions"] == 90
    assert fitted["dev"]["questions"] == sum(calibration_split_of(q) == "dev" for q in tune)
    assert calibrator.meta["split"]["calibration_salt"] == "neocorrag-calib-v1"
    assert calibrator.version.startswith("fit-20240501-")
    again, _ = fit_from_records(records, date=DAY)
    other, _ = fit_from_records(synthetic_records(tune, seed=3), date=DAY)
    assert again.version == calibrator.version != other.version
    with pytest.raises(InputError, match="report half"):
        fit_from_records(synthetic_records(report_half), date=DAY)


def test_a_results_file_that_is_not_utf8_is_an_input_error_and_the_script_says_so(tmp_path, capsys):
    latin1 = tmp_path / "results.json"
    latin1.write_bytes('{"per_question": {"belief": []}, "x": "caf\xe9"}'.encode("latin-1"))
    with pytest.raises(InputError, match=r"results\.json is not UTF-8 text"):
        fit_from_results([latin1])
    assert load_script().main(["--results", str(latin1), "--out", str(tmp_path / "a.json")]) == 2
    assert "is not UTF-8 text" in capsys.readouterr().err


# -- the script ---------------------------------------------------------------------------


def load_script():
    return load_benchmark("fit_calibrator")


def test_the_script_writes_a_loadable_file_a_report_and_a_plot(tmp_path, capsys):
    results = tmp_path / "run" / "results.json"
    results.parent.mkdir()
    per_question = {"belief-x": synthetic_records(tune_ids(80), seed=5)}
    settings = {"data": "musique.jsonl", "split": "tune", "lm": None, "reader": "default"}
    results.write_text(json.dumps({"settings": settings, "per_question": per_question}))
    out, report_path, plot = tmp_path / "a.json", tmp_path / "r" / "c.json", tmp_path / "p.png"
    argv = ["--results", str(results), "--method", "belief-x", "--out", str(out)]
    argv += ["--report", str(report_path), "--plot", str(plot), "--l2", "0.1", "10"]
    assert load_script().main(argv) == 0

    calibrator = AnswerabilityCalibrator.load(out)
    report = json.loads(report_path.read_text())
    assert calibrator.version == report["version"] and calibrator.meta["fitted"] is True
    assert calibrator.meta["script"] == "benchmarks/fit_calibrator.py"
    assert calibrator.meta["data_files"][0]["path"] == str(results)
    assert calibrator.meta["dev"]["brier"] == pytest.approx(report["fitted"]["dev"]["brier"])
    assert report["l2"] in (0.1, 10.0)
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    printed = capsys.readouterr().out
    assert f"| fitted `{calibrator.version}`" in printed and "| prior `prior-1` | dev |" in printed

    assert load_script().main(["--results", str(results), "--out", str(out)]) == 2
    assert "no per-question records of method 'belief' (it has: belief-x)" in (
        capsys.readouterr().err
    )


def test_the_replay_script_walks_recorded_steps_by_the_rules(tmp_path, capsys):
    replay = load_benchmark("replay_decisions")
    support = AnswerabilityCalibrator(("support",), (4.0,), 0.0, (0.5,), (0.25,), version="s")
    files = {}
    for name, p in (("hopeful", 0.9), ("futile", 0.01)):
        bias = math.log(p / (1 - p))
        model = AnswerabilityCalibrator(("support",), (0.0,), bias, (0.5,), (0.25,), version=name)
        files[name] = tmp_path / f"{name}.json"
        model.save(files[name])
    support.save(tmp_path / "support.json")
    belief = {"sufficiency": 0.5, "reliability": 0.8, "conflict": 0.1, "uncertainty": 0.5}
    belief |= {"gap": 0.5, "cost": 0.2}
    steps = [
        {**step(0, "", 0.5), "prompt_tokens": 0, "generated_tokens": 0, "belief": belief},
        {**step(1, "Mountrail", 0.2), "prompt_tokens": 900, "generated_tokens": 10},
        {**step(2, "Stanley", 0.9), "prompt_tokens": 1500, "generated_tokens": 10},
    ]
    for s in steps[1:]:
        s["belief"] = belief
    results = tmp_path / "results.json"
    results.write_text(json.dumps({"per_question": {"belief": [record(tune_ids(1)[0], steps)]}}))
    base = ["--results", str(results), "--calibrator", str(tmp_path / "support.json")]
    # p = 0.008 after the first search; a search worth (0.9 - 0.008) * 0.8: search, then
    # p = 0.998 >= 0.5: ANSWER "Stanley" after 2 rounds and 2,420 tokens
    assert replay.main([*base, "--after-search", str(files["hopeful"])]) == 0
    assert "| 0.05 | 100.0 | 2420 | 2.00 | 1 / 0 / 0 |" in capsys.readouterr().out
    # no gain expected: the episode ends after the first round, and p < 0.05 abstains
    argv = [*base, "--after-search", str(files["futile"]), "--abstain-below", "0", "0.05"]
    assert replay.main(argv) == 0
    printed = capsys.readouterr().out
    assert "| 0 | 0.0 | 910 | 1.00 | 0 / 1 / 0 |" in printed  # "Mountrail" is wrong
    assert "| 0.05 | 0.0 | 910 | 1.00 | 0 / 0 / 1 |" in printed


def test_the_replay_script_reads_steps_that_skipped_the_verifier(tmp_path, capsys):
    """verify="auto" (the default) records no verifier numbers on a skipped step."""
    replay = load_benchmark("replay_decisions")
    skipped = {"support": None, "conflict": None, "uncertainty": None, "gap": None}
    local = Step(
        index=1,
        diagnostics=Diagnostics(relevance=0.5, novelty=1.0, cost=0.1, **skipped),
        belief=Belief(),
        answerability=0.2,
        retrieval_value=0.0,
        decision=Decision(Action.STOP, "x"),
        draft_answer="Stanley",
    ).as_dict()
    assert "support" not in local["diagnostics"]
    assert replay.recorded_diagnostics(local["diagnostics"]) == Diagnostics(
        relevance=0.5, novelty=1.0, cost=0.1, **skipped
    )
    first = {**local, "step": 0, "draft_answer": "", "action": "retrieve"}
    results = tmp_path / "results.json"
    results.write_text(
        json.dumps({"per_question": {"belief": [record(tune_ids(1)[0], [first, local])]}})
    )
    assert replay.main(["--results", str(results)]) == 0
    assert "| 0.05 | 100.0 |" in capsys.readouterr().out


def test_a_fit_on_episodes_without_verifier_diagnostics_warns():
    def local_row(i: int) -> CalibrationRow:
        # Local diagnostics only, as a step of verify="auto" that skipped the verifier.
        right = int(i % 3 == 0)
        return CalibrationRow(f"q{i}", 1, {"relevance": 0.1 * (i % 10)}, right, float(right))

    with pytest.warns(UserWarning, match="verify='always'"):
        calibrator, _ = fit_and_select(
            [local_row(i) for i in range(30)], [local_row(i) for i in range(9)]
        )
    assert calibrator.features == ("relevance",)
