"""The miner end to end on tiny models: contracts that hold for every decoding mode."""

from __future__ import annotations

import io
from dataclasses import replace

import pytest
from conftest import bag_of_words_embedder

from neocorrag_core import EvidenceChainMiner, InputError, KeepReason, MinerConfig, Passage
from neocorrag_core.chains.config import miner_settings
from neocorrag_core.chains.path_search import search_paths
from neocorrag_core.cli.app import print_result
from neocorrag_core.errors import ConfigError
from neocorrag_core.rendering import chain_text, result_context
from neocorrag_core.types import LossStage

TRIPLES = {
    "p1": [["Van Hook Township", "located in", "Mountrail County"]],
    "p2": [["Lake Sakakawea", "borders", "Mountrail County"]],
    "p3": [["Paris", "capital of", "France"]],
    "p4": [["Mountrail County", "capital", "Stanley"], ["Stanley", "population", "2321"]],
    "p5": [["Berlin", "capital of", "Germany"]],
}


def make_passages() -> list[Passage]:
    return [
        Passage(pid, text=f"passage {pid}", title=pid.upper(), metadata={"triples": TRIPLES[pid]})
        for pid in ("p1", "p2", "p3", "p4", "p5")
    ]


QUERY = "What is the capital of the county where Van Hook Township is located?"


def passages_without_the_hub() -> list[Passage]:
    """``make_passages`` with p2 bordering McLean County: Mountrail County is then in two
    passages (p1, p4), not a hub, so p4 is a bridge from p1."""
    return [
        replace(p, metadata={"triples": [["Lake Sakakawea", "borders", "McLean County"]]})
        if p.id == "p2"
        else p
        for p in make_passages()
    ]


def miner_for(decoding: str, tiny_lm=None, **config) -> EvidenceChainMiner:
    """A miner on the bag-of-words embedder; the paper's keep rule (Eq. 8) unless told."""
    config.setdefault("keep", "paper")
    changes = {"decoding": decoding, "tau_edge": 0.1, "tau_boost": 0.1, **config}
    cfg, tuning = miner_settings(changes=changes)
    return EvidenceChainMiner(cfg, tuning=tuning, embedder=bag_of_words_embedder(), lm=tiny_lm)


@pytest.mark.parametrize("decoding", ["none", "beam", "rank"])
def test_every_chain_is_a_candidate_and_every_kept_passage_has_a_reason(decoding, tiny_lm):
    miner = miner_for(decoding, tiny_lm)
    passages = make_passages()
    result = miner.mine(QUERY, passages)
    assert result.fallback is None
    assert result.chains, "expected at least one chain"
    assert 1 <= len(result.chains) <= miner.config.beam_width
    # Recompute the candidate set independently and check membership byte for byte.
    candidates = _candidate_texts(miner, passages)
    assert result.num_candidates == len(candidates)
    assert all(chain.text in candidates for chain in result.chains)
    assert len({c.text for c in result.chains}) == len(result.chains)
    assert result.passages, "context must never be empty"
    assert all(k.explain() for k in result.kept)
    kept_ids = [p.id for p in result.passages]
    assert kept_ids == [p.id for p in passages if p.id in kept_ids]  # original order
    assert kept_ids[:2] == ["p1", "p2"]
    for kept in result.kept[2:]:
        assert kept.reason is KeepReason.CHAIN
        assert any(kept.passage.id in result.chains[i].source_ids for i in kept.chain_indices)
    assert {"triples", "graph", "embed", "search", "decode", "refine", "total"} <= set(
        result.timings
    )
    if decoding == "none":
        assert result.prompt_tokens == result.generated_tokens == 0
        assert all(c.lm_logprob is None for c in result.chains)
    else:
        assert result.prompt_tokens > 0
        assert all(c.lm_logprob is not None for c in result.chains)


def _candidate_texts(miner: EvidenceChainMiner, passages: list[Passage]) -> set[str]:
    from neocorrag_core.chains.graph import EvidenceGraph
    from neocorrag_core.chains.path_search import select_seeds, to_chain

    triples = miner.triple_source.triples_for(passages)
    graph = EvidenceGraph.from_triples(t for ts in triples for t in ts)
    entities = miner._extractor(miner.config.query_entities)(QUERY, graph.nodes)
    emb = miner.embedder
    seeds = select_seeds(
        graph.nodes,
        emb.embed([graph.surface[n] for n in graph.nodes]),
        emb.embed(entities),
        emb.embed([QUERY])[0],
        miner.config,
        miner.tuning,
    )
    paths, _ = search_paths(
        graph,
        seeds.nodes,
        emb.embed([t.text for t in graph.triples]),
        emb.embed([QUERY])[0],
        miner.config,
        miner.tuning,
    )
    return {to_chain(graph, p).text for p in paths}


