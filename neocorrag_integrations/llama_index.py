"""LlamaIndex adapters: :class:`NeocorRAGPostprocessor`, a drop-in ``BaseNodePostprocessor``,
:class:`EvidenceReformulationRetriever`, a ``BaseRetriever`` that searches again for the
evidence your retriever missed, and :class:`BeliefQueryEngine`, a query engine that decides
per question whether to search again, fix the evidence, answer or abstain.

Add them to the query engine you already have::

    from llama_index.core.query_engine import RetrieverQueryEngine
    from neocorrag_integrations.llama_index import (
        BeliefQueryEngine,
        EvidenceReformulationRetriever,
        NeocorRAGPostprocessor,
    )

    query_engine = index.as_query_engine(
        similarity_top_k=5, node_postprocessors=[NeocorRAGPostprocessor()]
    )
    # or: search again for the missing hops, then refine
    postprocessor = NeocorRAGPostprocessor()
    retriever = EvidenceReformulationRetriever(
        index.as_retriever(similarity_top_k=5), models=postprocessor
    )
    query_engine = RetrieverQueryEngine.from_args(retriever, node_postprocessors=[postprocessor])
    # or: let the evidence state decide when to search again (BeliefRAG)
    query_engine = BeliefQueryEngine(index.as_retriever(similarity_top_k=5), llm=your_llm)

Core classes take no LlamaIndex objects: :func:`as_chat_model` turns an LLM into the core's
``ChatModel`` and :func:`as_embedder` turns an embedding into an encode function, e.g.
``BeliefController.from_models(as_chat_model(llm))`` (the adapters here do it for you).

Needs ``llama-index-core`` (``pip install 'neocorrag[llamaindex]'``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

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
    from llama_index.core.schema import (
        NodeWithScore,
        QueryBundle,
        QueryType,
        TextNode,
    )
except ImportError as err:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        "neocorrag_integrations.llama_index needs llama-index-core: "
        "pip install 'neocorrag[llamaindex]'"
    ) from err

from neocorrag_core.belief import AnswerabilityCalibrator, BeliefConfig, BeliefController
from neocorrag_core.chains.miner import EvidenceChainMiner
from neocorrag_core.errors import ConfigError, InputError
from neocorrag_core.evireform import EvidenceReformulator
from neocorrag_core.models import LazyModels, TextEmbedder, resolve_embedder
from neocorrag_core.once import LoadOnce
from neocorrag_core.triples import TripleSource
from neocorrag_core.validation import check_bool, check_int
from neocorrag_integrations._belief import (
    ABSTAIN_MESSAGE,
    BeliefEngine,
    BeliefOutcome,
    ChainsDecoding,
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
from neocorrag_integrations._llama_index_models import as_chat_model, as_embedder
from neocorrag_integrations._reformulation import (
    ModelsSource,
    ReformedItem,
    ReformulationSettings,
)
from neocorrag_integrations._translate import engine_embedder, engine_lm
from neocorrag_integrations.llama_index_ingest import TripleExtractorTransform, node_source
from neocorrag_integrations.metadata_keys import IS_EVIDENCE_CHAINS

__all__ = [
    "BeliefQueryEngine",
    "EvidenceReformulationRetriever",
    "NeocorRAGEmbedding",
    "NeocorRAGPostprocessor",
    "TripleExtractorTransform",
    "as_chat_model",
    "as_embedder",
    "is_evidence_chain_node",
]

dispatcher = get_dispatcher(__name__)


class NeocorRAGPostprocessor(RefinerSettings, BaseNodePostprocessor):
    """Drops the low-ranked nodes nothing ties to the question; the chains say why.

    Returns copies of the kept nodes in their retrieval order, with their scores, ids and
    metadata, plus the ``neocorrag_*`` keys (kept reason, retrieval rank, chain numbers,
    fallback). Those keys are added to the copies' ``excluded_llm_metadata_keys`` and
    ``excluded_embed_metadata_keys``, so the LLM and the embedder never see them; the node
    text is cut to its evidence sentences by default (``MinerConfig.passage_focus``,
    ``neocorrag_focused`` marks a cut node). The chains are in the metadata
    (``metadata_keys.run_metadata``); by default no chain text goes to the LLM
    (``MinerConfig.chain_format="none"``). With another ``chain_format`` in
    ``miner_config``, chains found and ``include_chains`` set, one ``TextNode`` holding the
    chain block is added (``chains_position``), flagged with
    ``metadata["neocorrag_evidence_chains"] = True``, all of its metadata hidden from the LLM
    and the embedder, and scored with the best score of the nodes its chains came from.
    With no triples, every node comes back (as a copy) and ``neocorrag_fallback`` says
    why; with no chain, the keep mode's link rules still apply (``keep="paper"`` passes
    everything through) and ``neocorrag_fallback`` says why. The nodes passed in are never
    modified.

    Configuration lives in pydantic fields (see ``NeocorRAGPostprocessor.model_fields``);
    a bad one raises :class:`~neocorrag_core.errors.ConfigError` at construction (also
    from ``from_dict`` / ``from_json``, which rebuild through the constructor). The engine
    and its models live in a private attribute and load on first use. Emits
    ``ReRankStartEvent``/``ReRankEndEvent`` and a ``RERANKING`` callback event, as the
    rerankers do.

    The query is required (``query_bundle=`` or ``query_str=``, as a query engine passes
    it): a missing, non-string or empty one raises
    :class:`~neocorrag_core.errors.InputError`, as do ``nodes`` that are not a list of
    ``NodeWithScore``, before any work.
    """

    @classmethod
    def class_name(cls) -> str:
        """Name used by LlamaIndex serialization."""
        return "NeocorRAGPostprocessor"

    def _postprocess_nodes(
        self,
        nodes: list[NodeWithScore],
        query_bundle: QueryBundle | None = None,
    ) -> list[NodeWithScore]:
        query = _bundle_query("NeocorRAGPostprocessor", query_bundle)
        nodes = check_sequence("NeocorRAGPostprocessor", "nodes", nodes, _NODES)
        sources = _source_documents(nodes)
        self._start(nodes, query_bundle)
        with self.callback_manager.event(
            CBEventType.RERANKING, payload=self._payload(nodes, query)
        ) as event:
            out = self._build(nodes, self.plan(query, sources)) if nodes else []
            event.on_end(payload={EventPayload.NODES: out})
        dispatcher.event(ReRankEndEvent(nodes=out))
        return out

    async def _apostprocess_nodes(
        self,
        nodes: list[NodeWithScore],
        query_bundle: QueryBundle | None = None,
    ) -> list[NodeWithScore]:
        query = _bundle_query("NeocorRAGPostprocessor", query_bundle)
        nodes = check_sequence("NeocorRAGPostprocessor", "nodes", nodes, _NODES)
        sources = _source_documents(nodes)
        self._start(nodes, query_bundle)
        with self.callback_manager.event(
            CBEventType.RERANKING, payload=self._payload(nodes, query)
        ) as event:
            out: list[NodeWithScore] = []
            if nodes:
                out = self._build(nodes, await asyncio.to_thread(self.plan, query, sources))
            event.on_end(payload={EventPayload.NODES: out})
        dispatcher.event(ReRankEndEvent(nodes=out))
        return out

    def _start(self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None) -> None:
        dispatcher.event(
            ReRankStartEvent(
                query=query_bundle,
                nodes=nodes,
                top_n=self.effective_config().kept_top_n,
                model_name=self.describe_engine(),
            )
        )

    def _payload(self, nodes: list[NodeWithScore], query: str) -> dict[str, object]:
        return {
            EventPayload.NODES: nodes,
            EventPayload.MODEL_NAME: self.describe_engine(),
            EventPayload.QUERY_STR: query,
            EventPayload.TOP_K: self.effective_config().kept_top_n,
        }

    def _build(self, nodes: list[NodeWithScore], plan: Refinement) -> list[NodeWithScore]:
        out: list[NodeWithScore] = []
        for item in plan.layout(include_chains=self.include_chains, position=self.chains_position):
            if item is None:
                out.append(_chain_node(nodes, plan))
                continue
            original = nodes[item.index]
            node = detached_copy(original.node)
            node.metadata = kept_metadata(node.metadata, item.metadata)
            if item.text is not None:
                node.set_content(item.text)
            node.excluded_llm_metadata_keys = _with_keys(
                node.excluded_llm_metadata_keys, item.metadata
            )
            node.excluded_embed_metadata_keys = _with_keys(
                node.excluded_embed_metadata_keys, item.metadata
            )
            out.append(NodeWithScore(node=node, score=original.score))
        return out


class NeocorRAGEmbedding(BaseEmbedding):
    """LlamaIndex embedding over neocorrag's embedder: the bundled MiniLM by default.

    For building an index offline without another package; the model loads on the first
    call. ``embedder`` takes anything :func:`neocorrag_core.models.resolve_embedder`
    accepts (``None`` = bundled), or another framework embeddings object (translated by
    :func:`as_embedder`); only a name is kept when serialized (``model_name``).
    Pass the same object as the postprocessor's ``embedder=`` to load the model once.
    """

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

    # Pickle like a plain pydantic model (the embedder object travels, its loaded model
    # does not): LlamaIndex's BaseComponent would re-run __init__ from the fields, and
    # ``model_name`` of an object embedder is only its class name, not something to load.
    def __getstate__(self) -> dict[Any, Any]:
        return BaseModel.__getstate__(self)

    def __setstate__(self, state: dict[Any, Any]) -> None:
        BaseModel.__setstate__(self, state)

    def _resolved(self) -> TextEmbedder:
        embedder: TextEmbedder = self._embedder.get(
            lambda: resolve_embedder(engine_embedder(self._spec))
        )
        return embedder

    def text_embedder(self) -> TextEmbedder:
        """The engine's embedder behind this object (models load on first use): an engine
        given this object shares it, its cache included (a query embedded by the retriever
        is not embedded again by the postprocessor)."""
        return self._resolved()

    def _get_text_embeddings(self, texts: list[str]) -> list[list[float]]:
        texts = check_sequence("NeocorRAGEmbedding", "texts", texts, "strings")
        for i, text in enumerate(texts):
            if not isinstance(text, str):
                raise InputError(
                    f"NeocorRAGEmbedding: texts[{i}] is a {type(text).__name__}, not a string"
                )
        if not texts:
            return []
        return self._resolved().embed(texts).tolist()

    def _get_text_embedding(self, text: str) -> list[float]:
        return self._get_text_embeddings([text])[0]

    def _get_query_embedding(self, query: str) -> list[float]:
        return self._get_text_embeddings([query])[0]

    async def _aget_query_embedding(self, query: str) -> list[float]:
        return await asyncio.to_thread(self._get_query_embedding, query)

    # LlamaIndex's own async text methods call the sync one on the event loop, one text at
    # a time (aget_text_embedding_batch gathers them): one batched call in a thread instead.
    async def _aget_text_embedding(self, text: str) -> list[float]:
        return await asyncio.to_thread(self._get_text_embedding, text)

    async def _aget_text_embeddings(self, texts: list[str]) -> list[list[float]]:
        return await asyncio.to_thread(self._get_text_embeddings, texts)


class EvidenceReformulationRetriever(BaseRetriever):
    """Wraps your retriever and searches again for the evidence it missed (EviReform).

    The question goes to ``retriever`` first; the triples of what comes back become
    propositions, the facts that state what the question asks about are selected as
    evidence, and residual queries for what is still missing (by default each bridge entity
    the evidence names with the question's open relation words, e.g. ``"Mountrail County
    capital"``; with ``config={"residual_queries": "lm"}`` written by the LM) go to
    ``retriever`` again. All results are pooled, scored against the question and the
    residual queries, and the best ``k`` nodes come back, best first.

    Each query is sent as ``retriever.retrieve(...)`` (``aretrieve`` from
    :meth:`aretrieve`, the residual queries of a round concurrently) and its first
    ``first_k`` (default ``k``) or ``residual_k`` (default 5) nodes are used, so give the
    wrapped retriever at least that ``similarity_top_k``. Nodes are matched across queries
    by ``node_id`` (keep ids stable, as an index does) and each appears once; two nodes
    with the same title and text are one node even under different ids (a node without a
    stored id gets a fresh random one on every retrieval), and the first one seen is
    returned.

    Returns copies of the best ``k`` nodes, scored with the EviReform score, with the
    ``neocorrag_*`` keys of the LangChain retriever (``neocorrag_evireform_rank``,
    ``neocorrag_evireform_score``, ``neocorrag_found_by_query``, ``neocorrag_found_by_kind``,
    ``neocorrag_query_ranks``, ``neocorrag_residual_queries``,
    ``neocorrag_evireform_evidence``) in their metadata. Those keys are added to the copies'
    ``excluded_llm_metadata_keys`` and ``excluded_embed_metadata_keys``, so the LLM reads
    the same text as without this retriever. The nodes passed in are never modified. When
    the wrapped retriever fails (or returns something other than ``NodeWithScore``), a
    :class:`~neocorrag_core.evireform.RetrievalError` names the query. A query that is
    not a non-empty string (or a ``QueryBundle`` holding one) raises
    :class:`~neocorrag_core.errors.InputError`, as the engine does, before the wrapped
    retriever is asked. A bad setting raises :class:`~neocorrag_core.errors.ConfigError`
    at construction.

    LlamaIndex retrievers take no per-call number of results and this one is not a
    serializable ``BaseComponent`` (the wrapped retriever seldom is): its settings
    round-trip through ``settings.model_dump()``, e.g.
    ``EvidenceReformulationRetriever(base, **retriever.settings.model_dump())``.

    Args:
        retriever: the LlamaIndex retriever to wrap.
        k: nodes returned.
        config: a :class:`~neocorrag_core.evireform.ReformulationConfig` or a dict of its
            fields, e.g. ``{"residual_queries": "lm", "selection": "beam"}`` (the LM
            writes queries and selects evidence; the default needs no LM at all).
        embedder / lm / triple_source / reformulator / models: as for
            :class:`~neocorrag_integrations._reformulation.ReformulationSettings`;
            ``models=postprocessor`` shares a :class:`NeocorRAGPostprocessor`'s models and
            triple source.
        callback_manager / verbose: as for any LlamaIndex retriever.

    Thread-safe; pickles without its loaded models.
    """

    def __init__(
        self,
        retriever: BaseRetriever,
        *,
        k: int = 5,
        config: Any = None,
        embedder: Any = None,
        lm: Any = None,
        triple_source: TripleSource | None = None,
        reformulator: EvidenceReformulator | None = None,
        models: ModelsSource | None = None,
        callback_manager: CallbackManager | None = None,
        verbose: bool = False,
    ) -> None:
        owner = "EvidenceReformulationRetriever"
        if not callable(getattr(retriever, "retrieve", None)) or not callable(
            getattr(retriever, "aretrieve", None)
        ):
            raise ConfigError(
                f"{owner}: retriever must be a LlamaIndex retriever, got {type(retriever).__name__}"
            )
        check_int(owner, "k", k, minimum=1)
        check_bool(owner, "verbose", verbose)
        if callback_manager is not None and not isinstance(callback_manager, CallbackManager):
            raise ConfigError(
                f"{owner}.callback_manager must be a CallbackManager or None, "
                f"got {type(callback_manager).__name__}"
            )
        super().__init__(callback_manager=callback_manager, verbose=verbose)
        self._retriever = retriever
        self._settings = ReformulationSettings(
            k=k,
            config=config,
            embedder=embedder,
            lm=lm,
            triple_source=triple_source,
            reformulator=reformulator,
            models=models,
        )

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
        return self._settings.k

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

    def _bundle(self, query_bundle: QueryBundle, text: str) -> QueryBundle:
        # The original question keeps its bundle (custom embedding strings, a precomputed
        # embedding); residual queries get plain ones.
        return query_bundle if text == query_bundle.query_str else QueryBundle(text)

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        query = _bundle_query("EvidenceReformulationRetriever", query_bundle)

        def fetch(text: str) -> list[NodeWithScore]:
            return self._retriever.retrieve(self._bundle(query_bundle, text))

        items = self._settings.reformulate(query, fetch, _reformulation_sources)
        return _reformed_nodes(items)

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        query = _bundle_query("EvidenceReformulationRetriever", query_bundle)

        async def afetch(text: str) -> list[NodeWithScore]:
            return await self._retriever.aretrieve(self._bundle(query_bundle, text))

        items = await self._settings.areformulate(query, afetch, _reformulation_sources)
        return _reformed_nodes(items)


_NODES = "llama_index NodeWithScore objects, in retrieval order"


def _query_of(owner: str, query: Any) -> str:
    """The query string of a ``str`` or ``QueryBundle``, or an ``InputError``."""
    if isinstance(query, QueryBundle):
        return _bundle_query(owner, query)
    if not isinstance(query, str):
        raise InputError(
            f"{owner}: the query must be a non-empty string or a QueryBundle, "
            f"got {type(query).__name__}"
        )
    return check_query(owner, query)


def _bundle_query(owner: str, query_bundle: Any) -> str:
    """The query string of ``query_bundle``, or an ``InputError`` saying how to pass one."""
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
    return check_query(owner, query_bundle.query_str)


def _reformulation_sources(nodes: Sequence[NodeWithScore]) -> list[SourceDocument]:
    for i, item in enumerate(nodes):
        if not isinstance(item, NodeWithScore):
            raise InputError(
                f"nodes[{i}] is a {type(item).__name__}; EvidenceReformulationRetriever "
                "wraps retrievers that return llama_index NodeWithScore objects"
            )
    return _source_documents(nodes)


def _reformed_nodes(items: list[ReformedItem[NodeWithScore]]) -> list[NodeWithScore]:
    out = []
    for item in items:
        node = detached_copy(item.original.node)
        node.metadata = {**node.metadata, **item.metadata}
        node.excluded_llm_metadata_keys = _with_keys(node.excluded_llm_metadata_keys, item.metadata)
        node.excluded_embed_metadata_keys = _with_keys(
            node.excluded_embed_metadata_keys, item.metadata
        )
        out.append(NodeWithScore(node=node, score=item.score))
    return out


def is_evidence_chain_node(node: NodeWithScore | TextNode) -> bool:
    """Whether ``node`` is the evidence-chain node this postprocessor adds."""
    return node.metadata.get(IS_EVIDENCE_CHAINS) is True


def _chain_node(nodes: list[NodeWithScore], plan: Refinement) -> NodeWithScore:
    metadata = dict(plan.chain_metadata)
    keys = list(metadata)
    node = TextNode(
        id_=plan.chain_id,
        text=plan.chain_text,
        metadata=metadata,
        excluded_llm_metadata_keys=keys,
        excluded_embed_metadata_keys=keys,
    )
    # Score-based steps after this one (e.g. a similarity cutoff) treat the chains like the
    # best document they were mined from, instead of dropping a node without a score.
    scores = [s for i in plan.source_indices if (s := nodes[i].score) is not None]
    return NodeWithScore(node=node, score=max(scores) if scores else None)


def _with_keys(excluded: list[str], metadata: dict[str, object]) -> list[str]:
    return [*excluded, *(k for k in metadata if k not in excluded)]


def _source_documents(nodes: Sequence[NodeWithScore]) -> list[SourceDocument]:
    sources = []
    for i, item in enumerate(nodes):
        if not isinstance(item, NodeWithScore):
            raise InputError(
                f"nodes[{i}] is a {type(item).__name__}; NeocorRAGPostprocessor takes "
                "llama_index NodeWithScore objects"
            )
        sources.append(node_source(item.node, _score(i, item.score)))
    return sources


def _score(index: int, score: Any) -> float | None:
    # Vector stores may set numpy scores after construction (unvalidated); the engine
    # takes plain floats.
    if score is None:
        return None
    try:
        return float(score)
    except (TypeError, ValueError):
        raise InputError(
            f"nodes[{index}].score must be a number or None, got {type(score).__name__}"
        ) from None


class BeliefQueryEngine(BaseQueryEngine):
    """BeliefRAG as a LlamaIndex query engine: decides per question whether to search
    again, replace misleading evidence, answer, or abstain, over your retriever and LLM.

    ``query(question)`` (a string or a ``QueryBundle``) runs one episode of the
    :class:`~neocorrag_core.belief.BeliefController`: the question goes to ``retriever``,
    the LLM judges the evidence (one structured verifier call per step), writes the next
    query for the missing fact, and answers. It returns a ``Response`` whose

    - ``response`` is the answer, or ``abstain_message`` when the controller abstained;
    - ``source_nodes`` are the final evidence: copies of the nodes your retriever returned
      (ids, metadata and scores kept), in the order they were found; nodes the verifier
      dropped never come back, even when a later search returns them;
    - ``metadata`` holds ``trajectory`` (one dict per step: action, reason, query,
      diagnostics, belief, answerability, evidence ids, draft answer, tokens, seconds),
      ``answer`` (``None`` when abstained), ``abstained``, ``final_action``
      (``"answer"``, ``"stop"`` or ``"abstain"``), ``mutations``, ``retrieval_rounds``,
      ``tokens`` and ``question``.

    Each search is ``retriever.retrieve(QueryBundle(query))`` (the question keeps your
    bundle) and its first ``k`` nodes are used, so give the retriever at least that
    ``similarity_top_k``. ``aquery`` awaits ``retriever.aretrieve`` and runs the LLM calls
    in a worker thread. The retriever's and the LLM's own instrumentation events nest
    under this engine's query span.

    Args:
        retriever: the LlamaIndex retriever.
        llm: a LlamaIndex LLM, asked through :func:`as_chat_model`; ``None`` = the bundled
            local LM (a local LM spec, or your own ``neocorrag_core.lm.chat.ChatModel``, is
            accepted too).
        k: nodes used per search (default ``config.k``, 5).
        config: a :class:`~neocorrag_core.belief.BeliefConfig` or a dict of its fields; a
            dict changes the generator's defaults (a bundled preset's own settings
            included, ``belief.config.PRESET_SETTINGS``).
        calibrator: an :class:`~neocorrag_core.belief.AnswerabilityCalibrator` (default:
            the coefficient file shipped; see ``docs/belief.md``).
        after_search: the model of the answer after one more search, in the retrieval
            value (same type; default: the file shipped).
        embedder: for the relevance diagnostic (``None`` = the bundled MiniLM).
        models: share lazily loaded models with a postprocessor, a miner or a ``LazyModels``.
        chains_for_verifier: also show the verifier the NeocorRAG evidence chains mined
            from the evidence, as one extra document (default ``False``).
        miner / triple_source / chains_decoding: the chains' miner, its triples (default:
            metadata, else the triple store, else spaCy) and decoding (``"none"``). The
            same miner refines the answer's evidence when ``config`` sets
            ``refine_answer`` (``"all"`` or ``"first-search"``, ``BeliefConfig``).
        controller: a ready :class:`~neocorrag_core.belief.BeliefController` (your own
            components) instead of the settings above, which must then be left unset.
        abstain_message: the response text when the controller abstains.
        callback_manager: as for any LlamaIndex query engine.

    A bad setting raises :class:`~neocorrag_core.errors.ConfigError` at construction; a
    query that is not a non-empty string (or a ``QueryBundle`` holding one) raises
    :class:`~neocorrag_core.errors.InputError` before any search; a retriever that
    fails, or returns something other than ``NodeWithScore``, raises
    :class:`~neocorrag_core.errors.RetrievalError` naming the query. A failing LLM call
    raises :class:`~neocorrag_core.errors.ModelCallError` naming the component (the LLM's
    exception chained as ``__cause__``). A failed query leaves nothing behind.
    """

    def __init__(
        self,
        retriever: BaseRetriever,
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
        abstain_message: str = ABSTAIN_MESSAGE,
        callback_manager: CallbackManager | None = None,
    ) -> None:
        owner = "BeliefQueryEngine"
        if not callable(getattr(retriever, "retrieve", None)) or not callable(
            getattr(retriever, "aretrieve", None)
        ):
            raise ConfigError(
                f"{owner}: retriever must be a LlamaIndex retriever, got {type(retriever).__name__}"
            )
        if not isinstance(abstain_message, str):
            raise ConfigError(
                f"{owner}.abstain_message must be a string, got {type(abstain_message).__name__}"
            )
        if callback_manager is not None and not isinstance(callback_manager, CallbackManager):
            raise ConfigError(
                f"{owner}.callback_manager must be a CallbackManager or None, "
                f"got {type(callback_manager).__name__}"
            )
        self._retriever = retriever
        self._llm = llm
        self._engine = BeliefEngine(
            owner,
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
        self.abstain_message = abstain_message
        super().__init__(callback_manager=callback_manager)

    @property
    def retriever(self) -> BaseRetriever:
        """The retriever searched."""
        return self._retriever

    @property
    def llm(self) -> Any:
        """The LLM the controller's verifier, writer and answer generator use, as it was
        given (the controller asks it through :func:`as_chat_model`)."""
        return self._llm

    @property
    def config(self) -> BeliefConfig:
        """The controller settings in force (``k`` included)."""
        return self._engine.config

    @property
    def controller(self) -> BeliefController:
        """The controller every query runs."""
        return self._engine.controller

    @property
    def chains_for_verifier(self) -> bool:
        """Whether the verifier also sees the evidence chains."""
        return self._engine.chains_for_verifier

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
        question = _query_of("BeliefQueryEngine", query_bundle)

        def fetch(text: str) -> list[NodeWithScore]:
            return self._retriever.retrieve(_search_bundle(query_bundle, text))

        return self._response(self._engine.run(question, fetch, _belief_sources))

    async def _aquery(self, query_bundle: QueryBundle) -> Response:
        question = _query_of("BeliefQueryEngine", query_bundle)

        async def afetch(text: str) -> list[NodeWithScore]:
            return await self._retriever.aretrieve(_search_bundle(query_bundle, text))

        return self._response(await self._engine.arun(question, afetch, _belief_sources))

    def _response(self, outcome: BeliefOutcome[NodeWithScore]) -> Response:
        fields = result_fields(outcome.result)
        nodes = [
            NodeWithScore(node=detached_copy(item.node), score=item.score)
            for item in outcome.evidence
        ]
        answer = outcome.result.answer
        return Response(
            response=self.abstain_message if answer is None else answer,
            source_nodes=nodes,
            metadata=fields,
        )


def _search_bundle(query_bundle: QueryBundle, text: str) -> QueryBundle:
    # The question keeps its bundle (custom embedding strings, a precomputed embedding);
    # the controller's own queries get plain ones.
    return query_bundle if text == query_bundle.query_str else QueryBundle(text)


def _belief_sources(nodes: Sequence[NodeWithScore]) -> list[SourceDocument]:
    for i, item in enumerate(nodes):
        if not isinstance(item, NodeWithScore):
            raise InputError(
                f"nodes[{i}] is a {type(item).__name__}; BeliefQueryEngine searches "
                "retrievers that return llama_index NodeWithScore objects"
            )
    return _source_documents(nodes)
