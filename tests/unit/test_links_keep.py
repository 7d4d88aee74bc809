"""Passage links (query entity, bridge) and the keep modes of stage c, on hand-built cases."""

from __future__ import annotations

import pytest

from neocorrag_core.config import KEEP_MODES, MinerConfig
from neocorrag_core.links import PassageLinks, link_passages, mentions, passage_topic
from neocorrag_core.refine import refine_passages
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
    assert config.keep == "recall" and config.kept_top_n == 2 and not config.keeps_chain_sources
    assert MinerConfig(keep="balanced").kept_top_n == 1
    assert MinerConfig(keep="balanced", top_n=3).kept_top_n == 3
    assert MinerConfig(keep="paper").keeps_chain_sources
    assert MinerConfig(keep="recall", chain_support=True).keeps_chain_sources
    with pytest.raises(ValueError, match="keep must be one of"):
        MinerConfig(keep="all")  # type: ignore[arg-type]
