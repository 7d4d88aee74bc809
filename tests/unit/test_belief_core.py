"""The evidence-state controller's pure parts: workspace, belief update, calibrator, rules."""

from __future__ import annotations

import json
import math

import pytest

from neocorrag_core import ConfigError, InputError, Passage
from neocorrag_core.belief import (
    Action,
    AnswerabilityCalibrator,
    Belief,
    BeliefConfig,
    BeliefTuning,
    Budget,
    Diagnostics,
    EvidenceWorkspace,
    brier_score,
    decide,
    expected_calibration_error,
    implied_belief,
    reliability_bins,
    retrieval_value,
    update_belief,
    verifier_needed,
)
from neocorrag_core.belief.config import belief_settings


def p(pid: str) -> Passage:
    return Passage(id=pid, text=f"text of {pid}")


def diag(**values) -> Diagnostics:
    base = dict(
        relevance=0.5, novelty=0.5, cost=0.1, support=0.5, conflict=0.1, uncertainty=0.5, gap=0.5
    )
    base.update(values)
    return Diagnostics(**base)


# -- workspace -------------------------------------------------------------------------


def test_workspace_adds_new_passages_once_and_refuses_dropped_ones():
    ws = EvidenceWorkspace(capacity=10)
    added = ws.add([p("a"), p("b"), p("a")], step=0, reason="first")
    assert added.new == ("a", "b") and added.known == ("a",) and ws.ids == ("a", "b")
    assert ws.drop(["a", "zzz"], step=1, reason="misleading") == ("a",)
    again = ws.add([p("a"), p("c")], step=2, reason="replacement")
    assert again.refused == ("a",) and again.new == ("c",)
    assert ws.ids == ("b", "c") and ws.dropped == {"a": "misleading"}
    assert [(m.kind, m.passage_ids, m.step) for m in ws.log] == [
        ("add", ("a", "b"), 0),
        ("drop", ("a",), 1),
        ("add", ("c",), 2),
    ]
    assert again.novelty == pytest.approx(0.5)  # c new, a refused


def test_workspace_capacity_and_empty_search_novelty():
    ws = EvidenceWorkspace(capacity=2)
    added = ws.add([p("a"), p("b"), p("c")], step=0, reason="r")
    assert ws.ids == ("a", "b") and added.over_capacity == ("c",)
    assert ws.add([], step=1, reason="r").novelty == 0.0
    assert ws.add([p("a")], step=2, reason="r").novelty == 0.0


# -- belief update ---------------------------------------------------------------------


def test_more_support_means_more_sufficiency_and_conflict_lowers_reliability():
    low, high = implied_belief(diag(support=0.2)), implied_belief(diag(support=0.9))
    assert high.sufficiency > low.sufficiency
    calm, torn = implied_belief(diag(conflict=0.05)), implied_belief(diag(conflict=0.95))
    assert torn.reliability < calm.reliability and torn.conflict > calm.conflict


def test_blend_weighs_the_previous_belief_in_logit_space_and_cost_is_observed():
    previous = Belief(sufficiency=0.9, reliability=0.9, conflict=0.1, uncertainty=0.1, gap=0.1)
    d = diag(support=0.1, gap=0.9, cost=0.42)
    implied = implied_belief(d)
    assert update_belief(previous, d, blend=0.0) == implied
    kept = update_belief(previous, d, blend=1.0)
    assert kept.sufficiency == pytest.approx(0.9) and kept.cost == pytest.approx(0.42)
    half = update_belief(previous, d, blend=0.5)
    logit = lambda x: math.log(x / (1 - x))  # noqa: E731
    expected = 1 / (1 + math.exp(-(0.5 * logit(0.9) + 0.5 * logit(implied.sufficiency))))
    assert half.sufficiency == pytest.approx(expected)


def test_an_unmeasured_answer_confidence_contributes_nothing():
    assert implied_belief(diag()).uncertainty == implied_belief(diag()).uncertainty
    sure = implied_belief(diag(answer_confidence=0.95))
    assert sure.uncertainty < implied_belief(diag()).uncertainty


# -- calibrator ------------------------------------------------------------------------


def support_only(weight: float = 4.0) -> AnswerabilityCalibrator:
    return AnswerabilityCalibrator(
        features=("support",), weights=(weight,), bias=0.0, means=(0.5,), scales=(0.25,),
        version="test",
    )  # fmt: skip


