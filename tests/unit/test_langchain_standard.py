"""LangChain's own standard test suites (``langchain-tests``) on neocorrag's LangChain classes.

* :class:`EvidenceReformulationRetriever` runs ``RetrieversIntegrationTests``, wrapping an
  ``InMemoryVectorStore`` over langchain_core's ``DeterministicFakeEmbedding`` (no model,
  no network), with the bag-of-words embedder for EviReform's own scoring and no LM.
* :class:`NeocorRAGEmbeddings` runs ``EmbeddingsIntegrationTests`` and
  ``EmbeddingsUnitTests`` over the bag-of-words embedder.

The suites have no test for a ``BaseDocumentCompressor`` (``NeocorRAGCompressor``), and
``VectorStoreIntegrationTests`` tests a vector store, which neocorrag does not provide.
Nothing here is overridden or skipped: ``test_no_overrides_DO_NOT_OVERRIDE`` checks that.

The suites' async tests are plain ``async def`` (LangChain's packages run them under
pytest-asyncio's ``asyncio_mode = "auto"``); this repository keeps pytest-asyncio's strict
mode, so the classes carry the ``asyncio`` mark, and the warning pytest-asyncio gives for
the mark on their sync tests is filtered here, for these classes only.
"""

from __future__ import annotations

from typing import Any

import pytest
from adapter_fixtures import BRIDGE_CORPUS, BRIDGE_NO_LM, BRIDGE_QUESTION
from conftest import HashedBagOfWords
from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_core.vectorstores import InMemoryVectorStore
from langchain_tests.integration_tests import (
    EmbeddingsIntegrationTests,
    RetrieversIntegrationTests,
)
from langchain_tests.unit_tests import EmbeddingsUnitTests

from neocorrag_integrations.langchain import EvidenceReformulationRetriever, NeocorRAGEmbeddings

ASYNC_IN_STRICT_MODE = [
    pytest.mark.asyncio,
    pytest.mark.filterwarnings(
        "ignore:The test <Function .*> is marked with '@pytest.mark.asyncio' but it is not "
        "an async function:pytest.PytestWarning"
    ),
]


def vector_store_retriever(k: int = 5) -> Any:
    """A plain LangChain retriever over the EviReform corpus: deterministic, model-free."""
    store = InMemoryVectorStore(embedding=DeterministicFakeEmbedding(size=32))
    store.add_documents(
        [
            Document(id=pid, page_content=text, metadata={"title": title, "triples": triples})
            for pid, title, text, triples in BRIDGE_CORPUS
        ]
    )
    return store.as_retriever(search_kwargs={"k": k})


class TestEvidenceReformulationRetrieverStandard(RetrieversIntegrationTests):
    """``RetrieversIntegrationTests``: ``k`` at construction and per call, sync and async."""

    pytestmark = ASYNC_IN_STRICT_MODE

    @property
    def retriever_constructor(self) -> type[EvidenceReformulationRetriever]:
        return EvidenceReformulationRetriever

    @property
    def retriever_constructor_params(self) -> dict[str, Any]:
        return {
            "retriever": vector_store_retriever(),
            "config": BRIDGE_NO_LM,
            "embedder": HashedBagOfWords(),
            "k": 5,
        }

    @property
    def retriever_query_example(self) -> str:
        return BRIDGE_QUESTION


class TestNeocorRAGEmbeddingsIntegrationStandard(EmbeddingsIntegrationTests):
    """``EmbeddingsIntegrationTests``: embed_query / embed_documents and their async forms."""

    pytestmark = ASYNC_IN_STRICT_MODE

    @property
    def embeddings_class(self) -> type[NeocorRAGEmbeddings]:
        return NeocorRAGEmbeddings

    @property
    def embedding_model_params(self) -> dict[str, Any]:
        return {"embedder": HashedBagOfWords()}


class TestNeocorRAGEmbeddingsUnitStandard(EmbeddingsUnitTests):
    """``EmbeddingsUnitTests``: construction. ``test_init_from_env`` has nothing to check
    (the class reads no environment variable, so ``init_from_env_params`` stays empty)."""

    @property
    def embeddings_class(self) -> type[NeocorRAGEmbeddings]:
        return NeocorRAGEmbeddings

    @property
    def embedding_model_params(self) -> dict[str, Any]:
        return {"embedder": HashedBagOfWords()}


def test_the_retriever_suite_would_catch_an_ignored_per_call_k():
    # The regression the suite found: invoke(query, k=1) returned the configured 5.
    params = TestEvidenceReformulationRetrieverStandard().retriever_constructor_params
    retriever = EvidenceReformulationRetriever(**params)
    assert len(retriever.invoke(BRIDGE_QUESTION)) == 5
    assert len(retriever.invoke(BRIDGE_QUESTION, k=1)) == 1
