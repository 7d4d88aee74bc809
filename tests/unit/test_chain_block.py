"""The chain block handed to the reader: full (the paper's) and compact (each fact once)."""

from __future__ import annotations

import pytest

from neocorrag_core.config import MinerConfig
from neocorrag_core.errors import ConfigError
from neocorrag_core.rendering import linearize, render_chains
from neocorrag_core.types import EvidenceChain, MiningResult, Triple

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
    assert result.chain_text == ""


def test_bad_chain_format_is_a_clear_error():
    with pytest.raises(ValueError, match="chain_format"):
        render_chains([_chain([J], [True])], chain_format="tree")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="chain_format"):
        MinerConfig(chain_format="tree")  # type: ignore[arg-type]


def test_mining_result_renders_with_its_format():
    chains = [_chain([J, M], [True, True]), _chain([J, M, OHIO], [True, True, False])]
    compact = MiningResult("q", chains, [], [], 2)  # the default, as MinerConfig's
    full = MiningResult("q", chains, [], [], 2, chain_format="full")
    assert compact.chain_text.splitlines()[2] == (
        "2. West Virginia <- forms northern borders of - Ohio River"
    )
    assert full.chain_text.splitlines()[2] == f"2. {chains[1].text}"
