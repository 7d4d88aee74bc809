"""Configuration and input objects reject meaningless values at construction, as ConfigError
/ InputError (each also the built-in exception older callers catch)."""

from __future__ import annotations

import math

import pytest

from neocorrag_core import (
    BeliefConfig,
    ConfigError,
    InputError,
    MinerConfig,
    NeocorragError,
    Passage,
    ReformulationConfig,
)
from neocorrag_core.belief.config import BeliefTuning, belief_settings
from neocorrag_core.chains.config import MinerTuning, miner_settings
from neocorrag_core.evireform.config import ReformulationTuning, reformulation_settings

NAN, INF = math.nan, math.inf

MINER_BAD = [
    {"beta": NAN},
    {"beta": INF},
    {"alpha": NAN},
    {"tau_node": NAN},
    {"tau_edge": -INF},
    {"top_n": NAN},
    {"top_n": 2.5},
    {"top_n": "3"},
    {"top_n": -1},
    {"beam_width": NAN},
    {"beam_width": 2.5},
    {"beam_width": True},
    {"num_candidates": NAN},
    {"max_hops": 0},
    {"max_question_tokens": 0},
    {"filter_passages": "no"},
    {"include_passages_in_prompt": 1},
    {"chain_support": "yes"},
    {"keep": "everything"},
    {"decoding": None},
    {"search": 3},
]


@pytest.mark.parametrize("fields", MINER_BAD, ids=lambda f: f"{next(iter(f))}={f[next(iter(f))]!r}")
def test_miner_config_rejects_meaningless_values(fields):
    # Each name reaches the one settings object that has it (MinerConfig or MinerTuning).
    with pytest.raises(ConfigError, match=next(iter(fields))):
        miner_settings(changes=fields)


REFORM_BAD = [
    {"score_temperature": NAN},
    {"score_temperature": 0.0},
    {"original_weight": NAN},
    {"propagation_weight": 1.5},
    {"evidence_margin": INF},
    {"rounds": 1.5},
    {"residual_k": "5"},
    {"first_k": 0},
    {"max_lm_tokens": NAN},
    {"fill_with_entities": "no"},
    {"residual_retrieval": None},
    {"selection": "lm"},
    {"max_prompt_tokens": 0},
]


@pytest.mark.parametrize(
    "fields", REFORM_BAD, ids=lambda f: f"{next(iter(f))}={f[next(iter(f))]!r}"
)
def test_reformulation_config_rejects_meaningless_values(fields):
    with pytest.raises(ConfigError, match=next(iter(fields))):
        reformulation_settings(changes=fields)


def test_valid_edge_values_are_accepted():
    MinerConfig(top_n=0, tau_node=-1.0)
    MinerTuning(chain_support=None, alpha=1.0, beta=1.0)
    ReformulationConfig(first_k=None, max_lm_tokens=0)
    ReformulationTuning(evidence_margin=None, score_temperature=None, selection_passages=0)


@pytest.mark.parametrize(
    ("user", "research", "apply"),
    [
        (MinerConfig, MinerTuning, miner_settings),
        (ReformulationConfig, ReformulationTuning, reformulation_settings),
        (BeliefConfig, BeliefTuning, belief_settings),
    ],
)
def test_a_user_config_is_small_and_research_settings_live_apart(user, research, apply):
    # What a user chooses: at most 12 fields; the research settings share no name with it,
    # so a flat name (per-call override, --miner KEY=VALUE, a lab method) has one owner.
    assert len(user.field_names()) <= 12
    assert not set(user.field_names()) & set(research.field_names())
    assert user.research is research
    name = research.field_names()[0]
    with pytest.raises(ConfigError, match=f"{name}: research setting.*tuning={research.__name__}"):
        user().with_overrides(**{name: getattr(research(), name)})
    config, tuning = apply(changes={name: getattr(research(), name)})
    assert (config, tuning) == (user(), research())
    with pytest.raises(ConfigError, match=f"unknown {user.__name__} or {research.__name__}"):
        apply(changes={"no_such_field": 1})


def test_numpy_integers_become_plain_ints():
    np = pytest.importorskip("numpy")
    config = MinerConfig(top_n=np.int64(2), beam_width=np.int32(3))
    assert type(config.top_n) is int and type(config.beam_width) is int
    assert type(MinerTuning(max_hops=np.int64(3)).max_hops) is int


def test_config_errors_are_also_the_builtin_exceptions_callers_catch():
    with pytest.raises(ValueError):
        MinerTuning(beta=NAN)
    with pytest.raises(TypeError):
        MinerConfig(top_n="3")
    with pytest.raises(NeocorragError):
        MinerConfig().with_overrides(no_such_field=1)
    with pytest.raises(ConfigError, match="no_such_field"):
        ReformulationConfig().with_overrides(no_such_field=1)
    with pytest.raises(ConfigError, match="beam_width"):
        MinerConfig().with_overrides(beam_width=NAN)


def test_passage_validates_its_fields():
    assert Passage("p1", "text", metadata=None).metadata == {}
    for bad in ({"metadata": ["triples"]}, {"title": None}, {"score": "high"}, {"id": ""}):
        with pytest.raises(InputError):
            Passage(**{"id": "p1", "text": "text", **bad})
    with pytest.raises(InputError):
        Passage("p1", None)  # type: ignore[arg-type]


def test_a_triple_store_is_not_a_triple_source(tmp_path) -> None:
    from neocorrag_core import EvidenceChainMiner
    from neocorrag_core.errors import ConfigError
    from neocorrag_core.evireform import EvidenceReformulator
    from neocorrag_core.triples import DefaultTripleSource
    from neocorrag_core.triples.store import TripleStore

    with TripleStore(tmp_path / "t.sqlite") as store:
        for build in (EvidenceChainMiner, EvidenceReformulator):
            with pytest.raises(ConfigError, match=r"DefaultTripleSource\(store=\.\.\.\)"):
                build(triple_source=store)
        with pytest.raises(ConfigError, match="got dict; pass an extractor"):
            EvidenceChainMiner(triple_source={"triples": []})
        # what the message suggests is accepted (nothing loads at construction)
        EvidenceChainMiner(triple_source=DefaultTripleSource(store=store, extract=False))


def test_an_int_too_large_for_a_float_is_a_config_error() -> None:
    from neocorrag_core.errors import ConfigError

    with pytest.raises(ConfigError, match="tau_edge must be a finite number"):
        MinerConfig(tau_edge=10**400)


def test_call_search_refuses_a_bad_k() -> None:
    import asyncio

    from neocorrag_core.errors import ConfigError
    from neocorrag_core.search_calls import acall_search, call_search

    def search(query: str, k: int) -> list[Passage]:
        return [Passage(f"p{i}", "t") for i in range(5)]

    async def asearch(query: str, k: int) -> list[Passage]:
        return search(query, k)

    for k in (-1, 0, 2.5, True):
        with pytest.raises(ConfigError, match="k must be"):
            call_search(search, "q", k)  # type: ignore[arg-type]
        with pytest.raises(ConfigError, match="k must be"):
            asyncio.run(acall_search(asearch, "q", k))  # type: ignore[arg-type]
    assert len(call_search(search, "q", 2)) == 2
