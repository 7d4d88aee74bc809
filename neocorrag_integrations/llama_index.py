"""LlamaIndex adapters: :class:`NeocorRAGPostprocessor`, a drop-in ``BaseNodePostprocessor``;
:class:`EvidenceReformulationRetriever`, a ``BaseRetriever`` that searches again for the
evidence your retriever missed; :class:`BeliefQueryEngine`, a query engine that decides per
question whether to search again, fix the evidence, answer or abstain::

    query_engine = index.as_query_engine(node_postprocessors=[NeocorRAGPostprocessor()])
    query_engine = BeliefQueryEngine(index.as_retriever(similarity_top_k=5), llm=your_llm)

Core classes take no LlamaIndex objects: :func:`as_chat_model` and :func:`as_embedder`
translate them (the adapters here do it for you). Needs ``llama-index-core``
(``pip install 'neocorrag[llamaindex]'``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

try:
    from llama_index.core.base.base_query_engine import BaseQueryEngine
    from llama_index.core.base.embeddings.base import BaseEmbedding
    from llama_index.core.base.response.schema import RESPONSE_TYPE, Response
    from llama_index.core.bridge.pydantic import BaseModel, PrivateAttr
    from llama_index.core.callbacks import CallbackManager, CBEventType, EventPayload

    # The public import path (the function lives in llama_index_instrumentation).
    from llama_index.core.instrumentation import get_dispatcher  # type: ignore[attr-defined]
    from llama_index.core.instrumentation.events.rerank import ReRankEndEvent, ReRankStartEvent
    from llama_index.core.postprocessor.types import BaseNodePostprocessor
    from llama_index.core.retrievers import BaseRetriever
    from llama_index.core.schema import NodeWithScore, QueryBundle, QueryType, TextNode
except ImportError as err:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        "neocorrag_integrations.llama_index needs llama-index-core: "
        "pip install 'neocorrag[llamaindex]'"
    ) from err

from neocorrag_core.belief import BeliefResult
from neocorrag_core.belief.options import ABSTAIN_MESSAGE
from neocorrag_core.errors import ConfigError, InputError
from neocorrag_core.evireform import EvidenceReformulator
from neocorrag_core.graph import GraphRetriever
from neocorrag_core.models import LazyModels
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
from neocorrag_core.validation import check_bool, check_instance, clean_text
from neocorrag_integrations._belief import BeliefAdapter
from neocorrag_integrations._common import (
    EvaluateOptions,
    OwnEmbedder,
    PipelineOptions,
    RefineCall,
    RefinerSettings,
    detached_copy,
    evaluate_over,
    pipeline_parts,
)
from neocorrag_integrations._llama_index_models import as_chat_model, as_embedder
from neocorrag_integrations._reformulation import ReformulationSettings
from neocorrag_integrations._translate import engine_embedder
from neocorrag_integrations.llama_index_ingest import TripleExtractorTransform, node_fields

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from neocorrag_core.belief.options import BeliefOptions

__all__ = [
    "BeliefQueryEngine",
    "CorpusGraphRetriever",
    "EvidencePipelineRetriever",
    "EvidenceReformulationRetriever",
    "NeocorRAGEmbedding",
    "NeocorRAGPostprocessor",
    "TripleExtractorTransform",
    "as_chat_model",
    "as_embedder",
    "evaluate",
    "is_evidence_chain_node",
]

dispatcher = get_dispatcher(__name__)


def _read(position: int, item: Any) -> Fields:
    if not isinstance(item, NodeWithScore):
        raise InputError(
            f"nodes[{position}] is a {type(item).__name__}; neocorrag's LlamaIndex adapters "
            "take llama_index NodeWithScore objects"
        )
    score = item.score
    try:  # vector stores may set numpy scores after construction; the engine takes floats
        score = None if score is None else float(score)
    except (TypeError, ValueError):
        raise InputError(
            f"nodes[{position}].score must be a number or None, got {type(score).__name__}"
        ) from None
    return node_fields(item.node, score)


def _on_top(metadata: dict[str, Any], added: dict[str, Any]) -> dict[str, Any]:
    return {**metadata, **added}


def _with_keys(excluded: list[str], metadata: dict[str, Any]) -> list[str]:
    return [*excluded, *(k for k in metadata if k not in excluded)]


def _copy(
    original: NodeWithScore, score: float | None, added: dict[str, Any], merge: Any = None
) -> NodeWithScore:
    """A copy of ``original`` with ``added`` in its metadata (``merge``: how; default on top
    of its own), hidden from the LLM and the embedder."""
    node = detached_copy(original.node)
    node.metadata = (merge or _on_top)(node.metadata, added)
    node.excluded_llm_metadata_keys = _with_keys(node.excluded_llm_metadata_keys, added)
    node.excluded_embed_metadata_keys = _with_keys(node.excluded_embed_metadata_keys, added)
    return NodeWithScore(node=node, score=score)


class NeocorRAGPostprocessor(RefinerSettings, BaseNodePostprocessor):
    """Drops the low-ranked nodes nothing ties to the question; the chains say why.

    Returns copies of the kept nodes in retrieval order (scores, ids and metadata kept,
    plus the ``neocorrag_*`` keys, which are hidden from the LLM and the embedder), cut to
    their evidence sentences by default. With a ``chain_format`` that writes a block
    (``miner_config``) and ``include_chains``, one ``TextNode`` holds it (metadata hidden,
    scored like the best node its chains came from). Emits ``ReRankStartEvent`` /
    ``ReRankEndEvent`` and a ``RERANKING`` callback event, as rerankers do. Settings:
    :class:`~neocorrag_integrations._common.RefinerSettings` (pydantic fields; a bad one is
    a ``ConfigError``, also from ``from_dict`` / ``from_json``); the query
    (``query_bundle=`` or ``query_str=``) is required. The nodes passed in are never modified.
    """

    documents_name = "nodes"
    documents_kind = "llama_index NodeWithScore objects, in retrieval order"

    @classmethod
    def class_name(cls) -> str:
        """Name used by LlamaIndex serialization."""
        return "NeocorRAGPostprocessor"

    def _postprocess_nodes(
        self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None = None
    ) -> list[NodeWithScore]:
        call = self._started(nodes, query_bundle)
        with self.callback_manager.event(
            CBEventType.RERANKING, payload=self._payload(call)
        ) as event:
            out = self.refine(call)
            event.on_end(payload={EventPayload.NODES: out})
        dispatcher.event(ReRankEndEvent(nodes=out))
        return out

    async def _apostprocess_nodes(
        self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None = None
    ) -> list[NodeWithScore]:
        call = self._started(nodes, query_bundle)
        with self.callback_manager.event(
            CBEventType.RERANKING, payload=self._payload(call)
        ) as event:
            out = await asyncio.to_thread(self.refine, call)
            event.on_end(payload={EventPayload.NODES: out})
        dispatcher.event(ReRankEndEvent(nodes=out))
        return out

    def _started(self, nodes: Any, query_bundle: QueryBundle | None) -> RefineCall:
        call = self.check_call(_bundle_text(query_bundle), nodes)
        dispatcher.event(
            ReRankStartEvent(
                query=query_bundle,
                nodes=call.documents,
                top_n=call.config.kept_top_n,
                model_name=self.describe_engine(call.config),
            )
        )
        return call

    def _payload(self, call: RefineCall) -> dict[str, object]:
        return {
            EventPayload.NODES: call.documents,
            EventPayload.MODEL_NAME: self.describe_engine(call.config),
            EventPayload.QUERY_STR: call.query,
            EventPayload.TOP_K: call.config.kept_top_n,
        }

    def _fields(self, position: int, document: Any) -> Fields:
        return _read(position, document)

    def _kept_copy(
        self, original: NodeWithScore, added: dict[str, Any], text: str | None
    ) -> NodeWithScore:
        kept = _copy(original, original.score, added, kept_metadata)
        if text is not None:
            kept.node.set_content(text)
        return kept

    def _chain_document(
        self, text: str, metadata: dict[str, Any], chain_id: str, sources: list[Any]
    ) -> NodeWithScore:
        keys = list(metadata)
        node = TextNode(
            id_=chain_id,
            text=text,
            metadata=metadata,
            excluded_llm_metadata_keys=keys,
            excluded_embed_metadata_keys=keys,
        )
        # Score-based steps after this one (a similarity cutoff) treat the chains like the
        # best node they were mined from, instead of dropping a node without a score.
        scores = [s.score for s in sources if s.score is not None]
        return NodeWithScore(node=node, score=max(scores) if scores else None)


def is_evidence_chain_node(node: NodeWithScore | TextNode) -> bool:
    """Whether ``node`` is the evidence-chain node the postprocessor adds."""
    return node.metadata.get(IS_EVIDENCE_CHAINS) is True


class NeocorRAGEmbedding(OwnEmbedder, BaseEmbedding):
    """LlamaIndex embedding over neocorrag's embedder (the bundled MiniLM by default;
    anything :func:`~neocorrag_core.models.resolve_embedder` accepts; only a name is kept
    when serialized, ``model_name``). Loads on the first call; pass the same object as the
    postprocessor's ``embedder=`` to load the model once."""

    _spec: Any = PrivateAttr(default=None)
    _embedder: Any = PrivateAttr(default_factory=LoadOnce)

    def __init__(self, embedder: Any = None, **kwargs: Any) -> None:
        from neocorrag_core.models import BUNDLED_EMBEDDER_NAME

        if embedder is None and kwargs.get("model_name") not in (None, BUNDLED_EMBEDDER_NAME):
            embedder = kwargs["model_name"]  # rebuilt from a serialized dict
        if embedder is None or isinstance(embedder, str):
            kwargs.setdefault("model_name", embedder or BUNDLED_EMBEDDER_NAME)
        else:
            kwargs.setdefault("model_name", type(embedder).__name__)
        super().__init__(**kwargs)
        self._spec = embedder

    @classmethod
    def class_name(cls) -> str:
        """Name used by LlamaIndex serialization."""
        return "NeocorRAGEmbedding"

    # Pickle like a plain pydantic model (the embedder object travels, its loaded model does
    # not): BaseComponent would re-run __init__ from ``model_name``, a mere class name here.
    def __getstate__(self) -> dict[Any, Any]:
        return BaseModel.__getstate__(self)

    def __setstate__(self, state: dict[Any, Any]) -> None:
        BaseModel.__setstate__(self, state)

    def _get_text_embeddings(self, texts: list[str]) -> list[list[float]]:
        return self._vectors("NeocorRAGEmbedding", texts)

    def _get_text_embedding(self, text: str) -> list[float]:
        return self._get_text_embeddings([text])[0]

    def _get_query_embedding(self, query: str) -> list[float]:
        return self._get_text_embeddings([query])[0]

    async def _aget_query_embedding(self, query: str) -> list[float]:
        return await asyncio.to_thread(self._get_query_embedding, query)

    # LlamaIndex's own async text methods call the sync one on the event loop, one text at
    # a time: one batched call in a thread instead.
    async def _aget_text_embedding(self, text: str) -> list[float]:
        return await asyncio.to_thread(self._get_text_embedding, text)

    async def _aget_text_embeddings(self, texts: list[str]) -> list[list[float]]:
        return await asyncio.to_thread(self._get_text_embeddings, texts)


