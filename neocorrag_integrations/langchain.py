"""LangChain adapters: :class:`NeocorRAGCompressor`, a drop-in ``BaseDocumentCompressor``,
and :class:`EvidenceReformulationRetriever`, a ``BaseRetriever`` that searches again for
the evidence your retriever missed.

Wrap the retriever you already have::

    from langchain_classic.retrievers import ContextualCompressionRetriever
    from neocorrag_integrations.langchain import (
        EvidenceReformulationRetriever,
        NeocorRAGCompressor,
    )

    retriever = ContextualCompressionRetriever(
        base_compressor=NeocorRAGCompressor(), base_retriever=your_retriever
    )
    # or: search again for the missing hops, then refine
    compressor = NeocorRAGCompressor()
    retriever = ContextualCompressionRetriever(
        base_compressor=compressor,
        base_retriever=EvidenceReformulationRetriever(retriever=your_retriever, models=compressor),
    )

Needs only ``langchain-core`` at run time (``pip install 'neocorrag[langchain]'``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

try:
    from langchain_core.callbacks import (
        AsyncCallbackManagerForRetrieverRun,
        CallbackManagerForRetrieverRun,
        Callbacks,
    )
    from langchain_core.documents import BaseDocumentCompressor, Document
    from langchain_core.embeddings import Embeddings
    from langchain_core.retrievers import BaseRetriever, RetrieverLike
    from langchain_core.runnables import RunnableConfig
except ImportError as err:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        "neocorrag_integrations.langchain needs langchain-core: pip install 'neocorrag[langchain]'"
    ) from err

from neocorrag_core.errors import InputError
from neocorrag_core.models import TextEmbedder, resolve_embedder
from neocorrag_core.once import LoadOnce
from neocorrag_integrations._common import (
    Refinement,
    RefinerSettings,
    SourceDocument,
    check_query,
    check_sequence,
)
from neocorrag_integrations._reformulation import (
    ReformedItem,
    ReformulationSettings,
)
from neocorrag_integrations.langchain_ingest import TripleExtractorTransformer, document_source
from neocorrag_integrations.metadata_keys import IS_EVIDENCE_CHAINS

__all__ = [
    "EvidenceReformulationRetriever",
    "NeocorRAGCompressor",
    "NeocorRAGEmbeddings",
    "TripleExtractorTransformer",
    "is_evidence_chain_document",
]


class NeocorRAGCompressor(RefinerSettings, BaseDocumentCompressor):
    """Drops the low-ranked documents nothing ties to the question and adds the chains.

    Returns copies of the kept documents in their retrieval order (``id`` and metadata
    kept, plus ``neocorrag_kept_reason``, ``neocorrag_retrieval_rank``,
    ``neocorrag_chain_ids`` and ``neocorrag_fallback``) and, when chains were found and
    ``include_chains`` is set, one extra document holding the chains, flagged with
    ``metadata["neocorrag_evidence_chains"] = True`` and placed ``chains_position``.
    When the documents yield no triples or no chain, every document comes back (as a copy)
    and ``neocorrag_fallback`` says why. The documents passed in are never modified.

    Triples come from ``metadata["triples"]`` where present, else the triple store, else
    spaCy when the ``spacy`` extra is installed (stored for next time), unless
    ``triple_source=`` or a ``miner=`` with its own source is given. See
    :class:`~neocorrag_integrations._common.RefinerSettings` for every setting; a bad
    one raises :class:`~neocorrag_core.errors.ConfigError` at construction.

    A query that is not a non-empty string, or ``documents`` that are not a list of
    ``Document`` objects, raise :class:`~neocorrag_core.errors.InputError` (as the engine
    does), before any work.
    """

    def compress_documents(
        self,
        documents: Sequence[Document],
        query: str,
        callbacks: Callbacks | None = None,
    ) -> Sequence[Document]:
        """Refine ``documents`` (in retrieval order) for ``query``."""
        documents, sources = _checked(documents, query)
        if not documents:
            return []
        return self._build(documents, self.plan(query, sources))

    async def acompress_documents(
        self,
        documents: Sequence[Document],
        query: str,
        callbacks: Callbacks | None = None,
    ) -> Sequence[Document]:
        """Async :meth:`compress_documents`: mining runs in a worker thread, the event loop
        stays free, and the engine's locks keep concurrent calls safe."""
        documents, sources = _checked(documents, query)
        if not documents:
            return []
        plan = await asyncio.to_thread(self.plan, query, sources)
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
        self._embedder: LoadOnce[TextEmbedder] = LoadOnce()

    def _resolved(self) -> TextEmbedder:
        return self._embedder.get(lambda: resolve_embedder(self._spec))

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """Unit-length vectors, one per text; ``InputError`` unless ``texts`` is a list of
        strings."""
        texts = check_sequence("NeocorRAGEmbeddings.embed_documents", "texts", texts, "strings")
        for i, text in enumerate(texts):
            if not isinstance(text, str):
                raise InputError(
                    f"NeocorRAGEmbeddings.embed_documents: texts[{i}] is a "
                    f"{type(text).__name__}, not a string"
                )
        if not texts:
            return []
        return self._resolved().embed(texts).tolist()

    def embed_query(self, text: str) -> list[float]:
        """The unit-length vector of one query; ``InputError`` unless ``text`` is a string."""
        if not isinstance(text, str):
            raise InputError(
                f"NeocorRAGEmbeddings.embed_query: text must be a string, got {type(text).__name__}"
            )
        return self.embed_documents([text])[0]


