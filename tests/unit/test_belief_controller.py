"""The controller's episodes against scripted models and retrievers (no LM)."""

from __future__ import annotations

import asyncio
from dataclasses import replace

import numpy as np
import pytest

from neocorrag_core import ConfigError, Passage, RetrievalError
from neocorrag_core.belief import (
    AFTER_SEARCH_FILE,
    Action,
    AnswerabilityCalibrator,
    BeliefConfig,
    BeliefController,
    DraftAnswer,
    Usage,
    VerifierReply,
)
from neocorrag_core.belief.config import BeliefTuning, belief_settings

QUESTION = "What is the capital of the county that contains Van Hook Township?"
HOP1 = Passage(
    id="hop1", title="Van Hook Township", text="Van Hook Township is in Mountrail County."
)
HOP2 = Passage(id="hop2", title="Mountrail County", text="Its county seat is Stanley.")
BAD = Passage(id="bad", title="Van Hook (film)", text="Van Hook is a 1999 film set in Bismarck.")
NOISE = Passage(id="noise", title="Stanley Cup", text="The Stanley Cup is a hockey trophy.")


class Verifier:
    """Flags BAD as conflicting; support is high once both hops are in the evidence."""

    def __init__(self) -> None:
        self.calls = 0

    def verify(self, question, passages, draft_answer):
        self.calls += 1
        ids = {p.id for p in passages}
        both = {"hop1", "hop2"} <= ids
        return (
            VerifierReply(
                support=0.95 if both and "bad" not in ids else 0.3,
                conflict=0.9 if "bad" in ids else 0.05,
                uncertainty=0.2 if both else 0.7,
                gap=0.1 if both else 0.9,
                missing_fact="" if both else "capital of Mountrail County",
                drop_ids=("bad", "not-shown") if "bad" in ids else (),
            ),
            Usage(prompt_tokens=100 + 50 * len(passages), generated_tokens=20),
        )


class Generator:
    def answer(self, question, passages):
        ids = {p.id for p in passages}
        text = "Stanley" if "hop2" in ids else "Bismarck" if "bad" in ids else "unknown"
        return DraftAnswer(text, confidence=0.9 if text == "Stanley" else 0.3), Usage(80, 5)


class Writer:
    def __init__(self, sufficient: bool = False) -> None:
        self.sufficient = sufficient

    def next_query(self, question, passages, missing_fact, asked):
        if self.sufficient:
            return None, Usage(60, 3)
        return (missing_fact or "Mountrail County capital"), Usage(60, 6)

    def rewrite(self, question, last_query, asked):
        return f"{last_query} (reworded {len(asked)})", Usage(40, 6)


class Relevance:
    def relevance(self, question, passages):
        return 0.7


SUPPORT = AnswerabilityCalibrator(
    features=("support",), weights=(4.0,), bias=0.0, means=(0.5,), scales=(0.25,), version="t"
)


def constant(p: float) -> AnswerabilityCalibrator:
    """An after-search model that predicts ``p`` whatever the evidence."""
    bias = float(np.log(p / (1 - p)))
    return AnswerabilityCalibrator(("support",), (0.0,), bias, (0.5,), (0.25,), version="c")


def controller(writer=None, verifier=None, after_search=None, **config) -> BeliefController:
    # The rules' own tests use the prior retrieval value unless an after-search model is
    # given, so that they do not depend on the coefficients of the shipped file.
    config.setdefault("fitted_retrieval_value", after_search is not None)
    settings, tuning = belief_settings(changes=config)
    return BeliefController(
        verifier=verifier or Verifier(),
        generator=Generator(),
        writer=writer or Writer(),
        relevance=Relevance(),
        calibrator=SUPPORT,
        after_search=after_search,
        config=settings,
        tuning=tuning,
    )


class Retriever:
    """Scripted: the question finds the first hop and the misleading film page; any query
    naming Mountrail finds the second hop (and the film page again)."""

    def __init__(self, first=(HOP1, BAD)) -> None:
        self.first = list(first)
        self.queries: list[str] = []

    def __call__(self, query, k):
        self.queries.append(query)
        if query == QUESTION:
            return self.first[:k]
        if "Mountrail" in query:
            return [BAD, HOP2][:k]
        return [NOISE][:k]

    async def async_search(self, query, k):
        await asyncio.sleep(0)
        return self(query, k)


