"""The BeliefRAG adapters: LangChain's ``BeliefRAG`` Runnable and LlamaIndex's
``BeliefQueryEngine``, on scripted controllers and on fake framework LLMs (no LM)."""

from __future__ import annotations

import asyncio
import json
from dataclasses import replace
from typing import Any

import pytest
from conftest import HashedBagOfWords
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.documents import Document
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.language_models.fake_chat_models import FakeListChatModel
from langchain_core.messages import AIMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.retrievers import BaseRetriever as LCRetriever
from langchain_core.runnables import RunnableLambda
from llama_index.core.base.response.schema import Response
from llama_index.core.bridge.pydantic import Field
from llama_index.core.llms import (
    CompletionResponse,
    CustomLLM,
    LLMMetadata,
    MockLLM,
)
from llama_index.core.llms.callbacks import llm_completion_callback
from llama_index.core.retrievers import BaseRetriever as LIRetriever
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode
from pydantic import PrivateAttr

from neocorrag_core import (
    ConfigError,
    EvidenceChainMiner,
    InputError,
    MinerConfig,
    Passage,
    RetrievalError,
)
from neocorrag_core.belief import (
    AnswerabilityCalibrator,
    BeliefConfig,
    BeliefController,
    ChainEvidenceVerifier,
    DraftAnswer,
    Usage,
    VerifierReply,
    preset_settings,
)
from neocorrag_core.belief.chains import CHAIN_PASSAGE_TITLE
from neocorrag_core.belief.config import BeliefTuning
from neocorrag_integrations._belief import BeliefAdapter
from neocorrag_integrations.langchain import BeliefRAG, as_chat_model
from neocorrag_integrations.llama_index import BeliefQueryEngine

QUESTION = "What is the capital of the county that contains Van Hook Township?"
# (id, title, text, triples, score)
DOCS = {
    "hop1": (
        "Van Hook Township",
        "Van Hook Township is in Mountrail County.",
        [["Van Hook Township", "located in", "Mountrail County"]],
        0.9,
    ),
    "hop2": (
        "Mountrail County",
        "Its county seat is Stanley.",
        [["Mountrail County", "capital", "Stanley"]],
        0.8,
    ),
    "bad": ("Van Hook (film)", "Van Hook is a 1999 film set in Bismarck.", [], 0.7),
    "noise": ("Stanley Cup", "The Stanley Cup is a hockey trophy.", [], 0.2),
}
MINER_CONFIG = {"tau_edge": 0.1, "tau_boost": 0.1, "query_entities": "ngram"}


def script(query: str) -> list[str]:
    """What the scripted retrievers return: more than k (the adapter uses the first k)."""
    if query == QUESTION:
        return ["hop1", "bad", "noise"]
    if "Mountrail" in query:
        return ["bad", "hop2", "noise"]
    return ["noise"]


def document(pid: str) -> Document:
    title, text, triples, _ = DOCS[pid]
    return Document(
        id=pid, page_content=text, metadata={"title": title, "triples": triples, "src": pid}
    )


def node(pid: str) -> NodeWithScore:
    title, text, triples, score = DOCS[pid]
    item = TextNode(id_=pid, text=text, metadata={"title": title, "triples": triples})
    return NodeWithScore(node=item, score=score)


# ------------------------------------------------------------------------------------------
# Scripted controller components (the patterns of test_belief_controller)
# ------------------------------------------------------------------------------------------


class Verifier:
    """Flags "bad" as conflicting; support is high once both hops are in; records what it saw."""

    def __init__(self) -> None:
        self.seen: list[list[str]] = []

    def verify(self, question, passages, draft_answer):
        self.seen.append([p.id for p in passages])
        ids = {p.id for p in passages}
        both = {"hop1", "hop2"} <= ids
        return (
            VerifierReply(
                support=0.95 if both and "bad" not in ids else 0.3,
                conflict=0.9 if "bad" in ids else 0.05,
                uncertainty=0.2 if both else 0.7,
                gap=0.1 if both else 0.9,
                missing_fact="" if both else "capital of Mountrail County",
                drop_ids=("bad",) if "bad" in ids else (),
            ),
            Usage(prompt_tokens=100 + 50 * len(passages), generated_tokens=20),
        )


class Generator:
    def answer(self, question, passages):
        ids = {p.id for p in passages}
        text = "Stanley" if "hop2" in ids else "unknown"
        return DraftAnswer(text, confidence=0.9 if text == "Stanley" else 0.3), Usage(80, 5)


class Writer:
    def next_query(self, question, passages, missing_fact, asked):
        return (missing_fact or "Mountrail County capital"), Usage(60, 6)

    def rewrite(self, question, last_query, asked):
        return f"{last_query} (reworded {len(asked)})", Usage(40, 6)


class Relevance:
    def relevance(self, question, passages):
        return 0.7


