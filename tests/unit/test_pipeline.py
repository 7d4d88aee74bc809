"""The three systems as one pipeline: EviReform's provenance reaches the refiner, one engine
is shared, and sync and async give the same output (core, LangChain, LlamaIndex)."""

from __future__ import annotations

import asyncio
import copy
import re

import pytest
from adapter_fixtures import BRIDGE_CORPUS, BRIDGE_NO_LM, BRIDGE_QUESTION
from conftest import HashedBagOfWords
from langchain_core.documents import Document
from langchain_core.runnables import RunnableLambda
from llama_index.core.retrievers import BaseRetriever as LIBaseRetriever
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode

from neocorrag_core import EvidenceChainMiner, KeepReason, MinerConfig, Passage
from neocorrag_core.chains.keep import refine_passages
from neocorrag_core.chains.links import PassageLinks
from neocorrag_core.evireform import EvidenceReformulator, ReformulationConfig
from neocorrag_core.evireform.provenance import (
    PROVENANCE_KEY,
    names_bridge,
    provenance_in_metadata,
    provenance_of,
)
from neocorrag_core.models import resolve_embedder
from neocorrag_core.pipeline import EvidencePipeline
from neocorrag_core.triples import DefaultTripleSource
from neocorrag_core.types import Provenance
from neocorrag_integrations import langchain as lc
from neocorrag_integrations import llama_index as li
from neocorrag_integrations.metadata_keys import KEPT_REASON, PROVENANCE

LOOSE = {"tau_edge": 0.1, "tau_boost": 0.1, "query_entities": "ngram"}


def _words(text: str) -> set[str]:
    return set(re.findall(r"\w+", text.casefold()))


def _passages() -> list[Passage]:
    return [
        Passage(pid, text, title, metadata={"triples": triples})
        for pid, title, text, triples in BRIDGE_CORPUS
    ]


def search(query: str, k: int) -> list[Passage]:
    """Word overlap over the bridge corpus; the second hop (d2) only for a query naming
    its bridge entity."""
    words = _words(query)
    pool = [p for p in _passages() if p.id != "d2" or "jane roe" in query.casefold()]
    return sorted(pool, key=lambda p: -len(words & _words(p.text)))[:k]


async def asearch(query: str, k: int) -> list[Passage]:
    await asyncio.sleep(0)
    return search(query, k)


# ---- the keep rule and provenance ---------------------------------------------------------


def _unlinked(n: int) -> list[Passage]:
    words = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot"]
    return [Passage(f"p{i}", f"{words[i]} text", f"T{i}") for i in range(n)]


def test_a_found_hop_is_kept_where_links_keep_passages_and_not_in_paper_mode():
    passages = _unlinked(5)
    links = [PassageLinks(f"t{i}", query_entity=False, bridge=False) for i in range(5)]
    found = {"p4": Provenance(bridge="Jane Roe"), "p3": Provenance(evidence=True)}
    kept, dropped = refine_passages(passages, [], 2, keep="recall", links=links, provenance=found)
    reasons = {k.passage.id: k.reason for k in kept}
    assert reasons == {
        "p0": KeepReason.TOP_N,
        "p1": KeepReason.TOP_N,
        "p3": KeepReason.EVIDENCE,
        "p4": KeepReason.FOUND_HOP,
    }
    assert [d.passage.id for d in dropped] == ["p2"]
    assert all(k.explain() for k in kept)
    kept, _ = refine_passages(passages, [], 2, keep="paper", provenance=found)
    assert [k.passage.id for k in kept] == ["p0", "p1"]
    # Without provenance the same passages are dropped: it only ever adds.
    kept, _ = refine_passages(passages, [], 2, keep="recall", links=links)
    assert [k.passage.id for k in kept] == ["p0", "p1"]


def test_provenance_names_the_hop_a_residual_query_found():
    engine = EvidenceReformulator(
        ReformulationConfig(**BRIDGE_NO_LM), embedder=resolve_embedder(HashedBagOfWords())
    )
    result = engine.retrieve(BRIDGE_QUESTION, search, k=3)
    found = provenance_of(result)
    assert "d2" in {r.passage.id for r in result.passages}
    assert found["d2"].bridge == "Jane Roe"
    assert set(found) <= {r.passage.id for r in result.passages}


def test_a_first_result_counts_as_found_only_when_it_is_the_bridge_entitys_page():
    assert names_bridge(Passage("a", "Fort Davis is a town.", "Fort Davis, Texas"), "Texas")
    assert names_bridge(Passage("a", "x", "Jane Roe (director)"), "jane roe")
    assert not names_bridge(Passage("a", "Jane Roe was born in Oslo.", "Oslo"), "Jane Roe")
    assert not names_bridge(Passage("a", "x", "Roeland"), "Roe")  # not inside a word
    # Without a title, the first sentence names the page's subject.
    assert names_bridge(Passage("a", "Jane Roe is a director. She lives in Oslo."), "Jane Roe")
    assert not names_bridge(Passage("a", "Oslo is a city. Jane Roe lives there."), "Jane Roe")
    assert not names_bridge(Passage("a", "x", "Jane Roe"), "  ")

    def retitled(query: str, k: int) -> list[Passage]:
        return [
            Passage(p.id, p.text, "Directors of Norway", metadata=p.metadata) if p.id == "d2" else p
            for p in search(query, k)
        ]

    engine = EvidenceReformulator(
        ReformulationConfig(**BRIDGE_NO_LM), embedder=resolve_embedder(HashedBagOfWords())
    )
    result = engine.retrieve(BRIDGE_QUESTION, retitled, k=3)
    assert "d2" in {r.passage.id for r in result.passages}
    assert provenance_of(result).get("d2", Provenance()).bridge == ""