def test_chain_passage_below_top_n_is_kept_and_noise_dropped():
    result = miner_for("none").mine(QUERY, make_passages())
    kept = {k.passage.id: k.reason for k in result.kept}
    assert kept.get("p4") is KeepReason.CHAIN  # Mountrail County - capital -> Stanley
    assert "p3" not in kept and "p5" not in kept
    assert {d.passage.id for d in result.dropped} == {"p3", "p5"}


def test_default_keep_mode_keeps_the_linked_hop_and_says_where_the_rest_was_lost():
    passages = passages_without_the_hub()
    result = miner_for("none", keep="recall").mine(QUERY, passages, diagnose=True)
    kept = {k.passage.id: k.reason for k in result.kept}
    # p4 ("Mountrail County - capital -> Stanley") shares Mountrail County with p1.
    assert kept == {"p1": KeepReason.TOP_N, "p2": KeepReason.TOP_N, "p4": KeepReason.BRIDGE}
    stages = {d.passage.id: d.stage for d in result.dropped}
    assert stages == {"p3": LossStage.NOT_CONNECTED, "p5": LossStage.NOT_CONNECTED}


def test_the_loss_diagnosis_runs_only_when_asked():
    # A query does not need it (issue 52): without diagnose=True no stage is computed.
    result = miner_for("none", keep="recall").mine(QUERY, passages_without_the_hub())
    assert {d.passage.id for d in result.dropped} == {"p3", "p5"}
    assert all(d.stage is None for d in result.dropped)


def test_an_entity_most_passages_share_is_no_bridge_and_the_loss_is_charged_to_the_rule():
    # Mountrail County is in p1, p2 and p4: a hub (more than half of five passages), so
    # p4 is not linked; a chosen chain cites it, but keep="recall" keeps no chain sources.
    result = miner_for("none", keep="recall").mine(QUERY, make_passages(), diagnose=True)
    assert [k.passage.id for k in result.kept] == ["p1", "p2"]
    assert {d.passage.id: d.stage for d in result.dropped}["p4"] is LossStage.KEEP_RULE
    with_chains = miner_for("none", keep="recall", chain_support=True).mine(QUERY, make_passages())
    assert {k.passage.id: k.reason for k in with_chains.kept}["p4"] is KeepReason.CHAIN


def test_no_triples_passes_input_through():
    passages = [Passage("a", "plain text"), Passage("b", "more text")]
    result = miner_for("none").mine("Where is Stanley?", passages)
    assert result.fallback == "no_triples"
    assert result.chains == []
    assert [k.reason for k in result.kept] == [KeepReason.PASSTHROUGH] * 2
    assert result.passages == passages


def test_without_a_candidate_chain_the_paper_rule_passes_input_through():
    miner = EvidenceChainMiner(
        MinerConfig(decoding="none", keep="paper", tau_edge=0.99, tau_boost=0.99),
        embedder=bag_of_words_embedder(),
    )
    result = miner.mine(QUERY, make_passages())
    assert result.fallback == "no_candidate_chains"
    assert len(result.passages) == 5
    assert [k.reason for k in result.kept] == [KeepReason.PASSTHROUGH] * 5
    assert result_context(result)  # never empty


def test_without_a_candidate_chain_the_link_rules_still_apply():
    # Every triple is pruned (tau 0.99), so there is no chain; keep="recall" needs none:
    # one more than its top-2 by rank (no chain: the retriever is trusted one step
    # further), then p4 by its link to p1 (Mountrail County; p2 no longer shares it).
    passages = passages_without_the_hub()
    miner = EvidenceChainMiner(
        MinerConfig(decoding="none", keep="recall", tau_edge=0.99, tau_boost=0.99),
        embedder=bag_of_words_embedder(),
    )
    result = miner.mine(QUERY, passages, diagnose=True)
    assert result.fallback == "no_candidate_chains"
    assert result.chains == [] and chain_text(result) == ""
    kept = {k.passage.id: k.reason for k in result.kept}
    top = KeepReason.TOP_N
    assert kept == {"p1": top, "p2": top, "p3": top, "p4": KeepReason.BRIDGE}
    # p5 shares nothing with the question's seeds: charged to the graph, not the rule.
    assert {d.passage.id: d.stage for d in result.dropped} == {"p5": LossStage.NOT_CONNECTED}
    assert "refine" in result.timings
    # The demo's explanation says what happened, not that everything passed through.
    shown = io.StringIO()
    item = {"question": QUERY, "paragraphs": [{"id": p.id} for p in passages]}
    print_result(1, 1, item, passages, result, "none", out=shown)
    assert result.top_n == 3  # the keep mode's 2, and one more without a chain
    assert (
        "No evidence chain (the search found no chain of facts that fits the question): "
        "kept the top 3 by rank and the linked passages"
    ) in shown.getvalue()
    assert "retrieval rank 3: the top 3 by rank are always kept" in shown.getvalue()
    assert ": below the top 3 by rank, and nothing links it to the question" in shown.getvalue()
    assert "pass through unchanged" not in shown.getvalue()


