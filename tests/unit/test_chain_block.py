"""The chain block handed to the reader: full (the paper's), compact (each fact once) and
linking (compact without the chains one kept passage states whole)."""

from __future__ import annotations

import io

import pytest

from neocorrag_core.chains.config import MinerConfig
from neocorrag_core.cli.app import print_result
from neocorrag_core.errors import ConfigError
from neocorrag_core.rendering import chain_text, linearize, render_chains
from neocorrag_core.types import (
    EvidenceChain,
    KeepReason,
    KeptPassage,
    MiningResult,
    Passage,
    Triple,
)

J = Triple("Johnnycake", "located in", "McDowell County", ("p1",))
M = Triple("McDowell County", "located in", "West Virginia", ("p2",))
V = Triple("Virginia", "is bordered by", "West Virginia", ("p3",))
T = Triple("Virginia", "is bordered by", "Tennessee", ("p3",))
K = Triple("Virginia", "is bordered by", "Kentucky", ("p3",))
OHIO = Triple("Ohio River", "forms northern borders of", "West Virginia", ("p4",))


def _chain(triples: list[Triple], forward: list[bool]) -> EvidenceChain:
    return EvidenceChain(tuple(triples), linearize(triples, forward), 0.5, forward=tuple(forward))


def test_compact_states_each_fact_once_and_keeps_chain_numbers():
    chains = [
        _chain([J, M, V, T], [True, True, False, True]),
        _chain([J, M, V, K], [True, True, False, True]),  # only the last hop is new
        _chain([J, M, V], [True, True, False]),  # nothing new: no line
        _chain([J, M, OHIO], [True, True, False]),  # new hop after the shared node
    ]
    assert render_chains(chains, chain_format="compact") == (
        "Evidence chains:\n"
        "1. Johnnycake - located in -> McDowell County - located in -> West Virginia"
        " <- is bordered by - Virginia - is bordered by -> Tennessee\n"
        "2. Virginia - is bordered by -> Kentucky\n"
        "4. West Virginia <- forms northern borders of - Ohio River"
    )


def test_compact_writes_separate_runs_of_new_steps():
    # New, stated, new: two runs, each starting at the node it shares with the rest.
    first = _chain([V], [False])
    second = _chain([T, V, OHIO], [False, True, False])
    assert render_chains([first, second], chain_format="compact") == (
        "Evidence chains:\n"
        "1. West Virginia <- is bordered by - Virginia\n"
        "2. Tennessee <- is bordered by - Virginia; West Virginia <- forms northern borders of"
        " - Ohio River"
    )


def test_full_is_every_chain_whole():
    chains = [_chain([J, M], [True, True]), _chain([J], [True])]
    assert render_chains(chains, chain_format="full") == (
        "Evidence chains:\n"
        "1. Johnnycake - located in -> McDowell County - located in -> West Virginia\n"
        "2. Johnnycake - located in -> McDowell County"
    )


def test_compact_without_directions_shows_chains_whole_once():
    # A chain built outside the search has no walk directions: its text, unless repeated.
    outside = EvidenceChain((J,), "Johnnycake is in McDowell County", 0.0)
    again = EvidenceChain((J,), "Johnnycake is in McDowell County", 0.0)
    text = render_chains([outside, again, _chain([J], [True])], chain_format="compact")
    assert text == (
        "Evidence chains:\n"
        "1. Johnnycake is in McDowell County\n"
        "3. Johnnycake - located in -> McDowell County"
    )


def test_none_format_is_no_block():
    chains = [_chain([J, M], [True, True])]
    assert render_chains(chains, chain_format="none") == ""
    result = MiningResult("q", chains, [], [], 1, chain_format="none")
    assert chain_text(result) == ""


def test_bad_chain_format_is_a_clear_error():
    with pytest.raises(ValueError, match="chain_format"):
        render_chains([_chain([J], [True])], chain_format="tree")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="chain_format"):
        MinerConfig(chain_format="tree")  # type: ignore[arg-type]


def test_mining_result_renders_with_its_format():
    chains = [_chain([J, M], [True, True]), _chain([J, M, OHIO], [True, True, False])]
    compact = MiningResult("q", chains, [], [], 2, chain_format="compact")
    assert MiningResult("q", chains, [], [], 2).chain_format == MinerConfig().chain_format
    assert MiningResult("q", chains, [], [], 2).max_chain_lines == MinerConfig().max_chain_lines
    full = MiningResult("q", chains, [], [], 2, chain_format="full")
    assert chain_text(compact).splitlines()[2] == (
        "2. West Virginia <- forms northern borders of - Ohio River"
    )
    assert chain_text(full).splitlines()[2] == f"2. {chains[1].text}"


