"""Evaluate your own pipeline (issue 63.1): your questions file, your search or Chroma
collection, your chat model as the reader."""

from __future__ import annotations

import json
import re

import pytest

from neocorrag_core.errors import ConfigError
from neocorrag_core.eval import compare, load_qa
from neocorrag_core.eval.estimate import estimate
from neocorrag_core.eval.reader import ChatReader
from neocorrag_core.eval.settings import EvalSettings
from neocorrag_core.lm.chat import text_reply
from neocorrag_core.triples import MetadataTripleSource
from neocorrag_core.types import Passage

CORPUS = [
    Passage(
        "doc-film",
        "Moon Harbor is a 1990 film directed by Tom Reyes.",
        "Moon Harbor",
        metadata={"triples": [["Moon Harbor", "directed by", "Tom Reyes"]]},
    ),
    Passage(
        "doc-reyes",
        "Tom Reyes was born in Porto.",
        "Tom Reyes",
        metadata={"triples": [["Tom Reyes", "born in", "Porto"]]},
    ),
    *(
        Passage(
            f"doc-{i}",
            f"Sun Valley {i} is a town in Spain.",
            f"Sun Valley {i}",
            metadata={"triples": [[f"Sun Valley {i}", "located in", "Spain"]]},
        )
        for i in range(4)
    ),
]
QUESTIONS = [
    {"id": "q1", "question": "Where was the director of Moon Harbor born?", "answers": ["Porto"],
     "gold_ids": ["doc-film", "doc-reyes"]},
    {"id": "q2", "question": "Who directed Moon Harbor?", "answer": "Tom Reyes",
     "gold_titles": ["moon  HARBOR"]},
    {"id": "q3", "question": "Which country is Sun Valley 2 in?", "answers": "Spain"},
]  # fmt: skip


def _search(query: str, k: int) -> list[Passage]:
    words = set(re.findall(r"\w+", query.casefold()))
    scored = sorted(CORPUS, key=lambda p: -len(words & set(re.findall(r"\w+", p.text.casefold()))))
    return [
        Passage(p.id, p.text, p.title, 1.0 / (r + 1), dict(p.metadata))
        for r, p in enumerate(scored[:k])
    ]


class EchoChat:
    """A fake chat model: answers with the last word before a period in the context that
    also appears in its table, and reports its own token counts."""

    name = "echo"

    def __init__(self) -> None:
        self.calls = 0

    def ask(self, messages, schema=None):
        self.calls += 1
        prompt = messages[-1]["content"]
        for answer in ("Porto", "Tom Reyes", "Spain"):
            if (
                answer in prompt.split("Question:")[0]
                and answer not in prompt.split("Question:")[1]
            ):
                return text_reply(answer, messages, prompt_tokens=100, generated_tokens=3)
        return text_reply("unknown", messages, prompt_tokens=100, generated_tokens=1)


def test_your_questions_file_in_json_lines_and_csv(tmp_path):
    jsonl = tmp_path / "mine.jsonl"
    jsonl.write_text("\n".join(json.dumps(q) for q in QUESTIONS) + "\n")
    examples, report = load_qa(jsonl)
    assert report.format == "questions" and [e.id for e in examples] == ["q1", "q2", "q3"]
    assert examples[0].gold_ids == {"doc-film", "doc-reyes"} and examples[0].passages == ()
    assert examples[1].answers == ("Tom Reyes",) and examples[1].gold_titles == {"moon harbor"}
    assert examples[2].gold_ids == frozenset() and examples[2].gold_titles == frozenset()
    csv = tmp_path / "mine.csv"
    csv.write_text(
        "question,answers,gold_ids\nWho directed Moon Harbor?,Tom Reyes|T. Reyes,doc-film\n"
    )
    (example,), report = load_qa(csv)
    assert report.format == "questions"
    assert example.answers == ("Tom Reyes", "T. Reyes") and example.gold_ids == {"doc-film"}