SUPPORT = AnswerabilityCalibrator(
    features=("support",), weights=(4.0,), bias=0.0, means=(0.5,), scales=(0.25,), version="t"
)
# An after-search model that always expects a search to pay (p = 0.95): the scripted
# episodes search for their second hop whatever the shipped model says.
HOPEFUL = AnswerabilityCalibrator(
    features=("support",), weights=(0.0,), bias=2.944, means=(0.5,), scales=(0.25,), version="h"
)


def scripted(verifier=None, tuning=None, **config) -> BeliefController:
    return BeliefController(
        verifier=verifier or Verifier(),
        generator=Generator(),
        writer=Writer(),
        relevance=Relevance(),
        calibrator=SUPPORT,
        after_search=HOPEFUL,
        config=BeliefConfig(**{"k": 2, **config}),
        tuning=tuning,
    )


def without_seconds(trajectory: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: v for k, v in step.items() if k != "seconds"} for step in trajectory]


# ------------------------------------------------------------------------------------------
# Fake framework LLMs that answer by the role the prompt asks for
# ------------------------------------------------------------------------------------------


def role_reply(prompt: str) -> str:
    if "Judge the documents" in prompt:
        hop2 = "Its county seat is Stanley" in prompt
        return json.dumps(
            {
                "support": "high" if hop2 else "low",
                "conflict": "no",
                "confident": "yes" if hop2 else "no",
                "missing": "no" if hop2 else "yes",
                "drop": [],
                "missing_fact": "" if hop2 else "capital of Mountrail County",
            }
        )
    if "Reply with the answer only" in prompt:
        return "Stanley" if "Its county seat is Stanley" in prompt else "unknown"
    return "Mountrail County county seat"


class RoleChat(BaseChatModel):
    """A LangChain chat model that answers by role and records every prompt."""

    _prompts: list[str] = PrivateAttr(default_factory=list)
    fail: bool = False

    @property
    def _llm_type(self) -> str:
        return "role-chat"

    @property
    def prompts(self) -> list[str]:
        return self._prompts

    def _generate(self, messages, stop=None, run_manager=None, **kwargs):
        prompt = str(messages[-1].content)
        self._prompts.append(prompt)
        if self.fail:
            raise ConnectionError("provider down")
        message = AIMessage(content=role_reply(prompt))
        return ChatResult(generations=[ChatGeneration(message=message)])


class RoleLLM(CustomLLM):
    """A LlamaIndex LLM that answers by role and records every prompt."""

    prompts: list[str] = Field(default_factory=list)

    @property
    def metadata(self) -> LLMMetadata:
        return LLMMetadata(model_name="role-llm")

    @llm_completion_callback()
    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        self.prompts.append(prompt)
        return CompletionResponse(text=role_reply(prompt))

    @llm_completion_callback()
    def stream_complete(self, prompt: str, formatted: bool = False, **kwargs: Any):
        raise NotImplementedError


# ------------------------------------------------------------------------------------------
# Scripted retrievers
# ------------------------------------------------------------------------------------------


class LCScripted(LCRetriever):
    queries: list[str] = Field(default_factory=list)
    broken: str = ""  # "raise" or "strings"

    def _get_relevant_documents(self, query, *, run_manager):
        self.queries.append(query)
        if self.broken == "raise":
            raise TimeoutError("index offline")
        if self.broken == "strings":
            return ["not a document"]
        return [document(pid) for pid in script(query)]

    async def _aget_relevant_documents(self, query, *, run_manager):
        await asyncio.sleep(0)
        return self._get_relevant_documents(query, run_manager=run_manager)


def lc_retriever(**kwargs) -> LCScripted:
    return LCScripted(**kwargs)


class LIScripted(LIRetriever):
    def __init__(self, broken: str = "") -> None:
        super().__init__()
        self.queries: list[str] = []
        self.broken = broken

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        self.queries.append(query_bundle.query_str)
        if self.broken == "raise":
            raise TimeoutError("index offline")
        if self.broken == "strings":
            return ["not a node"]  # type: ignore[list-item]
        return [node(pid) for pid in script(query_bundle.query_str)]

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        await asyncio.sleep(0)
        return self._retrieve(query_bundle)


class Recorder(BaseCallbackHandler):
    """Records the runs a LangChain tracer would see: (event, run_id, parent_run_id)."""

    def __init__(self) -> None:
        self.events: list[tuple[str, Any, Any]] = []

    def on_chain_start(self, serialized, inputs, *, run_id, parent_run_id=None, **kw):
        self.events.append(("chain_start", run_id, parent_run_id))

    def on_retriever_start(self, serialized, query, *, run_id, parent_run_id=None, **kw):
        self.events.append(("retriever_start", run_id, parent_run_id))

    def on_retriever_end(self, documents, *, run_id, parent_run_id=None, **kw):
        self.events.append(("retriever_end", run_id, parent_run_id))

    def on_chat_model_start(self, serialized, messages, *, run_id, parent_run_id=None, **kw):
        self.events.append(("llm_start", run_id, parent_run_id))

    def on_llm_start(self, serialized, prompts, *, run_id, parent_run_id=None, **kw):
        self.events.append(("llm_start", run_id, parent_run_id))

    def of(self, name: str) -> list[tuple[str, Any, Any]]:
        return [e for e in self.events if e[0] == name]

    def root(self) -> Any:
        return next(
            run for name, run, parent in self.events if name == "chain_start" and not parent
        )


