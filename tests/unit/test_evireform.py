"""EviReform core: scoring rules by hand, residual queries, the loop around a fake search."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from neocorrag_core import Passage, Triple
from neocorrag_core.evireform import (
    EvidenceReformulator,
    ReformulationConfig,
    ReformulationQuery,
    ReformulationTuning,
    RetrievalError,
)
from neocorrag_core.evireform.propositions import build_propositions
from neocorrag_core.evireform.reformulator import rank_scores
from neocorrag_core.evireform.residual import (
    EXAMPLE_QUERIES,
    bridge_entities,
    bridge_entity_queries,
    parse_residual_queries,
    residual_prompt_text,
)
from neocorrag_core.evireform.scoring import (
    aggregate_to_passages,
    mix_query_scores,
    normalize_query_scores,
    normalize_scores,
    propagate,
    shared_entity_neighbors,
    softmax_scores,
)
from neocorrag_core.evireform.types import Proposition

NO_LM = ReformulationConfig(selection="embedding", residual_queries="entities")
LM = {"selection": "beam", "residual_queries": "lm"}  # the LM modes (the default needs none)

# ----------------------------------------------------------------------------- scoring


def test_normalize_scores_is_min_max_then_unit_mass():
    assert normalize_scores([3.0, 1.0, 2.0]) == pytest.approx([2 / 3, 0.0, 1 / 3])
    assert normalize_scores([0.4, 0.4]) == pytest.approx([0.5, 0.5])
    assert normalize_scores([7.0]) == pytest.approx([1.0])
    assert normalize_scores([]).size == 0


def test_softmax_normalization_by_hand():
    # exp(0 / 0.1) = 1 and exp(0.1 ln 2 / 0.1) = 2 -> [1/3, 2/3]
    assert softmax_scores([0.0, 0.1 * np.log(2)], 0.1) == pytest.approx([1 / 3, 2 / 3])
    assert normalize_query_scores([3.0, 1.0, 2.0], None) == pytest.approx([2 / 3, 0.0, 1 / 3])
    assert normalize_query_scores([0.0, 0.0], 0.1) == pytest.approx([0.5, 0.5])
    # with a temperature, mixing uses the softmax: 0.5 * [1/3, 2/3] + 0.5 * [2/3, 1/3]
    mixed = mix_query_scores([0.0, 0.1 * np.log(2)], [[0.1 * np.log(2), 0.0]], 0.5, 0.1)
    assert mixed == pytest.approx([0.5, 0.5])
    with pytest.raises(ValueError, match="temperature"):
        softmax_scores([1.0], 0.0)


def test_mixing_keeps_the_original_weight_and_splits_the_rest():
    # original [3,1,2] -> [2/3, 0, 1/3]; residual [0,2,1] -> [0, 2/3, 1/3]
    assert mix_query_scores([3, 1, 2], [[0, 2, 1]], 0.75) == pytest.approx([0.5, 1 / 6, 1 / 3])
    # two residual queries share the other half: mean([0,2/3,1/3], [1/3,1/3,1/3]) = [1/6,1/2,1/3]
    mixed = mix_query_scores([3, 1, 2], [[0, 2, 1], [5, 5, 5]], 0.5)
    assert mixed == pytest.approx([5 / 12, 1 / 4, 1 / 3])
    assert mixed.sum() == pytest.approx(1.0)
    # no residual query: everything on the original question
    assert mix_query_scores([3, 1, 2], [], 0.5) == pytest.approx([2 / 3, 0.0, 1 / 3])


def _prop(text: str, *entities: str, pid: str = "p") -> Proposition:
    return Proposition(text, (pid,), tuple(entities), tuple(entities))


def test_propagation_over_shared_entities_by_hand():
    props = [
        _prop("a", "e1", "e2"),
        _prop("b", "e2", "e3"),
        _prop("c", "e3"),
        _prop("d", "e4"),
    ]
    neighbors = shared_entity_neighbors(props)
    assert neighbors == [[1], [0, 2], [1], []]
    # A gives 0.4 to B; B gives 0.15 to A and C; C gives 0.2 to B; D (isolated) keeps 0.1.
    # received = [0.15, 0.6, 0.15, 0.1]; half direct, half received:
    out = propagate([0.4, 0.3, 0.2, 0.1], neighbors, 0.5)
    assert out == pytest.approx([0.275, 0.45, 0.175, 0.1])
    assert out.sum() == pytest.approx(1.0)
    assert propagate([0.4, 0.3, 0.2, 0.1], neighbors, 0.0) == pytest.approx([0.4, 0.3, 0.2, 0.1])
    with pytest.raises(ValueError, match="neighbour lists"):
        propagate([0.1, 0.2], [[1]], 0.5)


def test_aggregation_to_passages_max_and_sum():
    props = [
        Proposition("x", ("p1",)),
        Proposition("y", ("p1", "p2")),
        Proposition("z", ("p2",)),
    ]
    assert aggregate_to_passages([0.5, 0.2, 0.1], props, "max") == pytest.approx(
        {"p1": 0.5, "p2": 0.2}
    )
    assert aggregate_to_passages([0.5, 0.2, 0.1], props, "sum") == pytest.approx(
        {"p1": 0.7, "p2": 0.3}
    )
    with pytest.raises(ValueError, match="aggregation"):
        aggregate_to_passages([0.5, 0.2, 0.1], props, "mean")


def test_rank_scores_mixes_then_propagates():
    sims = np.array([[3.0, 0.0], [1.0, 2.0], [2.0, 1.0]])
    neighbors = [[], [], []]  # isolated: propagation changes nothing
    config = ReformulationTuning(original_weight=0.75, score_temperature=None)
    assert rank_scores(sims, neighbors, config) == pytest.approx([0.5, 1 / 6, 1 / 3])


def test_propositions_merge_duplicate_facts_and_fall_back_to_the_lead_sentence():
    p1 = Passage("p1", "Film X was directed by Jane Roe. It won prizes.", title="Film X")
    p2 = Passage("p2", "Film X, a film directed by Jane Roe.", title="Film X (film)")
    p3 = Passage("p3", "Oslo is a city. It is big.", title="Oslo")
    fact = Triple("Film X", "directed by", "Jane Roe")
    props = build_propositions([p1, p2, p3], [[fact], [fact], []])
    assert [p.text for p in props] == ["Film X directed by Jane Roe", "Oslo: Oslo is a city."]
    assert props[0].passage_ids == ("p1", "p2")
    assert props[0].entities == ("film x", "jane roe")
    assert props[1].entities == ("oslo",)
    with pytest.raises(ValueError):
        build_propositions([p1], [])


# ----------------------------------------------------------------------------- residual queries


def test_parse_residual_queries_strips_bullets_and_rejects_bad_lines():
    question = "Where was the director of Film X born?"
    evidence = ["Film X directed by Jane Roe"]
    reply = (
        "1. Query: Jane Roe hometown\n"
        "- Where was the director of Film X born?\n"  # the question itself
        "* Film X was directed by Jane Roe\n"  # restates the evidence
        + "- "
        + " ".join(["word"] * 30)
        + "\n"  # too long
        "2) Jane Roe hometown\n"  # duplicate
        "(3) 'Oslo population'\n"
        "Jane Roe early life\n"
    )
    parsed = parse_residual_queries(reply, question, evidence, max_queries=2)
    assert parsed.queries == ["Jane Roe hometown", "Oslo population"]
    assert not parsed.sufficient
    assert parsed.rejected == 4


def test_residual_queries_must_name_a_bridge_entity_when_there_is_one():
    question = "Who was in charge of the country where the composer of Aschenbrodel was a citizen?"
    evidence = ["Franjo Krezma was composer"]
    reply = (
        "Who was the composer of Aschenbrodel?\n"  # asks for the first hop again
        "Who was in charge of the country where the composer of Aschenbrodel was?\n"
        "Franjo Krezma citizenship\n"
        "Krezma nationality\n"
    )
    parsed = parse_residual_queries(reply, question, evidence, bridges=["Franjo Krezma"])
    assert parsed.queries == ["Franjo Krezma citizenship"]  # "Krezma" is 1 of 2 words
    assert parsed.rejected == 3
    free = parse_residual_queries(reply, question, evidence)
    assert free.queries[0] == "Who was the composer of Aschenbrodel?"


def test_queries_copied_from_the_prompt_example_are_rejected():
    reply = "\n".join(EXAMPLE_QUERIES) + "\nOslo Film School alumni"
    assert parse_residual_queries(reply, "q?").queries == ["Oslo Film School alumni"]


def test_parse_residual_queries_sufficient_and_asked():
    assert parse_residual_queries("SUFFICIENT.", "q?").sufficient
    assert parse_residual_queries("  Sufficient - the answer is Oslo", "q?").queries == []
    later = parse_residual_queries("Jane Roe hometown\nSUFFICIENT", "q?")
    assert later.queries == ["Jane Roe hometown"] and not later.sufficient
    first = parse_residual_queries("SUFFICIENT\nSteve Jobs hometown", "q?")
    assert first.queries == ["Steve Jobs hometown"] and not first.sufficient
    again = parse_residual_queries("jane roe HOMETOWN", "q?", asked=["Jane Roe hometown"])
    assert again.queries == []


def test_bridge_entities_skip_question_names_and_numbers():
    question = "Where was the director of Film X born?"
    evidence = [
        _prop("Film X directed by Jane Roe", "film x", "jane roe"),
        _prop("Film X released 1991", "film x", "1991"),
        _prop("Jane Roe studied at Oslo Film School", "jane roe", "oslo film school"),
    ]
    evidence = [
        Proposition(p.text, p.passage_ids, p.entities, tuple(s.title() for s in p.surface_entities))
        for p in evidence
    ]
    assert bridge_entities(question, evidence) == ["Jane Roe", "Oslo Film School"]
    assert bridge_entity_queries(question, evidence, max_queries=1) == ["Jane Roe"]
    # an entity an earlier query already names is not asked again
    assert bridge_entity_queries(question, evidence, asked=["Jane Roe hometown"]) == [
        "Oslo Film School"
    ]


def test_residual_prompt_lists_the_evidence():
    text = residual_prompt_text("Q?", ["a b c"], 3)
    assert "Question: Q?" in text and "- a b c" in text and "up to 3" in text
    assert "- (none)" in residual_prompt_text("Q?", [], 3)


# ----------------------------------------------------------------------------- the loop

QUESTION = "Where was the director of Film X born?"


def _doc(pid: str, text: str, *triples: tuple[str, str, str], title: str = "") -> Passage:
    return Passage(pid, text, title=title, metadata={"triples": [list(t) for t in triples]})


FILM = _doc(
    "film", "Film X is a 1999 drama directed by Jane Roe.", ("Film X", "directed by", "Jane Roe")
)
BIRTH = _doc("birth", "Jane Roe was born in Oslo.", ("Jane Roe", "born in", "Oslo"))
NOISE = [
    _doc(f"noise{i}", f"Film Y{i} is a comedy about directors.", (f"Film Y{i}", "genre", "comedy"))
    for i in range(4)
]


class BridgeSearch:
    """Returns the second hop only when the query names the bridge entity."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, int]] = []

    def __call__(self, query: str, k: int) -> list[Passage]:
        self.calls.append((query, k))
        if "jane roe" in query.casefold():
            return [BIRTH, FILM][:k]
        return [FILM, *NOISE][:k]