def actions(result):
    return [s.decision.action for s in result.steps]


def test_a_misleading_passage_is_dropped_and_replaced_and_never_comes_back():
    search = Retriever()
    result = controller().run(QUESTION, search)
    assert actions(result) == [Action.RETRIEVE, Action.VERIFY, Action.RETRIEVE, Action.ANSWER]
    assert result.answer == "Stanley" and not result.abstained
    assert [p.id for p in result.evidence] == ["hop1", "hop2"]
    assert "bad" in result.steps[2].retrieved_ids  # the search brought it back; refused
    assert [(m.kind, m.passage_ids) for m in result.mutations] == [
        ("add", ("hop1", "bad")),
        ("drop", ("bad",)),  # "not-shown" was never in the evidence: ignored
        ("add", ("hop2",)),
    ]
    assert "conflict" in result.steps[1].decision.reason
    assert "finish the correction" in result.steps[2].decision.reason
    assert result.retrieval_rounds == 2 and result.final_action is Action.ANSWER


def test_a_question_answerable_from_the_first_retrieval_stops_after_one_round():
    search = Retriever(first=(HOP1, HOP2))
    result = controller().run(QUESTION, search)
    assert actions(result) == [Action.RETRIEVE, Action.ANSWER]
    assert search.queries == [QUESTION] and result.answer == "Stanley"
    assert "answerability" in result.steps[-1].decision.reason


def test_a_missing_hop_is_searched_for_with_the_writers_query():
    search = Retriever(first=(HOP1,))
    result = controller().run(QUESTION, search)
    assert actions(result) == [
        Action.RETRIEVE,
        Action.RETRIEVE,
        Action.VERIFY,  # the second search brought the film page too
        Action.RETRIEVE,  # its replacement search finds nothing new (the film page refused)
        Action.ANSWER,
    ]
    assert search.queries[:2] == [QUESTION, "capital of Mountrail County"]
    assert result.steps[3].retrieved_ids == ("bad", "hop2") and result.steps[3].evidence_ids == (
        "hop1",
        "hop2",
    )
    assert result.steps[1].decision.query == "capital of Mountrail County"
    assert result.answer == "Stanley" and "bad" not in {p.id for p in result.evidence}


def test_the_fitted_retrieval_value_searches_only_when_a_search_is_expected_to_pay():
    # The first search finds one hop: the answerability is low and the belief reads a gap.
    hopeful = controller(after_search=constant(0.95)).run(QUESTION, Retriever(first=(HOP1,)))
    assert actions(hopeful)[:2] == [Action.RETRIEVE, Action.RETRIEVE]
    assert "after a search" in hopeful.steps[1].decision.reason
    # A model that expects no gain from searching ends the episode after the first round.
    futile = controller(after_search=constant(0.01)).run(QUESTION, Retriever(first=(HOP1,)))
    assert futile.retrieval_rounds == 1 and futile.final_action in (Action.STOP, Action.ABSTAIN)
    assert futile.steps[-1].retrieval_value == 0.0


def quiet_controller(verifier: Verifier) -> BeliefController:
    """Default settings; answerability and the after-search chance are 0.2 whatever the
    verifier says, so no reply of it can change a decision."""
    return BeliefController(
        verifier=verifier, generator=Generator(), writer=Writer(), relevance=Relevance(),
        calibrator=constant(0.2), after_search=constant(0.2), config=BeliefConfig(),
    )  # fmt: skip


def test_the_verifier_is_not_called_when_no_reply_could_change_the_decision():
    # Answerability and the after-search chance are constant (0.2): whatever the verifier
    # says, the controller stops after the first search, so the default does not ask it.
    verifier = Verifier()
    quiet = quiet_controller(verifier)
    result = quiet.run(QUESTION, Retriever(first=(HOP1, HOP2)))
    assert verifier.calls == 0
    assert actions(result) == [Action.RETRIEVE, Action.STOP] and result.answer == "Stanley"
    last = result.trajectory[-1]
    assert last["verified"] is False and "support" not in last["diagnostics"]
    assert "verifier not called" in last["reason"] and last["draft_answer"] == "Stanley"
    # The paper's loop asks it at every measured step: same decision, more tokens.
    loop = quiet.run(QUESTION, Retriever(first=(HOP1, HOP2)), verify="always")
    assert verifier.calls == 1 and loop.trajectory[-1]["verified"] is True
    assert actions(loop) == actions(result) and loop.answer == result.answer
    assert loop.lm_tokens == result.lm_tokens + 100 + 50 * 2 + 20
    # With a calibrator that reads the verifier's support, the default asks it.
    assert controller().run(QUESTION, Retriever(first=(HOP1, HOP2))).trajectory[-1]["verified"]


