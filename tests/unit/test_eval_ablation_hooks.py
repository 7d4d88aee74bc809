"""The engine switches behind the Table 2 ablations: naive search and no filtering."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import bag_of_words_embedder

from neocorrag_core import EvidenceChainMiner, KeepReason, MinerConfig, Passage
from neocorrag_core.chains.graph import EvidenceGraph, normalize_entity
from neocorrag_core.chains.path_search import naive_search_paths, search_paths
from neocorrag_core.eval import MethodInput
from neocorrag_core.eval.refiners import NeocorragMethod
from neocorrag_core.types import Triple


def test_config_rejects_unknown_search_mode():
    with pytest.raises(ValueError, match="search"):
        MinerConfig(search="greedy")
    assert MinerConfig().search == "activated" and MinerConfig().filter_passages


def _graph():
    triples = [
        Triple("A", "r1", "B", ("p1",)),
        Triple("B", "r2", "C", ("p2",)),
        Triple("A", "r3", "D", ("p3",)),
    ]
    # triple 1 is orthogonal to the query: activated search prunes it, naive search does not
    vecs = np.array([[1.0, 0.0], [0.0, 1.0], [0.8, 0.6]], dtype=np.float32)
    return EvidenceGraph.from_triples(triples), vecs, np.array([1.0, 0.0], dtype=np.float32)


def test_naive_search_is_unpruned_and_shortest_first():
    graph, vecs, query = _graph()
    config = MinerConfig(tau_edge=0.5, tau_boost=0.5, num_candidates=10)
    seeds = [normalize_entity("A")]
    naive, _ = naive_search_paths(graph, seeds, vecs, query, config)
    activated, _ = search_paths(graph, seeds, vecs, query, config)
    naive_sets = [set(p.triple_indices) for p in naive]
    assert [len(s) for s in naive_sets] == sorted(len(s) for s in naive_sets)
    assert {0, 1} in naive_sets  # reaches C through the pruned edge B - r2 -> C
    assert all(1 not in p.triple_indices for p in activated)
    # the recorded score is the plain cosine of the mean triple vector, no Eq. 5 factors
    two_hop = next(p for p in naive if set(p.triple_indices) == {0, 1})
    assert two_hop.score == pytest.approx(1 / np.sqrt(2))


def test_naive_search_keeps_the_first_m_paths():
    graph, vecs, query = _graph()
    config = MinerConfig(num_candidates=2)
    seeds = [normalize_entity("A")]
    naive, _ = naive_search_paths(graph, seeds, vecs, query, config)
    assert len(naive) == 2 and all(len(p.triple_indices) == 1 for p in naive)


def test_no_filter_keeps_every_passage_and_still_adds_chains():
    triples = {
        "p1": [["Van Hook Township", "located in", "Mountrail County"]],
        "p2": [["Paris", "capital of", "France"]],
        "p3": [["Berlin", "capital of", "Germany"]],
        "p4": [["Mountrail County", "capital", "Stanley"]],
    }
    passages = [Passage(k, f"text {k}", metadata={"triples": v}) for k, v in triples.items()]
    miner = EvidenceChainMiner(
        MinerConfig(decoding="none", tau_edge=0.1, tau_boost=0.1, top_n=1, chain_format="linking"),
        embedder=bag_of_words_embedder(),
    )
    query = "What is the capital of the county where Van Hook Township is located?"
    filtered = miner.mine(query, passages)
    kept_all = miner.mine(query, passages, filter_passages=False)
    assert len(filtered.passages) < 4
    assert [p.id for p in kept_all.passages] == ["p1", "p2", "p3", "p4"]
    assert all(k.reason is KeepReason.PASSTHROUGH for k in kept_all.kept)
    assert kept_all.chain_text == filtered.chain_text != ""


def test_no_filter_ablation_reuses_the_beam_chains(tiny_lm):
    from neocorrag_core.eval import BuildContext, MethodInput, build_methods

    passages = [
        Passage("p1", "t1", metadata={"triples": [["Van Hook Township", "in", "Mountrail"]]}),
        Passage("p2", "t2", metadata={"triples": [["Paris", "capital of", "France"]]}),
        Passage("p3", "t3", metadata={"triples": [["Mountrail", "capital", "Stanley"]]}),
    ]
    miner = EvidenceChainMiner(
        # The paper's full block (the default has none), so the reused chains show.
        MinerConfig(tau_edge=0.1, tau_boost=0.1, beam_width=2, top_n=1, chain_format="full"),
        embedder=bag_of_words_embedder(),
        lm=tiny_lm,
    )
    calls = []
    original = miner.mine
    miner.mine = lambda *a, **kw: calls.append(kw) or original(*a, **kw)
    beam, no_filter = build_methods(["neocorrag-beam", "ablation-no-filter"], BuildContext(miner))
    question = "What is the capital of Mountrail where Van Hook Township is?"
    call = MethodInput(question, passages, lambda query, k: passages[:k], len(passages))
    first, second = beam.refine(call), no_filter.refine(call)
    assert len(calls) == 1
    assert first.chain_text.startswith("Evidence chains:\n1. ")
    assert second.chain_text == first.chain_text
    assert [p.id for p in second.passages] == ["p1", "p2", "p3"]
    assert second.prompt_tokens == first.prompt_tokens
    assert second.info["reused_chains"] and not first.info["reused_chains"]
    assert second.timings == first.timings  # the mining cost, not the ~0 s of the reuse


@pytest.mark.parametrize(
    ("chain_format", "has_block"), [("none", False), ("full", True), ("compact", True)]
)
def test_free_decoding_writes_its_chains_in_the_runs_chain_format(tiny_lm, chain_format, has_block):
    from neocorrag_core.eval.refiners import FreeDecodingAblation, free_decoding_version

    passages = [
        Passage("p1", "t1", metadata={"triples": [["Van Hook Township", "in", "Mountrail"]]}),
        Passage("p2", "t2", metadata={"triples": [["Mountrail", "capital", "Stanley"]]}),
    ]
    miner = EvidenceChainMiner(
        MinerConfig(tau_edge=0.1, tau_boost=0.1, beam_width=2, chain_format=chain_format),
        embedder=bag_of_words_embedder(),
        lm=tiny_lm,
    )
    question = "What is the capital of Mountrail where Van Hook Township is?"
    call = MethodInput(question, passages, lambda query, k: passages[:k], len(passages))
    out = FreeDecodingAblation(miner, max_new_tokens=8).refine(call)
    assert out.info["generated_chains"]  # the random LM generated something either way
    assert out.chain_text.startswith("Evidence chains:") is has_block
    assert (out.chain_text == "") is not has_block
    assert free_decoding_version("ablation-free-decoding").startswith("free-decoding-2 miner-")


def test_chain_block_variants_reuse_one_mining_and_differ_only_in_the_block():
    from neocorrag_core.eval import BuildContext, MethodInput, build_methods

    passages = [
        Passage("p1", "t1", metadata={"triples": [["Van Hook Township", "in", "Mountrail"]]}),
        Passage("p2", "t2", metadata={"triples": [["Paris", "capital of", "France"]]}),
        Passage("p3", "t3", metadata={"triples": [["Mountrail", "capital", "Stanley"]]}),
    ]
    miner = EvidenceChainMiner(
        MinerConfig(tau_edge=0.1, tau_boost=0.1, top_n=1), embedder=bag_of_words_embedder()
    )
    calls = []
    original = miner.mine
    miner.mine = lambda *a, **kw: calls.append(kw) or original(*a, **kw)
    names = [
        "neocorrag-recall-two-chains",
        "neocorrag-recall-full-chains",
        "neocorrag-recall-no-chains",
        "neocorrag-recall-linking-chains",
        "neocorrag-recall-one-chain",
        "neocorrag-recall",
    ]
    methods = build_methods(names, BuildContext(miner))
    two, full, none, linking, one, default = methods
    question = "What is the capital of Mountrail where Van Hook Township is?"
    call = MethodInput(question, passages, lambda query, k: passages[:k], len(passages))
    outputs = [m.refine(call) for m in (two, full, none, linking, one, default)]
    assert len(calls) == 1 and "chain_format" not in calls[0]
    assert "max_chain_lines" not in calls[0]
    assert len({tuple(p.id for p in o.passages) for o in outputs}) == 1
    assert outputs[1].chain_text.startswith("Evidence chains:\n1. ")
    # The format methods show every line (the fixture's full block has three).
    assert len(outputs[1].chain_text.splitlines()) == 4
    assert len(outputs[0].chain_text) <= len(outputs[1].chain_text)
    assert outputs[2].chain_text == "" == outputs[5].chain_text  # no block by default
    assert outputs[1].info["reused_chains"] and outputs[2].info["reused_chains"]
    # Linking keeps the one chain, which crosses p1 -> p3 (both kept).
    assert outputs[3].info["reused_chains"]
    assert outputs[3].chain_text == outputs[0].chain_text
    assert "Van Hook Township - in -> Mountrail - capital -> Stanley" in outputs[3].chain_text
    # The one-line block: the first line of the linking block, from the same mining.
    assert outputs[4].info["reused_chains"]
    assert outputs[4].chain_text == "\n".join(outputs[3].chain_text.splitlines()[:2])
    # The cap is applied to the shared result whatever the format: the full block, cut.
    capped = NeocorragMethod(
        "capped", miner, one.memo, keep="recall", chain_format="full", max_chain_lines=1
    ).refine(call)
    assert len(calls) == 1 and capped.info["reused_chains"]
    assert capped.chain_text.splitlines() == outputs[1].chain_text.splitlines()[:2]


def test_the_whole_passage_method_hands_on_what_the_default_cuts():
    from neocorrag_core.eval import BuildContext, MethodInput, build_methods

    long_p3 = "Mountrail capital is Stanley. The region grows wheat."
    passages = [
        Passage(
            "p1",
            "Van Hook Township is in Mountrail. Its post office closed in 1957.",
            metadata={"triples": [["Van Hook Township", "in", "Mountrail"]]},
        ),
        Passage("p2", "t2", metadata={"triples": [["Paris", "capital of", "France"]]}),
        Passage("p3", long_p3, metadata={"triples": [["Mountrail", "capital", "Stanley"]]}),
    ]
    miner = EvidenceChainMiner(
        MinerConfig(tau_edge=0.1, tau_boost=0.1, top_n=1), embedder=bag_of_words_embedder()
    )
    default, whole = build_methods(
        ["neocorrag-recall", "neocorrag-recall-whole"], BuildContext(miner)
    )
    question = "What is the capital of Mountrail where Van Hook Township is?"
    call = MethodInput(question, passages, lambda query, k: passages[:k], len(passages))
    cut, kept_whole = default.refine(call), whole.refine(call)
    assert [p.id for p in cut.passages] == [p.id for p in kept_whole.passages]
    texts = {p.id: p.text for p in cut.passages}
    assert "p3" in texts and texts["p3"] == "Mountrail capital is Stanley."
    assert {p.id: p.text for p in kept_whole.passages}["p3"] == long_p3
    # The default ("all") cuts the top-1 passage too; the whole-passage method does not.
    assert texts["p1"] == "Van Hook Township is in Mountrail."
    assert {p.id: p.text for p in kept_whole.passages}["p1"].endswith("closed in 1957.")