def _retriever_check(owner: str, retriever: Any, callback_manager: Any) -> None:
    if not callable(getattr(retriever, "retrieve", None)) or not callable(
        getattr(retriever, "aretrieve", None)
    ):
        raise ConfigError(
            f"{owner}: retriever must be a LlamaIndex retriever, got {type(retriever).__name__}"
        )
    check_instance(owner, "callback_manager", callback_manager, CallbackManager, optional=True)


def _search_bundle(query_bundle: QueryBundle, text: str) -> QueryBundle:
    # The question keeps its bundle (custom embedding strings, a precomputed embedding);
    # queries written on the way get plain ones.
    return query_bundle if text == query_bundle.query_str else QueryBundle(text)


class EvidenceReformulationRetriever(BaseRetriever):
    """Wraps your retriever and searches again for the evidence it missed (EviReform).

    As the LangChain ``EvidenceReformulationRetriever``: each query is
    ``retriever.retrieve(...)`` (``aretrieve`` from :meth:`aretrieve`, a round's queries
    concurrently) and its first ``first_k`` (default ``k``) or ``residual_k`` nodes are
    used, so give the wrapped retriever at least that ``similarity_top_k``. Nodes are
    matched across queries by ``node_id`` (else by title and text). Returns copies of the
    best ``k`` nodes, scored with the EviReform score, with the ``neocorrag_*`` keys hidden
    from the LLM and the embedder. Keywords (``k``, ``config``, ``embedder``, ``lm``,
    ``triple_source``, ``reformulator``, ``models``):
    :class:`~neocorrag_integrations._reformulation.ReformulationSettings`, which round-trip
    through ``retriever.settings.model_dump()`` (this class is not a serializable
    ``BaseComponent``: the wrapped retriever seldom is). Thread-safe; pickles without its
    loaded models.
    """

    def __init__(
        self,
        retriever: BaseRetriever,
        *,
        callback_manager: CallbackManager | None = None,
        verbose: bool = False,
        **settings: Any,
    ) -> None:
        owner = "EvidenceReformulationRetriever"
        _retriever_check(owner, retriever, callback_manager)
        check_bool(owner, "verbose", verbose)
        super().__init__(callback_manager=callback_manager, verbose=verbose)
        self._retriever = retriever
        self._settings = ReformulationSettings(owner=owner, **settings)

    @property
    def retriever(self) -> BaseRetriever:
        """The wrapped retriever."""
        return self._retriever

    @property
    def settings(self) -> ReformulationSettings:
        """``k``, ``config``, ``embedder``, ``lm`` and the engine, as pydantic settings."""
        return self._settings

    @property
    def k(self) -> int:
        """Nodes returned per query."""
        k: int = self._settings.k
        return k

    @property
    def reformulator(self) -> EvidenceReformulator:
        """The engine (share it with ``reformulator=`` in another retriever)."""
        return self._settings.reformulator

    @property
    def models(self) -> LazyModels:
        """The engine's lazily loaded models (share them with ``models=``)."""
        return self._settings.models

    def retrieve(self, str_or_query_bundle: QueryType) -> list[NodeWithScore]:
        """Retrieve the best ``k`` nodes for a query string or ``QueryBundle``."""
        _query_of("EvidenceReformulationRetriever", str_or_query_bundle)
        return super().retrieve(str_or_query_bundle)

    async def aretrieve(self, str_or_query_bundle: QueryType) -> list[NodeWithScore]:
        """Async :meth:`retrieve`: the residual queries of a round are sent concurrently."""
        _query_of("EvidenceReformulationRetriever", str_or_query_bundle)
        return await super().aretrieve(str_or_query_bundle)

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        query = _question(query_bundle)

        def fetch(text: str) -> list[NodeWithScore]:
            return self._retriever.retrieve(_search_bundle(query_bundle, text))

        return self._settings.reformulate(query, fetch, _read, _copy, self.k)

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        query = _question(query_bundle)

        async def afetch(text: str) -> list[NodeWithScore]:
            return await self._retriever.aretrieve(_search_bundle(query_bundle, text))

        return await self._settings.areformulate(query, afetch, _read, _copy, self.k)