def test_a_skipped_verifier_also_skips_the_correction():
    # The misleading passage would be flagged, but no search can pay for its replacement.
    verifier = Verifier()
    quiet = quiet_controller(verifier)
    result = quiet.run(QUESTION, Retriever())
    assert verifier.calls == 0 and Action.VERIFY not in actions(result)
    # Prune-only corrections need no search, so there the verifier is asked.
    pruned = quiet.tuned(replace_dropped=False).run(QUESTION, Retriever())
    assert verifier.calls >= 1 and Action.VERIFY in actions(pruned)


def test_the_shipped_after_search_model_is_the_default():
    shipped = AnswerabilityCalibrator.load(shipped=AFTER_SEARCH_FILE)
    default = BeliefController(
        verifier=Verifier(), generator=Generator(), writer=Writer(), relevance=Relevance()
    )
    assert default.after_search.version == shipped.version


def test_the_writer_saying_sufficient_ends_with_an_answer():
    result = controller(writer=Writer(sufficient=True)).run(QUESTION, Retriever(first=(HOP1,)))
    assert actions(result)[-1] is Action.ANSWER
    assert "sufficient" in result.steps[-1].decision.reason


def test_round_and_token_caps_end_every_episode_with_a_typed_action():
    class Hopeless(Verifier):
        def verify(self, question, passages, draft_answer):
            _, usage = super().verify(question, passages, draft_answer)
            return VerifierReply(0.1, 0.0, 0.9, 0.95, "more", ()), usage

    for config in ({"max_rounds": 2}, {"max_tokens": 900}, {"max_rounds": 1}):
        result = controller(verifier=Hopeless(), **config).run(QUESTION, lambda q, k: [NOISE])
        assert result.final_action in (Action.STOP, Action.ABSTAIN)
        assert result.retrieval_rounds <= config.get("max_rounds", 4)
        assert result.lm_tokens <= config.get("max_tokens", 12000)
        assert all(s.decision.reason for s in result.steps)


def test_abstention_has_no_answer():
    class Hopeless(Verifier):
        def verify(self, question, passages, draft_answer):
            return VerifierReply(0.02, 0.0, 0.9, 0.05, "", ()), Usage(10, 1)

    result = controller(verifier=Hopeless()).run(QUESTION, lambda q, k: [NOISE])
    assert result.final_action is Action.ABSTAIN and result.answer is None and result.abstained


def test_prune_only_drops_without_searching_for_a_replacement():
    search = Retriever()
    result = controller(replace_dropped=False).run(QUESTION, search)
    assert actions(result)[:2] == [Action.RETRIEVE, Action.VERIFY]
    assert "finish the correction" not in " ".join(s.decision.reason for s in result.steps)
    assert "bad" not in {p.id for p in result.evidence}


def test_without_correction_the_misleading_passage_stays():
    result = controller(correct_problems=False).run(QUESTION, Retriever())
    assert Action.VERIFY not in actions(result)


def test_frozen_answerability_keeps_the_first_measured_value():
    result = controller(live_answerability=False).run(QUESTION, Retriever(first=(HOP1,)))
    measured = [s.answerability for s in result.steps[1:]]
    assert measured and len(set(measured)) == 1


def test_token_accounting_sums_the_steps_and_the_trajectory_is_json_ready():
    import json

    result = controller().run(QUESTION, Retriever())
    assert result.lm_tokens == sum(s.prompt_tokens + s.generated_tokens for s in result.steps)
    assert result.lm_tokens > 0
    record = json.loads(json.dumps(result.trajectory))
    assert record[1]["action"] == "verify" and record[1]["diagnostics"]["drop_ids"] == ["bad"]