def test_provenance_in_metadata_reads_what_is_well_formed_and_ignores_the_rest():
    passages = [
        Passage("a", "t", metadata={PROVENANCE_KEY: {"bridge": "X", "evidence": False}}),
        Passage("b", "t", metadata={PROVENANCE_KEY: {"bridge": "", "evidence": True}}),
        Passage("c", "t", metadata={PROVENANCE_KEY: "X"}),
        Passage("d", "t", metadata={PROVENANCE_KEY: {"bridge": 3, "evidence": "yes"}}),
        Passage("e", "t", metadata={PROVENANCE_KEY: {"bridge": "", "evidence": False}}),
        Passage("f", "t"),
    ]
    assert provenance_in_metadata(passages) == {
        "a": Provenance(bridge="X"),
        "b": Provenance(evidence=True),
    }


# ---- the core pipeline ----------------------------------------------------------------------


def _pipeline() -> EvidencePipeline:
    miner = EvidenceChainMiner(
        MinerConfig(**LOOSE),
        embedder=resolve_embedder(HashedBagOfWords()),
        triple_source=DefaultTripleSource(store=":memory:"),
    )
    reformulator = EvidenceReformulator(
        ReformulationConfig(**BRIDGE_NO_LM),
        models=miner.models,
        triple_source=miner.triple_source,
        vectors=miner.vectors,
    )
    return EvidencePipeline(miner, reformulator)


def _view(passages: list[Passage]) -> list[tuple[str, str]]:
    return [(p.id, p.text) for p in passages]


def test_the_core_pipeline_finds_the_hop_refines_and_is_the_same_async():
    pipeline = _pipeline()
    result = pipeline.retrieve(BRIDGE_QUESTION, search, k=3)
    assert "d2" in {p.id for p in result.retrieved}
    assert result.mining is not None and result.reformulation is not None
    assert "d2" in {k.passage.id for k in result.mining.kept}
    assert set(result.timings) == {"search", "reformulate", "refine", "total"}
    again = asyncio.run(pipeline.aretrieve(BRIDGE_QUESTION, asearch, k=3))
    assert _view(again.passages) == _view(result.passages)
    assert again.provenance == result.provenance
    # As a search of its own (what BeliefRAG's controller decides over).
    assert _view(pipeline.search(search)(BRIDGE_QUESTION, 3)) == _view(result.passages)


def test_the_default_pipeline_builds_one_engine():
    pipeline = EvidencePipeline()
    assert pipeline.reformulator.models is pipeline.miner.models
    assert pipeline.reformulator.triple_source is pipeline.miner.triple_source


# ---- LangChain ------------------------------------------------------------------------------


def _lc_documents() -> list[Document]:
    return [
        Document(id=pid, page_content=text, metadata={"title": title, "triples": triples})
        for pid, title, text, triples in BRIDGE_CORPUS
    ]


def _lc_search(query: str) -> list[Document]:
    words = _words(query)
    docs = [d for d in _lc_documents() if d.id != "d2" or "jane roe" in query.casefold()]
    return sorted(docs, key=lambda d: -len(words & _words(d.page_content)))[:3]


def _lc_pipeline() -> lc.EvidencePipelineRetriever:
    return lc.EvidencePipelineRetriever.from_retriever(
        RunnableLambda(_lc_search),
        k=3,
        config=BRIDGE_NO_LM,
        miner_config=LOOSE,
        embedder=HashedBagOfWords(),
        triple_source=DefaultTripleSource(store=":memory:"),
    )


def test_the_langchain_pipeline_shares_one_engine():
    pipeline = _lc_pipeline()
    miner, reformulator = pipeline.compressor.miner, pipeline.reformulation.reformulator
    assert reformulator.models is miner.models
    assert reformulator.triple_source is miner.triple_source
    out = pipeline.invoke(BRIDGE_QUESTION)
    assert "d2" in [d.id for d in out]
    assert miner.models.embedder_loaded
    again = asyncio.run(pipeline.ainvoke(BRIDGE_QUESTION))
    assert _lc_view(again) == _lc_view(out)


def _lc_view(docs: list[Document]) -> list[tuple[str | None, str, str]]:
    """What a reader gets and why (the timings in the metadata differ call to call)."""
    return [(d.id, d.page_content, d.metadata[KEPT_REASON]) for d in docs]


