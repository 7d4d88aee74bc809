"""benchmarks/scheduled_searches.py: the no-LM replay of the controller's scheduled searches."""

from __future__ import annotations

from benchmark_scripts import load_benchmark
from hop_fixtures import ACTOR, COSTAR, FATHER, FATHER_QUESTION

from neocorrag_core.eval.datasets import QAExample
from neocorrag_core.types import Passage

scheduled = load_benchmark("scheduled_searches")

EXAMPLE = QAExample(
    id="q1",
    question=FATHER_QUESTION,
    answers=("Leeds",),
    passages=(ACTOR, COSTAR, FATHER),
    gold_ids=frozenset({"actor", "father"}),
)


def search(query: str, k: int) -> list[Passage]:
    """Only a query naming Thomas Stanley reaches his passage; anything else brings back
    what the first search found."""
    return [FATHER][:k] if "Thomas Stanley" in query else [ACTOR, COSTAR][:k]


def run(variant, *, min_searches=2, max_rounds=4):
    return scheduled.schedule(
        EXAMPLE,
        [ACTOR, COSTAR],
        search,
        lambda shown: [[] for _ in shown],
        variant,
        k=5,
        min_searches=min_searches,
        max_rounds=max_rounds,
        max_evidence=8,
    )


def variant(name: str):
    return next(v for v in scheduled.VARIANTS if v.name == name)


def test_the_relation_first_query_reaches_the_second_hop_in_one_search():
    ids, searches = run(variant("relation-first"))
    assert ids == ("actor", "costar", "father") and searches == 2


def test_the_passage_order_query_misses_it_and_a_retry_searches_until_max_rounds():
    # Passage order asks for the co-star first, which adds nothing: without a retry that
    # search counts and the father is never read ...
    ids, searches = run(variant("passage order (entity-query-1)"))
    assert ids == ("actor", "costar") and searches == 2
    # ... and with a retry, the next queries (passage order without triples never sees
    # the sentence that names him) add nothing either, up to max_rounds searches.
    ids, searches = run(variant("passage order + retry"))
    assert ids == ("actor", "costar") and searches == 4
    assert run(variant("passage order + retry"), max_rounds=3)[1] == 3
    # A search that added a passage counts: relation-first stops after two either way.
    assert run(variant("relation-first + retry")) == (("actor", "costar", "father"), 2)


def test_outcome_rows_count_gold_found_complete_questions_and_searches():
    outcome = scheduled.Outcome()
    outcome.add(("actor", "costar", "father"), EXAMPLE.gold_ids, 2)
    outcome.add(("actor", "costar"), EXAMPLE.gold_ids, 3)
    assert outcome.row("x") == "| x | 75.0 | 50.0 | 2.50 | 2.50 |"


def test_a_missing_data_file_or_a_bad_count_is_one_usage_line(capsys) -> None:
    import pytest

    cases = (
        (["--data", "/no/such/file.json"], "error: data file not found: /no/such/file.json"),
        (["--data", "x.json", "--limit", "0"], "error: argument --limit: must be at least 1"),
    )
    for argv, message in cases:
        with pytest.raises(SystemExit) as exit_info:
            scheduled.main(argv)
        assert exit_info.value.code == 2
        assert message in capsys.readouterr().err


def _step(step: int, action: str, reason: str, query: str, evidence: list[str]) -> dict:
    return {
        "step": step,
        "action": action,
        "reason": reason,
        "query": query,
        "evidence_ids": evidence,
    }


def _episode(qid: str, second_query: str, third_query: str) -> dict:
    steps = [
        _step(
            0, "retrieve", "first retrieval for the question", FATHER_QUESTION, ["actor", "costar"]
        ),
        _step(
            1,
            "retrieve",
            "scheduled search 2 of 3 (min_searches): ...",
            second_query,
            ["actor", "costar", "father"],
        ),
        _step(
            2,
            "retrieve",
            "scheduled search 3 of 3 (min_searches): ...",
            third_query,
            ["actor", "costar", "father"],
        ),
        _step(3, "stop", "best-effort answer", "", ["actor", "costar", "father"]),
    ]
    return {"qid": qid, "question": FATHER_QUESTION, "info": {"trajectory": steps}}


def test_recorded_scheduled_queries_are_rewritten_from_the_workspace_they_had():
    passages = {p.id: p for p in (ACTOR, COSTAR, FATHER)}
    no_triples = lambda shown: [[] for _ in shown]  # noqa: E731
    # The current rules write "Thomas Stanley born" from the first search, then (that
    # query asked, the father's passage read) "Leeds".
    current = _episode("q1", "Thomas Stanley born", "Leeds")
    older = _episode("q2", "Edward Smith father", "Leeds")
    checked, changed = scheduled.recorded_query_changes([current, older], passages, no_triples)
    assert checked == 4
    # q2's third query is rewritten after what q2 really asked ("Edward Smith father", not
    # "Thomas Stanley born"), so the current rules would still ask for Thomas Stanley there.
    assert changed == [
        ("q2", "Edward Smith father", "Thomas Stanley born"),
        ("q2", "Leeds", "Thomas Stanley born"),
    ]


def test_records_that_are_not_belief_episodes_or_not_of_the_data_are_one_usage_line(
    tmp_path, capsys
) -> None:
    import json

    import pytest

    data = tmp_path / "data.json"
    data.write_text(
        json.dumps(
            [
                {
                    "id": "q1",
                    "question": FATHER_QUESTION,
                    "answer": "Leeds",
                    "paragraphs": [
                        {"title": "A", "paragraph_text": "Some text.", "is_supporting": True}
                    ],
                }
            ]
        )
    )
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"qid": "q1"}\n')
    no_question = tmp_path / "no_question.jsonl"
    episode = _episode("q1", "x", "y")
    del episode["question"]
    no_question.write_text(json.dumps(episode) + "\n")
    foreign = tmp_path / "foreign.jsonl"
    foreign.write_text(json.dumps(_episode("q1", "x", "y")) + "\n")
    for path, message in (
        (bad, "line 1: not a belief episode record"),
        (no_question, "line 1: not a belief episode record"),
        (foreign, "read passages that --data does not hold"),
    ):
        with pytest.raises(SystemExit) as exit_info:
            scheduled.main(["--data", str(data), "--records", str(path)])
        assert exit_info.value.code == 2
        assert message in capsys.readouterr().err
