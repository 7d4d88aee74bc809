"""What the two ``EvidenceReformulationRetriever`` adapters share: settings, ids, metadata.

The adapters only fetch documents from the wrapped retriever, reduce them to
:class:`~neocorrag_integrations._common.SourceDocument`, and copy the winners back; the
rest is decided here once, so LangChain and LlamaIndex behave the same:

* every call keeps its own :class:`ReformulationCall`, which turns the documents each query
  returns into engine passages with ids that are stable across the queries of that call
  (the engine merges its pool by passage id), and remembers the original objects;
* :func:`reformulation_items` turns the engine's ranking into the ``neocorrag_*`` metadata
  each output copy carries.

Imports pydantic (which both frameworks depend on) but neither framework; a framework
embeddings object passed as ``embedder=`` is translated by :mod:`._translate`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from pydantic import BaseModel, Field, PrivateAttr, ValidationInfo, field_validator

from neocorrag_core.chains.miner import EvidenceChainMiner
from neocorrag_core.errors import ConfigError
from neocorrag_core.evireform import (
    EvidenceReformulator,
    ReformulationConfig,
    ReformulationResult,
)
from neocorrag_core.models import LazyModels
from neocorrag_core.triples import DefaultTripleSource, TripleSource
from neocorrag_core.types import Passage
from neocorrag_core.validation import check_int
from neocorrag_integrations.metadata_keys import (
    EVIREFORM_EVIDENCE,
    EVIREFORM_RANK,
    EVIREFORM_SCORE,
    FOUND_BY_KIND,
    FOUND_BY_QUERY,
    QUERY_RANKS,
    RESIDUAL_QUERIES,
)

from ._common import (
    RefinerSettings,
    SourceDocument,
    check_call_k,
    check_fields,
    check_name,
    check_query,
    checked_sources,
    config_errors,
    reject_owned_settings,
)
from ._translate import engine_embedder

T = TypeVar("T")

ModelsSource = LazyModels | EvidenceChainMiner | EvidenceReformulator | RefinerSettings
"""What ``models=`` accepts: loaded-on-demand models, or an engine or adapter holding them."""


@dataclass(frozen=True)
class ReformedItem(Generic[T]):
    """One output document: the object the wrapped retriever returned, its score and the
    metadata to add to its copy."""

    original: T
    score: float | None
    metadata: dict[str, Any]


def content_id(text: str, title: str = "") -> str:
    """A stable id for a document without one: a digest of its title and text."""
    digest = hashlib.sha256(f"{title}\n{text}".encode()).hexdigest()[:32]
    return f"sha256:{digest}"


class ReformulationCall(Generic[T]):
    """The documents of one reformulation call, as engine passages with stable ids.

    A document keeps its own id as passage id; one without an id gets
    :func:`content_id`, so the same document returned by two queries is merged even when
    the retriever builds fresh objects each time. A title and text seen before under
    another id keep the first id (LlamaIndex gives a node without an id a random one on
    every retrieval). A *different* text under an id seen before gets ``<id>#<digest>``, so
    documents that share an id are still told apart.
    The object returned is the one the query credited with the document
    (``neocorrag_found_by_query``) returned, whichever search finished first.

    One instance per call, never shared between calls (so calls stay thread-safe); the
    async driver registers results on the event loop's thread only.
    """

    def __init__(self, to_sources: Callable[[Sequence[T]], list[SourceDocument]]) -> None:
        self._to_sources = to_sources
        self._originals: dict[str, T] = {}
        self._by_query: dict[tuple[str, str], T] = {}
        self._first_id: dict[str, str] = {}  # content fingerprint -> the id it came with first
        self._fingerprints: dict[str, str] = {}

    def search_with(
        self, fetch: Callable[[str], Sequence[T]]
    ) -> Callable[[str, int], list[Passage]]:
        """The engine's ``search(query, k)``: the first ``k`` documents ``fetch`` returns."""

        def search(query: str, k: int) -> list[Passage]:
            return self.register(_first(fetch(query), k), query)

        return search

    def asearch_with(
        self, afetch: Callable[[str], Awaitable[Sequence[T]]]
    ) -> Callable[[str, int], Awaitable[list[Passage]]]:
        """The engine's async ``search(query, k)`` over ``afetch``."""

        async def search(query: str, k: int) -> list[Passage]:
            return self.register(_first(await afetch(query), k), query)

        return search

    def register(self, documents: Sequence[T], query: str = "") -> list[Passage]:
        """Engine passages for ``documents`` (in order), remembering the originals (and
        which ``query`` returned each)."""
        sources = checked_sources(self._to_sources(documents))
        passages = []
        for source, original in zip(sources, documents, strict=True):
            title = source.metadata.get("title")
            title = title if isinstance(title, str) else ""
            pid = self._passage_id(source, title)
            self._originals.setdefault(pid, original)
            self._by_query.setdefault((query, pid), original)
            passages.append(
                Passage(
                    id=pid,
                    text=source.text,
                    title=title,
                    score=source.score,
                    metadata=dict(source.metadata),
                )
            )
        return passages

    def _passage_id(self, source: SourceDocument, title: str) -> str:
        fingerprint = content_id(source.text, title)
        if fingerprint in self._first_id:
            # The same title and text seen under another id is the same document: LlamaIndex
            # gives a node without an id a fresh random one on every retrieval, and a
            # document dropped once must not come back under a new name.
            return self._first_id[fingerprint]
        pid = source.id if isinstance(source.id, str) and source.id else fingerprint
        while pid in self._fingerprints and self._fingerprints[pid] != fingerprint:
            pid = f"{pid}#{fingerprint.removeprefix('sha256:')[:12]}"
        self._fingerprints[pid] = fingerprint
        self._first_id[fingerprint] = pid
        return pid

    def items(self, result: ReformulationResult) -> list[ReformedItem[T]]:
        """The output documents of an engine result, best first."""
        # Concurrent searches register in the order they finish; the engine credits the
        # first query in query order, so the original comes from that query's results.
        return [
            ReformedItem(
                self._by_query.get(
                    (m.metadata[FOUND_BY_QUERY], m.passage_id), self._originals[m.passage_id]
                ),
                m.score,
                m.metadata,
            )
            for m in reformulation_metadata(result)
        ]


