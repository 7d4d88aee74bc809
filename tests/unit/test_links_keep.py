"""Passage links (query entity, bridge) and the keep modes of stage c, on hand-built cases."""

from __future__ import annotations

import pytest

from neocorrag_core.chains.config import KEEP_MODES, MinerConfig, MinerTuning
from neocorrag_core.chains.keep import rank_cut, refine_passages
from neocorrag_core.chains.links import (
    PassageLinks,
    is_comparison,
    link_passages,
    mentions,
    passage_topic,
)
from neocorrag_core.types import EvidenceChain, KeepReason, Passage, Triple


def T(s: str, r: str, o: str, pid: str) -> Triple:
    return Triple(s, r, o, (pid,))


def test_topic_is_the_title_without_qualifier_else_the_most_frequent_subject():
    assert passage_topic(Passage("a", "x", title="Hello Love (song)"), []) == "hello love"
    assert passage_topic(Passage("b", "x", title="West Chicago, Illinois"), []) == "west chicago"
    triples = [
        T("Knott", "is", "a fell", "c"),
        T("Knott", "in", "Cumbria", "c"),
        T("X", "r", "Y", "c"),
    ]
    assert passage_topic(Passage("c", "x"), triples) == "knott"
    assert passage_topic(Passage("d", "x"), []) == ""


def test_mentions_needs_a_whole_phrase_of_three_characters_or_more():
    assert mentions("he studied at west chicago high school", "west chicago")
    assert not mentions("the westchicago fair", "west chicago")
    assert not mentions("an ox ran", "ox")  # too short to be evidence of anything


# The Fawell example of the loss diagnosis: the second hop's passage is titled
# "West Chicago, Illinois", the first names "West Chicago High School"; no triple shares
# a node, so no chain reaches it, but the first passage names its topic.
FAWELL = [
    Passage(
        "p1", "Harris W. Fawell is a graduate of West Chicago High School.", "Harris W. Fawell"
    ),
    Passage("p2", "Missouri City is a city in Fort Bend County, Texas.", "Missouri City, Texas"),
    Passage("p3", "Moumouni Fabre is a politician.", "Moumouni Fabré"),
    Passage("p4", "West Chicago is a city in DuPage County, Illinois.", "West Chicago, Illinois"),
]
FAWELL_TRIPLES = [
    [T("Harris W. Fawell", "graduate of", "West Chicago High School", "p1")],
    [T("Missouri City", "located in", "Fort Bend County", "p2")],
    [T("Moumouni Fabré", "is", "politician", "p3")],
    [T("West Chicago", "is a city in", "DuPage County", "p4")],
]
FAWELL_QUERY = "In what county is the city where Harris W. Fawell was born?"


def test_topic_named_in_an_anchor_passage_is_a_bridge():
    links = link_passages(FAWELL_QUERY, ["Harris W. Fawell"], FAWELL, FAWELL_TRIPLES)
    assert [link.query_entity for link in links] == [True, False, False, False]
    assert [link.bridge for link in links] == [False, False, False, True]
    assert links[3].linked_to == (0,)


def test_shared_entity_with_an_anchor_is_a_bridge_unless_it_is_a_hub_or_a_query_entity():
    passages = [Passage(f"p{i}", f"text {i}") for i in range(1, 6)]
    triples = [
        [T("Hello Love", "performed by", "Hank Snow", "p1"), T("Hello Love", "in", "USA", "p1")],
        [T("Hank Snow", "died in", "Madison", "p2")],  # shares Hank Snow: a bridge
        [T("Elvis", "born in", "USA", "p3")],  # shares only the hub USA
        [T("Ann", "lived in", "USA", "p4")],
        [T("Bob", "sang", "Hello Love", "p5")],  # shares only the query entity itself
    ]
    links = link_passages(
        "Where did the performer of Hello Love die?", ["Hello Love"], passages, triples
    )
    assert [link.bridge for link in links] == [False, True, False, False, False]
    # p5 names the query entity in a triple: it is about the question, not a bridge.
    assert links[4].query_entity and links[0].query_entity


