"""NeocorRAGPostprocessor inside the LlamaIndex pieces users wire it into."""

from __future__ import annotations

import asyncio
import json

import numpy as np
import pytest
from adapter_fixtures import CORPUS, DROPPED_IDS, KEPT_IDS, MINER_CONFIG, QUERY
from conftest import HashedBagOfWords
from llama_index.core import VectorStoreIndex
from llama_index.core.bridge.pydantic import Field
from llama_index.core.callbacks import CallbackManager, CBEventType, LlamaDebugHandler
from llama_index.core.instrumentation import get_dispatcher
from llama_index.core.instrumentation.event_handlers import BaseEventHandler
from llama_index.core.instrumentation.events.rerank import ReRankEndEvent, ReRankStartEvent
from llama_index.core.llms.mock import MockLLM
from llama_index.core.query_engine import RetrieverQueryEngine
from llama_index.core.retrievers import BaseRetriever
from llama_index.core.schema import MetadataMode, NodeWithScore, QueryBundle, TextNode

from neocorrag_core.errors import ConfigError, InputError
from neocorrag_integrations.llama_index import (
    NeocorRAGEmbedding,
    NeocorRAGPostprocessor,
    is_evidence_chain_node,
)


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


class FixedRetriever(BaseRetriever):
    """Returns the corpus in its fixed retrieval order (scores falling), whatever the query."""

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return [
            NodeWithScore(node=node, score=round(0.9 - 0.1 * i, 2))
            for i, node in enumerate(corpus_nodes())
        ]


def postprocessor(**settings) -> NeocorRAGPostprocessor:
    return NeocorRAGPostprocessor(
        embedder=HashedBagOfWords(), decoding="none", miner_config=MINER_CONFIG, **settings
    )


def test_retriever_query_engine_gives_the_llm_the_chains_and_not_the_dropped_nodes():
    # MockLLM answers with the prompt it was given: the response is what reached the LLM.
    plain = RetrieverQueryEngine.from_args(FixedRetriever(), llm=MockLLM())
    refined = RetrieverQueryEngine.from_args(
        FixedRetriever(), llm=MockLLM(), node_postprocessors=[postprocessor()]
    )
    plain_prompt = str(plain.query(QUERY))
    response = refined.query(QUERY)
    refined_prompt = str(response)
    dropped_texts = [text for pid, _, text, _ in CORPUS if pid in DROPPED_IDS]
    assert all(text in plain_prompt for text in dropped_texts)
    assert not any(text in refined_prompt for text in dropped_texts)
    assert (
        "Evidence chains:\n1. Van Hook Township - located in -> Mountrail County" in refined_prompt
    )
    assert "neocorrag_" not in refined_prompt and "triples" not in refined_prompt
    assert is_evidence_chain_node(response.source_nodes[0])
    assert [n.node_id for n in response.source_nodes[1:]] == KEPT_IDS
    assert str(asyncio.run(refined.aquery(QUERY))) == refined_prompt


def test_vector_store_index_as_query_engine():
    index = VectorStoreIndex(corpus_nodes(), embed_model=NeocorRAGEmbedding(HashedBagOfWords()))
    engine = index.as_query_engine(
        llm=MockLLM(), similarity_top_k=5, node_postprocessors=[postprocessor()]
    )
    response = engine.query(QUERY)
    retrieved = index.as_retriever(similarity_top_k=5).retrieve(QUERY)
    kept = [n for n in response.source_nodes if not is_evidence_chain_node(n)]
    assert any(is_evidence_chain_node(n) for n in response.source_nodes)
    order = [n.node_id for n in retrieved]
    assert [n.node_id for n in kept] == sorted((n.node_id for n in kept), key=order.index)
    assert [n.score for n in kept] == [retrieved[order.index(n.node_id)].score for n in kept]
    assert len(kept) < len(retrieved)


def test_llm_and_embedding_text_of_kept_nodes_is_unchanged_and_the_chain_node_is_plain():
    nodes = FixedRetriever().retrieve(QUERY)
    out = postprocessor().postprocess_nodes(nodes, query_str=QUERY)
    originals = {n.node_id: n.node for n in nodes}
    for item in out[1:]:
        for mode in (MetadataMode.LLM, MetadataMode.EMBED):
            assert item.node.get_content(mode) == originals[item.node_id].get_content(mode)
    chain = out[0]
    assert chain.node.get_content(MetadataMode.LLM) == chain.node.get_content()
    assert chain.node.get_content(MetadataMode.EMBED).startswith("Evidence chains:")
    # Its score is the best score among the nodes its chains came from (p1: 0.9).
    assert chain.score == pytest.approx(0.9)