def test_async_gives_what_sync_gives():
    sync = controller().run(QUESTION, Retriever())
    search = Retriever()
    asyn = asyncio.run(controller().arun(QUESTION, search.async_search))
    assert actions(asyn) == actions(sync) and asyn.answer == sync.answer
    assert [p.id for p in asyn.evidence] == [p.id for p in sync.evidence]
    assert asyn.lm_tokens == sync.lm_tokens


def test_a_failing_search_raises_a_retrieval_error_and_the_controller_stays_usable():
    ctl = controller()

    def broken(query, k):
        raise ConnectionError("index offline")

    with pytest.raises(RetrievalError, match="index offline"):
        ctl.run(QUESTION, broken)
    with pytest.raises(RetrievalError, match="Passage"):
        ctl.run(QUESTION, lambda q, k: ["not a passage"])
    assert ctl.run(QUESTION, Retriever()).answer == "Stanley"


def test_a_failing_model_call_is_a_clear_error_and_leaves_nothing_behind():
    from neocorrag_core.errors import ModelCallError

    class Broken(Verifier):
        def verify(self, question, passages, draft_answer):
            raise RuntimeError("verifier crashed")

    ctl = controller(verifier=Broken())
    with pytest.raises(ModelCallError, match="the verifier failed: RuntimeError: verifier crashed"):
        ctl.run(QUESTION, Retriever())
    ctl.verifier = Verifier()
    assert ctl.run(QUESTION, Retriever()).answer == "Stanley"


def test_bad_inputs_and_components_are_refused():
    from neocorrag_core import InputError

    with pytest.raises(InputError):
        controller().run("  ", Retriever())
    with pytest.raises(ConfigError, match="verifier"):
        BeliefController(
            verifier=object(), generator=Generator(), writer=Writer(), relevance=Relevance()
        )
    with pytest.raises(ConfigError, match="unknown"):
        controller().run(QUESTION, Retriever(), nope=1)


class EntityWriter(Writer):
    """A writer with a no-LM next-hop query (``EntityQueryWriter``)."""

    def __init__(self) -> None:
        super().__init__()
        self.lm_calls = 0

    def next_query(self, question, passages, missing_fact, asked):
        self.lm_calls += 1
        return super().next_query(question, passages, missing_fact, asked)

    def entity_query(self, question, passages, asked):
        return "Mountrail County capital"


class CountingGenerator(Generator):
    def __init__(self) -> None:
        self.calls = 0

    def answer(self, question, passages):
        self.calls += 1
        return super().answer(question, passages)


def scheduled_controller(writer, generator, **config) -> BeliefController:
    """Answerability and after-search chance 0.2 whatever is measured: after its
    measurement the controller stops."""
    return BeliefController(
        verifier=Verifier(), generator=generator, writer=writer, relevance=Relevance(),
        calibrator=constant(0.2), after_search=constant(0.2), config=BeliefConfig(**config),
    )  # fmt: skip


def test_min_searches_searches_before_measuring_with_the_no_lm_query():
    writer, generator, search = EntityWriter(), CountingGenerator(), Retriever(first=(HOP1,))
    result = scheduled_controller(writer, generator, min_searches=2).run(QUESTION, search)
    assert actions(result) == [Action.RETRIEVE, Action.RETRIEVE, Action.STOP]
    assert search.queries == [QUESTION, "Mountrail County capital"]
    assert "scheduled search 2 of 2" in result.steps[1].decision.reason
    assert result.steps[1].decision.query == "Mountrail County capital"
    # Nothing was measured before the scheduled search: one draft (the answer), no LM query.
    assert generator.calls == 1 and writer.lm_calls == 0
    assert result.steps[1].draft_answer == "" and result.steps[1].prompt_tokens == 0
    assert result.answer == "Stanley" and [p.id for p in result.evidence] == ["hop1", "bad", "hop2"]
    # The default (1) measures after the first search, as the paper does.
    default = scheduled_controller(EntityWriter(), CountingGenerator()).run(
        QUESTION, Retriever(first=(HOP1,))
    )
    assert actions(default) == [Action.RETRIEVE, Action.STOP]