# ------------------------------------------------------------------------------------------
# LangChain: BeliefRAG
# ------------------------------------------------------------------------------------------


def test_langchain_output_is_the_episode_and_the_final_evidence_documents():
    retriever = lc_retriever()
    out = BeliefRAG(retriever, controller=scripted()).invoke(QUESTION)
    assert out["answer"] == "Stanley" and out["abstained"] is False
    assert out["final_action"] == "answer" and out["retrieval_rounds"] == 2
    docs = out["documents"]
    assert [d.id for d in docs] == ["hop1", "hop2"]  # "bad" dropped, never came back
    assert all(isinstance(d, Document) for d in docs)
    assert docs[1].metadata == document("hop2").metadata  # metadata preserved
    assert docs[1].page_content == DOCS["hop2"][1]
    actions = [step["action"] for step in out["trajectory"]]
    assert actions == ["retrieve", "verify", "retrieve", "answer"]
    assert out["trajectory"][0]["retrieved_ids"] == ["hop1", "bad"]  # first k=2 of 3
    assert "bad" in out["trajectory"][2]["retrieved_ids"]  # returned again, refused
    assert out["tokens"]["total"] == sum(
        s["prompt_tokens"] + s["generated_tokens"] for s in out["trajectory"]
    )
    assert [m["kind"] for m in out["mutations"]] == ["add", "drop", "add"]
    json.dumps({k: v for k, v in out.items() if k != "documents"})
    assert retriever.queries[0] == QUESTION and "Mountrail" in retriever.queries[1]


def test_langchain_documents_are_copies():
    out = BeliefRAG(lc_retriever(), controller=scripted()).invoke(QUESTION)
    out["documents"][0].metadata["src"] = "changed"
    again = BeliefRAG(lc_retriever(), controller=scripted()).invoke(QUESTION)
    assert again["documents"][0].metadata["src"] == "hop1"


def test_langchain_str_dict_batch_and_ainvoke_give_the_same_episode():
    rag = BeliefRAG(lc_retriever(), controller=scripted())

    def key(out):
        return (out["answer"], [d.id for d in out["documents"]], without_seconds(out["trajectory"]))

    plain = key(rag.invoke(QUESTION))
    assert key(rag.invoke({"question": QUESTION, "other": 1})) == plain
    assert [key(o) for o in rag.batch([QUESTION, {"question": QUESTION}])] == [plain, plain]
    assert key(asyncio.run(rag.ainvoke(QUESTION))) == plain
    assert [key(o) for o in asyncio.run(rag.abatch([QUESTION, QUESTION]))] == [plain, plain]


def test_langchain_invoke_keywords_override_the_config_for_that_call():
    rag = BeliefRAG(lc_retriever(), controller=scripted())
    capped = rag.invoke(QUESTION, max_rounds=1)
    assert capped["retrieval_rounds"] == 1 and capped["final_action"] in ("stop", "abstain")
    assert rag.invoke(QUESTION)["retrieval_rounds"] == 2
    with pytest.raises(ConfigError, match="unknown BeliefConfig"):
        rag.invoke(QUESTION, max_roundz=1)


def test_langchain_a_call_takes_user_settings_only_research_ones_go_to_a_controller():
    retriever = lc_retriever()
    rag = BeliefRAG(retriever, controller=scripted())
    hint = r"conflict_threshold: research setting.*BeliefController\(\.\.\., tuning="
    with pytest.raises(ConfigError, match=hint):
        rag.invoke(QUESTION, conflict_threshold=0.6)
    with pytest.raises(ConfigError, match="correct_problems: research setting"):
        asyncio.run(rag.ainvoke(QUESTION, correct_problems=False))
    assert retriever.queries == []  # refused before any search
    one = rag.invoke(QUESTION, k=1)  # k is a user setting: a call may change it
    assert one["trajectory"][0]["retrieved_ids"] == ["hop1"]
    # The ablation through the constructor the lab uses: no correction, "bad" stays.
    ablated = scripted(tuning=BeliefTuning(correct_problems=False))
    out = BeliefRAG(lc_retriever(), controller=ablated).invoke(QUESTION)
    assert "verify" not in [step["action"] for step in out["trajectory"]]
    assert "bad" in [d.id for d in out["documents"]]


@pytest.mark.parametrize(
    "bad", [42, None, "", "   ", {"q": QUESTION}, {"question": 3}, [QUESTION], {"question": ""}]
)
def test_langchain_bad_input_is_an_input_error_before_any_search(bad):
    retriever = lc_retriever()
    with pytest.raises(InputError):
        BeliefRAG(retriever, controller=scripted()).invoke(bad)
    with pytest.raises(InputError):
        asyncio.run(BeliefRAG(retriever, controller=scripted()).ainvoke(bad))
    assert retriever.queries == []