def test_finds_the_second_hop_that_single_shot_misses(bow_embedder):
    search = BridgeSearch()
    single_shot = {p.id for p in search(QUESTION, 5)}
    assert "birth" not in single_shot

    reformulator = EvidenceReformulator(NO_LM, embedder=bow_embedder, lm="/nonexistent/lm")
    result = reformulator.retrieve(QUESTION, search, k=5)
    ids = [r.passage.id for r in result.passages]
    assert {"film", "birth"} <= set(ids)
    assert len(ids) == 5
    assert [(q.text, q.kind) for q in result.queries][:2] == [
        (QUESTION, "original"),
        ("Jane Roe born", "template"),  # the bridge and the relation still open
    ]
    birth = next(r for r in result.passages if r.passage.id == "birth")
    assert result.found_by_text(birth) == "Jane Roe born"
    assert result.queries[1].bridge == "Jane Roe"
    assert result.query_results[1] == ["birth", "film"]
    film = next(r for r in result.passages if r.passage.id == "film")
    assert film.found_by == 0 and dict(film.retrieval_ranks)[0] == 0
    assert result.first_pool_size == 5 and len(result.pool) == 6
    assert result.lm_tokens == 0 and not reformulator.models.lm_loaded
    assert search.calls[0] == (QUESTION, 5) and search.calls[1][1] == NO_LM.residual_k
    assert result.passages == sorted(result.passages, key=lambda r: -r.score)