def test_a_scheduled_search_uses_the_writers_lm_query_when_it_has_no_other():
    writer, search = Writer(), Retriever(first=(HOP1,))
    result = scheduled_controller(writer, CountingGenerator(), min_searches=2).run(QUESTION, search)
    assert search.queries == [QUESTION, "Mountrail County capital"]
    assert result.steps[1].prompt_tokens == 60  # the writer's call, and no draft


def test_min_searches_gives_way_to_the_round_cap():
    generator, search = CountingGenerator(), Retriever(first=(HOP1,))
    result = scheduled_controller(EntityWriter(), generator, min_searches=3, max_rounds=2).run(
        QUESTION, search
    )
    # No round left for the third scheduled search: the controller measures instead (and
    # corrects, with no search left to replace what it drops).
    assert actions(result) == [Action.RETRIEVE, Action.RETRIEVE, Action.VERIFY, Action.STOP]
    assert result.steps[2].draft_answer == "Stanley" and len(search.queries) == 2


def test_min_searches_stops_scheduling_once_the_workspace_is_full():
    generator, search = CountingGenerator(), Retriever(first=(HOP1, BAD))
    result = scheduled_controller(
        EntityWriter(), generator, min_searches=2, max_evidence=2, max_corrections=0
    ).run(QUESTION, search)
    # The first search filled the workspace: measured at once, and no search after it.
    assert search.queries == [QUESTION] and generator.calls == 1
    assert actions(result) == [Action.RETRIEVE, Action.STOP]
    assert "workspace is full" in result.steps[-1].decision.reason


def test_a_scheduled_search_never_ends_the_episode_unmeasured():
    # A writer without a no-LM query that says SUFFICIENT before anything was measured:
    # there is no draft to answer with, so the scheduled search takes a rewording.
    search = Retriever(first=(HOP1,))
    result = scheduled_controller(Writer(sufficient=True), CountingGenerator(), min_searches=2).run(
        QUESTION, search
    )
    assert actions(result)[:2] == [Action.RETRIEVE, Action.RETRIEVE]
    assert (
        search.queries[1]
        == "What is the capital of the county that contains Van Hook Township? (reworded 1)"
    )
    assert result.final_action.terminal and result.answer is not None


class RepeatingWriter(EntityWriter):
    def entity_query(self, question, passages, asked):
        return asked[-1]


def test_a_no_lm_query_that_was_asked_is_reworded():
    search = Retriever(first=(HOP1,))
    scheduled_controller(RepeatingWriter(), CountingGenerator(), min_searches=3).run(
        QUESTION, search
    )
    assert len(set(search.queries)) == len(search.queries) >= 3


def test_frozen_answerability_waits_for_the_first_measurement():
    result = controller(writer=EntityWriter(), min_searches=2, live_answerability=False).run(
        QUESTION, Retriever(first=(HOP1,))
    )
    # Frozen at the first *measured* step, not at a scheduled one (where nothing is known).
    assert [s.answerability for s in result.steps[:2]] == [0.0, 0.0]
    assert result.steps[2].draft_answer and result.steps[2].answerability > 0.0
    assert {s.answerability for s in result.steps[2:]} == {result.steps[2].answerability}


def test_a_correction_in_a_full_workspace_still_replaces_what_it_dropped():
    search = Retriever(first=(HOP1, BAD))
    result = controller(max_evidence=2).run(QUESTION, search)
    # Full after the first search; the correction's drop makes room for its replacement.
    assert actions(result) == [Action.RETRIEVE, Action.VERIFY, Action.RETRIEVE, Action.ANSWER]
    assert [p.id for p in result.evidence] == ["hop1", "hop2"]


def test_async_scheduled_searches_give_what_sync_gives():
    sync = scheduled_controller(EntityWriter(), CountingGenerator(), min_searches=2).run(
        QUESTION, Retriever(first=(HOP1,))
    )
    search = Retriever(first=(HOP1,))
    asyn = asyncio.run(
        scheduled_controller(EntityWriter(), CountingGenerator(), min_searches=2).arun(
            QUESTION, search.async_search
        )
    )
    assert actions(asyn) == actions(sync) and asyn.answer == sync.answer
    assert search.queries == [QUESTION, "Mountrail County capital"]


