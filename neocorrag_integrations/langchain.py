"""LangChain adapters: :class:`NeocorRAGCompressor`, a drop-in ``BaseDocumentCompressor``;
:class:`EvidenceReformulationRetriever`, a ``BaseRetriever`` that searches again for the
evidence your retriever missed; :class:`BeliefRAG`, a ``Runnable`` that decides per question
whether to search again, fix the evidence, answer or abstain::

    retriever = ContextualCompressionRetriever(
        base_compressor=NeocorRAGCompressor(), base_retriever=your_retriever
    )
    rag = BeliefRAG(your_retriever, your_chat_model)

Core classes take no LangChain objects: :func:`as_chat_model` and :func:`as_embedder` translate
them (the adapters here do it for you). Needs only ``langchain-core``
(``pip install 'neocorrag[langchain]'``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

try:
    from langchain_core.callbacks import (
        AsyncCallbackManagerForChainRun,
        AsyncCallbackManagerForRetrieverRun,
        CallbackManagerForChainRun,
        CallbackManagerForRetrieverRun,
        Callbacks,
    )
    from langchain_core.documents import BaseDocumentCompressor, Document
    from langchain_core.embeddings import Embeddings
    from langchain_core.retrievers import BaseRetriever, RetrieverLike
    from langchain_core.runnables import Runnable, RunnableConfig
    from langchain_core.runnables.config import patch_config
except ImportError as err:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        "neocorrag_integrations.langchain needs langchain-core: pip install 'neocorrag[langchain]'"
    ) from err

from neocorrag_core.belief import BeliefController
from neocorrag_core.belief.options import question_of
from neocorrag_core.errors import ConfigError, InputError
from neocorrag_core.graph import GraphRetriever
from neocorrag_core.once import LoadOnce
from neocorrag_core.records.calls import select_by_graph
from neocorrag_core.records.documents import (
    Fields,
    check_call_k,
    check_query,
    kept_metadata,
    search_over,
)
from neocorrag_core.records.keys import IS_EVIDENCE_CHAINS
from neocorrag_integrations._belief import BeliefAdapter
from neocorrag_integrations._common import (
    EvaluateOptions,
    OwnEmbedder,
    PipelineOptions,
    RefinerSettings,
    detached_copy,
    evaluate_over,
    pipeline_parts,
)
from neocorrag_integrations._langchain_models import (
    LangChainChatModel,
    as_chat_model,
    as_embedder,
)
from neocorrag_integrations._models import framework_of
from neocorrag_integrations._reformulation import ReformulationSettings
from neocorrag_integrations._translate import engine_embedder
from neocorrag_integrations.langchain_ingest import TripleExtractorTransformer, document_fields

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from neocorrag_core.belief.options import BeliefOptions

__all__ = [
    "BeliefRAG",
    "CorpusGraphRetriever",
    "EvidencePipelineRetriever",
    "EvidenceReformulationRetriever",
    "NeocorRAGCompressor",
    "NeocorRAGEmbeddings",
    "TripleExtractorTransformer",
    "as_chat_model",
    "as_embedder",
    "evaluate",
    "is_evidence_chain_document",
]


def _read(position: int, document: Any) -> Fields:
    if not isinstance(document, Document):
        raise InputError(
            f"documents[{position}] is a {type(document).__name__}; neocorrag's LangChain "
            "adapters take langchain_core Document objects"
        )
    return document_fields(document)


class NeocorRAGCompressor(RefinerSettings, BaseDocumentCompressor):
    """Drops the low-ranked documents nothing ties to the question; the chains say why.

    Returns copies of the kept documents in retrieval order (ids and metadata kept, plus the
    ``neocorrag_*`` keys of ``metadata_keys``), cut to their evidence sentences by default.
    The chains are in the metadata (``metadata_keys.run_metadata``); with a ``chain_format``
    that writes a block (``miner_config``) and ``include_chains``, one extra document holds
    it, flagged ``metadata["neocorrag_evidence_chains"] = True``. With no triples every
    document comes back and ``neocorrag_fallback`` says why. Settings:
    :class:`~neocorrag_integrations._common.RefinerSettings` (a bad one is a ``ConfigError``
    at construction); a query that is not a non-empty string, or documents that are not a
    list of ``Document``, are an ``InputError``. The documents passed in are never modified.
    """

    def compress_documents(
        self, documents: Sequence[Document], query: str, callbacks: Callbacks | None = None
    ) -> Sequence[Document]:
        """Refine ``documents`` (in retrieval order) for ``query``."""
        return self.refine(self.check_call(query, documents))

    async def acompress_documents(
        self, documents: Sequence[Document], query: str, callbacks: Callbacks | None = None
    ) -> Sequence[Document]:
        """Async :meth:`compress_documents`: the work runs in one worker thread."""
        return await asyncio.to_thread(self.refine, self.check_call(query, documents))

    def _fields(self, position: int, document: Any) -> Fields:
        return _read(position, document)

    def _kept_copy(self, original: Document, added: dict[str, Any], text: str | None) -> Document:
        kept = detached_copy(original)
        kept.metadata = kept_metadata(kept.metadata, added)
        if text is not None:
            kept.page_content = text
        return kept

    def _chain_document(
        self, text: str, metadata: dict[str, Any], chain_id: str, sources: list[Any]
    ) -> Document:
        return Document(id=chain_id, page_content=text, metadata=metadata)


def is_evidence_chain_document(document: Document) -> bool:
    """Whether ``document`` is the evidence-chain document the compressor adds."""
    return document.metadata.get(IS_EVIDENCE_CHAINS) is True


class NeocorRAGEmbeddings(OwnEmbedder, Embeddings):
    """LangChain ``Embeddings`` over neocorrag's embedder (the bundled MiniLM by default;
    anything :func:`~neocorrag_core.models.resolve_embedder` accepts). Loads on the first
    call; pass the same object as the compressor's ``embedder=`` to load the model once."""

    def __init__(self, embedder: Any = None) -> None:
        self._spec = embedder
        self._embedder = LoadOnce()

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """Unit-length vectors, one per text; ``InputError`` unless a list of strings."""
        return self._vectors("NeocorRAGEmbeddings.embed_documents", texts)

    def embed_query(self, text: str) -> list[float]:
        """The unit-length vector of one query; ``InputError`` unless a string."""
        if not isinstance(text, str):
            raise InputError(
                f"NeocorRAGEmbeddings.embed_query: text must be a string, got {type(text).__name__}"
            )
        return self.embed_documents([text])[0]