@pytest.mark.parametrize("broken", ["raise", "strings"])
def test_langchain_retriever_failure_is_a_retrieval_error_and_leaves_no_state(broken):
    verifier = Verifier()
    retriever = lc_retriever(broken=broken)
    rag = BeliefRAG(retriever, controller=scripted(verifier))
    with pytest.raises(RetrievalError, match="wrapped search failed"):
        rag.invoke(QUESTION)
    with pytest.raises(RetrievalError):
        asyncio.run(rag.ainvoke(QUESTION))
    retriever.broken = ""
    fresh = BeliefRAG(lc_retriever(), controller=scripted()).invoke(QUESTION)
    again = rag.invoke(QUESTION)
    assert without_seconds(again["trajectory"]) == without_seconds(fresh["trajectory"])


def test_langchain_callbacks_see_every_retrieval_and_llm_call_under_the_run():
    llm = RoleChat()
    rag = BeliefRAG(
        lc_retriever(), llm, embedder=HashedBagOfWords(), calibrator=SUPPORT, after_search=HOPEFUL
    )
    recorder = Recorder()
    out = rag.invoke(QUESTION, config={"callbacks": [recorder]})
    assert out["answer"] == "Stanley" and out["retrieval_rounds"] == 2
    root = recorder.root()
    starts, ends = recorder.of("retriever_start"), recorder.of("retriever_end")
    assert len(starts) == len(ends) == out["retrieval_rounds"]
    assert all(parent == root for _, _, parent in starts)
    calls = recorder.of("llm_start")
    assert len(calls) == len(llm.prompts) >= 3  # answer, verify, write, ...
    assert all(parent == root for _, _, parent in calls)
    verifier_calls = [p for p in llm.prompts if "Judge the documents" in p]
    assert len(verifier_calls) == 2


def test_langchain_ainvoke_callbacks_match_invoke():
    recorders = []
    outs = []
    for run in ("sync", "async"):
        llm = RoleChat()
        rag = BeliefRAG(
            lc_retriever(),
            llm,
            embedder=HashedBagOfWords(),
            calibrator=SUPPORT,
            after_search=HOPEFUL,
        )
        recorder = Recorder()
        config = {"callbacks": [recorder]}
        out = (
            rag.invoke(QUESTION, config)
            if run == "sync"
            else asyncio.run(rag.ainvoke(QUESTION, config))
        )
        recorders.append(recorder)
        outs.append(out)
    assert without_seconds(outs[0]["trajectory"]) == without_seconds(outs[1]["trajectory"])
    names = [[e[0] for e in r.events if e[0] != "chain_start"] for r in recorders]
    assert sorted(names[0]) == sorted(names[1])
    assert all(parent == recorders[1].root() for _, _, parent in recorders[1].of("llm_start"))


def test_langchain_callbacks_reach_llm_calls_made_outside_the_runs_context(monkeypatch):
    # LangChain also hands callbacks down through a context variable, which does not reach
    # a worker thread started without the context (as on Python 3.10's async paths); the
    # adapter passes them to every chat-model call explicitly.
    async def to_thread_without_context(func, /, *args, **kwargs):
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(None, lambda: func(*args, **kwargs))

    monkeypatch.setattr(asyncio, "to_thread", to_thread_without_context)
    llm = RoleChat()
    rag = BeliefRAG(
        lc_retriever(), llm, embedder=HashedBagOfWords(), calibrator=SUPPORT, after_search=HOPEFUL
    )
    recorder = Recorder()
    asyncio.run(rag.ainvoke(QUESTION, {"callbacks": [recorder]}))
    calls = recorder.of("llm_start")
    assert len(calls) == len(llm.prompts) >= 3
    assert all(parent == recorder.root() for _, _, parent in calls)


class StructuredRoleChat(RoleChat):
    """Offers structured output: the verifier's judgment comes back as a dict."""

    def with_structured_output(self, schema, **kwargs):
        def judge(messages):
            prompt = messages[-1][1]
            self._prompts.append(prompt)
            return json.loads(role_reply(prompt))

        return RunnableLambda(judge, name="structured-judge")


def test_langchain_structured_output_calls_are_traced_too(monkeypatch):
    async def to_thread_without_context(func, /, *args, **kwargs):
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(None, lambda: func(*args, **kwargs))

    monkeypatch.setattr(asyncio, "to_thread", to_thread_without_context)
    llm = StructuredRoleChat()
    rag = BeliefRAG(
        lc_retriever(), llm, embedder=HashedBagOfWords(), calibrator=SUPPORT, after_search=HOPEFUL
    )
    recorder = Recorder()
    out = asyncio.run(rag.ainvoke(QUESTION, {"callbacks": [recorder]}))
    assert out["answer"] == "Stanley"
    root = recorder.root()
    judged = [e for e in recorder.of("chain_start") if e[2] == root]
    assert len(judged) == 2  # the two structured verifier calls, under the BeliefRAG run


