"""Query entities E_q: n-gram matching to graph nodes and capitalized spans."""

from __future__ import annotations

import pytest

from neocorrag_core.chains.query_entities import (
    QueryEntityExtractor,
    capitalized_spans,
    ngram_entities,
)


def test_capitalized_spans_join_of_and_strip_possessives():
    query = "When did Hello Love's performer join the Bank of America in 1962?"
    assert capitalized_spans(query) == ["Hello Love", "Bank of America", "1962"]


def test_ngram_entities_prefer_longest_node_match():
    nodes = [
        "journal of psychotherapy integration",
        "psychotherapy",
        "american psychological association",
    ]
    query = (
        "Who was the first president of the association which published "
        "Journal of Psychotherapy Integration?"
    )
    assert ngram_entities(query, nodes) == ["Journal of Psychotherapy Integration"]


def test_a_question_that_names_nothing_has_no_query_entity():
    # No word of it is surfaced as an entity ("term", "have"): the seed step starts from
    # the nodes closest to the whole question instead.
    question = "What is a term for the institution allowing church courts to have functions?"
    assert ngram_entities(question, ["anglican communion"]) == []
    assert ngram_entities("what is the term for church courts?", ["church courts"]) == [
        "church courts"
    ]


def test_extractor_rejects_unknown_mode():
    with pytest.raises(ValueError, match="mode"):
        QueryEntityExtractor("llm")


def test_a_question_in_capitals_gives_no_capitalised_names():
    from neocorrag_core.chains.query_entities import all_capitals, question_spans

    assert all_capitals("WHO DIRECTED TITANIC?") and not all_capitals("NASA")
    assert question_spans("WHO DIRECTED TITANIC?") == []  # was ["DIRECTED TITANIC"]
    assert question_spans("NASA") == ["NASA"]
    assert question_spans("Who founded NASA?") == ["NASA"]
    # The graph's names are still found by their words, and no spurious span is added.
    assert ngram_entities("WHO DIRECTED TITANIC?", {"titanic"}) == ["TITANIC"]
    assert ngram_entities("WHO DIRECTED TITANIC?", {"james cameron"}) == []