@dataclass(frozen=True)
class PassageMetadata:
    """The ``neocorrag_*`` metadata of one ranked passage, framework-free."""

    passage_id: str
    score: float
    metadata: dict[str, Any]


def reformulation_metadata(result: ReformulationResult) -> list[PassageMetadata]:
    """Metadata for each passage of ``result.passages`` (best first); every document gets
    its own lists, so changing one output document never changes another."""
    out = []
    for rank, ranked in enumerate(result.passages, start=1):
        found = result.queries[ranked.found_by]
        metadata = {
            EVIREFORM_RANK: rank,
            EVIREFORM_SCORE: float(ranked.score),
            FOUND_BY_QUERY: found.text,
            FOUND_BY_KIND: found.kind,
            QUERY_RANKS: [
                {
                    "query": result.queries[index].text,
                    "kind": result.queries[index].kind,
                    "rank": position + 1,
                }
                for index, position in ranked.retrieval_ranks
            ],
            RESIDUAL_QUERIES: [
                {"text": q.text, "kind": q.kind, "round": q.round} for q in result.queries[1:]
            ],
            EVIREFORM_EVIDENCE: [p.text for p in result.evidence],
        }
        out.append(PassageMetadata(ranked.passage.id, float(ranked.score), metadata))
    return out


def _first(documents: Any, k: int) -> list[Any]:
    if isinstance(documents, (str, bytes, Mapping)) or not isinstance(documents, Sequence):
        raise TypeError(
            f"the wrapped retriever returned a {type(documents).__name__}; "
            "it must return a list of documents"
        )
    return list(documents)[:k]


