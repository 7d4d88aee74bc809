"""LangChain adapters: :class:`NeocorRAGCompressor`, a drop-in ``BaseDocumentCompressor``,
:class:`EvidenceReformulationRetriever`, a ``BaseRetriever`` that searches again for
the evidence your retriever missed, and :class:`BeliefRAG`, a ``Runnable`` that decides per
question whether to search again, fix the evidence, answer or abstain.

Wrap the retriever you already have::

    from langchain_classic.retrievers import ContextualCompressionRetriever
    from neocorrag_integrations.langchain import (
        BeliefRAG,
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
    # or: let the evidence state decide when to search again (BeliefRAG)
    rag = BeliefRAG(your_retriever, your_chat_model)
    rag.invoke("Who founded the company that makes the iPhone?")["answer"]

Core classes take no LangChain objects: :func:`as_chat_model` turns a chat model into the
core's ``ChatModel`` and :func:`as_embedder` turns ``Embeddings`` into an encode function,
e.g. ``BeliefController.from_models(as_chat_model(chat_model))`` (the adapters here do it
for you).

Needs only ``langchain-core`` at run time (``pip install 'neocorrag[langchain]'``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

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

from neocorrag_core.belief import AnswerabilityCalibrator, BeliefConfig, BeliefController
from neocorrag_core.chains.miner import EvidenceChainMiner
from neocorrag_core.errors import ConfigError, InputError
from neocorrag_core.models import TextEmbedder, resolve_embedder
from neocorrag_core.models.errors import framework_of
from neocorrag_core.once import LoadOnce
from neocorrag_core.triples import TripleSource
from neocorrag_integrations._belief import (
    BeliefEngine,
    BeliefOutcome,
    ChainsDecoding,
    question_of,
    result_fields,
)
from neocorrag_integrations._common import (
    Refinement,
    RefinerSettings,
    SourceDocument,
    check_query,
    check_sequence,
    detached_copy,
    kept_metadata,
)
from neocorrag_integrations._langchain_models import (
    LangChainChatModel,
    as_chat_model,
    as_embedder,
)
from neocorrag_integrations._reformulation import (
    ModelsSource,
    ReformedItem,
    ReformulationSettings,
)
from neocorrag_integrations._translate import engine_embedder, engine_lm
from neocorrag_integrations.langchain_ingest import TripleExtractorTransformer, document_source
from neocorrag_integrations.metadata_keys import IS_EVIDENCE_CHAINS

__all__ = [
    "BeliefRAG",
    "EvidenceReformulationRetriever",
    "NeocorRAGCompressor",
    "NeocorRAGEmbeddings",
    "TripleExtractorTransformer",
    "as_chat_model",
    "as_embedder",
    "is_evidence_chain_document",
]


class NeocorRAGCompressor(RefinerSettings, BaseDocumentCompressor):
    """Drops the low-ranked documents nothing ties to the question; the chains say why.

    Returns copies of the kept documents in their retrieval order (``id`` and metadata
    kept, plus ``neocorrag_kept_reason``, ``neocorrag_retrieval_rank``,
    ``neocorrag_chain_ids`` and ``neocorrag_fallback``; cut to their evidence sentences by
    default). The chains are in the metadata (``metadata_keys.run_metadata``). By default
    no chain text goes to the LLM (``MinerConfig.chain_format="none"``: on held-out
    questions the block did not help a 1.5B reader; docs/adapters.md); with another
    ``chain_format`` in ``miner_config``, chains found and ``include_chains`` set, one
    extra document holds the chain block, flagged with
    ``metadata["neocorrag_evidence_chains"] = True`` and placed ``chains_position``.
    When the documents yield no triples, every document comes back (as a copy) and
    ``neocorrag_fallback`` says why; when they yield no chain, the keep mode's link rules
    still apply (``keep="paper"`` passes everything through) and ``neocorrag_fallback``
    says why there is no chain. The documents passed in are never modified.

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
                kept = detached_copy(documents[item.index])
                kept.metadata = kept_metadata(kept.metadata, item.metadata)
                if item.text is not None:
                    kept.page_content = item.text
                out.append(kept)
        return out