def test_async_matches_sync(bow_embedder):
    reformulator = EvidenceReformulator(NO_LM, embedder=bow_embedder)
    search = BridgeSearch()

    async def asearch(query: str, k: int) -> list[Passage]:
        await asyncio.sleep(0)
        return search(query, k)

    sync = reformulator.retrieve(QUESTION, search, k=3)
    result = asyncio.run(reformulator.aretrieve(QUESTION, asearch, k=3))
    assert [r.passage.id for r in result.passages] == [r.passage.id for r in sync.passages]
    assert [r.score for r in result.passages] == pytest.approx([r.score for r in sync.passages])
    assert result.queries == sync.queries


def test_rerank_control_retrieves_nothing_new(bow_embedder):
    reformulator = EvidenceReformulator(NO_LM, embedder=bow_embedder)
    search = BridgeSearch()
    result = reformulator.tuned(residual_retrieval=False).retrieve(QUESTION, search, k=5)
    assert len(search.calls) == 1
    assert "birth" not in {r.passage.id for r in result.passages}
    assert [q.kind for q in result.queries][:2] == ["original", "template"]
    assert {q.kind for q in result.queries[1:]} == {"template"}
    assert result.query_results[1:] == [[]]  # nothing was searched
    # the same ranking from the public stage d-f entry point
    again = reformulator.rerank(QUESTION, result.queries, result.first_pool, k=5)
    assert [r.passage.id for r in again] == [r.passage.id for r in result.passages]
    with pytest.raises(ValueError, match="original question"):
        reformulator.rerank(QUESTION, [ReformulationQuery("x", "lm", 1)], result.first_pool)


