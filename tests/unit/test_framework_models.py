"""A core that knows no framework: the core refuses LangChain and LlamaIndex objects with the
fix, and the adapters translate them (chat models into ``ChatModel``, embeddings into encode
functions) with each framework's own API."""

from __future__ import annotations

import pickle
from typing import Any

import numpy as np
import pytest
from conftest import HashedBagOfWords
from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.language_models.fake_chat_models import FakeListChatModel
from langchain_core.messages import AIMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from llama_index.core.embeddings import MockEmbedding
from llama_index.core.llms import CompletionResponse, CustomLLM, LLMMetadata, MockLLM
from llama_index.core.llms.callbacks import llm_completion_callback
from pydantic import BaseModel

from neocorrag_core import ConfigError, EvidenceChainMiner, Passage
from neocorrag_core.belief import (
    BeliefController,
    LMAnswerGenerator,
    LMQueryWriter,
    LMVerifier,
    default_components,
)
from neocorrag_core.errors import EmbedderError
from neocorrag_core.lm.chat import ChatModel, ChatReply, text_reply
from neocorrag_core.models import LazyEmbedder, LazyModels, resolve_embedder, resolve_lm
from neocorrag_core.triples import LLMTripleExtractor
from neocorrag_integrations import langchain as lc
from neocorrag_integrations import llama_index as li
from neocorrag_integrations._langchain_models import EmbedDocuments, LangChainChatModel
from neocorrag_integrations._llama_index_models import LlamaIndexChatModel, TextEmbeddingBatch

MESSAGES = [
    {"role": "system", "content": "You answer questions."},
    {"role": "user", "content": "What is the capital of Mountrail County?"},
]
HOP = Passage("hop", "Its county seat is Stanley.", "Mountrail County")


class UsageChat(BaseChatModel):
    """A LangChain chat model whose replies carry ``usage_metadata``."""

    @property
    def _llm_type(self) -> str:
        return "usage-chat"

    def _generate(self, messages, stop=None, run_manager=None, **kwargs):
        usage = {"input_tokens": 11, "output_tokens": 3, "total_tokens": 14}
        message = AIMessage(content="Stanley", usage_metadata=usage)
        return ChatResult(generations=[ChatGeneration(message=message)])


class UsageLLM(CustomLLM):
    """A LlamaIndex LLM whose responses carry token counts in ``additional_kwargs``."""

    @property
    def metadata(self) -> LLMMetadata:
        return LLMMetadata(model_name="usage-llm")

    @llm_completion_callback()
    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        assert prompt.startswith("SYSTEM:\n") and prompt.endswith("ASSISTANT:\n")
        extra = {"prompt_tokens": 7, "completion_tokens": 2}
        return CompletionResponse(text="Stanley", additional_kwargs=extra)

    @llm_completion_callback()
    def stream_complete(self, prompt: str, formatted: bool = False, **kwargs: Any):
        raise NotImplementedError


class EchoChat:
    """A user's own ChatModel: no framework at all."""

    name = "echo"

    def __init__(self) -> None:
        self.asked: list[Any] = []

    def ask(self, messages, schema=None) -> ChatReply:
        self.asked.append(schema)
        return text_reply("Stanley", messages)


# ------------------------------------------------------------------------------------------
# The core refuses framework objects, naming the adapter function that wraps them
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "build",
    [
        LMVerifier,
        LMAnswerGenerator,
        LMQueryWriter,
        LLMTripleExtractor,
        BeliefController.from_models,
        default_components,
    ],
)
def test_a_langchain_chat_model_given_to_the_core_names_the_fix(build) -> None:
    with pytest.raises(ConfigError, match=r"neocorrag_integrations\.langchain\.as_chat_model"):
        build(FakeListChatModel(responses=["x"]))


def test_a_llama_index_llm_given_to_the_core_names_the_fix() -> None:
    with pytest.raises(ConfigError, match=r"neocorrag_integrations\.llama_index\.as_chat_model"):
        LLMTripleExtractor(MockLLM())
    with pytest.raises(ConfigError, match=r"llama_index\.as_chat_model"):
        BeliefController.from_models(MockLLM())


def test_an_unknown_object_given_as_lm_names_both_fixes_and_the_protocol() -> None:
    with pytest.raises(ConfigError) as info:
        LMVerifier(object())
    message = str(info.value)
    assert "langchain.as_chat_model" in message and "llama_index.as_chat_model" in message
    assert "ChatModel" in message and isinstance(info.value, TypeError)