class ReformulationSettings(BaseModel):
    """Configuration shared by both reformulating retrievers, and the engine they drive.

    The engine (an :class:`~neocorrag_core.evireform.EvidenceReformulator`) lives in a
    private attribute. It is built at construction, which is cheap: models load on first
    use (and the LM never, when the configuration needs none). Pass ``reformulator=`` to
    share one engine, or ``models=`` to share the loaded models of a compressor,
    postprocessor or miner; ``config`` then applies per call on top of the engine's own
    configuration.

    Every setting is checked at construction and a bad one (``k=2.5``, ``k="3"``,
    ``k=True``, a NaN or unknown field in ``config``, a wrong type) raises
    :class:`~neocorrag_core.errors.ConfigError` naming the field, never a pydantic
    ``ValidationError`` (``ConfigError`` is a ``ValueError``, as that is, and a
    ``TypeError``).
    """

    k: int = Field(default=5, ge=1, description="Documents returned, best first.")
    config: dict[str, Any] = Field(
        default_factory=dict,
        description="ReformulationConfig fields, e.g. {'residual_k': 5, "
        "'residual_queries': 'entities'}; a ReformulationConfig is accepted too.",
    )
    embedder: str | None = Field(
        default=None,
        description="Embedder name or folder; None = bundled MiniLM. An embeddings object "
        "passed to the constructor goes to the engine instead and is not serialized.",
    )
    lm: str | None = Field(
        default=None,
        description="LM writing the residual queries and selecting evidence: Hugging Face "
        "id or folder; None = bundled Qwen2.5-0.5B. A model object passed to the "
        "constructor goes to the engine and is not serialized.",
    )

    _reformulator: EvidenceReformulator = PrivateAttr()

    def __init__(
        self,
        *,
        reformulator: EvidenceReformulator | None = None,
        models: ModelsSource | None = None,
        embedder: Any = None,
        lm: Any = None,
        triple_source: TripleSource | None = None,
        **data: Any,
    ) -> None:
        """Build the settings and the (not yet loaded) engine.

        Args:
            reformulator: an engine to share; then ``models``, ``embedder``, ``lm`` and
                ``triple_source`` must be left unset (they belong to that engine).
            models: share loaded-on-demand models: a
                :class:`~neocorrag_core.models.LazyModels`, or anything holding them: an
                ``EvidenceChainMiner``, an ``EvidenceReformulator``, a
                ``NeocorRAGCompressor`` or ``NeocorRAGPostprocessor``. Then ``embedder``
                and ``lm`` must be left unset; a miner's (or adapter's) triple source is
                used too unless ``triple_source`` is given.
            embedder: anything :func:`neocorrag_core.models.resolve_embedder` accepts, or a
                LangChain or LlamaIndex embeddings object (translated by its framework's
                ``as_embedder``).
            lm: anything :func:`neocorrag_core.models.resolve_lm` accepts.
            triple_source: where triples come from; default as for the compressor (a
                :class:`~neocorrag_core.triples.DefaultTripleSource`: metadata, else the
                store, else spaCy, stored). Documents without triples take part through
                their lead sentence.
            **data: the pydantic fields above.
        """
        owner = type(self).__name__
        names = {k: v for k, v in (("embedder", embedder), ("lm", lm)) if isinstance(v, str)}
        with config_errors(owner):
            super().__init__(**names, **data)
        if reformulator is not None:
            reject_owned_settings(
                "reformulator",
                "set them on that EvidenceReformulator, or pass them here without reformulator=",
                models=models,
                embedder=embedder,
                lm=lm,
                triple_source=triple_source,
            )
            if not isinstance(reformulator, EvidenceReformulator):
                raise ConfigError(
                    f"{owner}: reformulator must be an EvidenceReformulator, "
                    f"got {type(reformulator).__name__}"
                )
            reformulator.config.with_overrides(**self.config)  # validate now, not per call
            self._reformulator = reformulator
            return
        shared: LazyModels | None = None
        if models is not None:
            reject_owned_settings(
                "models",
                "pass them where those models were built, or here without models=",
                embedder=embedder,
                lm=lm,
            )
            shared, their_triples = _shared_models(models)
            triple_source = triple_source or their_triples
        if triple_source is None:
            triple_source = DefaultTripleSource()
        self._reformulator = EvidenceReformulator(
            ReformulationConfig().with_overrides(**self.config),
            embedder=engine_embedder(embedder),
            lm=lm,
            triple_source=triple_source,
            models=shared,
        )

    # Our own checks run before pydantic's (which would take "3" or 2.0 as an integer); each
    # raises ConfigError, which __init__ unwraps from pydantic's ValidationError.
    @field_validator("k", mode="before")
    @classmethod
    def _positive_integer(cls, value: Any) -> Any:
        check_int(cls.__name__, "k", value, minimum=1)
        return int(value)

    @field_validator("embedder", "lm", mode="before")
    @classmethod
    def _names(cls, value: Any, info: ValidationInfo) -> Any:
        return check_name(cls.__name__, str(info.field_name), value)

    @field_validator("config", mode="before")
    @classmethod
    def _known_fields(cls, value: Any) -> dict[str, Any]:
        if isinstance(value, ReformulationConfig):
            return value.to_dict()
        if value is not None and not isinstance(value, Mapping):
            raise ConfigError(
                f"{cls.__name__}.config must be a ReformulationConfig or a dict, "
                f"got {type(value).__name__}"
            )
        fields = check_fields(cls.__name__, "config", value)
        try:
            ReformulationConfig().with_overrides(**fields)  # unknown names and bad values fail
        except ConfigError as err:
            raise ConfigError(f"{cls.__name__}.config: {err}") from err
        return fields

    @property
    def reformulator(self) -> EvidenceReformulator:
        """The engine this retriever drives (share it with ``reformulator=`` elsewhere)."""
        return self._reformulator

    @property
    def models(self) -> LazyModels:
        """The engine's models (share them with ``models=`` in another reformulator)."""
        return self._reformulator.models

    def effective_config(self) -> ReformulationConfig:
        """The engine configuration in force for this retriever's calls."""
        return self._reformulator.config.with_overrides(**self.config)

    def call_k(self, k: Any = None, *, owner: str | None = None) -> int:
        """The number of documents one call returns: ``k`` when given (a positive integer,
        else :class:`~neocorrag_core.errors.InputError`), the configured ``k`` otherwise."""
        return self.k if k is None else check_call_k(owner or type(self).__name__, k)

    def reformulate(
        self,
        query: str,
        fetch: Callable[[str], Sequence[T]],
        to_sources: Callable[[Sequence[T]], list[SourceDocument]],
        *,
        k: int | None = None,
    ) -> list[ReformedItem[T]]:
        """Run one call: ``fetch(query)`` asks the wrapped retriever; ``to_sources`` reduces
        its documents (raising on foreign objects, which becomes a ``RetrievalError``).

        ``k`` overrides the configured number of documents for this call. A query that is
        not a non-empty string raises :class:`~neocorrag_core.errors.InputError`; lone
        surrogates in it are replaced by U+FFFD, and the wrapped retriever gets it so.
        """
        query = check_query(type(self).__name__, query)
        n = self.call_k(k)
        call = ReformulationCall(to_sources)
        search = call.search_with(fetch)
        return call.items(self._reformulator.retrieve(query, search, k=n, **self.config))

    async def areformulate(
        self,
        query: str,
        afetch: Callable[[str], Awaitable[Sequence[T]]],
        to_sources: Callable[[Sequence[T]], list[SourceDocument]],
        *,
        k: int | None = None,
    ) -> list[ReformedItem[T]]:
        """Async :meth:`reformulate`: the queries of one round are sent concurrently and the
        LM steps run in a worker thread."""
        query = check_query(type(self).__name__, query)
        n = self.call_k(k)
        call = ReformulationCall(to_sources)
        search = call.asearch_with(afetch)
        result = await self._reformulator.aretrieve(query, search, k=n, **self.config)
        return call.items(result)


def _shared_models(source: ModelsSource) -> tuple[LazyModels, TripleSource | None]:
    if isinstance(source, LazyModels):
        return source, None
    if isinstance(source, RefinerSettings):
        source = source.miner
    if isinstance(source, EvidenceChainMiner | EvidenceReformulator):
        return source.models, source.triple_source
    raise ConfigError(
        "models must be a LazyModels, an EvidenceChainMiner, an EvidenceReformulator, or a "
        f"NeocorRAGCompressor / NeocorRAGPostprocessor; got {type(source).__name__}"
    )


__all__ = [
    "ModelsSource",
    "PassageMetadata",
    "ReformedItem",
    "ReformulationCall",
    "ReformulationSettings",
    "content_id",
    "reformulation_metadata",
]