def test_repeat_control_asks_the_question_again(bow_embedder):
    search = BridgeSearch()
    reformulator = EvidenceReformulator(embedder=bow_embedder, lm="/nonexistent/lm")
    result = reformulator.retrieve(QUESTION, search, k=5, residual_queries="repeat")
    assert [q.text for q in result.queries] == [QUESTION, QUESTION]
    assert "birth" not in {r.passage.id for r in result.passages}
    assert not reformulator.models.lm_loaded


def test_second_round_searches_from_the_new_evidence(bow_embedder):
    far = _doc("far", "Oslo lies on the Oslofjord.", ("Oslo", "lies on", "Oslofjord"))

    def search(query: str, k: int) -> list[Passage]:
        if "oslo" in query.casefold():
            return [far]
        if "jane roe" in query.casefold():
            return [BIRTH]
        return [FILM]

    reformulator = EvidenceReformulator(NO_LM, embedder=bow_embedder)
    one = reformulator.retrieve(QUESTION, search, k=5)
    # "born in Oslo" covers every relation word, so only a fixed second round searches on
    adaptive = reformulator.retrieve(QUESTION, search, k=5, rounds=2)
    assert adaptive.rounds == 1 and "far" not in {p.id for p in adaptive.pool}
    two = reformulator.retrieve(QUESTION, search, k=5, rounds=2, adaptive_rounds=False)
    assert "far" not in {p.id for p in one.pool}
    assert {p.id for p in two.pool} == {"film", "birth", "far"}
    assert [(q.text, q.round) for q in two.queries[1:]] == [("Jane Roe born", 1), ("Oslo", 2)]