def test_bad_gold_lists_are_skipped_and_counted(tmp_path):
    path = tmp_path / "mine.jsonl"
    rows = [{"question": "Q?", "answers": ["A"], "gold_ids": {"not": "a list"}}, QUESTIONS[0]]
    path.write_text("\n".join(json.dumps(r) for r in rows))
    examples, report = load_qa(path)
    assert [e.id for e in examples] == ["q1"]
    assert sum(report.skipped.values()) == 1


def test_compare_runs_your_search_and_your_chat_model(tmp_path, bow_embedder):
    chat = EchoChat()
    results = compare(
        QUESTIONS,
        _search,
        out=tmp_path / "run",
        reader=chat,
        methods=("none", "neocorrag-recall", "evireform-refined"),
        k=3,
        embedder=bow_embedder,
        triple_source=MetadataTripleSource(),
        show_progress=False,
        plots=False,
    )
    assert set(results["methods"]) == {"none", "neocorrag-recall", "evireform-refined"}
    none = results["methods"]["none"]
    assert none["questions"] == 3 and none["with_gold"] == 2
    assert none["em"] > 0  # the chat model answered from the retrieved passages
    assert chat.calls >= 3
    records = [
        json.loads(line)
        for line in (tmp_path / "run" / "cache" / "none.jsonl").read_text().splitlines()
    ]
    by_id = {r["qid"]: r for r in records}
    assert by_id["q1"]["reader_prompt_tokens"] == 100  # the model's own count
    assert by_id["q2"]["gold_ids"] == ["title:moon harbor"] and by_id["q2"]["recall"] == 1.0
    assert by_id["q3"]["has_gold"] is False
    report = (tmp_path / "run" / "report.md").read_text()
    assert "chat:echo" in json.dumps(results["settings"])
    assert "evireform-refined" in report


def test_compare_without_gold_shows_retrieval_as_not_measured(tmp_path, bow_embedder):
    rows = [{"id": "q", "question": "Who directed Moon Harbor?", "answers": ["Tom Reyes"]}]
    compare(rows, _search, out=tmp_path, reader=EchoChat(), methods=("none",),
            embedder=bow_embedder, triple_source=MetadataTripleSource(),
            show_progress=False, plots=False)  # fmt: skip
    table = (tmp_path / "report.md").read_text()
    row = next(line for line in table.splitlines() if line.startswith("| none |"))
    assert row.split("|")[2].strip() == "–"  # Recall@k: no gold passage named


def test_compare_refuses_what_it_cannot_use(tmp_path):
    with pytest.raises(ConfigError, match="search must be callable"):
        compare(QUESTIONS, "not a search", out=tmp_path)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="reader must be a ChatModel"):
        compare(QUESTIONS, _search, out=tmp_path, reader=object())
    with pytest.raises(ConfigError, match=r"questions\[1\]"):
        compare([QUESTIONS[0], "text"], _search, out=tmp_path)  # type: ignore[list-item]
    with pytest.raises(ConfigError, match="no questions file"):
        compare(tmp_path / "missing.jsonl", _search, out=tmp_path)
    with pytest.raises(TypeError, match="ChatModel"):
        ChatReader(object())


def test_questions_without_passages_need_a_store(tmp_path, bow_embedder):
    from neocorrag_core.eval.runner import run_evaluation

    path = tmp_path / "mine.jsonl"
    path.write_text(json.dumps(QUESTIONS[0]))
    settings = EvalSettings(
        data=str(path), out=str(tmp_path / "o"), methods=("none",), reader="none"
    )
    with pytest.raises(ValueError, match="--collection"):
        run_evaluation(settings, embedder=bow_embedder, show_progress=False)
    with pytest.raises(ValueError, match="--vector-store"):
        EvalSettings(data=str(path), out=str(tmp_path), collection="mine")