def test_calibrator_predicts_by_hand_and_takes_a_missing_feature_at_its_mean():
    cal = support_only()
    assert cal.predict(diag(support=0.75)) == pytest.approx(1 / (1 + math.exp(-4.0)))
    assert cal.predict({}) == pytest.approx(0.5)


def test_fit_recovers_the_direction_and_round_trips_through_a_file(tmp_path):
    rows = [diag(support=s / 20, gap=1 - s / 20) for s in range(21)] * 3
    outcomes = [int(r.support > 0.5) for r in rows]
    cal = AnswerabilityCalibrator.fit(rows, outcomes, features=("support", "gap"), l2=0.1)
    assert cal.weights[0] > 0 and cal.predict(diag(support=0.9, gap=0.1)) > 0.9
    assert cal.predict(diag(support=0.1, gap=0.9)) < 0.1
    path = tmp_path / "cal.json"
    cal.save(path)
    again = AnswerabilityCalibrator.load(path)
    assert again.predict(diag(support=0.6, gap=0.4)) == pytest.approx(
        cal.predict(diag(support=0.6, gap=0.4))
    )


def test_the_shipped_file_loads_and_bad_files_raise_input_errors(tmp_path):
    shipped = AnswerabilityCalibrator.load()
    assert 0.0 <= shipped.predict(diag()) <= 1.0
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(InputError, match="not JSON"):
        AnswerabilityCalibrator.load(bad)
    bad.write_text(json.dumps({"format": "something else"}))
    with pytest.raises(InputError, match="not a neocorrag answerability"):
        AnswerabilityCalibrator.load(bad)
    with pytest.raises(InputError, match="cannot read"):
        AnswerabilityCalibrator.load(tmp_path / "missing.json")
    with pytest.raises(ConfigError):
        AnswerabilityCalibrator(("a",), (1.0,), 0.0, (0.0,), (0.0,), "v")  # zero scale


SHIPPED_PREDICTIONS = {
    # file: (version, predict(PROBE), predict({}), predict_range(PROBE, verifier names)),
    # computed with the coefficient files and code as shipped before input validation
    "answerability.json": (
        "fit-20261202-2143b127", 0.15482490717046285, 0.18407045143677955,
        (0.12828488513545713, 0.25879789220371513),
    ),
    "after_search.json": (
        "fit-20261202-ea2fb4d5", 0.1750542061731634, 0.17883330994458327,
        (0.16563443233488517, 0.2035817704684205),
    ),
    "answerability-qwen-1.5b.json": (
        "fit-20261203-beb59686", 0.4190313286045034, 0.38030741389834954,
        (0.3932048472246008, 0.435747185286555),
    ),
    "after_search-qwen-1.5b.json": (
        "fit-20261203-b7c348a8", 0.4835587799937844, 0.38365315928273575,
        (0.31468265072302604, 0.709575017840221),
    ),
    "answerability_prior.json": (
        "prior-1", 0.8347951298093854, 0.5, (0.0322954646984505, 0.9986414800495711),
    ),
}  # fmt: skip
PROBE = Diagnostics(
    relevance=0.7, novelty=0.5, cost=0.2, support=0.65, conflict=0.1, uncertainty=0.75,
    gap=0.8, answer_confidence=0.9,
)  # fmt: skip


@pytest.mark.parametrize("name", sorted(SHIPPED_PREDICTIONS))
def test_every_shipped_file_loads_and_predicts_as_before(name):
    from neocorrag_core.belief.calibrator import ANSWERABILITY_FEATURES, shipped_files

    assert sorted(SHIPPED_PREDICTIONS) == shipped_files()
    version, probe, empty, ends = SHIPPED_PREDICTIONS[name]
    cal = AnswerabilityCalibrator.load(shipped=name)
    assert cal.version == version and set(cal.features) == set(ANSWERABILITY_FEATURES)
    assert cal.predict(PROBE) == pytest.approx(probe, abs=1e-12)
    assert cal.predict({}) == pytest.approx(empty, abs=1e-12)
    verifier = ("support", "conflict", "uncertainty", "gap")
    assert cal.predict_range(PROBE, verifier) == pytest.approx(ends, abs=1e-12)
    # The file round-trips through the validated reader unchanged.
    assert AnswerabilityCalibrator.from_dict(cal.to_dict()) == cal