def test_empty_first_retrieval_returns_nothing_and_loads_nothing():
    calls = []

    def empty(query: str, k: int) -> list[Passage]:
        calls.append(query)
        return []

    reformulator = EvidenceReformulator(embedder="/nonexistent/embedder", lm="/nonexistent/lm")
    result = reformulator.retrieve(QUESTION, empty, k=5)
    assert result.passages == [] and result.pool == [] and calls == [QUESTION]
    assert not reformulator.models.embedder_loaded and not reformulator.models.lm_loaded


def test_search_errors_are_reported_with_the_query(bow_embedder):
    reformulator = EvidenceReformulator(NO_LM, embedder=bow_embedder)

    def broken_second(query: str, k: int) -> list[Passage]:
        if query != QUESTION:
            raise ConnectionError("index offline")
        return [FILM, *NOISE]

    with pytest.raises(RetrievalError, match=r"'Jane Roe born'.*ConnectionError: index offline"):
        reformulator.retrieve(QUESTION, broken_second, k=3)
    with pytest.raises(RetrievalError, match=r"must return neocorrag_core\.Passage"):
        reformulator.retrieve(QUESTION, lambda q, k: ["just text"], k=3)
    with pytest.raises(RetrievalError, match="list of Passage"):
        reformulator.retrieve(QUESTION, lambda q, k: "just text", k=3)

    async def abroken(query: str, k: int) -> list[Passage]:
        raise TimeoutError("slow")

    with pytest.raises(RetrievalError, match="TimeoutError: slow"):
        asyncio.run(reformulator.aretrieve(QUESTION, abroken, k=3))


def test_bad_arguments_and_config():
    reformulator = EvidenceReformulator(NO_LM)
    with pytest.raises(ValueError, match="question"):
        reformulator.retrieve("  ", BridgeSearch(), k=3)
    with pytest.raises(ValueError, match="k must be"):
        reformulator.retrieve(QUESTION, BridgeSearch(), k=0)
    with pytest.raises(TypeError, match="unknown ReformulationConfig field"):
        reformulator.retrieve(QUESTION, BridgeSearch(), k=3, nonsense=1)
    # research settings are the engine's (tuned / tuning=), never per call
    with pytest.raises(ValueError, match=r"research setting.*tuning=ReformulationTuning"):
        reformulator.retrieve(QUESTION, BridgeSearch(), k=3, ranking="mixed")
    with pytest.raises(ValueError, match="original_weight"):
        ReformulationTuning(original_weight=1.5)
    with pytest.raises(ValueError, match="selection"):
        ReformulationConfig(selection="magic")  # type: ignore[arg-type]
    assert not ReformulationConfig(residual_queries="repeat").uses_lm
    assert not ReformulationConfig().uses_lm and not NO_LM.uses_lm  # the default needs no LM
    assert ReformulationConfig(**LM).uses_lm
    assert ReformulationConfig(residual_queries="lm").uses_lm


# ----------------------------------------------------------------------------- with an LM


@pytest.mark.parametrize("selection", ["beam", "rank"])
def test_lm_steps_pick_real_candidates_and_count_tokens(bow_embedder, tiny_lm, selection):
    reformulator = EvidenceReformulator(
        ReformulationConfig(selection=selection, residual_queries="lm", max_lm_tokens=None),
        tuning=ReformulationTuning(max_query_tokens=12),
        embedder=bow_embedder,
        lm=tiny_lm,
    )
    result = reformulator.retrieve(QUESTION, BridgeSearch(), k=5)
    first_pool = {"film"} | {f"noise{i}" for i in range(4)}
    # triples or relation-stating sentences of the first pool, nothing invented
    assert result.evidence and all(set(p.passage_ids) <= first_pool for p in result.evidence)
    assert result.prompt_tokens > 0
    kinds = {q.kind for q in result.queries[1:]}
    assert kinds <= {"lm", "entities", "template"}
    # whatever the random LM wrote, queries are valid: short, distinct, not the question
    texts = [q.text for q in result.queries]
    assert len(texts) == len(set(texts)) and len(result.queries) <= 4


