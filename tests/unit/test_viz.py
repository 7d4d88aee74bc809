"""The evidence picture: graph built from an adapter's output, and drawn without error."""

from __future__ import annotations

import matplotlib
from adapter_fixtures import MINER_CONFIG, QUERY
from conftest import HashedBagOfWords
from test_adapters_contract import LangChainHarness, LlamaIndexHarness

from neocorrag_integrations.langchain import NeocorRAGCompressor
from neocorrag_integrations.llama_index import NeocorRAGPostprocessor
from neocorrag_integrations.viz import draw_evidence, evidence_graph

matplotlib.use("Agg")


def refined_langchain(**settings):
    docs = LangChainHarness().docs()
    settings.setdefault("miner_config", MINER_CONFIG)
    compressor = NeocorRAGCompressor(
        embedder=HashedBagOfWords(), decoding="none", keep="paper", **settings
    )
    return compressor.compress_documents(docs, QUERY), docs


def test_graph_links_each_document_to_the_facts_it_supplied():
    refined, retrieved = refined_langchain(top_n=1, beam_width=1)
    graph = evidence_graph(refined, retrieved)
    documents = {n: d for n, d in graph.nodes(data=True) if d["kind"] == "document"}
    assert {n: d["status"] for n, d in documents.items()} == {
        "doc 1": "top_n",
        "doc 4": "chain",
        "doc 2": "dropped",
        "doc 3": "dropped",
        "doc 5": "dropped",
    }
    assert documents["doc 3"]["title"] == "Paris"
    facts = {(u, d["relation"], v): d for u, v, d in graph.edges(data=True) if d["kind"] == "fact"}
    assert set(facts) == {
        ("Van Hook Township", "located in", "Mountrail County"),
        ("Mountrail County", "capital", "Stanley"),
    }
    sources = {(u, v) for u, v, d in graph.edges(data=True) if d["kind"] == "source"}
    assert sources == {("doc 1", "Van Hook Township"), ("doc 4", "Mountrail County")}


def test_graph_is_the_same_when_the_chains_ride_on_a_kept_document():
    """Without a chain document (no block text, include_chains=False) the chain metadata is
    on the first kept document; the picture must not lose the facts or the dropped ones."""
    with_block, retrieved = refined_langchain(
        top_n=1, miner_config={**MINER_CONFIG, "chain_format": "compact"}
    )
    for settings in (
        {"include_chains": False},
        {"miner_config": {**MINER_CONFIG, "chain_format": "none"}},
    ):
        without, _ = refined_langchain(top_n=1, **settings)
        graph, expected = evidence_graph(without, retrieved), evidence_graph(with_block, retrieved)
        assert sorted(graph.nodes(data=True)) == sorted(expected.nodes(data=True))
        assert sorted(graph.edges(data=True), key=repr) == sorted(
            expected.edges(data=True), key=repr
        )
        assert any(d["kind"] == "fact" for _, _, d in graph.edges(data=True))


def test_draws_for_both_frameworks_and_for_an_output_without_chains():
    refined, retrieved = refined_langchain()
    ax = draw_evidence(refined, retrieved, title="why")
    texts = {t.get_text() for t in ax.texts}
    assert "located in" in texts and ax.get_title() == "why"
    nodes = LlamaIndexHarness().docs()
    postprocessor = NeocorRAGPostprocessor(
        embedder=HashedBagOfWords(), decoding="none", miner_config=MINER_CONFIG
    )
    assert draw_evidence(postprocessor.postprocess_nodes(nodes, query_str=QUERY), nodes)
    passthrough = postprocessor.postprocess_nodes(nodes, query_str="Quantum gluons")
    graph = evidence_graph(passthrough)
    assert {d["kind"] for _, d in graph.nodes(data=True)} == {"document"}
    assert draw_evidence(passthrough)


def test_a_source_trimmed_from_the_list_is_drawn_as_dropped():
    refined, retrieved = refined_langchain(top_n=1, beam_width=1)
    # A later stage keeps only the chain document and the first one ("doc 4" is gone).
    chain_doc = [d for d in refined if d.metadata.get("neocorrag_evidence_chains")]
    trimmed = [refined[0], *chain_doc]
    graph = evidence_graph(trimmed, retrieved)
    assert graph.nodes["doc 4"]["status"] == "dropped"
    assert draw_evidence(trimmed, retrieved) is not None


def test_two_relations_between_one_pair_share_one_label():
    from neocorrag_core.records.viz import _pair_labels

    facts = [
        ("A", "B", {"relation": "r1"}),
        ("A", "B", {"relation": "r2"}),
        ("B", "C", {"relation": "r1"}),
    ]
    assert _pair_labels(facts) == {("A", "B"): "r1 / r2", ("B", "C"): "r1"}


def test_an_entity_named_like_a_document_stays_an_entity():
    import copy

    from neocorrag_integrations.metadata_keys import CHAINS, IS_EVIDENCE_CHAINS

    refined, retrieved = refined_langchain(top_n=1, beam_width=1)
    refined = copy.deepcopy(refined)
    chain_doc = next(d for d in refined if d.metadata.get(IS_EVIDENCE_CHAINS))
    for chain in chain_doc.metadata[CHAINS]:
        for triple in chain["triples"]:
            if triple["object"] == "Stanley":
                triple["object"] = "doc 1"  # an entity whose name is a document node's
    graph = evidence_graph(refined, retrieved)
    assert graph.nodes["doc 1"]["kind"] == "document"
    assert graph.nodes["doc 1 (entity)"] == {"kind": "entity", "name": "doc 1"}
    facts = {(u, v) for u, v, d in graph.edges(data=True) if d["kind"] == "fact"}
    assert ("Mountrail County", "doc 1 (entity)") in facts
    ax = draw_evidence(refined, retrieved)
    assert "doc 1" in {t.get_text() for t in ax.texts}


def test_every_keep_reason_is_drawn_as_itself_with_its_own_legend_entry():
    """The statuses come from the one enum: a document kept for any reason (EviReform's
    found_hop and evidence included) is drawn as that reason, never as top_n."""
    import matplotlib.pyplot as plt
    from langchain_core.documents import Document

    from neocorrag_core.types import KeepReason
    from neocorrag_integrations.metadata_keys import KEPT_REASON, RETRIEVAL_RANK
    from neocorrag_integrations.viz import STATUS_COLORS, STATUS_LABELS

    refined = [
        Document(
            page_content=f"text {i}",
            metadata={"title": reason.value, KEPT_REASON: reason.value, RETRIEVAL_RANK: i + 1},
        )
        for i, reason in enumerate(KeepReason)
    ]
    refined.append(
        Document(
            page_content="x", metadata={KEPT_REASON: "from a newer version", RETRIEVAL_RANK: 99}
        )
    )
    graph = evidence_graph(refined)
    statuses = [graph.nodes[f"doc {i + 1}"]["status"] for i in range(len(KeepReason))]
    assert statuses == [reason.value for reason in KeepReason]
    assert graph.nodes["doc 99"]["status"] == "kept"
    for reason in KeepReason:
        assert reason.value in STATUS_COLORS
        assert STATUS_LABELS[reason.value] == f"kept: {reason.label}"
    assert len(set(STATUS_COLORS.values())) == len(STATUS_COLORS)
    ax = draw_evidence(refined)
    shown = {text.get_text() for text in ax.get_legend().get_texts()}
    assert {f"kept: {reason.label}" for reason in KeepReason} <= shown
    plt.close("all")