def test_your_chroma_collection_as_it_is(tmp_path, bow_embedder):
    chromadb = pytest.importorskip("chromadb")
    from chromadb.config import Settings

    from neocorrag_core.eval.runner import run_evaluation

    client = chromadb.PersistentClient(
        path=str(tmp_path / "chroma"), settings=Settings(anonymized_telemetry=False)
    )
    collection = client.create_collection("mine", metadata={"hnsw:space": "cosine"})
    collection.add(
        ids=[p.id for p in CORPUS],
        documents=[p.text for p in CORPUS],
        metadatas=[{"title": p.title} for p in CORPUS],
        embeddings=bow_embedder.embed([p.text for p in CORPUS]),
    )
    before = collection.count()
    path = tmp_path / "mine.jsonl"
    path.write_text("\n".join(json.dumps(q) for q in QUESTIONS))
    settings = EvalSettings(
        data=str(path), out=str(tmp_path / "o"), methods=("none",), reader="none",
        vector_store=str(tmp_path / "chroma"), collection="mine", plots=False,
    )  # fmt: skip
    results = run_evaluation(
        settings, embedder=bow_embedder, triple_source=MetadataTripleSource(), show_progress=False
    )
    assert results["methods"]["none"]["recall"] > 0
    assert collection.count() == before  # nothing was added to the user's collection
    wrong = EvalSettings(
        data=str(path), out=str(tmp_path / "p"), methods=("none",), reader="none",
        vector_store=str(tmp_path / "chroma"), collection="theirs",
    )  # fmt: skip
    with pytest.raises(ConfigError, match=r"'theirs'.*collections: mine"):
        run_evaluation(wrong, embedder=bow_embedder, show_progress=False)


def test_the_estimate_suggests_a_first_look():
    todo = [(object(), ["none", "evireform-refined", "neocorrag-recall"])] * 200
    est = estimate(todo, reader=None)
    assert est.questions == 200 and est.runs == 600
    message = est.message()
    assert "200 question(s)" in message and "--limit" in message
    assert est.first_look() < 200
    assert "--limit" not in estimate(todo[:3], reader=None).message()


def test_langchain_evaluate_with_a_langchain_chat_model(tmp_path, bow_embedder):
    pytest.importorskip("langchain_core")
    from langchain_core.documents import Document
    from langchain_core.language_models.fake_chat_models import FakeListChatModel
    from langchain_core.retrievers import BaseRetriever

    from neocorrag_integrations.langchain import evaluate

    class Mine(BaseRetriever):
        def _get_relevant_documents(self, query, *, run_manager):
            return [
                Document(page_content=p.text, id=p.id, metadata={"title": p.title, **p.metadata})
                for p in _search(query, 3)
            ]

    llm = FakeListChatModel(responses=["Porto"] * 20)
    results = evaluate(QUESTIONS[:1], Mine(), out=str(tmp_path), llm=llm, methods=("none",),
                       embedder=bow_embedder, triple_source=MetadataTripleSource())  # fmt: skip
    assert results["methods"]["none"]["em"] == 1.0
    assert results["methods"]["none"]["recall"] == 1.0


def test_llama_index_evaluate_with_a_llama_index_llm(tmp_path, bow_embedder):
    pytest.importorskip("llama_index.core")
    from llama_index.core.llms import MockLLM
    from llama_index.core.retrievers import BaseRetriever
    from llama_index.core.schema import NodeWithScore, TextNode

    from neocorrag_integrations.llama_index import evaluate

    class Mine(BaseRetriever):
        def _retrieve(self, query_bundle):
            return [
                NodeWithScore(
                    node=TextNode(id_=p.id, text=p.text, metadata={"title": p.title}), score=p.score
                )
                for p in _search(query_bundle.query_str, 3)
            ]

    results = evaluate(
        QUESTIONS[:1],
        Mine(),
        out=str(tmp_path),
        llm=MockLLM(max_tokens=5),
        methods=("none",),
        embedder=bow_embedder,
        triple_source=MetadataTripleSource(),
    )
    none = results["methods"]["none"]
    assert none["recall"] == 1.0 and none["reader_tokens"] > 0
