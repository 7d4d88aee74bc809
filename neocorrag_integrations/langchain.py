"""LangChain adapter: :class:`NeocorRAGCompressor`, a drop-in ``BaseDocumentCompressor``.

Wrap the retriever you already have::

    from langchain_classic.retrievers import ContextualCompressionRetriever
    from neocorrag_integrations.langchain import NeocorRAGCompressor

    retriever = ContextualCompressionRetriever(
        base_compressor=NeocorRAGCompressor(), base_retriever=your_retriever
    )

Needs only ``langchain-core`` at run time (``pip install 'neocorrag[langchain]'``).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence
from typing import Any

try:
    from langchain_core.callbacks import Callbacks
    from langchain_core.documents import BaseDocumentCompressor, Document
    from langchain_core.embeddings import Embeddings
except ImportError as err:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        "neocorrag_integrations.langchain needs langchain-core: pip install 'neocorrag[langchain]'"
    ) from err

from neocorrag_integrations._common import (
    CHAIN_IDS,
    CHAINS,
    DROPPED_IDS,
    DROPPED_RANKS,
    FALLBACK,
    IS_EVIDENCE_CHAINS,
    KEPT_REASON,
    NUM_CANDIDATES,
    RETRIEVAL_RANK,
    TIMINGS,
    Refinement,
    RefinerSettings,
    SourceDocument,
)

__all__ = [
    "CHAINS",
    "CHAIN_IDS",
    "DROPPED_IDS",
    "DROPPED_RANKS",
    "FALLBACK",
    "IS_EVIDENCE_CHAINS",
    "KEPT_REASON",
    "NUM_CANDIDATES",
    "RETRIEVAL_RANK",
    "TIMINGS",
    "NeocorRAGCompressor",
    "NeocorRAGEmbeddings",
    "is_evidence_chain_document",
]


class NeocorRAGCompressor(RefinerSettings, BaseDocumentCompressor):
    """Drops the low-ranked documents no evidence chain supports and adds the chains.

    Returns copies of the kept documents in their retrieval order (``id`` and metadata
    kept, plus ``neocorrag_kept_reason``, ``neocorrag_retrieval_rank``,
    ``neocorrag_chain_ids`` and ``neocorrag_fallback``) and, when chains were found and
    ``include_chains`` is set, one extra document holding the chains, flagged with
    ``metadata["neocorrag_evidence_chains"] = True`` and placed ``chains_position``.
    When the documents yield no triples or no chain, every document comes back (as a copy)
    and ``neocorrag_fallback`` says why. The documents passed in are never modified.

    Triples come from ``metadata["triples"]`` unless ``triple_source=`` (a triple store or
    an extractor) or a ``miner=`` with its own source is given. See
    :class:`~neocorrag_integrations._common.RefinerSettings` for every setting.
    """

    def compress_documents(
        self,
        documents: Sequence[Document],
        query: str,
        callbacks: Callbacks | None = None,
    ) -> Sequence[Document]:
        """Refine ``documents`` (in retrieval order) for ``query``."""
        documents = list(documents)
        if not documents:
            return []
        return self._build(documents, self.plan(query, _source_documents(documents)))

    async def acompress_documents(
        self,
        documents: Sequence[Document],
        query: str,
        callbacks: Callbacks | None = None,
    ) -> Sequence[Document]:
        """Async :meth:`compress_documents`: mining runs in a worker thread, the event loop
        stays free, and the engine's locks keep concurrent calls safe."""
        documents = list(documents)
        if not documents:
            return []
        plan = await asyncio.to_thread(self.plan, query, _source_documents(documents))
        return self._build(documents, plan)

    def _build(self, documents: list[Document], plan: Refinement) -> list[Document]:
        out: list[Document] = []
        for item in plan.layout(include_chains=self.include_chains, position=self.chains_position):
            if item is None:
                out.append(
                    Document(
                        id=plan.chain_id,
                        page_content=plan.chain_text,
                        metadata=dict(plan.chain_metadata),
                    )
                )
            else:
                kept = documents[item.index].model_copy(deep=True)
                kept.metadata = {**kept.metadata, **item.metadata}
                out.append(kept)
        return out


class NeocorRAGEmbeddings(Embeddings):
    """LangChain ``Embeddings`` over neocorrag's embedder: the bundled MiniLM by default.

    For building a vector store offline without another package; the model loads on the
    first call. ``embedder`` takes anything :func:`neocorrag_core.models.resolve_embedder`
    accepts. Pass the same object as the compressor's ``embedder=`` to load the model once.
    """

    def __init__(self, embedder: Any = None) -> None:
        self._spec = embedder
        self._embedder: Any = None
        self._lock = threading.Lock()

    def _resolved(self) -> Any:
        with self._lock:
            if self._embedder is None:
                from neocorrag_core.models import resolve_embedder

                self._embedder = resolve_embedder(self._spec)
        return self._embedder

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """Unit-length vectors, one per text."""
        return self._resolved().embed(list(texts)).tolist()

    def embed_query(self, text: str) -> list[float]:
        """The unit-length vector of one query."""
        return self.embed_documents([text])[0]


def is_evidence_chain_document(document: Document) -> bool:
    """Whether ``document`` is the evidence-chain document this compressor adds."""
    return document.metadata.get(IS_EVIDENCE_CHAINS) is True


def _source_documents(documents: Sequence[Document]) -> list[SourceDocument]:
    for i, doc in enumerate(documents):
        if not isinstance(doc, Document):
            raise TypeError(
                f"documents[{i}] is a {type(doc).__name__}; NeocorRAGCompressor takes "
                "langchain_core Document objects"
            )
    return [SourceDocument(doc.id, doc.page_content, doc.metadata) for doc in documents]