def test_token_budget_is_honoured(bow_embedder, tiny_lm):
    unlimited = EvidenceReformulator(
        ReformulationConfig(**LM, max_lm_tokens=None),
        tuning=ReformulationTuning(max_query_tokens=12),
        embedder=bow_embedder,
        lm=tiny_lm,
    ).retrieve(QUESTION, BridgeSearch(), k=5)
    assert unlimited.lm_tokens > 0

    for budget in (0, 10, unlimited.lm_tokens // 2, unlimited.lm_tokens + 200):
        result = EvidenceReformulator(
            ReformulationConfig(**LM, max_lm_tokens=budget),
            tuning=ReformulationTuning(max_query_tokens=12),
            embedder=bow_embedder,
            lm=tiny_lm,
        ).retrieve(QUESTION, BridgeSearch(), k=5)
        assert result.lm_tokens <= budget
        if budget < unlimited.lm_tokens:
            assert any("budget" in note for note in result.notes)
    starved = EvidenceReformulator(
        ReformulationConfig(**LM, max_lm_tokens=0), embedder=bow_embedder, lm=tiny_lm
    ).retrieve(QUESTION, BridgeSearch(), k=5)
    # no LM at all: the evidence comes from embeddings, the queries from bridge entities
    assert starved.lm_tokens == 0
    assert ("Jane Roe born", "template") in [(q.text, q.kind) for q in starved.queries]
    assert "birth" in {r.passage.id for r in starved.passages}


def test_bridge_entities_ignore_accents_and_dates():
    question = "Where was Akinoshu Kenji born?"
    evidence = [
        Proposition(
            "Akinoshū Kenji born 17 January 1969",
            ("p",),
            ("akinoshū kenji", "17 january 1969"),
            ("Akinoshū Kenji", "17 January 1969"),
        ),
        Proposition(
            "Akinoshū Kenji fought in Apollo 11 Arena in the 1990s",
            ("p",),
            ("akinoshū kenji", "apollo 11 arena", "1990s"),
            ("Akinoshū Kenji", "Apollo 11 Arena", "1990s"),
        ),
    ]
    assert bridge_entities(question, evidence) == ["Apollo 11 Arena"]


def test_rank_scores_propagates_over_linked_propositions():
    # two propositions share an entity, the third is alone; original query only
    sims = np.array([[3.0], [1.0], [2.0]])
    neighbors = [[1], [0], []]
    config = ReformulationTuning(score_temperature=None, propagation_weight=0.5)
    # mixed = [2/3, 0, 1/3]; received = [0, 2/3, 1/3] -> half/half = [1/3, 1/3, 1/3]
    assert rank_scores(sims, neighbors, config) == pytest.approx([1 / 3, 1 / 3, 1 / 3])


def test_rerank_control_runs_one_round_only(bow_embedder):
    reformulator = EvidenceReformulator(NO_LM, embedder=bow_embedder)
    result = reformulator.tuned(residual_retrieval=False).retrieve(
        QUESTION, BridgeSearch(), k=5, rounds=3
    )
    assert {q.round for q in result.queries} == {0, 1}


def test_search_results_are_cut_to_the_requested_k(bow_embedder):
    reformulator = EvidenceReformulator(NO_LM, embedder=bow_embedder)
    greedy = lambda query, k: [FILM, *NOISE]  # noqa: E731 - ignores k
    result = reformulator.retrieve(QUESTION, greedy, k=2, residual_k=1)
    assert result.first_pool_size == 2 and len(result.passages) == 2


def test_config_rejects_non_integers():
    with pytest.raises(TypeError, match="rounds must be an int"):
        ReformulationConfig(rounds=2.5)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="residual_k must be an int"):
        ReformulationConfig(residual_k="5")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="first_k"):
        ReformulationConfig(first_k=0)