def test_common_nouns_and_parts_of_longer_names_are_not_query_entities():
    passages = [
        Passage("p1", "Eileen Chang wrote Love in a Fallen City.", "Love in a Fallen City (film)"),
        Passage("p2", "Fallen City is a documentary.", "Fallen City"),
        Passage("p3", "Jason Moore is a director.", "Jason Moore (director)"),
    ]
    triples = [
        [T("Love in a Fallen City", "written by", "Eileen Chang", "p1")],
        [T("Fallen City", "is", "documentary", "p2")],
        [T("Jason Moore", "is", "director", "p3")],
    ]
    query = "Who directed Love In A Fallen City?"
    links = link_passages(query, ["director", "Love In A Fallen City"], passages, triples)
    assert [link.query_entity for link in links] == [True, False, False]


def test_link_passages_checks_its_input():
    with pytest.raises(ValueError, match="one list of triples per passage"):
        link_passages("q", [], FAWELL, FAWELL_TRIPLES[:2])


def _links(*flags: tuple[bool, bool]) -> list[PassageLinks]:
    return [PassageLinks("t", entity, bridge) for entity, bridge in flags]


def _chain(*sources: str) -> EvidenceChain:
    triples = tuple(T(f"h{s}", "r", f"t{s}", s) for s in sources)
    return EvidenceChain(triples, " / ".join(t.text for t in triples), 1.0)


PASSAGES = [Passage(f"p{i}", f"text {i}") for i in range(1, 7)]
# p3 about a query entity, p4 a bridge, p5 only cited by a chain, p6 nothing.
LINKS = _links(
    (True, False), (False, False), (True, False), (False, True), (False, False), (False, False)
)
CHAINS = [_chain("p1", "p5")]


@pytest.mark.parametrize(
    ("keep", "expected"),
    [
        ("recall", {"p1": "top_n", "p2": "top_n", "p3": "query_entity", "p4": "bridge"}),
        ("balanced", {"p1": "top_n", "p3": "query_entity", "p4": "bridge"}),
        ("precise", {"p1": "top_n", "p4": "bridge"}),
        ("paper", {"p1": "top_n", "p2": "top_n", "p5": "chain"}),
    ],
)
def test_each_keep_mode_keeps_what_its_rules_say(keep, expected):
    top_n = KEEP_MODES[keep][0]
    kept, dropped = refine_passages(PASSAGES, CHAINS, top_n, keep=keep, links=LINKS)
    assert {k.passage.id: k.reason.value for k in kept} == expected
    assert {d.passage.id for d in dropped} == {p.id for p in PASSAGES} - set(expected)
    assert all(k.explain() for k in kept)


def test_chain_support_can_be_switched_on_in_any_mode():
    kept, _ = refine_passages(PASSAGES, CHAINS, 1, keep="precise", links=LINKS, chain_support=True)
    assert {k.passage.id: k.reason for k in kept} == {
        "p1": KeepReason.TOP_N,
        "p4": KeepReason.BRIDGE,
        "p5": KeepReason.CHAIN,
    }


def test_link_based_modes_need_links():
    with pytest.raises(ValueError, match="needs links"):
        refine_passages(PASSAGES, CHAINS, 2, keep="recall")


def test_config_dial_defaults_and_validation():
    config = MinerConfig()
    tuning = MinerTuning()
    assert config.keep == "recall" and config.kept_top_n == 2
    assert not tuning.keeps_chain_sources(config.keep)
    assert MinerConfig(keep="balanced").kept_top_n == 1
    assert MinerConfig(keep="balanced", top_n=3).kept_top_n == 3
    assert tuning.keeps_chain_sources("paper")
    assert MinerTuning(chain_support=True).keeps_chain_sources("recall")
    with pytest.raises(ValueError, match="keep must be one of"):
        MinerConfig(keep="all")  # type: ignore[arg-type]


def test_comparison_questions_are_recognised_by_their_shape():
    assert is_comparison("Which magazine was started first, Arthur's Magazine or First for Women?")
    assert is_comparison("Are Local H and For Against both from the United States?")
    assert is_comparison("Did Bob and Ann study together?")
    assert not is_comparison("In what county is the city where Harris W. Fawell was born?")
    assert not is_comparison("Who directed Oregon?")  # "or" only inside a word
    assert not is_comparison("")


