"""The lab's miner methods: the no-filter and free-decoding ablations, the chain-block and
focus variants, all on the product's :class:`NeocorragMethod` and its shared memo."""

from __future__ import annotations

import pytest
from conftest import bag_of_words_embedder
from neocorrag_lab.free_decoding import FreeDecodingAblation, free_decoding_version
from neocorrag_lab.miner_variants import method_version

from neocorrag_core import EvidenceChainMiner, MinerConfig, Passage
from neocorrag_core.chains.focus import FOCUS_RULES
from neocorrag_core.eval import BuildContext, MethodInput, build_methods
from neocorrag_core.eval.refiners import NeocorragMethod


def test_no_filter_ablation_reuses_the_beam_chains(tiny_lm):
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
    original = miner.mine_unchecked
    miner.mine_unchecked = lambda *a, **kw: calls.append(a[2]) or original(*a, **kw)
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
    passages = [
        Passage("p1", "t1", metadata={"triples": [["Van Hook Township", "in", "Mountrail"]]}),
        Passage("p2", "t2", metadata={"triples": [["Paris", "capital of", "France"]]}),
        Passage("p3", "t3", metadata={"triples": [["Mountrail", "capital", "Stanley"]]}),
    ]
    miner = EvidenceChainMiner(
        MinerConfig(tau_edge=0.1, tau_boost=0.1, top_n=1), embedder=bag_of_words_embedder()
    )
    calls = []
    original = miner.mine_unchecked
    miner.mine_unchecked = lambda *a, **kw: calls.append(a[2]) or original(*a, **kw)
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
    assert len(calls) == 1 and calls[0].chain_format == miner.config.chain_format
    assert calls[0].max_chain_lines == miner.config.max_chain_lines
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


def test_the_variants_that_cut_passages_carry_the_sentence_rules():
    assert FOCUS_RULES in method_version("neocorrag-recall-focused")
    assert FOCUS_RULES in method_version("neocorrag-recall-focused-no-chains")
    assert FOCUS_RULES not in method_version("neocorrag-recall-whole")