def test_langchain_fake_list_chat_model_through_the_framework_path():
    good = {"support": "high", "conflict": "no", "confident": "yes", "missing": "no"}
    llm = FakeListChatModel(responses=["Stanley", json.dumps({**good, "drop": []})])

    class TwoHops(LCRetriever):
        def _get_relevant_documents(self, query, *, run_manager):
            return [document("hop1"), document("hop2")]

    rag = BeliefRAG(
        TwoHops(), llm, embedder=HashedBagOfWords(), calibrator=SUPPORT, after_search=HOPEFUL
    )
    out = rag.invoke({"question": QUESTION})
    assert out["answer"] == "Stanley" and out["final_action"] == "answer"
    assert [d.id for d in out["documents"]] == ["hop1", "hop2"]
    assert out["tokens"]["prompt"] > 0 and out["tokens"]["generated"] > 0
    assert not rag.controller.relevance.models.lm_loaded  # no local LM for a chat model


def test_langchain_llm_error_is_a_model_call_error_and_the_next_call_starts_afresh():
    from neocorrag_core.errors import ModelCallError

    llm = RoleChat(fail=True)
    rag = BeliefRAG(
        lc_retriever(), llm, embedder=HashedBagOfWords(), calibrator=SUPPORT, after_search=HOPEFUL
    )
    with pytest.raises(ModelCallError, match="provider down") as raised:
        rag.invoke(QUESTION)
    assert isinstance(raised.value.__cause__, ConnectionError)
    llm.fail = False
    out = rag.invoke(QUESTION)
    assert out["answer"] == "Stanley" and out["trajectory"][0]["step"] == 0


def test_langchain_chains_for_verifier_shows_the_chain_block_to_the_verifier():
    miner = EvidenceChainMiner(MinerConfig(**MINER_CONFIG), embedder=HashedBagOfWords())
    llm = RoleChat()
    rag = BeliefRAG(
        lc_retriever(),
        llm,
        chains_for_verifier=True,
        miner=miner,
        calibrator=SUPPORT,
        after_search=HOPEFUL,
    )
    assert rag.chains_for_verifier
    out = rag.invoke(QUESTION)
    judged = [p for p in llm.prompts if "Judge the documents" in p]
    assert judged and all(f"[1] {CHAIN_PASSAGE_TITLE}:" in p for p in judged)
    assert "Mountrail County - capital -> Stanley" in judged[-1]  # both hops linked
    assert all(not p.startswith("neocorrag:") for s in out["trajectory"] for p in s["evidence_ids"])
    plain = BeliefRAG(
        lc_retriever(),
        RoleChat(),
        embedder=HashedBagOfWords(),
        calibrator=SUPPORT,
        after_search=HOPEFUL,
    )
    plain_llm = plain.llm
    plain.invoke(QUESTION)
    assert not any(CHAIN_PASSAGE_TITLE in p for p in plain_llm.prompts)


def test_langchain_refined_answer_hides_the_noise_from_the_answer_prompt_only():
    """With refine_answer="all" the answer prompt holds what the miner keeps (the top-2 by
    rank and the hop the chain needs), the verifier still sees every passage."""
    miner = EvidenceChainMiner(MinerConfig(**MINER_CONFIG), embedder=HashedBagOfWords())
    llm = RoleChat()
    rag = BeliefRAG(
        lc_retriever(),
        llm,
        config={"refine_answer": "all", "verify": "always"},
        miner=miner,
        calibrator=SUPPORT,
        after_search=HOPEFUL,
    )
    assert not rag.chains_for_verifier  # the miner serves the answer only
    out = rag.invoke(QUESTION)
    answers = [p for p in llm.prompts if "Answer the question using the documents" in p]
    judged = [p for p in llm.prompts if "Judge the documents" in p]
    assert answers and judged
    assert "hockey trophy" in judged[-1]  # the verifier reads the whole workspace
    assert "hockey trophy" not in answers[-1] and "Stanley." in answers[-1]
    assert "noise" in [d.metadata["src"] for d in out["documents"]]  # evidence untouched


def test_langchain_refinement_turned_on_per_call_uses_the_adapters_miner():
    miner = EvidenceChainMiner(MinerConfig(**MINER_CONFIG), embedder=HashedBagOfWords())
    rag = BeliefRAG(lc_retriever(), RoleChat(), models=miner, calibrator=SUPPORT)
    assert rag._setup.answer_miner is miner  # built with nothing refining yet
    llm = rag.llm
    rag.invoke(QUESTION, refine_answer="all", verify="always")
    answers = [p for p in llm.prompts if "Answer the question using the documents" in p]
    assert answers and "hockey trophy" not in answers[-1]
    rag.invoke(QUESTION, verify="always")  # the next call reads every passage again
    answers = [p for p in llm.prompts if "Answer the question using the documents" in p]
    assert "hockey trophy" in answers[-1]