class EvidencePipelineRetriever(BaseRetriever):
    """Your retriever, EviReform for the missing hop, then the refiner for the noise: the
    three as one retriever on one engine (one load of each model, one triple source).

    Build it with :meth:`from_retriever`; ``RetrieverQueryEngine.from_args(pipeline)`` (or
    ``BeliefQueryEngine(pipeline)``) answers over it. Each call runs ``reformulation`` (an
    :class:`EvidenceReformulationRetriever`) and hands its ``k`` nodes to ``postprocessor``
    (a :class:`NeocorRAGPostprocessor`), which reads what EviReform wrote about each node
    (``neocorrag_provenance``): a hop searched for on purpose is kept even when nothing
    links it to the other nodes. ``aretrieve`` runs the same steps asynchronously. The same
    pipeline by hand: ``RetrieverQueryEngine.from_args(reformulation,
    node_postprocessors=[postprocessor])``.
    """

    def __init__(
        self,
        reformulation: EvidenceReformulationRetriever,
        postprocessor: NeocorRAGPostprocessor,
        *,
        callback_manager: CallbackManager | None = None,
    ) -> None:
        owner = "EvidencePipelineRetriever"
        check_instance(owner, "reformulation", reformulation, EvidenceReformulationRetriever)
        check_instance(owner, "postprocessor", postprocessor, NeocorRAGPostprocessor)
        check_instance(owner, "callback_manager", callback_manager, CallbackManager, optional=True)
        super().__init__(callback_manager=callback_manager)
        self.reformulation = reformulation
        self.postprocessor = postprocessor

    @classmethod
    def from_retriever(
        cls, retriever: BaseRetriever, **options: Unpack[PipelineOptions]
    ) -> EvidencePipelineRetriever:
        """The pipeline over ``retriever`` (``similarity_top_k`` at least ``k``) on one engine:
        ``.postprocessor.miner`` and ``.reformulation.reformulator`` share models and triple
        source. Keywords: :class:`~neocorrag_integrations._common.PipelineOptions`.

        Examples
        --------
        >>> pipeline = EvidencePipelineRetriever.from_retriever(  # doctest: +SKIP
        ...     index.as_retriever(similarity_top_k=5), embedder=embed_model)
        >>> engine = RetrieverQueryEngine.from_args(pipeline, llm=llm)  # doctest: +SKIP
        """
        postprocessor, settings = pipeline_parts("from_retriever", NeocorRAGPostprocessor, options)
        return cls(EvidenceReformulationRetriever(retriever, **settings), postprocessor)

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        found = self.reformulation.retrieve(query_bundle)
        return self.postprocessor.postprocess_nodes(found, query_bundle=query_bundle)

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        found = await self.reformulation.aretrieve(query_bundle)
        return await self.postprocessor.apostprocess_nodes(found, query_bundle=query_bundle)