def test_min_searches_must_be_positive():
    with pytest.raises(ConfigError, match="min_searches"):
        BeliefConfig(min_searches=0)


# ------------------------------------------------------------------------------------------
# Found in review: the token cap after a correction, an empty answer, settings of the wrong
# type, a per-call max_evidence, malformed replies of custom components.
# ------------------------------------------------------------------------------------------


def test_measuring_after_a_correction_respects_the_token_cap():
    class Costly(Verifier):
        def verify(self, question, passages, draft_answer):
            reply, _ = super().verify(question, passages, draft_answer)
            return reply, Usage(1000 + 150 * len(passages), 60)

    # prune-only: after the drop, the next step would measure again; with the cap below
    # the first measurement's cost twice, it must end on the last draft instead.
    ctl = controller(verifier=Costly(), replace_dropped=False, verify="always", max_tokens=2500)
    result = ctl.run(QUESTION, Retriever())
    assert actions(result)[:2] == [Action.RETRIEVE, Action.VERIFY]
    assert result.lm_tokens <= 2500
    assert result.final_action.terminal and "token budget" in result.steps[-1].decision.reason
    roomy = controller(verifier=Costly(), replace_dropped=False, verify="always").run(
        QUESTION, Retriever()
    )
    assert roomy.lm_tokens > 2500  # the cap, not the scenario, stopped the first one


def test_an_empty_answer_ends_as_an_abstention_not_as_an_answer():
    class Mute(Generator):
        def answer(self, question, passages):
            return DraftAnswer("  ", confidence=0.9), Usage(80, 1)

    ctl = BeliefController(
        verifier=Verifier(),
        generator=Mute(),
        writer=Writer(),
        relevance=Relevance(),
        calibrator=SUPPORT,
        tuning=BeliefTuning(fitted_retrieval_value=False),
    )
    result = ctl.run(QUESTION, Retriever(first=(HOP1, HOP2)))
    assert result.answer is None and result.abstained
    assert result.final_action is Action.ABSTAIN
    assert result.steps[-1].decision.action is Action.ABSTAIN
    assert "the generator gave no answer" in result.steps[-1].decision.reason


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("config", {"max_rounds": 2}, "config must be a BeliefConfig"),
        ("calibrator", "answerability.json", "AnswerabilityCalibrator.load"),
        ("after_search", 0.5, "after_search must be a AnswerabilityCalibrator"),
    ],
)
def test_settings_of_the_wrong_type_are_refused_when_built(field, value, message):
    parts = dict(verifier=Verifier(), generator=Generator(), writer=Writer(), relevance=Relevance())
    with pytest.raises(ConfigError, match=message):
        BeliefController(**parts, **{field: value})
    with pytest.raises(ConfigError, match=message):
        BeliefController.from_models(**{field: value})  # before any model is built


def test_max_evidence_cannot_change_per_call():
    ctl = controller()
    with pytest.raises(ConfigError, match="max_evidence cannot change per call"):
        ctl.run(QUESTION, Retriever(), max_evidence=12)
    same = ctl.run(QUESTION, Retriever(), max_evidence=ctl.config.max_evidence)
    assert same.answer == "Stanley"


@pytest.mark.parametrize(
    ("reply", "message"),
    [
        (lambda r, u: (replace(r, support=None), u), "the verifier's support must be a number"),
        (lambda r, u: r, r"the verifier must return \(value, Usage\)"),
        (lambda r, u: (replace(r, drop_ids="bad"), u), "drop_ids must be a sequence"),
        (lambda r, u: ("looks fine", u), "the verifier returned a str, expected VerifierReply"),
    ],
)
def test_a_malformed_reply_of_a_custom_component_is_a_clear_error(reply, message):
    from neocorrag_core.errors import ModelCallError

    class Sloppy(Verifier):
        def verify(self, question, passages, draft_answer):
            return reply(*super().verify(question, passages, draft_answer))

    with pytest.raises(ModelCallError, match=message):
        controller(verifier=Sloppy(), verify="always").run(QUESTION, Retriever())

    class Bare(Generator):
        def answer(self, question, passages):
            return "Stanley"

    ctl = controller()
    ctl.generator = Bare()
    with pytest.raises(ModelCallError, match="the answer generator must return"):
        ctl.run(QUESTION, Retriever())