def test_langchain_bad_settings_are_config_errors():
    retriever = lc_retriever()
    with pytest.raises(ConfigError, match="retriever"):
        BeliefRAG(lambda q: [], RoleChat())
    with pytest.raises(ConfigError, match="k"):
        BeliefRAG(retriever, RoleChat(), k=0)
    with pytest.raises(ConfigError, match="max_roundz"):
        BeliefRAG(retriever, RoleChat(), config={"max_roundz": 2})
    with pytest.raises(ConfigError, match="config"):
        BeliefRAG(retriever, RoleChat(), config="fast")
    with pytest.raises(ConfigError, match="after_search must be an AnswerabilityCalibrator"):
        BeliefRAG(retriever, RoleChat(), after_search="fitted.json")
    with pytest.raises(ConfigError, match="chains_for_verifier"):
        BeliefRAG(retriever, RoleChat(), miner=EvidenceChainMiner())
    with pytest.raises(ConfigError, match="chains_for_verifier"):  # the answer uses no decoding
        BeliefRAG(retriever, RoleChat(), config={"refine_answer": "all"}, chains_decoding="rank")
    with pytest.raises(ConfigError, match="refine_answer"):
        BeliefRAG(retriever, RoleChat(), config={"refine_answer": "yes"})
    with pytest.raises(ConfigError, match="chains_for_verifier"):
        BeliefRAG(retriever, RoleChat(), chains_for_verifier="yes")
    with pytest.raises(ConfigError, match="LlamaIndex"):
        BeliefRAG(retriever, RoleLLM())
    with pytest.raises(ConfigError, match="controller"):
        BeliefRAG(retriever, RoleChat(), controller=scripted())
    with pytest.raises(ConfigError, match="controller"):
        BeliefRAG(retriever, controller="mine")
    assert BeliefRAG(retriever, RoleChat(), k=3, embedder=HashedBagOfWords()).config.k == 3
    rag = BeliefRAG(retriever, RoleChat(), after_search=HOPEFUL, embedder=HashedBagOfWords())
    assert rag.controller.after_search is HOPEFUL


# ------------------------------------------------------------------------------------------
# LlamaIndex: BeliefQueryEngine
# ------------------------------------------------------------------------------------------


def test_llama_index_response_holds_the_answer_evidence_and_trajectory():
    retriever = LIScripted()
    response = BeliefQueryEngine(retriever, controller=scripted()).query(QUESTION)
    assert isinstance(response, Response) and str(response) == "Stanley"
    assert [n.node.node_id for n in response.source_nodes] == ["hop1", "hop2"]
    assert [n.score for n in response.source_nodes] == [DOCS["hop1"][3], DOCS["hop2"][3]]
    assert response.source_nodes[1].node.metadata["title"] == "Mountrail County"
    meta = response.metadata
    assert meta["abstained"] is False and meta["answer"] == "Stanley"
    assert meta["final_action"] == "answer" and meta["retrieval_rounds"] == 2
    assert [s["action"] for s in meta["trajectory"]] == ["retrieve", "verify", "retrieve", "answer"]
    json.dumps(meta)
    assert retriever.queries[0] == QUESTION


def test_llama_index_aquery_gives_what_query_gives_and_keeps_the_bundle():
    engine = BeliefQueryEngine(LIScripted(), controller=scripted())
    sync = engine.query(QueryBundle(QUESTION))
    done = asyncio.run(engine.aquery(QUESTION))
    assert str(done) == str(sync)
    assert [n.node.node_id for n in done.source_nodes] == [
        n.node.node_id for n in sync.source_nodes
    ]
    assert without_seconds(done.metadata["trajectory"]) == without_seconds(
        sync.metadata["trajectory"]
    )


def test_llama_index_abstention_gives_the_abstain_message():
    class Weak(Verifier):
        def verify(self, question, passages, draft_answer):
            return VerifierReply(support=0.0, conflict=0.0, uncertainty=1.0, gap=0.0), Usage(10, 2)

    engine = BeliefQueryEngine(LIScripted(), controller=scripted(Weak()), abstain_message="no idea")
    response = engine.query(QUESTION)
    assert response.metadata["abstained"] is True and response.metadata["answer"] is None
    assert response.metadata["final_action"] == "abstain" and str(response) == "no idea"


@pytest.mark.parametrize("bad", [None, 3, "", "  ", QueryBundle("  ")])
def test_llama_index_bad_query_is_an_input_error_before_any_search(bad):
    retriever = LIScripted()
    engine = BeliefQueryEngine(retriever, controller=scripted())
    with pytest.raises(InputError):
        engine.query(bad)
    with pytest.raises(InputError):
        asyncio.run(engine.aquery(bad))
    assert retriever.queries == []


@pytest.mark.parametrize("broken", ["raise", "strings"])
def test_llama_index_retriever_failure_is_a_retrieval_error(broken):
    retriever = LIScripted(broken=broken)
    engine = BeliefQueryEngine(retriever, controller=scripted())
    with pytest.raises(RetrievalError, match="wrapped search failed"):
        engine.query(QUESTION)
    with pytest.raises(RetrievalError):
        asyncio.run(engine.aquery(QUESTION))
    retriever.broken = ""
    assert str(engine.query(QUESTION)) == "Stanley"


