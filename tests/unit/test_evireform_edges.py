"""EviReform edge cases found in review: repeated-word names, the rerank control's inputs
and shared names, lower-case questions, relation-sentence name order, duplicate ids with
different texts, a query that starts with a number and a colon.

Model-free: bag-of-words embeddings, bridge entities as residual queries.
"""

from __future__ import annotations

import pytest

from neocorrag_core import Passage
from neocorrag_core.errors import InputError
from neocorrag_core.evireform import (
    EvidenceReformulator,
    ReformulationConfig,
    ReformulationQuery,
    ReformulationTuning,
)
from neocorrag_core.evireform.propositions import relation_sentences
from neocorrag_core.evireform.ranking import about_entity
from neocorrag_core.evireform.residual import (
    names_entity,
    names_in_lower_case,
    parse_residual_queries,
)

NO_LM = ReformulationConfig(selection="embedding", residual_queries="entities")


def _doc(pid: str, text: str, *triples: tuple[str, str, str], title: str = "") -> Passage:
    return Passage(pid, text, title=title, metadata={"triples": [list(t) for t in triples]})


def test_a_name_that_repeats_a_word_is_named_by_its_own_text():
    assert names_entity("Duran Duran is an English band.", "Duran Duran")
    assert about_entity("Baden-Baden", "Baden-Baden", "A spa town.")
    assert not names_entity("Roberto Duran boxed.", "Duran Duran")  # the word once only


def test_no_question_search_for_a_repeated_word_name_the_first_search_found(bow_embedder):
    band = _doc(
        "band",
        "Duran Duran is a band formed in Birmingham.",
        ("Duran Duran", "formed in", "Birmingham"),
        title="Duran Duran",
    )
    result = EvidenceReformulator(NO_LM, embedder=bow_embedder).retrieve(
        "In which city was Duran Duran formed?", lambda q, k: [band], k=3
    )
    assert not [q for q in result.queries if q.kind == "question"]


COUNTY = _doc("county", "Stanley is the seat.", title="Mountrail County")
TOWNSHIP = _doc(
    "township",
    "Van Hook Township is a township in Mountrail County.",
    ("Van Hook Township", "located in", "Mountrail County"),
    title="Van Hook Township",
)
LOOKALIKES = [
    _doc(f"like{i}", f"The capital of the county that contains township {i}.", title=f"T {i}")
    for i in range(3)
]
QUESTION = "What is the capital of the county that contains Van Hook Township?"


def test_rerank_follows_shared_names_among_the_passages_it_is_given(bow_embedder):
    # The passages given to rerank() are the question's own results, so shared names look
    # among them: the township names "Mountrail County", the county's title. (It used to
    # find no first-search passage and never follow a shared name.)
    pool = [TOWNSHIP, *LOOKALIKES, COUNTY]
    queries = [ReformulationQuery(QUESTION, "original", 0)]
    reformulator = EvidenceReformulator(
        NO_LM, tuning=ReformulationTuning(follow_titles=False), embedder=bow_embedder
    )
    shared = reformulator.rerank(QUESTION, queries, pool, k=3)
    assert {"township", "county"} <= {r.passage.id for r in shared}
    plain = reformulator.tuned(follow_names=False).rerank(QUESTION, queries, pool, k=3)
    assert "county" not in {r.passage.id for r in plain}


@pytest.mark.parametrize(
    ("question", "k", "passages", "message"),
    [
        (QUESTION, -1, [TOWNSHIP], "k must be a positive integer"),
        (QUESTION, "2", [TOWNSHIP], "k must be a positive integer"),
        (QUESTION, True, [TOWNSHIP], "k must be a positive integer"),
        (None, 2, [TOWNSHIP], "question must be a non-empty string"),
        (QUESTION, 2, [{"id": "x", "text": "y"}], "passages must be a list of Passage"),
    ],
)
def test_rerank_rejects_bad_input_with_a_clear_error(bow_embedder, question, k, passages, message):
    reformulator = EvidenceReformulator(NO_LM, embedder=bow_embedder)
    queries = [ReformulationQuery(QUESTION, "original", 0)]
    with pytest.raises(InputError, match=message):
        reformulator.rerank(question, queries, passages, k=k)
    with pytest.raises(InputError, match="ReformulationQuery"):
        reformulator.rerank(QUESTION, ["what?"], [TOWNSHIP], k=2)  # type: ignore[list-item]


def test_a_lower_case_question_takes_its_bridges_from_the_names_it_gives(bow_embedder):
    film = _doc(
        "film",
        "Film X is a 1999 drama directed by Jane Roe.",
        ("Film X", "directed by", "Jane Roe"),
    )
    noise = [
        _doc(
            f"noise{i}",
            f"Film Y{i} is a comedy about directors.",
            (f"Film Y{i}", "genre", "comedy"),
        )
        for i in range(4)
    ]
    reformulator = EvidenceReformulator(NO_LM, embedder=bow_embedder)

    def queries(question: str) -> list[str]:
        result = reformulator.retrieve(question, lambda q, k: [film, *noise][:k], k=5)
        return [q.text for q in result.queries[1:]]

    assert names_in_lower_case("where was the director of film x born?", [film, *noise]) == [
        "Film X"
    ]
    assert queries("Where was the director of Film X born?") == ["Jane Roe born"]
    # no "Film Y0 born": a look-alike saying "directors" is not where the chain hangs
    assert queries("where was the director of film x born?") == ["Jane Roe born"]
    # A question typed in capitals is read like one typed in lower case.
    assert queries("WHERE WAS THE DIRECTOR OF FILM X BORN?") == ["Jane Roe born"]


def test_relation_sentences_order_names_after_the_relation_word_first():
    # "Tom" first occurs inside "Tom Anderson"; Tom Smith still comes after "father".
    for writer in ("Tom Anderson", "Tim Anderson", "Annabel"):
        sentence = f"{writer} wrote that her father was Tom Smith who lived in Dallas."
        (prop,) = relation_sentences([Passage("p", sentence, title="Kate")], ["father"])
        assert prop.surface_entities[:2] == ("Tom Smith", "Dallas")
        assert prop.surface_entities[-1] == writer


def test_a_second_text_under_a_known_id_is_reported_not_silently_merged(bow_embedder, caplog):
    first = _doc("x", "Alpha text about Jane Roe.", title="A")
    other = _doc("x", "Jane Roe was born in Paris.", title="B")
    result = EvidenceReformulator(NO_LM, embedder=bow_embedder).retrieve(
        "Where was Jane Roe born?", lambda q, k: [first, other], k=2
    )
    assert [p.title for p in result.pool] == ["A"]
    assert any("came back with a different text" in note for note in result.notes)
    assert "came back with a different text" in caplog.text


def test_a_query_that_starts_with_a_number_and_a_colon_keeps_it():
    parsed = parse_residual_queries(
        "2001: A Space Odyssey composer\n2) 2001: A Space Odyssey year", "Who?"
    )
    assert parsed.queries == ["2001: A Space Odyssey composer", "2001: A Space Odyssey year"]