def test_framework_embeddings_given_to_the_core_name_the_fix() -> None:
    with pytest.raises(ConfigError, match=r"langchain\.as_embedder"):
        resolve_embedder(DeterministicFakeEmbedding(size=8))
    miner = EvidenceChainMiner(embedder=DeterministicFakeEmbedding(size=8))  # loads nothing
    with pytest.raises(ConfigError, match=r"langchain\.as_embedder"):
        _ = miner.models.embedder
    # Our own embeddings objects are no spec of the core either: as_embedder shares them.
    with pytest.raises(ConfigError, match=r"NeocorRAGEmbeddings / NeocorRAGEmbedding"):
        resolve_embedder(lc.NeocorRAGEmbeddings(HashedBagOfWords()))
    # A LlamaIndex embedding is callable (on nodes): the core, which recognises no
    # framework, takes it as an encode function, and its first call fails with the fix.
    embedder = resolve_embedder(MockEmbedding(embed_dim=4))
    with pytest.raises(EmbedderError, match=r"get_content.*llama_index\.as_embedder"):
        embedder.embed(["Stanley"])


def test_a_chat_model_is_not_a_local_lm() -> None:
    with pytest.raises(TypeError, match="as_chat_model"):
        resolve_lm(FakeListChatModel(responses=["x"]))
    with pytest.raises(TypeError, match="chain decoding"):
        _ = LazyModels(lm=lc.as_chat_model(FakeListChatModel(responses=["x"]))).lm


# ------------------------------------------------------------------------------------------
# The core takes a ChatModel: the adapters' translations, or your own
# ------------------------------------------------------------------------------------------


def test_a_chat_model_of_your_own_serves_the_core_without_a_framework() -> None:
    chat = EchoChat()
    assert isinstance(chat, ChatModel)
    draft, usage = LMAnswerGenerator(chat).answer("Capital?", [HOP])
    assert draft.text == "Stanley" and draft.confidence is None and usage.total > 0
    controller = BeliefController.from_models(chat, HashedBagOfWords())
    assert controller.config.verify == "always"  # the shipped models do not know it
    assert LLMTripleExtractor(chat).extractor_id == "llm:echo"


def test_langchain_usage_comes_from_usage_metadata() -> None:
    reply = lc.as_chat_model(UsageChat()).ask(MESSAGES)
    assert reply == ChatReply("Stanley", False, 11, 3)


def test_llama_index_usage_comes_from_additional_kwargs() -> None:
    chat = li.as_chat_model(UsageLLM())
    assert chat.ask(MESSAGES) == ChatReply("Stanley", False, 7, 2)
    assert LLMTripleExtractor(chat).extractor_id == "llm:UsageLLM:usage-llm"


def test_without_reported_usage_the_tokens_are_estimated() -> None:
    reply = lc.as_chat_model(FakeListChatModel(responses=["Stanley"])).ask(MESSAGES)
    assert reply.value == "Stanley" and not reply.structured
    assert reply.prompt_tokens > 0 and reply.generated_tokens == 2


class Verdict(BaseModel):
    supported: bool


def test_no_structured_output_falls_back_to_the_text_answer() -> None:
    # FakeListChatModel has no tool calling: with_structured_output raises, asked once.
    chat = lc.as_chat_model(FakeListChatModel(responses=['{"supported": true}'] * 2))
    assert chat.ask(MESSAGES, Verdict).value == '{"supported": true}'
    assert chat.ask(MESSAGES, Verdict).structured is False
    # MockLLM is not a function-calling model: its text answer.
    assert li.as_chat_model(MockLLM()).ask(MESSAGES, Verdict).structured is False


def test_the_wrappers_refuse_the_other_framework_and_local_specs() -> None:
    with pytest.raises(ConfigError, match=r"llama_index\.as_chat_model"):
        lc.as_chat_model(MockLLM())
    with pytest.raises(ConfigError, match=r"langchain\.as_chat_model"):
        li.as_chat_model(FakeListChatModel(responses=["x"]))
    with pytest.raises(ConfigError, match="local LM spec"):
        lc.as_chat_model("qwen-1.5b")
    with pytest.raises(ConfigError, match="no invoke"):
        lc.as_chat_model(object())
    with pytest.raises(ConfigError, match=r"llama_index\.as_embedder"):
        lc.as_embedder(MockEmbedding(embed_dim=4))
    with pytest.raises(ConfigError, match="get_text_embedding_batch"):
        li.as_embedder(object())
    chat = EchoChat()
    assert lc.as_chat_model(chat) is chat and li.as_chat_model(chat) is chat