class NeocorRAGEmbeddings(Embeddings):
    """LangChain ``Embeddings`` over neocorrag's embedder: the bundled MiniLM by default.

    For building a vector store offline without another package; the model loads on the
    first call. ``embedder`` takes anything :func:`neocorrag_core.models.resolve_embedder`
    accepts, or another framework embeddings object (translated by :func:`as_embedder`).
    Pass the same object as the compressor's ``embedder=`` to load the model once.
    """

    def __init__(self, embedder: Any = None) -> None:
        self._spec = embedder
        self._embedder: LoadOnce[TextEmbedder] = LoadOnce()

    def _resolved(self) -> TextEmbedder:
        return self._embedder.get(lambda: resolve_embedder(engine_embedder(self._spec)))

    def text_embedder(self) -> TextEmbedder:
        """The engine's embedder behind this object (models load on first use): an engine
        given this object shares it, its cache included (a query embedded by the retriever
        is not embedded again by the compressor)."""
        return self._resolved()

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
    propositions, the facts that state what the question asks about are selected as
    evidence, and residual queries for what is still missing (by default each bridge entity
    the evidence names with the question's open relation words, e.g. ``"Mountrail County
    capital"``; with ``config={"residual_queries": "lm"}`` written by the LM) go to
    ``retriever`` again. All results are pooled, scored against the question and the
    residual queries, and the best ``k`` come back, best first.

    Each query is sent as ``retriever.invoke(query)`` and its first ``first_k`` (default
    ``k``) or ``residual_k`` (default 5) documents are used: LangChain retrievers take no
    common ``k`` argument, so configure yours to return at least that many, e.g.
    ``store.as_retriever(search_kwargs={"k": 5})``. ``ainvoke`` sends the residual queries
    of a round concurrently with ``retriever.ainvoke``. Documents are matched across
    queries by their ``id`` (documents without one by a digest of their title and text),
    and each appears once; two documents with the same title and text are one document
    even under different ids (the first one seen is returned).

    Like every LangChain retriever, ``invoke(query, k=3)`` (and ``ainvoke``) returns that
    many documents for that call instead of the configured ``k``; any other keyword
    argument is passed on to every call of the wrapped retriever (e.g. a vector store's
    ``filter=``).

    Returns copies of the best ``k`` documents (``id`` and metadata kept) with
    ``neocorrag_evireform_rank`` (1-based), ``neocorrag_evireform_score``,
    ``neocorrag_found_by_query`` / ``neocorrag_found_by_kind`` (the first query that
    retrieved it: ``"original"``, ``"question"``, ``"template"``, ``"entities"``, ``"lm"``
    or ``"repeat"``),
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
        doc = detached_copy(item.original)
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


BeliefInput = str | dict[str, Any]


class BeliefRAG(Runnable[BeliefInput, dict[str, Any]]):
    """BeliefRAG as a LangChain ``Runnable``: decides per question whether to search again,
    replace misleading evidence, answer, or abstain, over your retriever and chat model.

    ``invoke(question)`` (a string or ``{"question": ...}``) runs one episode of the
    :class:`~neocorrag_core.belief.BeliefController`: the question goes to ``retriever``,
    the chat model judges the evidence (one structured verifier call per step), writes
    the next query for the missing fact, and answers. It returns a dict:

    - ``answer``: the answer (``None`` when it abstained), ``abstained``, ``final_action``
      (``"answer"``, ``"stop"`` or ``"abstain"``);
    - ``documents``: the final evidence, copies of the documents your retriever returned
      (``id`` and metadata kept), in the order they were found; passages the verifier
      dropped never come back, even when a later search returns them;
    - ``trajectory``: one dict per step (action, reason, query, diagnostics, belief,
      answerability, evidence ids, draft answer, tokens, seconds), ``mutations`` (every
      change of the evidence), ``retrieval_rounds``, ``tokens`` (prompt, generated,
      total), ``question``.

    Each search is ``retriever.invoke(query)`` and its first ``k`` documents are used
    (configure the retriever to return at least that many). Retrieval and chat-model calls
    run with this run's child callbacks, so a tracer (LangSmith, a callback handler) sees
    every retrieval and every LLM call under the ``BeliefRAG`` run. ``ainvoke`` awaits
    ``retriever.ainvoke`` and runs the model calls in a worker thread; ``batch`` /
    ``abatch`` are LangChain's (concurrent calls; each has its own state). Keyword
    arguments of ``invoke`` change :class:`~neocorrag_core.belief.BeliefConfig` fields
    for that call, e.g. ``invoke(q, max_rounds=2)``.

    Args:
        retriever: any runnable from a query string to a list of documents.
        llm: a LangChain chat model (or LLM), asked through :func:`as_chat_model`;
            ``None`` = the bundled local LM (a local LM spec, or your own
            ``neocorrag_core.lm.chat.ChatModel``, is accepted too; their calls are not
            LangChain runs).
        k: documents used per search (default ``config.k``, 5).
        config: a :class:`~neocorrag_core.belief.BeliefConfig` or a dict of its fields
            (thresholds, ``max_rounds``, ``max_tokens``, ``max_evidence``...); a dict
            changes the generator's defaults (a bundled preset's own settings included,
            ``belief.config.PRESET_SETTINGS``).
        calibrator: an :class:`~neocorrag_core.belief.AnswerabilityCalibrator` (default:
            the coefficient file shipped; see ``docs/belief.md``).
        after_search: the model of the answer after one more search, in the retrieval
            value (same type; default: the file shipped).
        embedder: for the relevance diagnostic (``None`` = the bundled MiniLM).
        models: share lazily loaded models with a compressor, a miner or a ``LazyModels``.
        chains_for_verifier: also show the verifier the NeocorRAG evidence chains mined
            from the evidence, as one extra document (default ``False``).
        miner / triple_source / chains_decoding: the chains' miner, its triples (default:
            metadata, else the triple store, else spaCy) and decoding (``"none"``). The
            same miner refines the answer's evidence when ``config`` sets
            ``refine_answer`` (``"all"`` or ``"first-search"``, ``BeliefConfig``).
        controller: a ready :class:`~neocorrag_core.belief.BeliefController` (your own
            components) instead of the settings above, which must then be left unset.
        name: the run name tracers show (default ``"BeliefRAG"``).

    A bad setting raises :class:`~neocorrag_core.errors.ConfigError` at construction; an
    input that is neither a non-empty string nor a dict with one under ``"question"``
    raises :class:`~neocorrag_core.errors.InputError` before any search; a retriever that
    fails, or returns something other than documents, raises
    :class:`~neocorrag_core.errors.RetrievalError` naming the query. A failing chat-model
    call raises :class:`~neocorrag_core.errors.ModelCallError` naming the component (the
    model's own exception is chained as ``__cause__``; put ``with_retry`` /
    ``with_fallbacks`` on the chat model itself). A failed call leaves nothing behind:
    the next call starts afresh.
    """

    def __init__(
        self,
        retriever: Any,
        llm: Any = None,
        *,
        k: int | None = None,
        config: BeliefConfig | dict[str, Any] | None = None,
        calibrator: AnswerabilityCalibrator | None = None,
        after_search: AnswerabilityCalibrator | None = None,
        embedder: Any = None,
        models: ModelsSource | None = None,
        chains_for_verifier: bool = False,
        miner: EvidenceChainMiner | None = None,
        triple_source: TripleSource | None = None,
        chains_decoding: ChainsDecoding | None = None,
        controller: BeliefController | None = None,
        name: str | None = None,
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
        self._llm = llm
        self._engine = BeliefEngine(
            "BeliefRAG",
            llm=engine_lm(llm, as_chat_model),
            k=k,
            config=config,
            calibrator=calibrator,
            after_search=after_search,
            embedder=embedder,
            models=models,
            chains_for_verifier=chains_for_verifier,
            miner=miner,
            triple_source=triple_source,
            chains_decoding=chains_decoding,
            controller=controller,
        )

    @property
    def llm(self) -> Any:
        """The chat model the controller's verifier, writer and answer generator use, as
        it was given (the controller asks it through :func:`as_chat_model`)."""
        return self._llm

    @property
    def config(self) -> BeliefConfig:
        """The controller settings in force (``k`` included)."""
        return self._engine.config

    @property
    def controller(self) -> BeliefController:
        """The controller on ``llm`` itself (each LangChain call builds one whose chat-model
        calls carry that call's callbacks; the models are shared)."""
        return self._engine.controller

    @property
    def chains_for_verifier(self) -> bool:
        """Whether the verifier also sees the evidence chains."""
        return self._engine.chains_for_verifier

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

        outcome = self._engine.run(
            question,
            fetch,
            _source_documents,
            controller=self._traced_controller(child),
            overrides=overrides,
        )
        return _belief_output(outcome)

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

        outcome = await self._engine.arun(
            question,
            afetch,
            _source_documents,
            controller=self._traced_controller(child),
            overrides=overrides,
        )
        return _belief_output(outcome)

    def _traced_controller(self, child: RunnableConfig) -> BeliefController:
        chat = self._engine.llm
        if self._engine.custom or not isinstance(chat, LangChainChatModel):
            return self._engine.controller  # no LangChain model of ours to trace
        # The chat model with this run's callbacks on every call, structured ones included.
        return self._engine.build_controller(chat.with_config(child))


def _belief_output(outcome: BeliefOutcome[Document]) -> dict[str, Any]:
    return {
        **result_fields(outcome.result),
        "documents": [detached_copy(doc) for doc in outcome.evidence],
    }