class CorpusGraphRetriever(BaseRetriever):
    """Your retriever's candidates, chosen and completed on the corpus graph of the triple
    store: HippoRAG-style retrieval with no LLM, without EviReform.

    Each call asks ``retriever`` for its candidates (``similarity_top_k=20``, say), seeds a
    walk on the store's graph from the question and them, and returns copies of the ``k``
    nodes the walk ranks best with ``neocorrag_graph_score`` / ``neocorrag_found_by_graph``
    / ``neocorrag_graph_via`` metadata (hidden from the LLM and the embedder). With
    ``get_nodes`` (your vector store's ``get_nodes(node_ids=...)``) a stored node no search
    returned can be among them; without it the graph chooses among the candidates.

    Args:
        retriever: your LlamaIndex retriever.
        k: nodes returned.
        get_nodes: reads stored nodes by id (``vector_store.get_nodes``).
        embedder, triple_source: as for :class:`NeocorRAGPostprocessor` (the triple source
            must read a store: the graph is the store's).
    """

    def __init__(
        self,
        retriever: BaseRetriever,
        *,
        k: int = 5,
        get_nodes: Callable[..., Sequence[Any]] | None = None,
        embedder: Any = None,
        triple_source: Any = None,
        callback_manager: CallbackManager | None = None,
    ) -> None:
        owner = "CorpusGraphRetriever"
        _retriever_check(owner, retriever, callback_manager)
        k = check_call_k(owner, k)
        super().__init__(callback_manager=callback_manager)
        self.k = k
        self.retriever = retriever
        self.get_nodes = get_nodes
        self.engine = GraphRetriever(
            embedder=engine_embedder(embedder), triple_source=triple_source
        )

    def _by_ids(self, ids: list[str]) -> list[NodeWithScore]:
        assert self.get_nodes is not None
        return [NodeWithScore(node=node, score=None) for node in self.get_nodes(node_ids=ids)]

    def _select(self, query_bundle: QueryBundle, found: list[NodeWithScore]) -> list[NodeWithScore]:
        return select_by_graph(
            self.engine,
            _question(query_bundle),
            found,
            self.k,
            read=_read,
            copy=_copy,
            get_by_ids=self._by_ids if self.get_nodes is not None else None,
        )

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return self._select(query_bundle, self.retriever.retrieve(query_bundle))

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        found = await self.retriever.aretrieve(query_bundle)
        return await asyncio.to_thread(self._select, query_bundle, found)