def test_embeddings_become_encode_functions_and_ours_are_shared() -> None:
    texts = ["Mountrail County", "Stanley"]
    lc_embeddings = DeterministicFakeEmbedding(size=8)
    encode = lc.as_embedder(lc_embeddings)
    assert isinstance(encode, EmbedDocuments)
    np.testing.assert_allclose(
        resolve_embedder(encode).embed(texts),
        resolve_embedder(lambda t: lc_embeddings.embed_documents(t)).embed(texts),
    )
    li_embedding = MockEmbedding(embed_dim=4)
    assert resolve_embedder(li.as_embedder(li_embedding)).name == "MockEmbedding"
    ours = lc.NeocorRAGEmbeddings(HashedBagOfWords())
    shared = lc.as_embedder(ours)
    assert isinstance(shared, LazyEmbedder) and not shared.loaded  # resolved on first use
    assert resolve_embedder(shared) is ours.text_embedder()  # one embedder, one cache
    assert resolve_embedder(li.as_embedder(ours)) is ours.text_embedder()
    theirs = li.NeocorRAGEmbedding(HashedBagOfWords())
    assert resolve_embedder(li.as_embedder(theirs)) is theirs.text_embedder()


# ------------------------------------------------------------------------------------------
# The adapters translate what they receive (either framework's objects, as before)
# ------------------------------------------------------------------------------------------


def test_the_adapters_translate_framework_embeddings() -> None:
    compressor = lc.NeocorRAGCompressor(embedder=DeterministicFakeEmbedding(size=16))
    assert isinstance(compressor.miner.models.embedder_spec, EmbedDocuments)
    clone = pickle.loads(pickle.dumps(compressor))  # the encode function pickles
    assert clone.miner.models.embedder.embed(["a"]).shape == (1, 16)
    postprocessor = li.NeocorRAGPostprocessor(embedder=MockEmbedding(embed_dim=8))
    assert isinstance(postprocessor.miner.models.embedder_spec, TextEmbeddingBatch)
    # Either framework's embeddings in either adapter.
    across = lc.EvidenceReformulationRetriever(
        retriever=lc_retriever(), embedder=MockEmbedding(embed_dim=8)
    )
    assert isinstance(across.models.embedder_spec, TextEmbeddingBatch)
    ours = lc.NeocorRAGEmbeddings(HashedBagOfWords())
    shared = lc.NeocorRAGCompressor(embedder=ours)
    assert isinstance(shared.miner.models.embedder_spec, LazyEmbedder)
    assert not ours._embedder.loaded  # the adapter resolved nothing at construction
    clone = pickle.loads(pickle.dumps(shared))  # the shared embedder's object pickles
    assert clone.miner.models.embedder.embed(["a"]).shape[0] == 1
    assert shared.miner.models.embedder is ours.text_embedder()


def test_the_belief_adapters_ask_a_translated_chat_model() -> None:
    from neocorrag_integrations.langchain import BeliefRAG
    from neocorrag_integrations.llama_index import BeliefQueryEngine

    chat = FakeListChatModel(responses=["Stanley"])
    rag = BeliefRAG(lc_retriever(), chat, embedder=HashedBagOfWords())
    assert rag.llm is chat  # as given
    assert isinstance(rag.controller.verifier.chat_model, LangChainChatModel)
    engine = BeliefQueryEngine(li_retriever(), MockLLM(), embedder=HashedBagOfWords())
    assert isinstance(engine.controller.generator.chat_model, LlamaIndexChatModel)
    own = BeliefRAG(lc_retriever(), EchoChat(), embedder=HashedBagOfWords())
    assert isinstance(own.controller.writer.chat_model, EchoChat)
    with pytest.raises(ConfigError, match="no complete"):
        BeliefQueryEngine(li_retriever(), object(), embedder=HashedBagOfWords())


def lc_retriever() -> Any:
    """A LangChain retriever that finds nothing (the tests here never search)."""
    from langchain_core.runnables import RunnableLambda

    return RunnableLambda(lambda query: [])


def li_retriever() -> Any:
    """A LlamaIndex retriever that finds nothing."""
    from llama_index.core.retrievers import BaseRetriever

    class Empty(BaseRetriever):
        def _retrieve(self, query_bundle):
            return []

    return Empty()