# The same fact extracted from two passages.
M23 = Triple("McDowell County", "located in", "West Virginia", ("p2", "p3"))


def test_linking_drops_chains_one_kept_passage_states_whole():
    chains = [
        _chain([V, T], [False, True]),  # all of it in p3, which is kept: no line
        _chain([J, M], [True, True]),  # crosses p1 -> p2: the link the reader needs
        _chain([M23, V], [True, False]),  # p3 supplies both (M23 comes from p2 and p3)
        _chain([OHIO], [True]),  # p4 was dropped: the reader sees this fact nowhere else
        _chain([M, V], [True, False]),  # crosses p2 -> p3, but chain 2 stated M already
    ]
    text = render_chains(chains, chain_format="linking", kept_ids={"p1", "p2", "p3"})
    assert text == (
        "Evidence chains:\n"
        "2. Johnnycake - located in -> McDowell County - located in -> West Virginia\n"
        "4. Ohio River - forms northern borders of -> West Virginia\n"
        "5. West Virginia <- is bordered by - Virginia"
    )
    # Compact shows the first one too (chain 3 restates facts of chains 1 and 2 there).
    compact = render_chains(chains, chain_format="compact")
    assert [line[:2] for line in compact.splitlines()] == ["Ev", "1.", "2.", "4."]


def test_linking_is_no_block_when_every_chain_is_inside_a_kept_passage():
    chains = [_chain([V, T], [False, True]), _chain([V], [False])]
    assert render_chains(chains, chain_format="linking", kept_ids={"p3"}) == ""
    # Without the passage the same chains are news to the reader.
    assert render_chains(chains, chain_format="linking", kept_ids={"p1"}) == (
        render_chains(chains, chain_format="compact")
    )


def test_linking_states_facts_once_among_the_chains_it_shows():
    chains = [_chain([J, M], [True, True]), _chain([J, M, OHIO], [True, True, False])]
    assert render_chains(chains, chain_format="linking", kept_ids={"p1", "p2"}) == (
        "Evidence chains:\n"
        "1. Johnnycake - located in -> McDowell County - located in -> West Virginia\n"
        "2. West Virginia <- forms northern borders of - Ohio River"
    )


def test_linking_keeps_chains_without_sources_or_triples():
    # Facts with no source ids (a chain built outside the search) are never "inside" one.
    bare = Triple("Johnnycake", "located in", "McDowell County", ())
    outside = EvidenceChain((), "Johnnycake is in McDowell County", 0.0)
    text = render_chains([_chain([bare], [True]), outside], chain_format="linking", kept_ids={"p1"})
    assert text.splitlines()[1:] == [
        "1. Johnnycake - located in -> McDowell County",
        "2. Johnnycake is in McDowell County",
    ]


def test_max_lines_keeps_the_first_lines_the_format_shows():
    chains = [
        _chain([V, T], [False, True]),  # inside kept p3: linking shows no line for it
        _chain([J, M], [True, True]),
        _chain([J, M], [True, True]),  # nothing new: no line, so it takes no slot
        _chain([OHIO], [True]),
        _chain([M, V], [True, False]),
    ]
    linking = render_chains(chains, chain_format="linking", kept_ids={"p1", "p2", "p3"})
    one = render_chains(chains, chain_format="linking", kept_ids={"p1", "p2", "p3"}, max_lines=1)
    two = render_chains(chains, chain_format="linking", kept_ids={"p1", "p2", "p3"}, max_lines=2)
    assert linking.splitlines()[1:] == [
        "2. Johnnycake - located in -> McDowell County - located in -> West Virginia",
        "4. Ohio River - forms northern borders of -> West Virginia",
        "5. West Virginia <- is bordered by - Virginia",
    ]
    assert one == "\n".join(linking.splitlines()[:2])
    assert two == "\n".join(linking.splitlines()[:3])
    full_one = render_chains(chains, chain_format="full", max_lines=1)
    assert full_one == f"Evidence chains:\n1. {chains[0].text}"
    assert render_chains(chains, chain_format="linking", max_lines=99) == render_chains(
        chains, chain_format="linking"
    )