def shipped_dict() -> dict:
    return AnswerabilityCalibrator.load().to_dict()


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            lambda d: d["features"].__setitem__(0, "relevence"),
            r"unknown feature\(s\) \['relevence'\]",
        ),
        (lambda d: d["features"].__setitem__(0, "support"), r"\['support'\] listed more than once"),
        (lambda d: d["features"].__setitem__(0, 1), "1 is not a diagnostic name"),
        (lambda d: d.update(features="abcdef"), "features must be a list"),
        (lambda d: d.update(weights="123456"), "weights must be a list of numbers"),
        (lambda d: d.update(means={"a": 1}), "means must be a list of numbers"),
        (lambda d: d["scales"].__setitem__(0, [1]), r"scales holds \[1\], not a finite"),
        (lambda d: d["weights"].__setitem__(0, True), "weights holds True"),
        (lambda d: d["weights"].__setitem__(0, math.nan), "weights holds nan"),
        (lambda d: d["weights"].pop(), "of one length"),
        (lambda d: d["scales"].__setitem__(0, 0), "scales > 0"),
        (lambda d: d.update(bias=True), "bias must be a finite number"),
        (lambda d: d.update(bias="0.5"), "bias must be a finite number"),
        (lambda d: d.update(format_version=True), "format_version True"),
        (lambda d: d.update(format_version=2), "format_version 2; this neocorrag reads"),
        (lambda d: d.update(version=None), "version must be a non-empty string"),
        (lambda d: d.update(version=" "), "version must be a non-empty string"),
        (lambda d: d.update(meta=[1, 2]), "meta must be an object"),
        (lambda d: d.pop("bias"), r"lacks bias"),
    ],
)
def test_a_bad_field_of_a_coefficient_file_is_an_input_error_naming_it(change, message):
    data = shipped_dict()
    change(data)
    with pytest.raises(InputError, match=message):
        AnswerabilityCalibrator.from_dict(data, origin="f.json")


def test_a_whole_number_format_version_and_a_numeric_version_are_read():
    data = shipped_dict()
    data.update(format_version=1.0, version=3)
    calibrator = AnswerabilityCalibrator.from_dict(data, origin="f.json")
    assert calibrator.version == "3"


def test_unreadable_coefficient_files_and_unknown_shipped_names_are_input_errors(tmp_path):
    latin1 = tmp_path / "latin1.json"
    latin1.write_bytes('{"format": "caf\xe9"}'.encode("latin-1"))
    with pytest.raises(InputError, match=r"latin1\.json is not UTF-8 text"):
        AnswerabilityCalibrator.load(latin1)
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(InputError, match=r"deep\.json is not JSON"):
        AnswerabilityCalibrator.load(deep)
    with pytest.raises(InputError, match=r"no shipped calibrator file 'nope\.json'; shipped: "):
        AnswerabilityCalibrator.load(shipped="nope.json")


ROWS = [{"support": 0.2}, {"support": 0.8}, {"support": 0.5}, {"support": 0.4}]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"outcomes": [1, 1, 1, 1]}, "every one of the 4 outcomes is right"),
        ({"outcomes": [False] * 4}, "every one of the 4 outcomes is wrong"),
        ({"outcomes": [math.nan, 0, 1, 0]}, r"outcomes\[0\] is nan"),
        ({"outcomes": [2, 0, 1, 0]}, r"outcomes\[0\] is 2"),
        ({"outcomes": [1, 0, -1, 0]}, r"outcomes\[2\] is -1"),
        ({"outcomes": [1, 0, "1", 0]}, r"outcomes\[2\] is '1'"),
        ({"outcomes": [1, 0, 1]}, "one outcome per row"),
        ({"features": ["suport"]}, r"unknown feature\(s\) \['suport'\]"),
        ({"features": ["support", "support"]}, "listed more than once"),
        ({"features": "support"}, "features must be a list"),
        ({"features": []}, "features is empty"),
        ({"l2": -5}, "l2 must be a finite number >= 0, got -5"),
        ({"l2": math.nan}, "l2 must be a finite number >= 0, got nan"),
        ({"l2": math.inf}, "l2 must be a finite number >= 0, got inf"),
        ({"rows": [{"support": math.inf}, *ROWS[1:]]}, r"rows\[0\]: diagnostic support is inf"),
        ({"rows": [*ROWS[:3], {"support": "abc"}]}, r"rows\[3\]: diagnostic support is 'abc'"),
        ({"rows": [*ROWS[:3], 0.4]}, r"rows\[3\] is 0.4, not Diagnostics"),
        ({"rows": "abcd"}, "rows must be a list"),
    ],
)
def test_fit_refuses_bad_input_with_an_input_error_naming_it(kwargs, message):
    args = {"rows": ROWS, "outcomes": [0, 1, 1, 0], "features": ["support"]} | kwargs
    rows, outcomes = args.pop("rows"), args.pop("outcomes")
    with pytest.raises(InputError, match=message):
        AnswerabilityCalibrator.fit(rows, outcomes, **args)