@pytest.mark.parametrize("switch", [{"filter_passages": False}, {"passage_focus": "linked"}])
def test_the_no_chain_path_honours_the_ablation_and_passage_focus(switch):
    changes = {"decoding": "none", "keep": "recall", "tau_edge": 0.99, "tau_boost": 0.99}
    config, tuning = miner_settings(changes={**changes, **switch})
    miner = EvidenceChainMiner(config, tuning=tuning, embedder=bag_of_words_embedder())
    result = miner.mine(QUERY, passages_without_the_hub())
    assert result.fallback == "no_candidate_chains"
    if "filter_passages" in switch:  # Table 2 ablation: nothing dropped, chain or not
        assert [k.reason for k in result.kept] == [KeepReason.PASSTHROUGH] * 5
        assert result.dropped == []
    else:  # the same passages as without focus; one-sentence texts have nothing to cut
        assert [k.passage.id for k in result.kept] == ["p1", "p2", "p3", "p4"]
        assert all(k.full_text is None for k in result.kept)


def test_a_query_without_seed_nodes_keeps_the_top_n_and_its_links():
    # Nothing in this question names a node: no seeds, no chain; recall keeps top-3 (its
    # top-2 and one more), as no passage is about a query entity or linked to an anchor.
    miner = EvidenceChainMiner(
        MinerConfig(decoding="none", keep="recall", tau_node=0.99),
        embedder=bag_of_words_embedder(),
    )
    passages = make_passages()
    result = miner.mine("quantum chromodynamics explains gluons", passages)
    assert result.fallback in {"no_seed_nodes", "no_candidate_chains"}
    assert [p.id for p in result.passages] == ["p1", "p2", "p3"]


def test_empty_passages_give_empty_result_without_loading_models():
    miner = EvidenceChainMiner(MinerConfig(), embedder=object(), lm=object())
    result = miner.mine("anything?", [])
    assert result.fallback == "no_passages"
    assert result.passages == []


def test_per_call_overrides_and_bad_inputs():
    miner = miner_for("none")
    assert miner.mine(QUERY, make_passages(), top_n=5).dropped == []
    with pytest.raises(TypeError, match="unknown MinerConfig field"):
        miner.mine(QUERY, make_passages(), bogus=1)
    # Research settings are the miner's, never per call.
    with pytest.raises(ConfigError, match=r"research setting.*tuning=MinerTuning"):
        miner.mine(QUERY, make_passages(), filter_passages=False)
    with pytest.raises(ValueError, match="non-empty"):
        miner.mine("  ", make_passages())
    with pytest.raises(InputError, match="Passage"):
        miner.mine(QUERY, ["raw string"])
    with pytest.raises(InputError, match="sequence"):
        miner.mine(QUERY, "raw string")
    with pytest.raises(ValueError, match="duplicate passage id"):
        miner.mine(QUERY, [Passage("x", "a"), Passage("x", "b")])


def test_decoding_none_never_loads_the_lm():
    miner = EvidenceChainMiner(
        MinerConfig(decoding="none", tau_edge=0.1, tau_boost=0.1),
        embedder=bag_of_words_embedder(),
        lm="/nonexistent/model/path",
    )
    assert miner.mine(QUERY, make_passages()).chains
    assert not miner.models.lm_loaded


def test_triple_texts_are_embedded_once_across_calls():
    calls: list[list[str]] = []
    encode = bag_of_words_embedder()

    def counting(texts):
        calls.append(list(texts))
        return encode(texts)

    miner = EvidenceChainMiner(
        MinerConfig(decoding="none", tau_edge=0.1, tau_boost=0.1), embedder=counting
    )
    miner.mine(QUERY, make_passages())
    miner.mine(QUERY, make_passages())
    sent = [t for batch in calls for t in batch]
    assert len(sent) == len(set(sent))


def test_a_per_call_query_entities_override_is_used(monkeypatch):
    # The extractor used to be built once, in the constructor's mode: the override was
    # validated and then ignored.
    from neocorrag_core.chains.query_entities import QueryEntityExtractor

    used: list[str] = []
    original = QueryEntityExtractor.__call__

    def record(self, query, nodes):
        used.append(self.mode)
        return original(self, query, nodes) if self.mode == "ngram" else ["Van Hook Township"]

    monkeypatch.setattr(QueryEntityExtractor, "__call__", record)
    miner = miner_for("none", query_entities="ngram")
    miner.mine(QUERY, make_passages())
    miner.mine(QUERY, make_passages(), query_entities="spacy")
    miner.mine(QUERY, make_passages())
    assert used == ["ngram", "spacy", "ngram"]


def test_a_malformed_triple_object_in_metadata_is_skipped_not_a_crash():
    from neocorrag_core import Triple

    passages = make_passages()
    passages[0] = replace(
        passages[0],
        metadata={"triples": [Triple("Van Hook Township", "located in", None), *TRIPLES["p1"]]},  # type: ignore[arg-type]
    )
    result = miner_for("none").mine(QUERY, passages)
    assert result.context  # mined as if the bad item were not there
    assert not any(t.object is None for chain in result.chains for t in chain.triples)
