"""EvidenceReformulationRetriever (LlamaIndex): wraps a retriever and finds the missing hop.

Fast and model-free: bag-of-words embeddings, evidence picked by cosine and bridge
entities as residual queries, triples in ``metadata["triples"]`` (hidden from the LLM).
"""

from __future__ import annotations

import asyncio
import copy
import pickle
import re
from typing import Any

import pytest
from adapter_fixtures import BRIDGE_CORPUS as CORPUS
from adapter_fixtures import BRIDGE_ENTITY as BRIDGE
from adapter_fixtures import BRIDGE_HIDDEN as HIDDEN
from adapter_fixtures import BRIDGE_NO_LM as NO_LM
from adapter_fixtures import BRIDGE_QUERY
from adapter_fixtures import BRIDGE_QUESTION as QUESTION
from conftest import HashedBagOfWords
from llama_index.core.llms.mock import MockLLM
from llama_index.core.query_engine import RetrieverQueryEngine
from llama_index.core.retrievers import BaseRetriever
from llama_index.core.schema import MetadataMode, NodeWithScore, QueryBundle, TextNode

from neocorrag_core.errors import ConfigError, InputError
from neocorrag_core.evireform import ReformulationConfig, RetrievalError
from neocorrag_integrations.llama_index import (
    EvidenceReformulationRetriever,
    NeocorRAGPostprocessor,
    is_evidence_chain_node,
)
from neocorrag_integrations.metadata_keys import REFORMULATION_KEYS

HIDDEN_TEXT = CORPUS[1][2]


def corpus_nodes() -> list[TextNode]:
    # Triples ride in metadata but are hidden from the LLM and the embedder, as a user would.
    return [
        TextNode(
            id_=pid,
            text=text,
            metadata={"title": title, "triples": triples},
            excluded_llm_metadata_keys=["triples"],
            excluded_embed_metadata_keys=["triples"],
        )
        for pid, title, text, triples in CORPUS
    ]


def _words(text: str) -> set[str]:
    return set(re.findall(r"\w+", text.casefold()))


class BridgeRetriever(BaseRetriever):
    """Word-overlap search that returns the second-hop node (d2) only when the query names
    the bridge entity; the same node objects every call, scores falling with rank."""

    def __init__(self, k: int = 3, fail_on: str | None = None) -> None:
        super().__init__()
        self.k = k
        self.fail_on = fail_on
        self.nodes = corpus_nodes()
        self.sent: list[str] = []

    def _search(self, query: str, how: str) -> list[NodeWithScore]:
        self.sent.append(f"{how}:{query}")
        if self.fail_on is not None and self.fail_on in query:
            raise ConnectionError("the index is offline")
        nodes = self.nodes
        if BRIDGE.casefold() not in query.casefold():
            nodes = [n for n in nodes if n.node_id != HIDDEN]
        words = _words(query)
        ranked = sorted(nodes, key=lambda n: -len(words & _words(n.text)))[: self.k]
        return [NodeWithScore(node=n, score=round(0.9 - 0.1 * i, 2)) for i, n in enumerate(ranked)]

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return self._search(query_bundle.query_str, "sync")

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        await asyncio.sleep(0)
        return self._search(query_bundle.query_str, "async")


class EmptyRetriever(BaseRetriever):
    """Finds nothing."""

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return []


class BareNodesRetriever(BaseRetriever):
    """Returns nodes without NodeWithScore around them (a broken retriever)."""

    def _retrieve(self, query_bundle: QueryBundle) -> list[Any]:
        return corpus_nodes()


def wrapper(base: Any = None, **settings: Any) -> EvidenceReformulationRetriever:
    settings.setdefault("config", NO_LM)
    settings.setdefault("k", 3)
    if "reformulator" not in settings and "models" not in settings:
        settings.setdefault("embedder", HashedBagOfWords())
    return EvidenceReformulationRetriever(base or BridgeRetriever(), **settings)


def ids(nodes: list[NodeWithScore]) -> list[str]:
    return [n.node_id for n in nodes]


def comparable(nodes: list[NodeWithScore]) -> list[dict[str, Any]]:
    return [n.model_dump() for n in nodes]


def test_finds_the_second_hop_that_the_wrapped_retriever_alone_misses():
    base = BridgeRetriever()
    assert HIDDEN not in ids(base.retrieve(QUESTION))
    out = wrapper(base).retrieve(QUESTION)
    assert HIDDEN in ids(out) and len(out) == 3 and len(set(ids(out))) == 3
    assert f"sync:{BRIDGE_QUERY}" in base.sent
    hop = next(n for n in out if n.node_id == HIDDEN)
    assert hop.metadata["neocorrag_found_by_query"] == BRIDGE_QUERY
    assert hop.metadata["neocorrag_found_by_kind"] == "template"