def test_by_default_the_run_metadata_rides_on_a_kept_node_hidden_from_llm_and_embedder():
    nodes = FixedRetriever().retrieve(QUERY)
    default = {k: v for k, v in MINER_CONFIG.items() if k != "chain_format"}
    out = NeocorRAGPostprocessor(
        embedder=HashedBagOfWords(), decoding="none", miner_config=default
    ).postprocess_nodes(nodes, query_str=QUERY)
    assert not any(n.node.metadata.get("neocorrag_evidence_chains") for n in out)
    assert out[0].node.metadata["neocorrag_chains"]  # the chains are there ...
    originals = {n.node_id: n.node for n in nodes}
    for item in out:  # ... and the LLM and the embedder see none of it
        for mode in (MetadataMode.LLM, MetadataMode.EMBED):
            text = item.node.get_content(mode)
            assert "neocorrag" not in text and "Evidence chains" not in text
            assert text == originals[item.node_id].get_content(mode)


class Collector(BaseEventHandler):
    """Keeps the instrumentation events it sees."""

    events: list = Field(default_factory=list)

    @classmethod
    def class_name(cls) -> str:
        return "Collector"

    def handle(self, event, **kwargs) -> None:
        self.events.append(event)


def test_emits_rerank_events_and_a_reranking_callback_like_the_rerankers():
    collector = Collector()
    debug = LlamaDebugHandler()
    dispatcher = get_dispatcher("neocorrag_integrations.llama_index")
    dispatcher.add_event_handler(collector)
    try:
        pp = postprocessor(top_n=1)
        pp.callback_manager = CallbackManager([debug])
        nodes = FixedRetriever().retrieve(QUERY)
        out = pp.postprocess_nodes(nodes, query_str=QUERY)
        asyncio.run(pp.apostprocess_nodes(nodes, query_str=QUERY))
    finally:
        dispatcher.event_handlers.remove(collector)
    starts = [e for e in collector.events if isinstance(e, ReRankStartEvent)]
    ends = [e for e in collector.events if isinstance(e, ReRankEndEvent)]
    assert len(starts) == len(ends) == 2
    assert starts[0].top_n == 1 and starts[0].query.query_str == QUERY
    assert starts[0].model_name == "neocorrag/none"
    assert [n.node_id for n in ends[0].nodes] == [n.node_id for n in out]
    pairs = debug.get_event_pairs(CBEventType.RERANKING)
    assert len(pairs) == 2


def test_missing_query_is_a_clear_error():
    with pytest.raises(InputError, match="needs the query"):
        postprocessor().postprocess_nodes(FixedRetriever().retrieve(QUERY))
    with pytest.raises(InputError, match="needs the query"):
        asyncio.run(postprocessor().apostprocess_nodes(FixedRetriever().retrieve(QUERY)))


@pytest.mark.parametrize(
    ("call", "message"),
    [
        ({"query_str": ""}, "the query is empty"),
        ({"query_str": "   "}, "the query is empty"),
        ({"query_str": 42}, "the query must be a non-empty string, got int"),
        ({"query_bundle": QueryBundle("")}, "the query is empty"),
        ({"query_bundle": QueryBundle(None)}, "the query must be a non-empty string"),
        ({"query_bundle": QUERY}, "query_bundle must be a QueryBundle, got str"),
    ],
)
def test_an_empty_or_non_string_query_is_an_input_error(call, message):
    # An empty query used to pass every node through; None query_str an AttributeError.
    pp = postprocessor()
    nodes = FixedRetriever().retrieve(QUERY)
    with pytest.raises(InputError, match=message):
        pp.postprocess_nodes(nodes, **call)
    with pytest.raises(InputError, match=message):
        asyncio.run(pp.apostprocess_nodes(nodes, **call))


def test_numpy_scores_are_read_as_floats():
    nodes = FixedRetriever().retrieve(QUERY)
    for node in nodes:
        node.score = np.float32(node.score)  # what some vector stores set, unvalidated
    out = postprocessor().postprocess_nodes(nodes, query_str=QUERY)
    assert [n.node_id for n in out[1:]] == KEPT_IDS
    nodes[0].score = "high"
    with pytest.raises(InputError, match=r"nodes\[0\].score must be a number"):
        postprocessor().postprocess_nodes(nodes, query_str=QUERY)


def test_serializes_to_json_and_back():
    pp = NeocorRAGPostprocessor(lm="some/lm", top_n=3, decoding="rank", chains_position="last")
    data = json.loads(pp.to_json())
    assert data["class_name"] == "NeocorRAGPostprocessor" and data["lm"] == "some/lm"
    rebuilt = NeocorRAGPostprocessor.from_json(pp.to_json())
    assert rebuilt.to_dict() == pp.to_dict()


