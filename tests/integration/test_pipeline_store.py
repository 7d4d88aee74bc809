"""The composed pipeline on a persistent Chroma store, as a deployment runs it: one process
indexes (the ingestion transform writes triples and their vectors; Chroma keeps the
documents), later processes reopen the folder and query through
``EvidencePipelineRetriever``.

Each process is a fresh interpreter (``subprocess``), so nothing survives in memory: the same
answers after a restart come from the store. The embedder is a tiny sentence-transformers
folder (no weight package); triples come from spaCy at indexing time only: the query process
blocks spaCy's import, so a query that tried to extract would fail.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("chromadb")
pytest.importorskip("langchain_chroma")

from tiny_models import save_tiny_embedder

from neocorrag_core.triples import spacy_available

pytestmark = pytest.mark.skipif(not spacy_available(), reason="needs the spacy extra")

CORPUS = [
    ("film-x", "Film X", "Film X is a 1999 drama film directed by Jane Roe."),
    ("jane-roe", "Jane Roe", "Jane Roe is a film director. Jane Roe was born in Oslo."),
    ("film-y", "Film Y", "Film Y is a 2004 comedy film directed by John Smith."),
    ("john-smith", "John Smith", "John Smith was born in Leeds."),
    ("oslo", "Oslo", "Oslo is the capital of Norway."),
    ("bergen", "Bergen", "Bergen is a city in Norway."),
    ("leeds", "Leeds", "Leeds is a city in England."),
]
QUESTIONS = ["Where was the director of Film X born?", "Who directed Film Y?"]

COMMON = """
import json, sys
import chromadb
from chromadb.config import Settings
from langchain_chroma import Chroma
from langchain_core.documents import Document
from neocorrag_core.triples import DefaultTripleSource
from neocorrag_integrations.langchain import (
    EvidencePipelineRetriever, NeocorRAGEmbeddings, TripleExtractorTransformer)

folder, embedder = sys.argv[1], sys.argv[2]
corpus, questions = json.loads(sys.argv[3]), json.loads(sys.argv[4])
embeddings = NeocorRAGEmbeddings(embedder)
settings = Settings(anonymized_telemetry=False)

def open_store():
    client = chromadb.PersistentClient(path=folder + "/chroma", settings=settings)
    return Chroma(client=client, collection_name="corpus", embedding_function=embeddings)

sent = set()

def answers(pipeline):
    out = {}
    for q in questions:
        docs = pipeline.invoke(q)
        out[q] = [[d.id, d.page_content, d.metadata["neocorrag_kept_reason"]] for d in docs]
        sent.update(r["text"] for d in docs for r in d.metadata["neocorrag_residual_queries"])
    return out

def pipeline_on(store):
    return EvidencePipelineRetriever.from_retriever(
        store.as_retriever(search_kwargs={"k": 4}), k=4, embedder=embeddings,
        miner_config={"tau_edge": 0.0, "tau_boost": 0.0},
        triple_source=DefaultTripleSource(store=folder + "/triples.sqlite"))
"""

INDEX = (
    COMMON
    + """
docs = [Document(id=i, page_content=text, metadata={"title": title}) for i, title, text in corpus]
transformer = TripleExtractorTransformer(
    store=folder + "/triples.sqlite", metadata_format="json", embedder=embedder)
store = open_store()
store.add_documents(transformer.transform_documents(docs))
print(json.dumps(answers(pipeline_on(store))))
"""
)

QUERY = (
    "import sys\nsys.modules['spacy'] = None  # a query that tried to extract would fail\n"
    + COMMON
    + """
encoded = []
engine = embeddings.text_embedder()
encode = engine._encode_batch
def counted(texts):
    encoded.extend(texts)
    return encode(texts)
engine._encode_batch = counted
result = answers(pipeline_on(open_store()))
print(json.dumps({"answers": result, "encoded": encoded, "residual": sorted(sent)}))
"""
)


def _run(code: str, *args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout.strip().splitlines()[-1]


def test_the_pipeline_survives_a_restart_and_a_query_embeds_only_queries(tmp_path: Path) -> None:
    embedder = str(save_tiny_embedder(tmp_path / "tiny_embedder"))
    args = (str(tmp_path), embedder, json.dumps(CORPUS), json.dumps(QUESTIONS))
    indexed = json.loads(_run(INDEX, *args))
    first = json.loads(_run(QUERY, *args))
    second = json.loads(_run(QUERY, *args))
    assert first["answers"] == indexed  # the same answers in a fresh process
    assert second["answers"] == indexed
    for question in QUESTIONS:
        assert indexed[question], question
    # Only queries were embedded, each once: the questions, the residual queries EviReform
    # sent, and the names the questions give (the miner embeds a question's capitalised
    # names with it, and one that names no node of the call's graph has no stored vector);
    # never a passage, a node or a triple (their vectors are in the store).
    from neocorrag_core.text.capitals import question_spans

    names = {span for q in QUESTIONS for span in question_spans(q)}
    assert set(QUESTIONS) <= set(first["encoded"])
    assert set(first["encoded"]) <= set(QUESTIONS) | set(first["residual"]) | names
    assert len(first["encoded"]) == len(set(first["encoded"]))


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_the_same_pipeline_runs_on_a_chroma_server(tmp_path: Path) -> None:
    """The server form of the store (``chroma run``, from the same package): only the client
    changes (``HttpClient`` instead of ``PersistentClient``)."""
    import time

    import chromadb
    from chromadb.config import Settings
    from conftest import HashedBagOfWords
    from langchain_chroma import Chroma
    from langchain_core.documents import Document

    from neocorrag_integrations.langchain import EvidencePipelineRetriever, NeocorRAGEmbeddings

    server = Path(sys.executable).parent / "chroma"
    if not server.exists():
        pytest.skip("the chroma server script is not installed beside this Python")
    port = _free_port()
    process = subprocess.Popen(
        [str(server), "run", "--path", str(tmp_path / "server"), "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        settings = Settings(anonymized_telemetry=False)
        deadline = time.monotonic() + 60
        while True:
            try:
                client = chromadb.HttpClient(host="127.0.0.1", port=port, settings=settings)
                client.heartbeat()
                break
            except Exception:
                if time.monotonic() > deadline or process.poll() is not None:
                    raise
                time.sleep(0.5)
        embeddings = NeocorRAGEmbeddings(HashedBagOfWords())
        store = Chroma(client=client, collection_name="corpus", embedding_function=embeddings)
        triples = {
            "film-x": [["Film X", "directed by", "Jane Roe"]],
            "jane-roe": [["Jane Roe", "born in", "Oslo"]],
        }
        store.add_documents(
            [
                Document(
                    id=i,
                    page_content=text,
                    metadata={"title": title, "triples": json.dumps(triples.get(i, []))},
                )
                for i, title, text in CORPUS
            ]
        )
        pipeline = EvidencePipelineRetriever.from_retriever(
            store.as_retriever(search_kwargs={"k": 3}),
            k=3,
            embedder=embeddings,
            miner_config={"tau_edge": 0.0, "tau_boost": 0.0},
            triple_source=None,
        )
        out = pipeline.invoke(QUESTIONS[0])
        assert out and all(d.metadata["neocorrag_kept_reason"] for d in out)
        assert "film-x" in [d.id for d in out]
    finally:
        process.terminate()
        process.wait(timeout=30)