def test_fit_takes_true_false_and_any_iterable_and_defaults_to_the_answerability_features():
    from neocorrag_core.belief.calibrator import ANSWERABILITY_FEATURES

    fitted = AnswerabilityCalibrator.fit(
        iter(ROWS), (o for o in [False, True, True, False]), features=["support"]
    )
    assert fitted.weights[0] > 0
    # The default leaves out novelty and cost (protocol, not evidence) and reads the
    # answer's confidence, as the shipped files do.
    rows = [
        diag(novelty=1.0 - 0.02 * i, cost=0.01 * i, answer_confidence=0.3 + 0.6 * (i % 2))
        for i in range(20)
    ]
    cal = AnswerabilityCalibrator.fit(rows, [i % 2 for i in range(20)])
    assert cal.features == ANSWERABILITY_FEATURES
    assert cal.predict(rows[1]) > 0.8 and cal.predict(rows[0]) < 0.2


def test_a_nan_feature_is_taken_at_its_mean_in_fit_and_predict_alike():
    rows = [{"support": s} for s in (0.1, 0.3, 0.7, 0.9)] + [{"support": math.nan}]
    cal = AnswerabilityCalibrator.fit(rows, [0, 0, 1, 1, 1], features=["support"])
    assert cal.means == (pytest.approx(0.5),)
    assert cal.predict({"support": math.nan}) == pytest.approx(cal.predict({}))
    assert cal.predict_range({"support": math.nan}, ()) == (cal.predict({}),) * 2
    assert math.isfinite(cal.predict(diag(support=math.nan)))
    for bad in (math.inf, "0.5", True):
        with pytest.raises(InputError, match="diagnostic support is"):
            cal.predict({"support": bad})


def test_the_scores_check_their_input():
    for call in (brier_score, expected_calibration_error, reliability_bins):
        with pytest.raises(InputError, match="3 probabilities but 1 outcomes"):
            call([0.1, 0.2, 0.3], [1])
        for bad in (1.5, -0.1, math.nan, "0.5"):
            with pytest.raises(InputError, match="probabilities must be finite numbers in"):
                call([bad, 0.5], [1, 0])
        with pytest.raises(InputError, match=r"outcomes\[0\] is 2"):
            call([0.5], [2])
    for bins in (0, -1, 2.5, True):
        with pytest.raises(InputError, match="bins must be an integer >= 1"):
            reliability_bins([0.5], [1], bins=bins)


def test_a_probability_on_a_bin_edge_falls_in_the_bin_it_starts():
    # linspace edges (0.30000000000000004) put 0.3 in the bin below; it starts [0.3, 0.4).
    assert expected_calibration_error([0.25, 0.3], [0, 1]) == pytest.approx(0.475)
    edges = [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9]
    table = reliability_bins(edges, [1] * len(edges))
    assert [(b["low"], b["count"]) for b in table] == [(e, 1) for e in edges]
    assert reliability_bins([0.0, 1.0], [0, 1])[-1] == {
        "low": 0.9, "high": 1.0, "count": 1, "predicted": 1.0, "observed": 1.0,
    }  # fmt: skip