def test_max_lines_must_be_positive():
    for bad in (0, True, 1.5):
        with pytest.raises(ValueError, match="max_lines"):
            render_chains([_chain([J], [True])], max_lines=bad)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="max_chain_lines"):
        MinerConfig(max_chain_lines=0)
    with pytest.raises(ConfigError, match="max_chain_lines"):
        MinerConfig(max_chain_lines=1.5)  # type: ignore[arg-type]


def test_mining_result_caps_its_block():
    chains = [_chain([J, M], [True, True]), _chain([OHIO], [True])]
    result = MiningResult("q", chains, [], [], 2, chain_format="linking", max_chain_lines=1)
    assert chain_text(result).splitlines()[1:] == [
        "1. Johnnycake - located in -> McDowell County - located in -> West Virginia"
    ]


def test_mining_result_linking_uses_its_kept_passages():
    chains = [_chain([V, T], [False, True]), _chain([J, M], [True, True])]
    kept = [
        KeptPassage(Passage(pid, f"text {pid}"), rank, KeepReason.TOP_N)
        for rank, pid in enumerate(["p1", "p2", "p3"], start=1)
    ]
    result = MiningResult("q", chains, kept, [], 2, chain_format="linking")
    assert [line[:2] for line in chain_text(result).splitlines()] == ["Ev", "2."]
    # Drop p3 and the first chain tells the reader something again.
    fewer = MiningResult("q", chains, kept[:2], [], 2, chain_format="linking")
    assert chain_text(fewer).splitlines()[1].startswith("1. West Virginia")


def test_the_demo_says_why_a_question_with_chains_has_no_block():
    chains = [_chain([V, T], [False, True])]
    kept = [
        KeptPassage(
            Passage("p3", "Virginia borders West Virginia.", "Virginia"), 1, KeepReason.TOP_N
        )
    ]
    item = {"question": "q", "answer": "a", "paragraphs": []}

    def shown(result: MiningResult) -> str:
        out = io.StringIO()
        print_result(1, 1, item, [kept[0].passage], result, "none", out=out)
        return out.getvalue()

    linking = shown(MiningResult("q", chains, kept, [], 1, chain_format="linking"))
    assert (
        "Chain block: none (each chosen chain is a fact one kept passage states whole)" in linking
    )
    assert "Evidence chains:" not in linking
    compact = shown(MiningResult("q", chains, kept, [], 1, chain_format="compact"))
    assert "Chain block: none" not in compact and "Evidence chains:" in compact
    assert "max_chain_lines" not in compact  # one line: the cap dropped nothing
    default = shown(MiningResult("q", chains, kept, [], 1))  # chain_format="none"
    assert "Chain block: none (chain_format='none'): the reader gets the kept" in default
    assert "Evidence chains:" not in default
    # The chains are still listed, under a heading that says how they were chosen.
    assert "Evidence chains found (best search scores, no LM decoding):\n  1. " in default
    three = [_chain([J], [True]), _chain([M], [True]), _chain([OHIO], [True])]
    capped = shown(MiningResult("q", three, kept, [], 3, chain_format="compact"))
    assert "Chain block: its first 2 of 3 lines (max_chain_lines)" in capped
    assert "| 2. McDowell County" in capped and "| 3. Ohio River" not in capped


def test_the_demo_says_which_kept_passage_was_cut():
    whole = Passage("p3", "Virginia borders West Virginia. It has a coast.", "Virginia")
    cut = KeptPassage(
        Passage("p3", "Virginia borders West Virginia.", "Virginia"),
        3,
        KeepReason.QUERY_ENTITY,
        full_text=whole.text,
    )
    top = KeptPassage(Passage("p1", "West Virginia is a state.", "WV"), 1, KeepReason.TOP_N)
    item = {"question": "q", "answer": "a", "paragraphs": []}
    out = io.StringIO()
    result = MiningResult("q", [], [top, cut], [], 0)
    print_result(1, 1, item, [top.passage, whole], result, "none", out=out)
    lines = out.getvalue().splitlines()
    # 31 of 47 characters, counted by hand; the top-N passage is whole and says nothing.
    assert any(
        line.startswith("  [3] Virginia")
        and line.endswith("; cut to its evidence sentences (31 of 47 chars)")
        for line in lines
    )
    assert not any(line.startswith("  [1] WV") and "cut to" in line for line in lines)