def test_to_dict_from_dict_round_trip_keeps_every_setting_and_the_engine_config():
    pp = NeocorRAGPostprocessor(
        embedder="some/embedder", lm="some/lm", keep="balanced", top_n=1, decoding="beam",
        beam_width=2, miner_config={"tau_edge": 0.3, "query_entities": "ngram"},
        include_chains=False, chains_position="last",
    )  # fmt: skip
    data = pp.to_dict()
    assert data["class_name"] == NeocorRAGPostprocessor.class_name() == "NeocorRAGPostprocessor"
    assert "callback_manager" not in data  # excluded, as LlamaIndex does
    rebuilt = NeocorRAGPostprocessor.from_dict(data)
    assert isinstance(rebuilt, NeocorRAGPostprocessor)
    assert rebuilt.to_dict() == data
    assert rebuilt.effective_config() == pp.effective_config()
    assert rebuilt.miner is not pp.miner and rebuilt.miner.models.lm_spec == "some/lm"
    assert NeocorRAGPostprocessor.from_json(json.dumps(data)).to_dict() == data


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"top_n": 2.5}, "NeocorRAGPostprocessor: MinerConfig.top_n must be an integer"),
        ({"beam_width": "3"}, "NeocorRAGPostprocessor: MinerConfig.beam_width must be an integer"),
        ({"miner_config": {"tau_edge": float("nan")}}, "tau_edge must be a finite number"),
        ({"chains_position": "middle"}, "chains_position must be one of"),
    ],
)
def test_from_dict_with_a_bad_value_is_a_config_error(change, message):
    data = {**postprocessor().to_dict(), **change}
    data.pop("embedder")  # the bag-of-words embedder object was not serialized
    with pytest.raises(ConfigError, match=message):
        NeocorRAGPostprocessor.from_dict(data)


def test_postprocessor_and_embedding_class_names():
    assert NeocorRAGPostprocessor.class_name() == "NeocorRAGPostprocessor"
    assert postprocessor().to_dict()["class_name"] == "NeocorRAGPostprocessor"
    assert NeocorRAGEmbedding.class_name() == "NeocorRAGEmbedding"
    assert NeocorRAGEmbedding("some/folder").to_dict()["class_name"] == "NeocorRAGEmbedding"


def test_apostprocess_nodes_gives_what_postprocess_nodes_gives():
    pp = postprocessor(top_n=1)
    nodes = FixedRetriever().retrieve(QUERY)
    sync = pp.postprocess_nodes(nodes, query_str=QUERY)
    by_str = asyncio.run(pp.apostprocess_nodes(nodes, query_str=QUERY))
    by_bundle = asyncio.run(pp.apostprocess_nodes(nodes, query_bundle=QueryBundle(QUERY)))

    def plain(out: list[NodeWithScore]) -> list[dict]:
        dumped = [n.model_dump() for n in out]
        for item in dumped:
            item["node"]["metadata"].pop("neocorrag_timings", None)
        return dumped

    assert plain(by_str) == plain(sync) == plain(by_bundle)
    assert is_evidence_chain_node(sync[0])


def test_embedding_rejects_non_string_texts():
    embedding = NeocorRAGEmbedding(HashedBagOfWords())
    with pytest.raises(InputError, match=r"texts\[1\] is a int"):
        embedding.get_text_embedding_batch(["Paris", 3])
    assert embedding.get_text_embedding_batch([]) == []


def test_embedding_is_unit_length_and_rebuilds_from_its_dict():
    embedding = NeocorRAGEmbedding(HashedBagOfWords())
    vectors = np.asarray(embedding.get_text_embedding_batch(["Stanley is a city", "Paris"]))
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0)
    assert embedding.get_query_embedding("Paris") == pytest.approx(vectors[1].tolist())
    named = NeocorRAGEmbedding.from_dict(NeocorRAGEmbedding("some/folder").to_dict())
    assert named.model_name == "some/folder" and named._spec == "some/folder"
    assert NeocorRAGEmbedding().model_name == "all-MiniLM-L6-v2"


class _CountingBagOfWords(HashedBagOfWords):
    """Records each call's batch size and the thread it ran on."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[tuple[int, str]] = []

    def __call__(self, texts: list[str]) -> np.ndarray:
        import threading

        self.calls.append((len(texts), threading.current_thread().name))
        return super().__call__(texts)


def test_async_text_embeddings_are_one_batch_off_the_event_loop():
    import threading

    counting = _CountingBagOfWords()
    embedding = NeocorRAGEmbedding(counting, embed_batch_size=10)
    texts = ["Stanley is a city", "Paris", "Mountrail County", "Van Hook"]
    vectors = asyncio.run(embedding.aget_text_embedding_batch(texts))
    assert vectors == embedding.get_text_embedding_batch(texts)
    batch, thread = counting.calls[0]
    assert batch == 4 and thread != threading.main_thread().name
    single = asyncio.run(embedding.aget_text_embedding("Paris"))
    assert single == pytest.approx(vectors[1])


def test_embedding_with_an_embedder_object_survives_pickling():
    # LlamaIndex pickles transformations for num_workers; the object must travel, not its
    # class name as a model to download.
    import pickle

    embedding = NeocorRAGEmbedding(HashedBagOfWords())
    copy = pickle.loads(pickle.dumps(embedding))
    assert copy.get_query_embedding("Paris") == pytest.approx(
        embedding.get_query_embedding("Paris")
    )