def test_brier_ece_and_bins_by_hand():
    probs, ys = [0.9, 0.9, 0.1, 0.1], [1, 0, 0, 0]
    assert brier_score(probs, ys) == pytest.approx((0.01 + 0.81 + 0.01 + 0.01) / 4)
    bins = reliability_bins(probs, ys, bins=10)
    assert [(b["count"], b["observed"]) for b in bins] == [(2, 0.0), (2, 0.5)]
    # |0.1 - 0| * 2 + |0.9 - 0.5| * 2, over 4
    assert expected_calibration_error(probs, ys) == pytest.approx((0.2 + 0.8) / 4)


# -- rules -----------------------------------------------------------------------------

CONFIG = BeliefConfig()
CALM = Belief(sufficiency=0.5, reliability=0.8, conflict=0.1, uncertainty=0.5, gap=0.8, cost=0.1)


def budget(**values) -> Budget:
    base = dict(rounds_used=1, tokens_used=100, corrections_used=0, searched=True)
    base.update(values)
    return Budget(**base)


def act(belief=CALM, d=None, answerability=0.2, b=None, config=CONFIG, cost=100, tuning=None):
    return decide(
        belief, d or diag(), answerability, b or budget(), config, search_cost=cost,
        tuning=tuning or BeliefTuning(),
    ).action  # fmt: skip


def test_the_first_decision_is_a_retrieval_unless_there_is_no_budget_at_all():
    first = budget(rounds_used=0, tokens_used=0, searched=False)
    assert act(b=first) is Action.RETRIEVE
    assert act(b=first, config=BeliefConfig(max_tokens=50), cost=100) is Action.ABSTAIN


def test_a_pending_correction_is_finished_first():
    assert act(answerability=0.99, b=budget(pending_correction=1)) is Action.RETRIEVE
    prune_only = BeliefTuning(replace_dropped=False)
    assert act(answerability=0.99, b=budget(pending_correction=1), tuning=prune_only) is (
        Action.ANSWER
    )


@pytest.mark.parametrize(
    "belief",
    [
        Belief(sufficiency=0.5, reliability=0.8, conflict=0.6, uncertainty=0.5, gap=0.5),
        Belief(sufficiency=0.5, reliability=0.2, conflict=0.1, uncertainty=0.5, gap=0.5),
    ],
    ids=["conflict", "unreliable"],
)
def test_problematic_evidence_with_flagged_passages_is_verified(belief):
    flagged = diag(drop_ids=("x",))
    assert act(belief, flagged, answerability=0.99) is Action.VERIFY
    assert act(belief, diag(), answerability=0.99) is Action.ANSWER  # nothing flagged
    off = BeliefTuning(correct_problems=False)
    assert act(belief, flagged, answerability=0.99, tuning=off) is Action.ANSWER
    assert act(belief, flagged, 0.99, budget(corrections_used=2)) is Action.ANSWER  # cap


def test_answer_at_the_threshold_and_retrieve_while_a_search_is_worth_it():
    assert act(answerability=0.50) is Action.ANSWER
    assert act(answerability=0.49) is Action.RETRIEVE  # gap 0.8 * 0.51 * 0.9 = 0.37
    assert retrieval_value(CALM, 0.49) == pytest.approx(0.8 * 0.51 * 0.9)


def test_the_fitted_retrieval_value_is_the_expected_gain_of_a_search():
    # gain (0.45 - 0.30) * (1 - cost 0.1) = 0.135 >= 0.10: search; a gain of 0.05 is not
    # worth it, whatever gap the belief reads (the prior formula would give 0.8*0.7*0.9)
    assert retrieval_value(CALM, 0.30, after_search=0.45) == pytest.approx(0.15 * 0.9)
    assert retrieval_value(CALM, 0.30, after_search=0.20) == 0.0  # a search that hurts
    searched = decide(CALM, diag(), 0.30, budget(), CONFIG, search_cost=100, after_search=0.45)
    assert searched.action is Action.RETRIEVE and "0.30 -> 0.45" in searched.reason
    low = decide(
        CALM, diag(novelty=0.9), 0.30, budget(), CONFIG, search_cost=100, after_search=0.35
    )
    assert low.action is Action.STOP
    assert act(answerability=0.30) is Action.RETRIEVE  # the prior formula: 0.50