def test_scores_are_the_evireform_scores_and_metadata_is_hidden_from_llm_and_embedder():
    base = BridgeRetriever()
    out = wrapper(base).retrieve(QUESTION)
    assert [n.metadata["neocorrag_evireform_rank"] for n in out] == [1, 2, 3]
    assert [n.score for n in out] == [n.metadata["neocorrag_evireform_score"] for n in out]
    assert [n.score for n in out] == sorted((n.score for n in out), reverse=True)
    originals = {n.node_id: n for n in base.nodes}
    for item in out:
        assert set(REFORMULATION_KEYS) <= set(item.metadata)
        assert item.metadata["title"] == originals[item.node_id].metadata["title"]
        for mode in (MetadataMode.LLM, MetadataMode.EMBED):
            assert item.node.get_content(mode) == originals[item.node_id].get_content(mode)
        assert "triples" in item.node.excluded_llm_metadata_keys
    residual = out[0].metadata["neocorrag_residual_queries"]
    assert {"text": BRIDGE_QUERY, "kind": "template", "round": 1} in residual


def test_async_gives_what_sync_gives_and_uses_the_async_retriever():
    base = BridgeRetriever()
    retriever = wrapper(base)
    sync = retriever.retrieve(QUESTION)
    base.sent.clear()
    asynchronous = asyncio.run(retriever.aretrieve(QUESTION))
    assert comparable(asynchronous) == comparable(sync)
    assert base.sent and all(s.startswith("async:") for s in base.sent)


def test_the_original_query_bundle_reaches_the_wrapped_retriever():
    seen: list[QueryBundle] = []

    class Recording(BridgeRetriever):
        def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
            seen.append(query_bundle)
            return super()._retrieve(query_bundle)

    bundle = QueryBundle(QUESTION, custom_embedding_strs=["director of Film X birthplace"])
    wrapper(Recording()).retrieve(bundle)
    assert seen[0].custom_embedding_strs == ["director of Film X birthplace"]
    assert any(b.query_str == BRIDGE_QUERY and not b.custom_embedding_strs for b in seen[1:])


def test_never_mutates_the_wrapped_retrievers_nodes():
    base = BridgeRetriever()
    before = copy.deepcopy(base.nodes)
    out = wrapper(base).retrieve(QUESTION)
    assert [n.model_dump() for n in base.nodes] == [n.model_dump() for n in before]
    assert not any(o.node is n for o in out for n in base.nodes)
    for item in out:
        item.node.metadata["triples"].append(["x", "y", "z"])
        item.node.excluded_llm_metadata_keys.append("title")
    assert [n.model_dump() for n in base.nodes] == [n.model_dump() for n in before]


def test_empty_results_give_an_empty_list():
    retriever = wrapper(EmptyRetriever())
    assert retriever.retrieve(QUESTION) == []
    assert asyncio.run(retriever.aretrieve(QUESTION)) == []


@pytest.mark.parametrize(
    "query", [None, 42, ["a list"], "", "  ", QueryBundle(""), QueryBundle(None)]
)
def test_a_missing_non_string_or_empty_query_is_an_input_error(query):
    # As the engine does; None used to be an AttributeError, "" a silent pass-through.
    base = BridgeRetriever()
    retriever = wrapper(base)
    with pytest.raises(InputError, match="EvidenceReformulationRetriever: the query"):
        retriever.retrieve(query)
    with pytest.raises(InputError, match="EvidenceReformulationRetriever: the query"):
        asyncio.run(retriever.aretrieve(query))
    assert base.sent == []  # the wrapped retriever was never asked


@pytest.mark.parametrize("fail_on", [QUESTION, BRIDGE_QUERY])
def test_a_failing_wrapped_retriever_raises_retrieval_error_naming_the_query(fail_on):
    retriever = wrapper(BridgeRetriever(fail_on=fail_on))
    with pytest.raises(RetrievalError, match=re.escape(repr(fail_on))) as info:
        retriever.retrieve(QUESTION)
    assert "ConnectionError: the index is offline" in str(info.value)
    with pytest.raises(RetrievalError, match=re.escape(repr(fail_on))):
        asyncio.run(retriever.aretrieve(QUESTION))


def test_a_wrapped_retriever_returning_bare_nodes_is_a_retrieval_error():
    # LlamaIndex's own retrieve() already trips over them; the error still names the query.
    with pytest.raises(RetrievalError, match=re.escape(repr(QUESTION))):
        wrapper(BareNodesRetriever()).retrieve(QUESTION)