def _scripted_lm(monkeypatch, tiny_lm, reply: str) -> None:
    """Make the query-writing call return ``reply`` (the tiny random LM writes noise)."""
    import neocorrag_core.evireform.reformulator as module

    def fake_generate(lm, ids, max_new_tokens):
        return lm.tokenizer(reply, add_special_tokens=False)["input_ids"]

    monkeypatch.setattr(module, "greedy_generate", fake_generate)


def test_lm_queries_are_used_then_entities_fill_the_free_slots(bow_embedder, tiny_lm, monkeypatch):
    _scripted_lm(monkeypatch, tiny_lm, "1. Where was Jane Roe born?\n2. Who directed Film X?")
    result = EvidenceReformulator(
        ReformulationConfig(selection="embedding", residual_queries="lm", max_lm_tokens=None),
        embedder=bow_embedder,
        lm=tiny_lm,
    ).retrieve(QUESTION, BridgeSearch(), k=5)
    residual = [(q.text, q.kind) for q in result.queries[1:]]
    # the second line names no bridge entity (it asks for the first hop again): rejected
    assert residual[0] == ("Where was Jane Roe born?", "lm")
    assert all(kind == "entities" for _, kind in residual[1:])
    assert "Jane Roe" not in [t for t, _ in residual[1:]]  # already named by the LM query
    assert "birth" in {r.passage.id for r in result.passages}
    assert result.prompt_tokens > 0


def test_sufficient_stops_the_loop(bow_embedder, tiny_lm, monkeypatch):
    _scripted_lm(monkeypatch, tiny_lm, "SUFFICIENT")
    search = BridgeSearch()
    result = EvidenceReformulator(
        ReformulationConfig(selection="embedding", residual_queries="lm", max_lm_tokens=None),
        embedder=bow_embedder,
        lm=tiny_lm,
    ).retrieve(QUESTION, search, k=5)
    assert result.sufficient and len(result.queries) == 1 and len(search.calls) == 1


def test_lm_path_question_query_carries_the_relation_words_too(bow_embedder, tiny_lm, monkeypatch):
    # No first-search passage names "Said Ashour": round 1 also searches his name. Without
    # fill_with_entities the LM's queries return early; that path must write the question
    # query the way the no-LM path does (with the open relation words), not the bare name.
    question = "Where was the director of Film X born, according to Said Ashour?"
    _scripted_lm(monkeypatch, tiny_lm, "Jane Roe hometown")
    lm_only = EvidenceReformulator(
        ReformulationConfig(selection="embedding", residual_queries="lm", max_lm_tokens=None),
        tuning=ReformulationTuning(fill_with_entities=False),
        embedder=bow_embedder,
        lm=tiny_lm,
    ).retrieve(question, BridgeSearch(), k=5)
    no_lm = EvidenceReformulator(
        ReformulationConfig(selection="embedding", residual_queries="entities"),
        embedder=bow_embedder,
    ).retrieve(question, BridgeSearch(), k=5)

    def asked_for_him(result):
        return [q.text for q in result.queries if q.kind == "question"]

    assert [(q.text, q.kind) for q in lm_only.queries if q.kind == "lm"] == [
        ("Jane Roe hometown", "lm")
    ]
    assert asked_for_him(lm_only) == asked_for_him(no_lm)
    assert asked_for_him(lm_only) == ["Said Ashour born according"]  # not the bare name


def test_a_tiny_temperature_concentrates_the_mass_without_a_warning() -> None:
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        weights = softmax_scores([0.2, 0.9, 0.5], 1e-310)
    assert weights.tolist() == [0.0, 1.0, 0.0]
