"""Evidence graph construction and stage c (Eq. 8 refinement and rendering)."""

from __future__ import annotations

import pytest

from neocorrag_core.chains.graph import EvidenceGraph, normalize_entity
from neocorrag_core.chains.keep import refine_passages
from neocorrag_core.rendering import chain_text, render_chains, result_context
from neocorrag_core.types import (
    EvidenceChain,
    KeepReason,
    MiningResult,
    Passage,
    Triple,
)


def test_normalize_entity_folds_case_space_and_outer_punctuation():
    assert normalize_entity('  "Mountrail   County," ') == "mountrail county"
    assert normalize_entity("STANLEY") == normalize_entity("stanley")


def test_normalize_entity_folds_latin_accents_only():
    assert normalize_entity("Aschenbrödel") == normalize_entity("Aschenbrodel") == "aschenbrodel"
    assert normalize_entity("Tekezé River") == "tekeze river"
    assert normalize_entity("Łódź") == "łodz"  # Ł has no decomposition: kept
    # Marks on other scripts are part of the word.
    for word in ("Йошкар-Ола", "Ἀθῆναι", "नमस्ते", "مُحَمَّد"):
        assert normalize_entity(word) == " ".join(word.split()).casefold()
    assert normalize_entity("Aschenbrödel", fold_accents=False) == "aschenbrödel"


def test_graph_merges_duplicate_facts_and_unions_sources():
    graph = EvidenceGraph.from_triples(
        [
            Triple("Stanley", "capital of", "Mountrail County", ("p1",)),
            Triple("stanley", "capital of", "Mountrail  County", ("p2",)),
            Triple("Stanley", "located in", "North Dakota", ("p2",)),
            Triple("X", "is", "x", ("p3",)),  # self-loop after normalization: no edge
        ]
    )
    assert len(graph.triples) == 2
    assert graph.triples[0].source_ids == ("p1", "p2")
    assert graph.surface["stanley"] == "Stanley"
    assert {e.neighbor for e in graph.neighbors("stanley")} == {"mountrail county", "north dakota"}
    assert [e.forward for e in graph.neighbors("north dakota")] == [False]


def test_graph_to_networkx_keeps_relations():
    graph = EvidenceGraph.from_triples([Triple("A", "r", "B", ("p",))])
    nxg = graph.to_networkx()
    assert nxg.nodes["a"]["label"] == "A"
    assert next(iter(nxg.edges(data=True)))[2]["relation"] == "r"


def _passages(n: int) -> list[Passage]:
    return [Passage(id=f"p{i}", text=f"text {i}", title=f"T{i}") for i in range(1, n + 1)]


def _chain(*sources: str) -> EvidenceChain:
    triples = tuple(Triple(f"h{s}", "r", f"t{s}", (s,)) for s in sources)
    return EvidenceChain(triples, " / ".join(t.text for t in triples), 1.0)


def test_refine_keeps_top_n_and_chain_sources_in_original_order():
    passages = _passages(5)
    kept, dropped = refine_passages(
        passages, [_chain("p5", "p1"), _chain("p4")], top_n=2, keep="paper"
    )
    assert [k.passage.id for k in kept] == ["p1", "p2", "p4", "p5"]
    assert [k.reason for k in kept] == [
        KeepReason.TOP_N,
        KeepReason.TOP_N,
        KeepReason.CHAIN,
        KeepReason.CHAIN,
    ]
    assert kept[2].chain_indices == (1,)
    assert kept[3].chain_indices == (0,)
    assert [(d.passage.id, d.rank) for d in dropped] == [("p3", 3)]
    assert all(k.explain() for k in kept)


def test_refine_without_chains_keeps_only_top_n():
    kept, dropped = refine_passages(_passages(5), [], top_n=2, keep="paper")
    assert [k.passage.id for k in kept] == ["p1", "p2"]
    assert len(dropped) == 3


def test_refine_never_returns_empty_context():
    # top_n=0 and no chain touches any passage: everything would be dropped.
    kept, dropped = refine_passages(_passages(3), [_chain("elsewhere")], top_n=0, keep="paper")
    assert [k.passage.id for k in kept] == ["p1", "p2", "p3"]
    assert all(k.reason is KeepReason.PASSTHROUGH for k in kept)
    assert dropped == []


def test_refine_empty_input_is_empty():
    assert refine_passages([], [], top_n=2, keep="paper") == ([], [])


def test_render_chains_and_context():
    chain = EvidenceChain((Triple("A", "r", "B", ("p1",)),), "A - r -> B", 0.9)
    assert render_chains([]) == ""
    assert render_chains([chain]) == "Evidence chains:\n1. A - r -> B"
    kept, dropped = refine_passages(_passages(1), [chain], top_n=1, keep="paper")
    result = MiningResult("q", [chain], kept, dropped, 1, chain_format="compact")
    assert result_context(result) == "Evidence chains:\n1. A - r -> B\n\nT1: text 1"
    assert result_context(result, chains_first=False).endswith("1. A - r -> B")
    # The default (linking) leaves out a chain the one kept passage states whole.
    assert result_context(MiningResult("q", [chain], kept, dropped, 1)) == "T1: text 1"


def test_the_deprecated_result_members_still_render_and_warn():
    """``MiningResult.chain_text`` / ``context()``: kept for one release, same output as
    ``rendering.chain_text`` / ``rendering.result_context``."""
    chain = EvidenceChain((Triple("A", "r", "B", ("p1",)),), "A - r -> B", 0.9)
    kept, dropped = refine_passages(_passages(1), [chain], top_n=1, keep="paper")
    result = MiningResult("q", [chain], kept, dropped, 1, chain_format="compact")
    with pytest.warns(DeprecationWarning, match=r"rendering\.chain_text\(result\)"):
        assert result.chain_text == chain_text(result) == "Evidence chains:\n1. A - r -> B"
    with pytest.warns(DeprecationWarning, match=r"rendering\.result_context\(result"):
        assert result.context(chains_first=False) == result_context(result, chains_first=False)