def test_low_value_after_a_stale_search_rewrites_once_then_ends():
    no_gap = Belief(sufficiency=0.5, reliability=0.8, conflict=0.1, uncertainty=0.5, gap=0.05)
    stale = diag(novelty=0.1)
    assert act(no_gap, stale, answerability=0.3) is Action.REWRITE
    assert act(no_gap, stale, 0.3, budget(rewrote_last=True)) is Action.STOP
    assert act(no_gap, diag(novelty=0.9), answerability=0.3) is Action.STOP
    assert act(no_gap, diag(novelty=0.9), answerability=0.04) is Action.ABSTAIN


def test_caps_end_the_episode_with_stop_or_abstain():
    assert act(answerability=0.3, b=budget(rounds_used=4)) is Action.STOP
    assert act(answerability=0.04, b=budget(rounds_used=4)) is Action.ABSTAIN
    assert act(answerability=0.3, b=budget(tokens_used=11950), cost=100) is Action.STOP


def test_every_decision_has_a_reason():
    decision = decide(CALM, diag(), 0.2, budget(), CONFIG, search_cost=100)
    assert decision.reason and "retrieval value" in decision.reason


def test_the_range_over_free_features_is_taken_at_their_ends_by_hand():
    cal = AnswerabilityCalibrator(
        features=("support", "relevance"), weights=(2.0, 1.0), bias=0.0, means=(0.5, 0.5),
        scales=(0.25, 0.5), version="test",
    )  # fmt: skip
    # support free: 2 * (0 - 0.5) / 0.25 = -4 .. +4; relevance 0.7 fixed: + 0.4.
    low, high = cal.predict_range({"relevance": 0.7, "support": 0.9}, ("support",))
    sig = lambda z: 1 / (1 + math.exp(-z))  # noqa: E731
    assert (low, high) == (pytest.approx(sig(-3.6)), pytest.approx(sig(4.4)))
    # A negative weight swaps the ends; a feature with no free name is as in predict().
    neg = support_only(weight=-4.0)
    assert neg.predict_range({}, ("support",)) == (pytest.approx(sig(-8)), pytest.approx(sig(8)))
    assert neg.predict_range({"support": 0.75}, ()) == (neg.predict(diag(support=0.75)),) * 2


def test_unmeasured_verifier_numbers_are_left_out_of_the_features():
    skipped = diag(support=None, conflict=None, uncertainty=None, gap=None)
    assert not skipped.verified and diag().verified
    assert set(skipped.features()) == {"relevance", "novelty", "cost"}
    # The belief update and the calibrator take what is there (the mean for the rest).
    assert support_only().predict(skipped) == pytest.approx(0.5)
    assert 0.0 < implied_belief(skipped).sufficiency < 1.0


def test_the_verifier_is_skipped_only_when_no_reply_can_change_the_decision():
    b = budget()
    # Answerability 0.14-0.24 for any reply; after a search at most 0.20: a search is worth
    # at most (0.20 - 0.14) * (1 - 0.1) = 0.054 < 0.10.
    quiet = verifier_needed((0.14, 0.24), b, CONFIG, cost=0.1, search_cost=100,
                            after_search=(0.1, 0.2))  # fmt: skip
    assert not quiet.needed
    assert "0.14-0.24" in quiet.why and "at most 0.05" in quiet.why
    always = BeliefConfig(verify="always")
    assert verifier_needed((0.14, 0.24), b, always, cost=0.1, search_cost=100,
                           after_search=(0.1, 0.2)).needed  # fmt: skip
    # A reply could ANSWER, or ABSTAIN:
    for ans in ((0.4, 0.6), (0.03, 0.08)):
        check = verifier_needed(ans, b, CONFIG, cost=0.1, search_cost=100, after_search=(0, 0))
        assert check.needed and "threshold" in check.why
    # A reply could make a search pay: (0.40 - 0.14) * 0.9 = 0.23.
    hopeful = verifier_needed((0.14, 0.24), b, CONFIG, cost=0.1, search_cost=100,
                              after_search=(0.1, 0.4))  # fmt: skip
    assert hopeful.needed and "0.23" in hopeful.why
    # The unfitted prior bounds the gap belief by 1: (1 - 0.14) * 0.9 >= 0.10.
    assert verifier_needed((0.14, 0.24), b, CONFIG, cost=0.1, search_cost=100).needed
    # A correction with no search after it is a change the fitted models do not value.
    prune = BeliefTuning(replace_dropped=False)
    assert verifier_needed((0.14, 0.24), b, CONFIG, cost=0.1, search_cost=100,
                           after_search=(0.1, 0.2), tuning=prune).needed  # fmt: skip
    spent = budget(rounds_used=CONFIG.max_rounds)
    assert verifier_needed((0.14, 0.24), spent, CONFIG, cost=0.1, search_cost=100,
                           after_search=(0.1, 0.2)).needed  # fmt: skip
    # ... unless no correction is left either.
    done = budget(rounds_used=CONFIG.max_rounds, corrections_used=CONFIG.max_corrections)
    last = verifier_needed((0.14, 0.24), done, CONFIG, cost=0.1, search_cost=100,
                           after_search=(0.1, 0.2))  # fmt: skip
    assert not last.needed and "no search is left" in last.why