def test_llama_index_llm_through_the_framework_path_with_chains():
    miner = EvidenceChainMiner(MinerConfig(**MINER_CONFIG), embedder=HashedBagOfWords())
    llm = RoleLLM()
    engine = BeliefQueryEngine(
        LIScripted(),
        llm,
        chains_for_verifier=True,
        miner=miner,
        calibrator=SUPPORT,
        after_search=HOPEFUL,
    )
    response = engine.query(QUESTION)
    assert str(response) == "Stanley" and response.metadata["retrieval_rounds"] == 2
    judged = [p for p in llm.prompts if "Judge the documents" in p]
    assert len(judged) == 2 and all(f"[1] {CHAIN_PASSAGE_TITLE}:" in p for p in judged)
    assert isinstance(engine.controller.verifier, ChainEvidenceVerifier)
    final = response.metadata["trajectory"][-1]["evidence_ids"]
    assert [n.node.node_id for n in response.source_nodes] == final and "hop2" in final


def test_llama_index_refined_answer_hides_the_noise_from_the_answer_prompt_only():
    miner = EvidenceChainMiner(MinerConfig(**MINER_CONFIG), embedder=HashedBagOfWords())
    llm = RoleLLM()
    engine = BeliefQueryEngine(
        LIScripted(),
        llm,
        config={"refine_answer": "all", "verify": "always"},
        miner=miner,
        calibrator=SUPPORT,
        after_search=HOPEFUL,
    )
    response = engine.query(QUESTION)
    answers = [p for p in llm.prompts if "Answer the question using the documents" in p]
    judged = [p for p in llm.prompts if "Judge the documents" in p]
    assert answers and judged and "hockey trophy" in judged[-1]
    assert "hockey trophy" not in answers[-1] and "Stanley." in answers[-1]
    assert "noise" in [n.node.node_id for n in response.source_nodes]  # evidence untouched


def test_llama_index_mock_llm_still_ends_with_a_typed_action():
    engine = BeliefQueryEngine(
        LIScripted(), MockLLM(), embedder=HashedBagOfWords(), config={"max_rounds": 2}
    )
    response = engine.query(QUESTION)
    assert response.metadata["final_action"] in ("answer", "stop", "abstain")
    assert response.metadata["abstained"] == (response.metadata["answer"] is None)
    assert 1 <= response.metadata["retrieval_rounds"] <= 2


def test_llama_index_bad_settings_are_config_errors():
    with pytest.raises(ConfigError, match="retriever"):
        BeliefQueryEngine(object(), RoleLLM())
    with pytest.raises(ConfigError, match="abstain_message"):
        BeliefQueryEngine(LIScripted(), RoleLLM(), abstain_message=None)
    with pytest.raises(ConfigError, match="k"):
        BeliefQueryEngine(LIScripted(), RoleLLM(), k=2.5)
    with pytest.raises(ConfigError, match="callback_manager"):
        BeliefQueryEngine(LIScripted(), RoleLLM(), callback_manager=[])
    with pytest.raises(ConfigError, match="embedder"):
        BeliefQueryEngine(
            LIScripted(), RoleLLM(), models=EvidenceChainMiner(), embedder=HashedBagOfWords()
        )


def test_the_verifier_mode_follows_what_the_fitted_models_know():
    # The shipped models are fitted on the bundled LM: with it (llm=None) the verifier is
    # asked only when a reply could change the decision; with another LLM, at every step.
    bundled = BeliefRAG(LCScripted(), None, embedder=HashedBagOfWords())
    assert bundled.config.verify == "auto"
    chat = FakeListChatModel(responses=["Stanley"])
    assert BeliefRAG(LCScripted(), chat, embedder=HashedBagOfWords()).config.verify == ("always")
    assert (
        BeliefQueryEngine(LIScripted(), MockLLM(), embedder=HashedBagOfWords()).config.verify
        == "always"
    )
    # Models refitted on your own LLM, or an explicit setting, decide instead.
    refit = BeliefRAG(LCScripted(), chat, embedder=HashedBagOfWords(), calibrator=SUPPORT)
    assert refit.config.verify == "auto"
    told = BeliefRAG(LCScripted(), chat, embedder=HashedBagOfWords(), config={"verify": "auto"})
    assert told.config.verify == "auto"
    assert BeliefController.from_models(as_chat_model(chat)).config.verify == "always"
    assert BeliefController.from_models().config.verify == "auto"
    with pytest.raises(ConfigError, match="verify"):
        BeliefRAG(LCScripted(), None, config={"verify": "sometimes"})


def test_a_preset_generator_starts_from_its_own_settings():
    # The 1.5B preset searches twice before measuring (PRESET_SETTINGS); a dict config
    # changes other fields and keeps that, an explicit field wins; other LMs keep 1.
    assert preset_settings("qwen-1.5b") == {
        "min_searches": 2,
        "max_corrections": 0,
        "refine_answer": "first-search",
    }
    assert preset_settings(None) == {} and preset_settings(object()) == {}
    bigger = BeliefRAG(LCScripted(), "qwen-1.5b", embedder=HashedBagOfWords(), k=3)
    assert bigger.config.min_searches == 2 and bigger.config.k == 3
    told = BeliefQueryEngine(
        LIScripted(), "qwen-1.5b", embedder=HashedBagOfWords(), config={"min_searches": 1}
    )
    assert told.config.min_searches == 1
    assert BeliefRAG(LCScripted(), None, embedder=HashedBagOfWords()).config.min_searches == 1
    assert BeliefController.from_models("qwen-1.5b").config.min_searches == 2
    assert BeliefController.from_models().config.min_searches == 1