# "Which magazine was started first, Arthur's Magazine or First for Women?": the two
# compared passages, one the first names (a bridge by name), one that only shares an
# entity with an anchor, one that only names a query entity in a triple, one unrelated.
MAGAZINES = [
    Passage("m1", "Arthur's Magazine was published in Philadelphia.", "Arthur's Magazine"),
    Passage("m2", "Godey's Lady's Book was a magazine in Philadelphia.", "Godey's Lady's Book"),
    Passage("m3", "First for Women is a magazine by Bauer Media Group.", "First for Women"),
    Passage("m4", "Bauer Media Group is a publisher.", "Bauer Media Group"),
    Passage("m5", "Edgar Poe wrote for Arthur's Magazine.", "Edgar Poe"),
    Passage("m6", "Tom lived in Philadelphia.", "Tom"),
]
MAGAZINE_TRIPLES = [
    [T("Arthur's Magazine", "published in", "Philadelphia", "m1")],
    [T("Godey's Lady's Book", "published in", "Philadelphia", "m2")],
    [T("First for Women", "published by", "Bauer Media Group", "m3")],
    [T("Bauer Media Group", "is", "publisher", "m4")],
    [T("Edgar Poe", "wrote for", "Arthur's Magazine", "m5")],
    [T("Tom", "lived in", "Boston", "m6")],
]
MAGAZINE_QUERY = "Which magazine was started first, Arthur's Magazine or First for Women?"
MAGAZINE_ENTITIES = ["Arthur's Magazine", "First for Women"]


def test_titled_and_named_are_the_narrow_halves_of_the_two_links():
    links = link_passages(MAGAZINE_QUERY, MAGAZINE_ENTITIES, MAGAZINES, MAGAZINE_TRIPLES)
    assert [link.titled for link in links] == [True, False, True, False, False, False]
    assert [link.query_entity for link in links] == [True, False, True, False, True, False]
    # m4 is named in m3 and m1 in m5 (anchors); m2 only shares Philadelphia with m1.
    assert [link.named for link in links] == [True, False, False, True, False, False]
    assert [link.bridge for link in links] == [True, True, False, True, False, False]


@pytest.mark.parametrize(
    ("keep", "comparison", "expected"),
    [
        # Not a comparison: top-2, query-entity and bridge passages, as before.
        ("recall", False, ["m1", "m2", "m3", "m4", "m5"]),
        # A comparison: top-1, the compared passages and what they name.
        ("recall", True, ["m1", "m3", "m4"]),
        ("balanced", True, ["m1", "m3", "m4"]),
        # Modes that keep no query-entity passages are left alone.
        ("precise", True, ["m1", "m2", "m4"]),
        ("paper", True, ["m1", "m2"]),
    ],
)
def test_a_comparison_keeps_the_compared_passages(keep, comparison, expected):
    links = link_passages(MAGAZINE_QUERY, MAGAZINE_ENTITIES, MAGAZINES, MAGAZINE_TRIPLES)
    top_n = KEEP_MODES[keep][0]
    kept, dropped = refine_passages(
        MAGAZINES, [], top_n, keep=keep, links=links, comparison=comparison
    )
    assert [k.passage.id for k in kept] == expected
    assert len(kept) + len(dropped) == len(MAGAZINES)
    # rank_cut says how many were kept by rank alone (what the demo prints as "the top N").
    cut = rank_cut(top_n, keep=keep, links=links, comparison=comparison)
    assert cut == (1 if comparison and keep in ("recall", "balanced") else top_n)
    assert [k.rank for k in kept if k.reason is KeepReason.TOP_N] == list(range(1, cut + 1))


def test_a_comparison_with_one_titled_passage_keeps_the_usual_rules():
    links = link_passages(MAGAZINE_QUERY, MAGAZINE_ENTITIES, MAGAZINES[:2], MAGAZINE_TRIPLES[:2])
    kept, _ = refine_passages(MAGAZINES[:2], [], 2, keep="recall", links=links, comparison=True)
    assert [k.passage.id for k in kept] == ["m1", "m2"]