def test_a_full_workspace_takes_no_plain_search_and_asks_the_verifier_only_for_a_correction():
    full = budget(room=False)
    # A search would be worth 0.23, but its passages could not be kept: the episode ends.
    stop = decide(CALM, diag(), 0.2, full, CONFIG, search_cost=100, after_search=0.5)
    assert stop.action is Action.STOP and "workspace is full" in stop.reason
    assert decide(CALM, diag(), 0.2, budget(), CONFIG, search_cost=100,
                  after_search=0.5).action is Action.RETRIEVE  # fmt: skip
    # A correction's replacement search still follows the drops that make room ...
    hopeful = verifier_needed((0.14, 0.24), full, CONFIG, cost=0.1, search_cost=100,
                              after_search=(0.1, 0.4))  # fmt: skip
    assert hopeful.needed
    # ... so with no correction left, no reply can lead to a search.
    closed = BeliefConfig(max_corrections=0)
    quiet = verifier_needed((0.14, 0.24), full, closed, cost=0.1, search_cost=100,
                            after_search=(0.1, 0.4))  # fmt: skip
    assert not quiet.needed and "workspace is full" in quiet.why
    assert verifier_needed((0.14, 0.24), budget(), closed, cost=0.1, search_cost=100,
                           after_search=(0.1, 0.4)).needed  # fmt: skip
    # A scheduled search is not run into a full workspace either.
    scheduled = budget(room=False, scheduled_left=1)
    assert decide(CALM, diag(), 0.2, scheduled, CONFIG, search_cost=100,
                  after_search=0.2).action is Action.STOP  # fmt: skip


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("answer_threshold", 1.5),
        ("verify", "sometimes"),
        ("k", 0),
        ("max_rounds", 2.0),
        ("blend", -0.1),
        ("k", True),
    ],
)
def test_bad_config_values_raise_config_errors(field, value):
    with pytest.raises(ConfigError, match=field):
        belief_settings(changes={field: value})
    with pytest.raises(ConfigError, match="unknown"):
        BeliefConfig().with_overrides(nope=1)


def test_the_shipped_models_are_picked_for_the_generator_they_were_fitted_on():
    from neocorrag_core.belief import BeliefController, default_verify
    from neocorrag_core.belief.calibrator import SHIPPED_MODELS, shipped_pair

    default = shipped_pair(None)
    assert default is not None
    assert default[0].version == AnswerabilityCalibrator.load().version
    # Another model, or a framework LLM object: no file was fitted for it.
    assert shipped_pair("some/other-model") is None and shipped_pair(object()) is None
    assert default_verify("some/other-model", refitted=False) == "always"
    assert default_verify("some/other-model", refitted=True) == "auto"
    # The 1.5B reader has its own fit, not the 0.5B's files under another name.
    own = shipped_pair("qwen-1.5b")
    assert own is not None and own[0].version != default[0].version
    assert own[1].version != default[1].version
    for preset, (answerability, after) in SHIPPED_MODELS.items():
        pair = shipped_pair(None if preset == "default" else preset)
        assert pair is not None
        assert pair[0].version == AnswerabilityCalibrator.load(shipped=answerability).version
        assert pair[1].version == AnswerabilityCalibrator.load(shipped=after).version
        assert default_verify(None if preset == "default" else preset, refitted=False) == "auto"
        built = BeliefController.from_models(None if preset == "default" else preset)
        assert built.calibrator.version == pair[0].version  # nothing loads but the files
        assert built.after_search.version == pair[1].version