class EvidenceReformulationRetriever(ReformulationSettings, BaseRetriever):
    """Wraps your retriever and searches again for the evidence it missed (EviReform).

    The question goes to ``retriever`` first; the triples of what comes back become
    propositions, the most helpful ones are selected as evidence, and residual queries
    for what is still missing (written by the LM, or the evidence's bridge entities) go
    to ``retriever`` again. All results are pooled, scored against the question and the
    residual queries, and the best ``k`` come back, best first.

    Each query is sent as ``retriever.invoke(query)`` and its first ``first_k`` (default
    ``k``) or ``residual_k`` (default 5) documents are used: LangChain retrievers take no
    common ``k`` argument, so configure yours to return at least that many, e.g.
    ``store.as_retriever(search_kwargs={"k": 5})``. ``ainvoke`` sends the residual queries
    of a round concurrently with ``retriever.ainvoke``. Documents are matched across
    queries by their ``id`` (documents without one by a digest of their title and text),
    and each appears once.

    Like every LangChain retriever, ``invoke(query, k=3)`` (and ``ainvoke``) returns that
    many documents for that call instead of the configured ``k``; any other keyword
    argument is passed on to every call of the wrapped retriever (e.g. a vector store's
    ``filter=``).

    Returns copies of the best ``k`` documents (``id`` and metadata kept) with
    ``neocorrag_evireform_rank`` (1-based), ``neocorrag_evireform_score``,
    ``neocorrag_found_by_query`` / ``neocorrag_found_by_kind`` (the first query that
    retrieved it: ``"original"``, ``"lm"``, ``"entities"`` or ``"repeat"``),
    ``neocorrag_query_ranks`` (every query that retrieved it, with the 1-based rank), and,
    the same on each document of a call, ``neocorrag_residual_queries`` and
    ``neocorrag_evireform_evidence``. The documents passed in are never modified. When the
    wrapped retriever fails (or returns something other than documents), a
    :class:`~neocorrag_core.evireform.RetrievalError` names the query. A query that is
    not a non-empty string raises :class:`~neocorrag_core.errors.InputError`, as the
    engine does, before the wrapped retriever is asked.

    Triples come from ``metadata["triples"]``, else the triple store, else spaCy (the
    ``spacy`` extra; stored), unless ``triple_source=`` is given; documents without
    triples take part through their title and lead sentence. See
    :class:`~neocorrag_integrations._reformulation.ReformulationSettings` for ``k``,
    ``config`` (any :class:`~neocorrag_core.evireform.ReformulationConfig` field),
    ``embedder``, ``lm``, ``reformulator=`` and ``models=`` (e.g. ``models=compressor``
    shares a :class:`NeocorRAGCompressor`'s models and triple source); a bad setting
    raises :class:`~neocorrag_core.errors.ConfigError` at construction. Thread-safe;
    pickles without its loaded models, like the compressor.
    """

    retriever: RetrieverLike
    """The retriever to wrap: any runnable from a query string to a list of documents."""

    def _get_relevant_documents(
        self,
        query: str,
        *,
        run_manager: CallbackManagerForRetrieverRun,
        k: int | None = None,
        **kwargs: Any,
    ) -> list[Document]:
        n = self._call_k(query, k)
        passed_on = _passed_on(kwargs)

        def fetch(text: str) -> list[Document]:
            config: RunnableConfig = {"callbacks": run_manager.get_child()}
            return self.retriever.invoke(text, config=config, **passed_on)

        return _copies(self.reformulate(query, fetch, _source_documents, k=n))

    async def _aget_relevant_documents(
        self,
        query: str,
        *,
        run_manager: AsyncCallbackManagerForRetrieverRun,
        k: int | None = None,
        **kwargs: Any,
    ) -> list[Document]:
        n = self._call_k(query, k)
        passed_on = _passed_on(kwargs)

        async def afetch(text: str) -> list[Document]:
            config: RunnableConfig = {"callbacks": run_manager.get_child()}
            return await self.retriever.ainvoke(text, config=config, **passed_on)

        return _copies(await self.areformulate(query, afetch, _source_documents, k=n))

    def _call_k(self, query: Any, k: Any) -> int:
        check_query("EvidenceReformulationRetriever", query)
        return self.call_k(k, owner="EvidenceReformulationRetriever")


def _passed_on(kwargs: dict[str, Any]) -> dict[str, Any]:
    # BaseRetriever.invoke reads `verbose` for its own callbacks and leaves it in kwargs.
    return {name: value for name, value in kwargs.items() if name != "verbose"}


def _copies(items: list[ReformedItem[Document]]) -> list[Document]:
    out = []
    for item in items:
        doc = item.original.model_copy(deep=True)
        doc.metadata = {**doc.metadata, **item.metadata}
        out.append(doc)
    return out


def is_evidence_chain_document(document: Document) -> bool:
    """Whether ``document`` is the evidence-chain document this compressor adds."""
    return document.metadata.get(IS_EVIDENCE_CHAINS) is True


def _checked(documents: Any, query: Any) -> tuple[list[Document], list[SourceDocument]]:
    check_query("NeocorRAGCompressor", query)
    kind = "langchain_core Documents, in retrieval order"
    documents = check_sequence("NeocorRAGCompressor", "documents", documents, kind)
    return documents, _source_documents(documents)


def _source_documents(documents: Sequence[Document]) -> list[SourceDocument]:
    for i, doc in enumerate(documents):
        if not isinstance(doc, Document):
            raise InputError(
                f"documents[{i}] is a {type(doc).__name__}; neocorrag's LangChain adapters "
                "take langchain_core Document objects"
            )
    return [document_source(doc) for doc in documents]