def test_in_a_retriever_query_engine_the_llm_reads_the_second_hop():
    # MockLLM answers with the prompt it was given: the response is what reached the LLM.
    plain = str(RetrieverQueryEngine.from_args(BridgeRetriever(), llm=MockLLM()).query(QUESTION))
    engine = RetrieverQueryEngine.from_args(wrapper(), llm=MockLLM())
    response = engine.query(QUESTION)
    assert HIDDEN_TEXT not in plain and HIDDEN_TEXT in str(response)
    assert "neocorrag_" not in str(response) and "triples" not in str(response)
    assert HIDDEN in [n.node_id for n in response.source_nodes]
    assert str(asyncio.run(engine.aquery(QUESTION))) == str(response)


def test_with_the_postprocessor_in_a_retriever_query_engine():
    postprocessor = NeocorRAGPostprocessor(
        embedder=HashedBagOfWords(),
        decoding="none",
        top_n=2,
        miner_config={
            "tau_edge": 0.1,
            "tau_boost": 0.1,
            "query_entities": "ngram",
            "chain_format": "linking",  # a chain block (the default has none)
        },
    )
    retriever = wrapper(models=postprocessor)
    assert retriever.models is postprocessor.miner.models
    engine = RetrieverQueryEngine.from_args(
        retriever, llm=MockLLM(), node_postprocessors=[postprocessor]
    )
    response = engine.query(QUESTION)
    prompt = str(response)
    # Both hops reach the chain block (each fact once, so not one line).
    assert "Film X - directed by -> Jane Roe" in prompt and "Jane Roe - born in -> Oslo" in prompt
    assert HIDDEN_TEXT in prompt and "neocorrag_" not in prompt
    assert is_evidence_chain_node(response.source_nodes[0])
    assert HIDDEN in [n.node_id for n in response.source_nodes[1:]]
    assert str(asyncio.run(engine.aquery(QUESTION))) == prompt


def test_settings_are_checked_and_exposed():
    retriever = wrapper(config=ReformulationConfig(**NO_LM), k=2)
    assert retriever.k == 2 and retriever.settings.effective_config() == ReformulationConfig(
        **NO_LM
    )
    assert len(retriever.retrieve(QUESTION)) == 2
    with pytest.raises(ConfigError, match="unknown ReformulationConfig field"):
        wrapper(config={"residual_queries_max": 2})
    with pytest.raises(ConfigError, match="residual_queries must be one of"):
        wrapper(config={"residual_queries": "guess"})
    with pytest.raises(ConfigError, match="LlamaIndex retriever"):
        EvidenceReformulationRetriever("not a retriever")
    shared = wrapper(reformulator=retriever.reformulator, config={})
    assert shared.reformulator is retriever.reformulator


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"k": 2.5}, r"EvidenceReformulationRetriever.k must be an integer, got float 2\.5"),
        ({"k": float("nan")}, "EvidenceReformulationRetriever.k must be an integer"),
        ({"k": "3"}, "EvidenceReformulationRetriever.k must be an integer, got str '3'"),
        ({"k": True}, "EvidenceReformulationRetriever.k must be an integer, got bool True"),
        ({"k": 0}, "EvidenceReformulationRetriever.k must be >= 1"),
        ({"config": 3}, "config must be a ReformulationConfig or a dict of its fields, got int"),
        ({"config": {"residual_k": float("inf")}}, "ReformulationConfig.residual_k"),
        ({"verbose": "yes"}, "EvidenceReformulationRetriever.verbose must be True or False"),
        ({"callback_manager": []}, "callback_manager must be a CallbackManager or None"),
        ({"models": "some/lm"}, "models must be"),
    ],
)
def test_every_bad_setting_is_a_config_error_naming_it(settings, message):
    with pytest.raises(ConfigError, match=message):
        wrapper(**settings)


def test_settings_round_trip_through_a_plain_dict():
    # Not a serializable BaseComponent (LlamaIndex retrievers are not); the settings are.
    retriever = EvidenceReformulationRetriever(
        BridgeRetriever(), k=4, config={"residual_k": 7}, embedder="some/embedder", lm="some/lm"
    )
    data = retriever.settings.model_dump()
    assert data == {
        "k": 4, "config": {"residual_k": 7}, "embedder": "some/embedder", "lm": "some/lm"
    }  # fmt: skip
    rebuilt = EvidenceReformulationRetriever(BridgeRetriever(), **data)
    assert rebuilt.settings.model_dump() == data
    assert rebuilt.settings.effective_config() == retriever.settings.effective_config()
    assert rebuilt.models.lm_spec == "some/lm"


def test_pickled_retriever_gives_the_same_output_without_its_loaded_models():
    retriever = wrapper()
    first = retriever.retrieve(QUESTION)
    clone = pickle.loads(pickle.dumps(retriever))
    assert clone.models is not retriever.models and not clone.models.embedder_loaded
    assert comparable(clone.retrieve(QUESTION)) == comparable(first)