def evaluate(
    questions: Any, retriever: BaseRetriever, *, out: str, **options: Unpack[EvaluateOptions]
) -> dict[str, Any]:
    """Your questions over your LlamaIndex retriever, answered by your LLM: as
    :func:`neocorrag_integrations.langchain.evaluate` (``gold_ids`` are your node ids;
    ``llm`` a LlamaIndex LLM; keywords:
    :class:`~neocorrag_integrations._common.EvaluateOptions`)."""
    _retriever_check("evaluate", retriever, None)
    search = search_over(retriever.retrieve, _read)
    name = f"llama_index:{type(retriever).__name__}"
    return evaluate_over(
        questions, search, out=out, name=name, translate=as_chat_model, options=options
    )


def _question(query_bundle: QueryBundle) -> str:
    """The query of a bundle the entry point (``retrieve``, ``query``) checked already, as
    valid Unicode."""
    return clean_text(query_bundle.query_str)


def _query_of(owner: str, query: Any) -> str:
    """The query string of a ``str`` or ``QueryBundle``, or an ``InputError``."""
    if isinstance(query, QueryBundle):
        query = query.query_str
    elif not isinstance(query, str):
        raise InputError(
            f"{owner}: the query must be a non-empty string or a QueryBundle, "
            f"got {type(query).__name__}"
        )
    return check_query(owner, query)