def _copy(original: Document, score: float, metadata: dict[str, Any]) -> Document:
    doc = detached_copy(original)
    doc.metadata = {**doc.metadata, **metadata}
    return doc


class EvidenceReformulationRetriever(ReformulationSettings, BaseRetriever):
    """Wraps your retriever and searches again for the evidence it missed (EviReform).

    The question goes to ``retriever`` (``invoke``; configure it to return at least ``k``, or
    ``first_k`` / ``residual_k``, documents); the facts of what comes back that state what
    the question asks about become evidence, and residual queries for what is missing
    (each bridge entity with the question's open relation words, e.g. ``"Mountrail County
    capital"``; ``config={"residual_queries": "lm"}``: written by the LM) go to it again.
    The pooled results are scored against the question and the residual queries; copies
    of the best ``k`` come back, best first, with the ``neocorrag_evireform_*`` /
    ``neocorrag_found_by_*`` / ``neocorrag_query_ranks`` / ``neocorrag_residual_queries``
    metadata. Documents are matched across queries by ``id`` (else by title and text).

    ``invoke(query, k=3)`` returns that many for that call; other keywords (a vector
    store's ``filter=``) reach every call of the wrapped retriever; ``ainvoke`` sends a
    round's queries concurrently. Settings:
    :class:`~neocorrag_integrations._reformulation.ReformulationSettings`
    (``models=compressor`` shares a compressor's models and triple source). A failing
    retriever is a ``RetrievalError`` naming the query; a bad query an ``InputError``.
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
        query, n, passed_on = self._call(query, k, kwargs)

        def fetch(text: str) -> list[Document]:
            config: RunnableConfig = {"callbacks": run_manager.get_child()}
            return self.retriever.invoke(text, config=config, **passed_on)

        return self.reformulate(query, fetch, _read, _copy, n)

    async def _aget_relevant_documents(
        self,
        query: str,
        *,
        run_manager: AsyncCallbackManagerForRetrieverRun,
        k: int | None = None,
        **kwargs: Any,
    ) -> list[Document]:
        query, n, passed_on = self._call(query, k, kwargs)

        async def afetch(text: str) -> list[Document]:
            config: RunnableConfig = {"callbacks": run_manager.get_child()}
            return await self.retriever.ainvoke(text, config=config, **passed_on)

        return await self.areformulate(query, afetch, _read, _copy, n)

    def _call(self, query: Any, k: Any, kwargs: dict[str, Any]) -> tuple[str, int, dict[str, Any]]:
        # BaseRetriever.invoke reads `verbose` for its own callbacks and leaves it in kwargs.
        passed_on = {name: value for name, value in kwargs.items() if name != "verbose"}
        return check_query(self._owner(), query), self.call_k(k), passed_on


class EvidencePipelineRetriever(BaseRetriever):
    """Your retriever, EviReform for the missing hop, then the refiner for the noise: the
    three as one retriever on one engine (one load of each model, one triple source).

    Build it with :meth:`from_retriever`. Each call runs ``reformulation`` (an
    :class:`EvidenceReformulationRetriever` over your retriever) and hands its ``k``
    documents to ``compressor`` (a :class:`NeocorRAGCompressor`), which reads what EviReform
    wrote about each one (``neocorrag_provenance``): a hop searched for on purpose is kept
    even when nothing links it to the other documents. What comes back is the compressor's
    output with both stages' metadata. ``ainvoke`` runs the same steps (a round's residual
    queries concurrently). ``ContextualCompressionRetriever(base_compressor=compressor,
    base_retriever=reformulation)`` (langchain-classic) is the same pipeline; this class
    needs only langchain-core. Any retriever slot takes it, ``BeliefRAG`` included.
    """

    reformulation: EvidenceReformulationRetriever
    """EviReform over your retriever."""
    compressor: NeocorRAGCompressor
    """The refiner, on the same models and triple source."""

    @classmethod
    def from_retriever(
        cls, retriever: RetrieverLike, **options: Unpack[PipelineOptions]
    ) -> EvidencePipelineRetriever:
        """The pipeline over ``retriever`` (any runnable from a query to documents) on one
        engine: ``.compressor.miner`` and ``.reformulation.reformulator`` share models and
        triple source. Keywords: :class:`~neocorrag_integrations._common.PipelineOptions`.

        Examples
        --------
        >>> pipeline = EvidencePipelineRetriever.from_retriever(  # doctest: +SKIP
        ...     store.as_retriever(search_kwargs={"k": 5}), embedder=embeddings)
        >>> documents = pipeline.invoke("Who is the mother of the director of Polish-Russian War?")
        """
        compressor, settings = pipeline_parts("from_retriever", NeocorRAGCompressor, options)
        reformulation = EvidenceReformulationRetriever(retriever=retriever, **settings)
        return cls(reformulation=reformulation, compressor=compressor)

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun
    ) -> list[Document]:
        config: RunnableConfig = {"callbacks": run_manager.get_child()}
        found = self.reformulation.invoke(query, config=config)
        return list(self.compressor.compress_documents(found, query))

    async def _aget_relevant_documents(
        self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun
    ) -> list[Document]:
        config: RunnableConfig = {"callbacks": run_manager.get_child()}
        found = await self.reformulation.ainvoke(query, config=config)
        return list(await self.compressor.acompress_documents(found, query))


class CorpusGraphRetriever(BaseRetriever):
    """Your retriever's candidates, chosen and completed on the corpus graph of the triple
    store: HippoRAG-style retrieval with no LLM, without EviReform.

    Build it with :meth:`from_retriever`. Each call asks ``retriever`` for its candidates
    (configure it to return ``candidates`` documents, e.g. ``search_kwargs={"k": 20}``),
    seeds a walk on the store's graph from the question and them, and returns copies of the
    ``k`` documents the walk ranks best with ``neocorrag_graph_score`` /
    ``neocorrag_found_by_graph`` / ``neocorrag_graph_via`` metadata. With ``get_by_ids``
    (your vector store's ``get_by_ids``) a stored document no search returned can be among
    them; without it the graph chooses among the candidates.
    """

    retriever: RetrieverLike
    """The retriever whose results seed the walk."""
    engine: GraphRetriever
    """The core graph retriever (its store, embedder and settings)."""
    k: int = 5
    """Documents returned."""
    get_by_ids: Callable[[list[str]], Sequence[Document]] | None = None
    """Reads stored documents by id (``vectorstore.get_by_ids``)."""

    @classmethod
    def from_retriever(
        cls,
        retriever: RetrieverLike,
        *,
        k: int = 5,
        get_by_ids: Callable[[list[str]], Sequence[Document]] | None = None,
        embedder: Any = None,
        triple_source: Any = None,
    ) -> CorpusGraphRetriever:
        """The graph retriever over ``retriever``.

        Parameters
        ----------
        retriever: your retriever (any runnable from a query to documents).
        k: documents returned.
        get_by_ids: ``vectorstore.get_by_ids`` of the store ``retriever`` searches.
        embedder, triple_source: as for :class:`NeocorRAGCompressor` (the triple source
            must read a store: the graph is the store's).

        Examples
        --------
        >>> graph = CorpusGraphRetriever.from_retriever(  # doctest: +SKIP
        ...     store.as_retriever(search_kwargs={"k": 20}), get_by_ids=store.get_by_ids,
        ...     embedder=embeddings, triple_source=DefaultTripleSource(store="triples.sqlite"))
        >>> documents = graph.invoke("Who is the mother of the director of Polish-Russian War?")
        """
        check_call_k("CorpusGraphRetriever", k)
        engine = GraphRetriever(embedder=engine_embedder(embedder), triple_source=triple_source)
        return cls(retriever=retriever, engine=engine, k=k, get_by_ids=get_by_ids)

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun
    ) -> list[Document]:
        query = check_query("CorpusGraphRetriever", query)
        config: RunnableConfig = {"callbacks": run_manager.get_child()}
        found = self.retriever.invoke(query, config=config)
        return select_by_graph(
            self.engine, query, found, self.k, read=_read, copy=_copy, get_by_ids=self.get_by_ids
        )

    async def _aget_relevant_documents(
        self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun
    ) -> list[Document]:
        query = check_query("CorpusGraphRetriever", query)
        config: RunnableConfig = {"callbacks": run_manager.get_child()}
        found = await self.retriever.ainvoke(query, config=config)
        return await asyncio.to_thread(
            select_by_graph,
            self.engine,
            query,
            found,
            self.k,
            read=_read,
            copy=_copy,
            get_by_ids=self.get_by_ids,
        )


def evaluate(
    questions: Any, retriever: RetrieverLike, *, out: str, **options: Unpack[EvaluateOptions]
) -> dict[str, Any]:
    """Your questions over your retriever, answered by your chat model: no refinement, the
    refiner's dial, EviReform and the full pipeline side by side
    (:func:`neocorrag_core.eval.compare`: report.md, report.html and results.json in ``out``).

    ``questions``: a JSON-lines / JSON / CSV file (``question``, ``answers``, optional
    ``gold_ids``: your documents' ids, or ``gold_titles``) or a list of such dicts;
    ``retriever``: any runnable from a query to documents (EviReform's searches call it
    too); ``llm`` (a LangChain chat model) and the other keywords:
    :class:`~neocorrag_integrations._common.EvaluateOptions`.

    Examples
    --------
    >>> retriever = store.as_retriever(search_kwargs={"k": 5})  # doctest: +SKIP
    >>> results = evaluate("questions.jsonl", retriever, out="runs/mine",  # doctest: +SKIP
    ...                    llm=chat_model, embedder=embeddings)
    """
    search = search_over(retriever.invoke, _read)
    name = f"langchain:{type(retriever).__name__}"
    return evaluate_over(
        questions, search, out=out, name=name, translate=as_chat_model, options=options
    )


BeliefInput = str | dict[str, Any]


class BeliefRAG(BeliefAdapter, Runnable[BeliefInput, dict[str, Any]]):
    """BeliefRAG as a LangChain ``Runnable``: per question, search, judge the evidence,
    replace misleading documents, search again for the missing fact, answer or abstain.

    ``invoke(question)`` (a string or ``{"question": ...}``) runs one episode of the
    :class:`~neocorrag_core.belief.BeliefController` and returns a dict: ``answer``
    (``None`` when it abstained), ``abstained``, ``final_action``, ``documents`` (copies of
    your retriever's documents, the final evidence), ``trajectory`` (one dict per step),
    ``mutations``, ``retrieval_rounds``, ``tokens``, ``question``. Each search is
    ``retriever.invoke(query)`` (its first ``k`` documents), with this run's child
    callbacks, as is every chat-model call; ``ainvoke`` awaits ``retriever.ainvoke``.
    Keywords of ``invoke`` change ``BeliefConfig`` fields for that call (``k`` included; a
    ``BeliefTuning`` field is a ``ConfigError``: pass a controller built with it).

    ``llm``: a LangChain chat model (asked through :func:`as_chat_model`), your own
    ``ChatModel``, a local LM spec, or ``None`` (the bundled LM). ``name``: the run name.
    Other keywords: :class:`~neocorrag_core.belief.options.BeliefOptions`. A bad setting
    is a ``ConfigError``, a bad input an ``InputError`` (before any search), a failing
    retriever a ``RetrievalError``, a failing chat-model call a ``ModelCallError`` naming
    the component (the model's exception chained). A failed call leaves nothing behind.
    """

    def __init__(
        self,
        retriever: Any,
        llm: Any = None,
        *,
        name: str | None = None,
        **options: Unpack[BeliefOptions],
    ) -> None:
        if not isinstance(retriever, Runnable):
            raise ConfigError(
                "BeliefRAG: retriever must be a LangChain retriever (a Runnable from a query "
                f"to documents), got {type(retriever).__name__}"
            )
        if framework_of(llm) == "LlamaIndex":
            raise ConfigError(
                "BeliefRAG: llm is a LlamaIndex LLM; use a LangChain chat model here, or "
                "neocorrag_integrations.llama_index.BeliefQueryEngine"
            )
        self.retriever = retriever
        self.name = name
        self._set_up("BeliefRAG", llm, as_chat_model, options)

    def invoke(
        self, input: BeliefInput, config: RunnableConfig | None = None, **kwargs: Any
    ) -> dict[str, Any]:
        """One episode for the question ``input``; see the class docstring for the output."""
        return self._call_with_config(self._invoke, input, config, run_type="chain", **kwargs)

    async def ainvoke(
        self, input: BeliefInput, config: RunnableConfig | None = None, **kwargs: Any
    ) -> dict[str, Any]:
        """Async :meth:`invoke`: searches await ``retriever.ainvoke``."""
        return await self._acall_with_config(
            self._ainvoke, input, config, run_type="chain", **kwargs
        )

    def _invoke(
        self,
        input: BeliefInput,
        run_manager: CallbackManagerForChainRun,
        config: RunnableConfig,
        **overrides: Any,
    ) -> dict[str, Any]:
        question = question_of("BeliefRAG", input)
        child = patch_config(config, callbacks=run_manager.get_child())

        def fetch(query: str) -> list[Document]:
            return self.retriever.invoke(query, config=child)

        traced = self._traced_controller(child)
        result, evidence = self._setup.run(
            question, fetch, _read, controller=traced, overrides=overrides
        )
        return {**result.as_dict(), "documents": [detached_copy(d) for d in evidence]}

    async def _ainvoke(
        self,
        input: BeliefInput,
        run_manager: AsyncCallbackManagerForChainRun,
        config: RunnableConfig,
        **overrides: Any,
    ) -> dict[str, Any]:
        question = question_of("BeliefRAG", input)
        child = patch_config(config, callbacks=run_manager.get_child())

        async def afetch(query: str) -> list[Document]:
            return await self.retriever.ainvoke(query, config=child)

        traced = self._traced_controller(child)
        result, evidence = await self._setup.arun(
            question, afetch, _read, controller=traced, overrides=overrides
        )
        return {**result.as_dict(), "documents": [detached_copy(d) for d in evidence]}

    def _traced_controller(self, child: RunnableConfig) -> BeliefController:
        chat = self._setup.llm
        if self._setup.custom or not isinstance(chat, LangChainChatModel):
            return self._setup.controller  # no LangChain model of ours to trace
        # The chat model with this run's callbacks on every call, structured ones included.
        return self._setup.build_controller(chat.with_config(child))