class FreshNodes(LIScripted):
    """Builds new nodes without ids on every call: LlamaIndex gives each a random id."""

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        self.queries.append(query_bundle.query_str)
        out = []
        for pid in script(query_bundle.query_str):
            title, text, triples, score = DOCS[pid]
            item = TextNode(text=text, metadata={"title": title, "triples": triples})
            out.append(NodeWithScore(node=item, score=score))
        return out


class ByText(Verifier):
    """The scripted verifier, reading titles instead of ids (the ids change every call)."""

    def verify(self, question, passages, draft_answer):
        by_title = {DOCS[pid][0]: pid for pid in DOCS}
        named = [Passage(id=by_title[p.title], text=p.text, title=p.title) for p in passages]
        reply, usage = super().verify(question, named, draft_answer)
        real = {by_title[p.title]: p.id for p in passages}
        drops = tuple(real[pid] for pid in reply.drop_ids)
        return replace(reply, drop_ids=drops), usage


def test_llama_index_a_dropped_node_stays_dropped_when_the_retriever_makes_fresh_nodes():
    controller = BeliefController(
        verifier=ByText(),
        generator=Generator(),
        writer=Writer(),
        relevance=Relevance(),
        calibrator=SUPPORT,
        tuning=BeliefTuning(fitted_retrieval_value=False),
    )
    response = BeliefQueryEngine(FreshNodes(), controller=controller).query(QUESTION)
    texts = [n.node.get_content() for n in response.source_nodes]
    assert not any(t.startswith("Van Hook is a 1999 film") for t in texts)
    assert len(texts) == len(set(texts))  # and no page twice under two random ids
    actions = [step["action"] for step in response.metadata["trajectory"]]
    assert actions[:3] == ["retrieve", "verify", "retrieve"]  # dropped, then replaced


# ------------------------------------------------------------------------------------------
# Both adapters: one way to set k, user settings only, the shared properties
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("config", [{"k": 3}, {"k": 5, "max_rounds": 2}, BeliefConfig(k=3)])
def test_k_is_set_with_the_adapters_k_keyword_not_in_config(config):
    with pytest.raises(ConfigError, match=r"BeliefRAG\.config: k is set with BeliefRAG's own k="):
        BeliefRAG(LCScripted(), RoleChat(), embedder=HashedBagOfWords(), config=config)
    with pytest.raises(ConfigError, match=r"BeliefQueryEngine\(\.\.\., k="):
        BeliefQueryEngine(LIScripted(), RoleLLM(), embedder=HashedBagOfWords(), config=config)


def test_the_k_keyword_beside_a_config_dict_or_a_whole_belief_config():
    whole = BeliefConfig(max_rounds=2)  # k at its default: the keyword sets it
    rag = BeliefRAG(LCScripted(), RoleChat(), embedder=HashedBagOfWords(), config=whole, k=3)
    assert rag.config == replace(whole, k=3)
    engine = BeliefQueryEngine(
        LIScripted(), RoleLLM(), embedder=HashedBagOfWords(), config={"max_rounds": 2}, k=2
    )
    assert engine.config.k == 2 and engine.config.max_rounds == 2
    assert BeliefRAG(LCScripted(), RoleChat(), embedder=HashedBagOfWords()).config.k == 5


def test_research_settings_in_an_adapters_config_name_the_controller_way_in():
    hint = r"BeliefRAG\.config: conflict_threshold: research setting.*controller="
    with pytest.raises(ConfigError, match=hint):
        BeliefRAG(LCScripted(), RoleChat(), config={"conflict_threshold": 0.6})
    with pytest.raises(ConfigError, match="blend: research setting"):
        BeliefQueryEngine(LIScripted(), RoleLLM(), config={"blend": 0.5})


def test_both_adapters_have_the_same_belief_properties():
    for make, retriever, chat in (
        (BeliefRAG, LCScripted(), RoleChat()),
        (BeliefQueryEngine, LIScripted(), RoleLLM()),
    ):
        miner = EvidenceChainMiner(MinerConfig(**MINER_CONFIG), embedder=HashedBagOfWords())
        adapter = make(retriever, chat, chains_for_verifier=True, miner=miner, k=3)
        assert isinstance(adapter, BeliefAdapter)
        assert adapter.llm is chat
        assert adapter.config.k == 3 and adapter.controller.config is adapter.config
        assert adapter.chains_for_verifier
        assert isinstance(adapter.controller.verifier, ChainEvidenceVerifier)
        custom = scripted()
        given = make(retriever, controller=custom)
        assert given.controller is custom and given.config is custom.config
        assert given.llm is None and not given.chains_for_verifier