def _bundle_text(query_bundle: Any) -> Any:
    """The postprocessor's query string (checked with the nodes), or an ``InputError``
    saying how to pass one."""
    owner = "NeocorRAGPostprocessor"
    if query_bundle is None:
        raise InputError(
            f"{owner} needs the query: call postprocess_nodes(nodes, query_bundle=...) or "
            "query_str=..., as a query engine does"
        )
    if not isinstance(query_bundle, QueryBundle):
        raise InputError(
            f"{owner}: query_bundle must be a QueryBundle, got {type(query_bundle).__name__} "
            "(pass a plain string as query_str=...)"
        )
    return query_bundle.query_str


class BeliefQueryEngine(BeliefAdapter, BaseQueryEngine):
    """BeliefRAG as a LlamaIndex query engine: per question, search, judge the evidence,
    replace misleading nodes, search again for the missing fact, answer or abstain.

    ``query(question)`` (a string or a ``QueryBundle``) runs one episode of the
    :class:`~neocorrag_core.belief.BeliefController` and returns a ``Response``: the answer
    (or ``abstain_message``), ``source_nodes`` (copies of your retriever's nodes, the final
    evidence) and ``metadata`` (``trajectory``, ``answer``, ``abstained``, ``final_action``,
    ``mutations``, ``retrieval_rounds``, ``tokens``, ``question``). Each search is
    ``retriever.retrieve`` (its first ``k`` nodes); ``aquery`` awaits ``aretrieve``.

    ``llm``: a LlamaIndex LLM (asked through :func:`as_chat_model`), your own
    ``ChatModel``, a local LM spec, or ``None`` (the bundled LM). Other keywords:
    :class:`~neocorrag_core.belief.options.BeliefOptions`. Errors as for the LangChain
    ``BeliefRAG``.
    """

    def __init__(
        self,
        retriever: BaseRetriever,
        llm: Any = None,
        *,
        abstain_message: str = ABSTAIN_MESSAGE,
        callback_manager: CallbackManager | None = None,
        **options: Unpack[BeliefOptions],
    ) -> None:
        owner = "BeliefQueryEngine"
        _retriever_check(owner, retriever, callback_manager)
        if not isinstance(abstain_message, str):
            raise ConfigError(
                f"{owner}.abstain_message must be a string, got {type(abstain_message).__name__}"
            )
        self._retriever = retriever
        self._set_up(owner, llm, as_chat_model, options)
        self.abstain_message = abstain_message
        super().__init__(callback_manager=callback_manager)

    @property
    def retriever(self) -> BaseRetriever:
        """The retriever searched."""
        return self._retriever

    def query(self, str_or_query_bundle: QueryType) -> RESPONSE_TYPE:
        """One episode for a question string or ``QueryBundle``; see the class docstring."""
        _query_of("BeliefQueryEngine", str_or_query_bundle)  # before LlamaIndex's events
        return super().query(str_or_query_bundle)

    async def aquery(self, str_or_query_bundle: QueryType) -> RESPONSE_TYPE:
        """Async :meth:`query`: searches await ``retriever.aretrieve``."""
        _query_of("BeliefQueryEngine", str_or_query_bundle)
        return await super().aquery(str_or_query_bundle)

    def _get_prompt_modules(self) -> dict[str, Any]:
        return {}  # the controller's prompts are versioned code, not LlamaIndex templates

    def _query(self, query_bundle: QueryBundle) -> Response:
        def fetch(text: str) -> list[NodeWithScore]:
            return self._retriever.retrieve(_search_bundle(query_bundle, text))

        return self._response(*self._setup.run(_question(query_bundle), fetch, _read))

    async def _aquery(self, query_bundle: QueryBundle) -> Response:
        async def afetch(text: str) -> list[NodeWithScore]:
            return await self._retriever.aretrieve(_search_bundle(query_bundle, text))

        return self._response(*await self._setup.arun(_question(query_bundle), afetch, _read))

    def _response(self, result: BeliefResult, evidence: Sequence[NodeWithScore]) -> Response:
        nodes = [NodeWithScore(node=detached_copy(n.node), score=n.score) for n in evidence]
        answer = result.answer
        return Response(
            response=self.abstain_message if answer is None else answer,
            source_nodes=nodes,
            metadata=result.as_dict(),
        )