def test_the_compressor_keeps_what_evireform_found_on_purpose():
    # A low-ranked document nothing links to: dropped, unless the retriever before the
    # compressor found it for a bridge entity.
    words = ["Alpha", "Bravo", "Charlie", "Delta", "Echo"]
    docs = [
        Document(
            id=f"p{i}",
            page_content=f"{w} was born in {w}ville.",
            metadata={"triples": [[w, "born in", f"{w}ville"]]},
        )
        for i, w in enumerate(words)
    ]
    docs[4].metadata[PROVENANCE] = {"bridge": "Echo", "evidence": False}
    before = copy.deepcopy(docs)
    compressor = lc.NeocorRAGCompressor(embedder=HashedBagOfWords(), miner_config=LOOSE)
    out = compressor.compress_documents(docs, "Where was alpha born?")
    reasons = {d.id: d.metadata[KEPT_REASON] for d in out}
    assert reasons.get("p4") == "found_hop"
    assert "p2" not in reasons
    assert docs == before


# ---- LlamaIndex -----------------------------------------------------------------------------


class _Nodes(LIBaseRetriever):
    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return [
            NodeWithScore(node=TextNode(id_=d.id, text=d.page_content, metadata=d.metadata))
            for d in _lc_search(query_bundle.query_str)
        ]


def test_the_llama_index_pipeline_shares_one_engine_and_async_matches_sync():
    pipeline = li.EvidencePipelineRetriever.from_retriever(
        _Nodes(),
        k=3,
        config=BRIDGE_NO_LM,
        miner_config=LOOSE,
        embedder=HashedBagOfWords(),
        triple_source=DefaultTripleSource(store=":memory:"),
    )
    miner = pipeline.postprocessor.miner
    assert pipeline.reformulation.reformulator.models is miner.models
    out = pipeline.retrieve(BRIDGE_QUESTION)
    assert "d2" in [n.node.node_id for n in out]
    again = asyncio.run(pipeline.aretrieve(BRIDGE_QUESTION))
    assert [(n.node.node_id, n.node.get_content()) for n in again] == [
        (n.node.node_id, n.node.get_content()) for n in out
    ]


def test_the_llama_index_pipeline_refuses_parts_of_the_wrong_kind():
    from neocorrag_core.errors import ConfigError

    with pytest.raises(ConfigError, match="postprocessor"):
        li.EvidencePipelineRetriever(
            li.EvidenceReformulationRetriever(_Nodes(), embedder=HashedBagOfWords()),
            "not a postprocessor",  # type: ignore[arg-type]
        )


def test_the_ingestion_computes_the_fact_vectors_a_query_would_ask_for():
    from neocorrag_core.evireform.propositions import build_propositions, relation_sentences
    from neocorrag_core.triples.vectors import fact_texts_of

    bare = Passage("bare", "Hedda Nilsen was born in Tromsø. She sang.", "Hedda")
    passages = [*_passages(), bare]
    triples = [p.metadata.get("triples", []) for p in passages]
    texts = set(fact_texts_of(passages, triples))
    # EviReform's sentence facts for any relation word, and the lead of a passage without
    # triples, are among the texts stored at ingestion.
    for words in (["born"], ["directed"], ["capital"], ["sang"]):
        assert {p.text for p in relation_sentences(passages, words)} <= texts
    lead = build_propositions(passages[-1:], [[]])
    assert {p.text for p in lead} <= texts


# ---- a slow retriever (issue 64) ----------------------------------------------------------


def test_a_slow_retrievers_residual_searches_end_at_the_timeout_with_a_note():
    """The LangChain pipeline over a retriever that hangs on every residual query: the call
    ends at ``search_timeout`` with what the first search found, and says so."""
    import threading

    from neocorrag_integrations.metadata_keys import EVIREFORM_NOTES

    release = threading.Event()

    def hanging(query: str) -> list[Document]:
        if query != BRIDGE_QUESTION:
            release.wait(30)  # a thread cannot be stopped: the call stops waiting for it
        return _lc_search(query)

    async def ahanging(query: str) -> list[Document]:
        if query != BRIDGE_QUESTION:
            await asyncio.sleep(30)  # cancelled at the timeout
        return _lc_search(query)

    pipeline = lc.EvidencePipelineRetriever.from_retriever(
        RunnableLambda(hanging, afunc=ahanging),
        k=3,
        config={**BRIDGE_NO_LM, "search_timeout": 0.3},
        miner_config=LOOSE,
        embedder=HashedBagOfWords(),
        triple_source=DefaultTripleSource(store=":memory:"),
    )
    try:
        out = pipeline.invoke(BRIDGE_QUESTION)
        aout = asyncio.run(pipeline.ainvoke(BRIDGE_QUESTION))
    finally:
        release.set()
    for docs in (out, aout):
        assert docs and "d2" not in [d.id for d in docs]  # the hop was behind the hang
        notes = docs[0].metadata[EVIREFORM_NOTES]
        assert any("search_timeout" in n for n in notes), notes
