"""``neocorrag eval`` on the real default models: one MuSiQue question, two cheap methods.

Marked ``real_models``; needs the ``bundled`` and ``bundled-lm`` extras and the shared data folder.
"""

from __future__ import annotations

import json

import pytest
from conftest import SHARED_DATA

from neocorrag_core.cli.app import main

pytestmark = pytest.mark.real_models

MUSIQUE = SHARED_DATA / "musique" / "hipporag_musique_train_100.json"
OPENIE = SHARED_DATA / "musique" / "hipporag_musique_train_openie_gpt35.json"


@pytest.mark.skipif(not MUSIQUE.is_file(), reason="shared data not present")
def test_cli_eval_on_real_models(tmp_path, capsys):
    out = tmp_path / "run"
    args = ["eval", "--data", str(MUSIQUE), "--triples", str(OPENIE), "--limit", "1"]
    args += ["--methods", "none", "neocorrag-recall", "--out", str(out), "--max-new-tokens", "8"]
    assert main(args) == 0
    results = json.loads((out / "results.json").read_text())
    assert results["questions_compared"] == 1
    none, mined = results["methods"]["none"], results["methods"]["neocorrag-recall"]
    assert none["atd"] == 5 and mined["atd"] <= 5
    assert none["reader_tokens"] > 100
    assert "neocorrag eval report" in capsys.readouterr().out


def test_cli_eval_on_your_own_questions_and_chroma_collection(tmp_path, capsys):
    """A user's own JSON-lines file over their own Chroma collection (built with the bundled
    embedder, as NeocorRAGEmbeddings builds it), the bundled LM answering."""
    chromadb = pytest.importorskip("chromadb")
    from chromadb.config import Settings

    from neocorrag_core.models import resolve_embedder

    passages = {
        "film": ("Moon Harbor", "Moon Harbor is a 1990 drama film directed by Tom Reyes."),
        "reyes": ("Tom Reyes", "Tom Reyes is a Portuguese director who was born in Porto."),
        "town": ("Sun Valley", "Sun Valley is a small town in Idaho, United States."),
    }
    embedder = resolve_embedder(None)
    client = chromadb.PersistentClient(
        path=str(tmp_path / "chroma"), settings=Settings(anonymized_telemetry=False)
    )
    collection = client.create_collection("mine", metadata={"hnsw:space": "cosine"})
    collection.add(
        ids=list(passages),
        documents=[text for _, text in passages.values()],
        metadatas=[{"title": title} for title, _ in passages.values()],
        embeddings=embedder.embed([text for _, text in passages.values()]),
    )
    data = tmp_path / "mine.jsonl"
    rows = [
        {"question": "Where was the director of Moon Harbor born?", "answers": ["Porto"],
         "gold_ids": ["film", "reyes"]},
        {"question": "Which state is Sun Valley in?", "answers": ["Idaho"]},
    ]  # fmt: skip
    data.write_text("\n".join(json.dumps(r) for r in rows))
    out = tmp_path / "run"
    args = ["eval", "--data", str(data), "--vector-store", str(tmp_path / "chroma")]
    args += ["--collection", "mine", "--top-k", "2", "--triples", "spacy", "--no-plots"]
    args += ["--methods", "none", "neocorrag-recall", "--out", str(out), "--max-new-tokens", "8"]
    assert main(args) == 0
    results = json.loads((out / "results.json").read_text())
    none = results["methods"]["none"]
    assert none["questions"] == 2 and none["with_gold"] == 1
    assert none["recall"] == 1.0  # both gold documents among the collection's top 2
    assert none["reader_tokens"] > 20
    assert collection.count() == 3
    assert "neocorrag eval" in capsys.readouterr().err  # the time estimate came first


def test_evaluate_with_a_real_langchain_chat_model(tmp_path):
    """``evaluate`` with a LangChain chat model that runs a real LLM (the bundled 0.5B behind
    LangChain's chat-model interface, as a user's own model would be) over a LangChain
    retriever: the answers are the model's, translated through ``as_chat_model``."""
    pytest.importorskip("langchain_core")
    from langchain_core.documents import Document
    from langchain_core.language_models.chat_models import BaseChatModel
    from langchain_core.messages import AIMessage
    from langchain_core.outputs import ChatGeneration, ChatResult
    from langchain_core.retrievers import BaseRetriever

    from neocorrag_core.lm.generation import chat_prompt_ids, greedy_generate
    from neocorrag_core.models import resolve_lm
    from neocorrag_integrations.langchain import evaluate

    lm = resolve_lm("default")

    class LocalChat(BaseChatModel):
        calls: int = 0

        @property
        def _llm_type(self) -> str:
            return "local-test"

        def _generate(self, messages, stop=None, run_manager=None, **kwargs):
            self.calls += 1
            ids = chat_prompt_ids(lm, "\n\n".join(str(m.content) for m in messages))
            text = lm.tokenizer.decode(greedy_generate(lm, ids, 8), skip_special_tokens=True)
            return ChatResult(generations=[ChatGeneration(message=AIMessage(content=text))])

    corpus = [
        Document(id="film", page_content="Moon Harbor is a 1990 film directed by Tom Reyes.",
                 metadata={"title": "Moon Harbor"}),
        Document(id="reyes", page_content="Tom Reyes is a director who was born in Porto.",
                 metadata={"title": "Tom Reyes"}),
    ]  # fmt: skip

    class Mine(BaseRetriever):
        def _get_relevant_documents(self, query, *, run_manager):
            return list(corpus)

    chat = LocalChat()
    rows = [{"id": "q1", "question": "Who directed Moon Harbor?", "answers": ["Tom Reyes"],
             "gold_ids": ["film"]}]  # fmt: skip
    results = evaluate(rows, Mine(), out=str(tmp_path), llm=chat, methods=("none",), k=2)
    none = results["methods"]["none"]
    assert chat.calls == 1 and none["recall"] == 1.0
    assert none["reader_tokens"] > 20
    record = json.loads((tmp_path / "cache" / "none.jsonl").read_text().splitlines()[0])
    assert record["raw_prediction"].strip()  # the model's own words
