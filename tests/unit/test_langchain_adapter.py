"""NeocorRAGCompressor inside the LangChain pieces users wire it into."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import numpy as np
import pytest
from adapter_fixtures import CORPUS, DROPPED_IDS, KEPT_IDS, MINER_CONFIG, QUERY
from conftest import HashedBagOfWords
from langchain_classic.retrievers import ContextualCompressionRetriever
from langchain_classic.retrievers.document_compressors import DocumentCompressorPipeline
from langchain_core.callbacks import CallbackManagerForRetrieverRun, Callbacks
from langchain_core.documents import BaseDocumentCompressor, Document
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import PromptTemplate
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables import RunnableLambda, RunnablePassthrough
from langchain_core.vectorstores import InMemoryVectorStore

from neocorrag_core.errors import InputError
from neocorrag_integrations.langchain import (
    NeocorRAGCompressor,
    NeocorRAGEmbeddings,
    is_evidence_chain_document,
)


class FixedRetriever(BaseRetriever):
    """Returns the corpus in its fixed retrieval order, whatever the query."""

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun
    ) -> list[Document]:
        return [
            Document(id=pid, page_content=text, metadata={"title": title, "triples": triples})
            for pid, title, text, triples in CORPUS
        ]


class KeepFirst(BaseDocumentCompressor):
    """A second pipeline stage: keeps the first ``k`` documents."""

    k: int

    def compress_documents(
        self, documents: Sequence[Document], query: str, callbacks: Callbacks | None = None
    ) -> Sequence[Document]:
        return list(documents)[: self.k]


def compressor(**settings) -> NeocorRAGCompressor:
    return NeocorRAGCompressor(
        embedder=HashedBagOfWords(), decoding="none", miner_config=MINER_CONFIG, **settings
    )


def test_contextual_compression_retriever_returns_chains_and_supported_documents():
    retriever = ContextualCompressionRetriever(
        base_compressor=compressor(), base_retriever=FixedRetriever()
    )
    docs = retriever.invoke(QUERY)
    assert is_evidence_chain_document(docs[0])
    assert [d.id for d in docs[1:]] == KEPT_IDS
    adocs = asyncio.run(retriever.ainvoke(QUERY))
    assert [d.id for d in adocs] == [d.id for d in docs]


def test_document_compressor_pipeline_runs_it_as_one_stage():
    pipeline = DocumentCompressorPipeline(transformers=[compressor(), KeepFirst(k=2)])
    retriever = ContextualCompressionRetriever(
        base_compressor=pipeline, base_retriever=FixedRetriever()
    )
    docs = retriever.invoke(QUERY)
    assert is_evidence_chain_document(docs[0]) and docs[1].id == "p1" and len(docs) == 2
    adocs = asyncio.run(retriever.ainvoke(QUERY))
    assert [d.id for d in adocs] == [d.id for d in docs]


def _rag_chain(retriever: BaseRetriever):
    """An LCEL chain whose 'LLM' returns the prompt it was given, so tests can read it."""
    prompt = PromptTemplate.from_template("Context:\n{context}\n\nQuestion: {question}\nAnswer:")

    def format_docs(docs: list[Document]) -> str:
        return "\n\n".join(d.page_content for d in docs)

    echo_llm = RunnableLambda(lambda value: value.to_string())
    return (
        {"context": retriever | format_docs, "question": RunnablePassthrough()}
        | prompt
        | echo_llm
        | StrOutputParser()
    )


def test_in_an_lcel_chain_the_llm_reads_the_chains_and_not_the_dropped_documents():
    plain = _rag_chain(FixedRetriever()).invoke(QUERY)
    refined_retriever = ContextualCompressionRetriever(
        base_compressor=compressor(), base_retriever=FixedRetriever()
    )
    refined = _rag_chain(refined_retriever).invoke(QUERY)
    dropped_texts = [text for pid, _, text, _ in CORPUS if pid in DROPPED_IDS]
    assert all(text in plain for text in dropped_texts)
    assert not any(text in refined for text in dropped_texts)
    assert "Evidence chains:\n1. Van Hook Township - located in -> Mountrail County" in refined
    assert "Evidence chains" not in plain
    assert asyncio.run(_rag_chain(refined_retriever).ainvoke(QUERY)) == refined


def test_over_an_in_memory_vector_store():
    store = InMemoryVectorStore(embedding=NeocorRAGEmbeddings(HashedBagOfWords()))
    store.add_documents(FixedRetriever().invoke(""))
    base = store.as_retriever(search_kwargs={"k": 5})
    retrieved = base.invoke(QUERY)
    docs = ContextualCompressionRetriever(base_compressor=compressor(), base_retriever=base).invoke(
        QUERY
    )
    kept = [d for d in docs if not is_evidence_chain_document(d)]
    assert [d.id for d in kept] == [d.id for d in retrieved if d.id in {k.id for k in kept}]
    assert [d.metadata["neocorrag_retrieval_rank"] for d in kept] == [
        [r.id for r in retrieved].index(d.id) + 1 for d in kept
    ]
    assert is_evidence_chain_document(docs[0])


def test_embeddings_are_unit_length_and_query_matches_documents():
    embeddings = NeocorRAGEmbeddings(HashedBagOfWords())
    vectors = np.asarray(embeddings.embed_documents(["Stanley is a city", "Paris"]))
    assert vectors.shape == (2, 256)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0)
    assert embeddings.embed_query("Paris") == pytest.approx(vectors[1].tolist())


def test_embeddings_reject_what_is_not_text():
    embeddings = NeocorRAGEmbeddings(HashedBagOfWords())
    with pytest.raises(InputError, match=r"texts\[1\] is a NoneType"):
        embeddings.embed_documents(["Paris", None])
    with pytest.raises(InputError, match="texts must be a list of strings, got str"):
        embeddings.embed_documents("Paris")  # would embed each character
    with pytest.raises(InputError, match="text must be a string, got list"):
        embeddings.embed_query(["Paris"])
    assert embeddings.embed_documents([]) == []


def test_compressor_in_a_compression_retriever_rejects_a_missing_query():
    retriever = ContextualCompressionRetriever(
        base_compressor=compressor(), base_retriever=FixedRetriever()
    )
    with pytest.raises(InputError, match="NeocorRAGCompressor: the query is empty"):
        retriever.invoke("")
    with pytest.raises(InputError, match="NeocorRAGCompressor: the query must be"):
        compressor().compress_documents(FixedRetriever().invoke("x"), None)
