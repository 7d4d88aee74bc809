"""LlamaIndex adapter: :class:`NeocorRAGPostprocessor`, a drop-in ``BaseNodePostprocessor``.

Add it to the query engine you already have::

    from neocorrag_integrations.llama_index import NeocorRAGPostprocessor

    query_engine = index.as_query_engine(
        similarity_top_k=5, node_postprocessors=[NeocorRAGPostprocessor()]
    )

Needs ``llama-index-core`` (``pip install 'neocorrag[llamaindex]'``).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence
from typing import Any

try:
    from llama_index.core.base.embeddings.base import BaseEmbedding
    from llama_index.core.bridge.pydantic import PrivateAttr
    from llama_index.core.callbacks import CBEventType, EventPayload
    from llama_index.core.instrumentation import get_dispatcher
    from llama_index.core.instrumentation.events.rerank import ReRankEndEvent, ReRankStartEvent
    from llama_index.core.postprocessor.types import BaseNodePostprocessor
    from llama_index.core.schema import MetadataMode, NodeWithScore, QueryBundle, TextNode
except ImportError as err:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        "neocorrag_integrations.llama_index needs llama-index-core: "
        "pip install 'neocorrag[llamaindex]'"
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
    "NeocorRAGEmbedding",
    "NeocorRAGPostprocessor",
    "is_evidence_chain_node",
]

dispatcher = get_dispatcher(__name__)


class NeocorRAGPostprocessor(RefinerSettings, BaseNodePostprocessor):
    """Drops the low-ranked nodes no evidence chain supports and adds the chains as a node.

    Returns copies of the kept nodes in their retrieval order, with their scores, ids and
    metadata, plus the ``neocorrag_*`` keys (kept reason, retrieval rank, chain numbers,
    fallback). Those keys are added to the copies' ``excluded_llm_metadata_keys`` and
    ``excluded_embed_metadata_keys``, so the text the LLM reads is the same as without the
    postprocessor. When chains were found and ``include_chains`` is set, one ``TextNode``
    holding the chain block is added (``chains_position``), flagged with
    ``metadata["neocorrag_evidence_chains"] = True``, all of its metadata hidden from the LLM
    and the embedder, and scored with the best score of the nodes its chains came from.
    With no triples or no chain, every node comes back (as a copy) and
    ``neocorrag_fallback`` says why. The nodes passed in are never modified.

    Configuration lives in pydantic fields (see ``NeocorRAGPostprocessor.model_fields``);
    the engine and its models live in a private attribute and load on first use. Emits
    ``ReRankStartEvent``/``ReRankEndEvent`` and a ``RERANKING`` callback event, as the
    rerankers do.
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
        sources = _source_documents(nodes)
        query = self._start(nodes, query_bundle)
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
        sources = _source_documents(nodes)
        query = self._start(nodes, query_bundle)
        with self.callback_manager.event(
            CBEventType.RERANKING, payload=self._payload(nodes, query)
        ) as event:
            out: list[NodeWithScore] = []
            if nodes:
                out = self._build(nodes, await asyncio.to_thread(self.plan, query, sources))
            event.on_end(payload={EventPayload.NODES: out})
        dispatcher.event(ReRankEndEvent(nodes=out))
        return out

    def _start(self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None) -> str:
        if query_bundle is None:
            raise ValueError(
                "NeocorRAGPostprocessor needs the query: call postprocess_nodes(nodes, "
                "query_bundle=...) or query_str=..., as a query engine does"
            )
        dispatcher.event(
            ReRankStartEvent(
                query=query_bundle,
                nodes=nodes,
                top_n=self.effective_config().top_n,
                model_name=self.describe_engine(),
            )
        )
        return query_bundle.query_str

    def _payload(self, nodes: list[NodeWithScore], query: str) -> dict[str, object]:
        return {
            EventPayload.NODES: nodes,
            EventPayload.MODEL_NAME: self.describe_engine(),
            EventPayload.QUERY_STR: query,
            EventPayload.TOP_K: self.effective_config().top_n,
        }

    def _build(self, nodes: list[NodeWithScore], plan: Refinement) -> list[NodeWithScore]:
        out: list[NodeWithScore] = []
        for item in plan.layout(include_chains=self.include_chains, position=self.chains_position):
            if item is None:
                out.append(_chain_node(nodes, plan))
                continue
            original = nodes[item.index]
            node = original.node.model_copy(deep=True)
            node.metadata = {**node.metadata, **item.metadata}
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
    accepts (``None`` = bundled); only a name is kept when serialized (``model_name``).
    Pass the same object as the postprocessor's ``embedder=`` to load the model once.
    """

    _spec: Any = PrivateAttr(default=None)
    _embedder: Any = PrivateAttr(default=None)
    _lock: Any = PrivateAttr(default_factory=threading.Lock)

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

    def _resolved(self) -> Any:
        with self._lock:
            if self._embedder is None:
                from neocorrag_core.models import resolve_embedder

                self._embedder = resolve_embedder(self._spec)
        return self._embedder

    def _get_text_embeddings(self, texts: list[str]) -> list[list[float]]:
        return self._resolved().embed(list(texts)).tolist()

    def _get_text_embedding(self, text: str) -> list[float]:
        return self._get_text_embeddings([text])[0]

    def _get_query_embedding(self, query: str) -> list[float]:
        return self._get_text_embeddings([query])[0]

    async def _aget_query_embedding(self, query: str) -> list[float]:
        return await asyncio.to_thread(self._get_query_embedding, query)


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
    scores = [nodes[i].score for i in plan.source_indices if nodes[i].score is not None]
    return NodeWithScore(node=node, score=max(scores) if scores else None)


def _with_keys(excluded: list[str], metadata: dict[str, object]) -> list[str]:
    return [*excluded, *(k for k in metadata if k not in excluded)]


def _source_documents(nodes: Sequence[NodeWithScore]) -> list[SourceDocument]:
    sources = []
    for i, item in enumerate(nodes):
        if not isinstance(item, NodeWithScore):
            raise TypeError(
                f"nodes[{i}] is a {type(item).__name__}; NeocorRAGPostprocessor takes "
                "llama_index NodeWithScore objects"
            )
        text = item.node.get_content(metadata_mode=MetadataMode.NONE)
        sources.append(SourceDocument(item.node.node_id, text, item.node.metadata, item.score))
    return sources
