"""What the two ``EvidenceReformulationRetriever`` adapters share: settings, ids, metadata.

The adapters fetch documents from the wrapped retriever and copy the winners back; the rest
is decided here once, so LangChain and LlamaIndex behave the same. Every call keeps its own
:class:`ReformulationCall`: the documents each query returns become passages with ids that
are stable across the queries of that call (the engine merges its pool by passage id), and
the engine's ranking becomes copies of the original objects with their ``neocorrag_*``
metadata. Imports pydantic but neither framework.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Generic, TypeVar

from pydantic import BaseModel, Field, PrivateAttr

from neocorrag_core.evireform import EvidenceReformulator, ReformulationConfig
from neocorrag_core.evireform.provenance import provenance_metadata, provenance_of
from neocorrag_core.evireform.types import ReformulationResult
from neocorrag_core.models import LazyModels
from neocorrag_core.triples import DefaultTripleSource, TripleSource
from neocorrag_core.types import Passage
from neocorrag_core.validation import check_int

from ._common import (
    EngineSettings,
    ModelsSource,
    Reader,
    check_call_k,
    check_name,
    config_errors,
    passage,
    read_fields,
)
from ._translate import engine_embedder
from .metadata_keys import (
    EVIREFORM_EVIDENCE,
    EVIREFORM_NOTES,
    EVIREFORM_RANK,
    EVIREFORM_SCORE,
    FOUND_BY_KIND,
    FOUND_BY_QUERY,
    PROVENANCE,
    QUERY_RANKS,
    RESIDUAL_QUERIES,
)

T = TypeVar("T")
Copy = Callable[[T, float, dict[str, Any]], T]
"""An adapter's copy of an original object, with its score and the metadata to add."""


def content_id(text: str, title: str = "") -> str:
    """A stable id for a document without one: a digest of its title and text."""
    digest = hashlib.sha256(f"{title}\n{text}".encode()).hexdigest()[:32]
    return f"sha256:{digest}"


class ReformulationCall(Generic[T]):
    """The documents of one call, as engine passages with stable ids, and the originals.

    A document keeps its own id as passage id; one without gets :func:`content_id`, so the
    same document returned by two queries is merged even when the retriever builds fresh
    objects. A title and text seen before under another id keep the first id (LlamaIndex
    gives a node without an id a random one on every retrieval); a *different* text under
    an id seen before gets ``<id>#<digest>``. One instance per call (calls stay thread-safe);
    a round's searches fetch concurrently (worker threads for a sync retriever, tasks for an
    async one) and register what they found one at a time, in the order they finish.
    """

    def __init__(self, read: Reader) -> None:
        self._read = read
        self._originals: dict[str, T] = {}
        self._by_query: dict[tuple[str, str], T] = {}
        self._first_id: dict[str, str] = {}  # content fingerprint -> the id it came with first
        self._fingerprints: dict[str, str] = {}
        self._lock = threading.Lock()

    def search_with(
        self, fetch: Callable[[str], Sequence[T]]
    ) -> Callable[[str, int], list[Passage]]:
        """The engine's ``search(query, k)``: the first ``k`` documents ``fetch`` returns."""
        return lambda query, k: self.register(_first(fetch(query), k), query)

    def asearch_with(
        self, afetch: Callable[[str], Awaitable[Sequence[T]]]
    ) -> Callable[[str, int], Awaitable[list[Passage]]]:
        """The engine's async ``search(query, k)`` over ``afetch``."""

        async def search(query: str, k: int) -> list[Passage]:
            return self.register(_first(await afetch(query), k), query)

        return search

    def register(self, documents: Sequence[T], query: str = "") -> list[Passage]:
        """Passages for ``documents`` (in order), remembering the originals (and which
        ``query`` returned each)."""
        read = [read_fields(i, self._read(i, original)) for i, original in enumerate(documents)]
        passages = []
        with self._lock:
            for original, fields in zip(documents, read, strict=True):
                title = fields[2].get("title")
                title = title if isinstance(title, str) else ""
                pid = self._passage_id(fields[0], fields[1], title)
                self._originals.setdefault(pid, original)
                self._by_query.setdefault((query, pid), original)
                passages.append(passage(pid, fields))
        return passages

    def _passage_id(self, doc_id: Any, text: str, title: str) -> str:
        fingerprint = content_id(text, title)
        if fingerprint in self._first_id:  # the same document, dropped once, stays dropped
            return self._first_id[fingerprint]
        pid = doc_id if isinstance(doc_id, str) and doc_id else fingerprint
        while pid in self._fingerprints and self._fingerprints[pid] != fingerprint:
            pid = f"{pid}#{fingerprint.removeprefix('sha256:')[:12]}"
        self._fingerprints[pid] = fingerprint
        self._first_id[fingerprint] = pid
        return pid

    def originals(self, passage_ids: Sequence[str]) -> list[T]:
        """The objects the retriever returned for ``passage_ids``, in that order."""
        return [self._originals[pid] for pid in passage_ids]

    def outputs(self, result: ReformulationResult, copy: Copy[T]) -> list[T]:
        """The engine's ranking as copies of the original objects, best first, each with its
        own ``neocorrag_*`` metadata. The original is the one the crediting query returned
        (concurrent searches register in the order they finish)."""
        residual = [{"text": q.text, "kind": q.kind, "round": q.round} for q in result.queries[1:]]
        evidence = [p.text for p in result.evidence]
        provenance = provenance_of(result)
        out = []
        for rank, ranked in enumerate(result.passages, start=1):
            found = result.queries[ranked.found_by]
            pid = ranked.passage.id
            metadata = {
                EVIREFORM_RANK: rank,
                EVIREFORM_SCORE: float(ranked.score),
                FOUND_BY_QUERY: found.text,
                FOUND_BY_KIND: found.kind,
                QUERY_RANKS: [
                    {"query": result.queries[i].text, "kind": result.queries[i].kind, "rank": r + 1}
                    for i, r in ranked.retrieval_ranks
                ],
                RESIDUAL_QUERIES: [dict(q) for q in residual],
                EVIREFORM_EVIDENCE: list(evidence),
            }
            if pid in provenance:  # read back by a refiner later in the pipeline
                metadata[PROVENANCE] = provenance_metadata(provenance[pid])
            if result.notes:
                metadata[EVIREFORM_NOTES] = list(result.notes)
            original = self._by_query.get((found.text, pid), self._originals[pid])
            out.append(copy(original, float(ranked.score), metadata))
        return out


def _first(documents: Any, k: int) -> list[Any]:
    if isinstance(documents, (str, bytes, Mapping)) or not isinstance(documents, Sequence):
        raise TypeError(
            f"the wrapped retriever returned a {type(documents).__name__}; "
            "it must return a list of documents"
        )
    return list(documents)[:k]


class ReformulationSettings(EngineSettings, BaseModel):
    """The reformulating retrievers' settings and the engine they drive.

    ``reformulator=`` shares an engine, ``models=`` the models (and triple source) of a
    refiner, miner or reformulator; otherwise one is built on ``embedder`` / ``lm`` (models
    load on first use, the LM never when the configuration needs none). ``config`` holds
    :class:`~neocorrag_core.evireform.ReformulationConfig` fields (a dict, or the
    dataclass), checked by it at construction; with a shared engine they apply per call on
    top of its configuration. Its research settings
    (:class:`~neocorrag_core.evireform.config.ReformulationTuning`) are the engine's.
    """

    k: Any = Field(default=5, description="Documents returned, best first.")
    config: Any = Field(
        default_factory=dict,
        description="ReformulationConfig fields, e.g. {'residual_k': 5, 'residual_queries': "
        "'lm'}; a ReformulationConfig is accepted too.",
    )
    embedder: Any = Field(default=None, description="Embedder name or folder; None = bundled.")
    lm: Any = Field(default=None, description="LM name or folder; None = bundled Qwen2.5-0.5B.")

    _reformulator: EvidenceReformulator = PrivateAttr()
    _overrides: dict[str, Any] = PrivateAttr(default_factory=dict)
    _name: str = PrivateAttr(default="")

    def _owner(self) -> str:
        return getattr(self, "_name", "") or type(self).__name__

    def __init__(
        self,
        *,
        reformulator: EvidenceReformulator | None = None,
        models: ModelsSource | None = None,
        embedder: Any = None,
        lm: Any = None,
        triple_source: TripleSource | None = None,
        owner: str | None = None,
        **data: Any,
    ) -> None:
        """``reformulator``: an engine to share (then the other keywords belong to it);
        ``models``: share loaded-on-demand models (a ``LazyModels``, a miner, a
        reformulator, a compressor or postprocessor; its triple source too unless
        ``triple_source`` is given); ``embedder`` / ``lm`` / ``triple_source``: as for the
        refiner; ``owner``: the adapter's name in errors (one that holds these settings);
        ``data``: the fields."""
        owner = owner or self._owner()
        names = {k: v for k, v in (("embedder", embedder), ("lm", lm)) if isinstance(v, str)}
        with config_errors(owner):
            super().__init__(**names, **data)
        self._name = owner
        check_int(owner, "k", self.k, minimum=1)
        self.k = int(self.k)
        for name in ("embedder", "lm"):
            check_name(owner, name, getattr(self, name))
        if isinstance(self.config, ReformulationConfig):
            self.config = self.config.to_dict()
        if reformulator is not None:
            self._reformulator = self._shared(
                "reformulator", reformulator, EvidenceReformulator,
                models=models, embedder=embedder, lm=lm, triple_source=triple_source,
            )  # fmt: skip
            self._config(reformulator.config, self.config, "config")
            self._overrides = dict(self.config)  # applied per call, on the shared engine
            return
        shared, theirs = (
            self._models(models, embedder=embedder, lm=lm) if models is not None else (None, None)
        )
        self._reformulator = EvidenceReformulator(
            self._config(ReformulationConfig(), self.config, "config"),
            embedder=engine_embedder(embedder),
            lm=lm,
            triple_source=triple_source or theirs or DefaultTripleSource(),
            models=shared,
        )

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
        return self._reformulator.config.with_overrides(**self._overrides)

    def call_k(self, k: Any = None, *, owner: str | None = None) -> int:
        """The documents one call returns: ``k`` when given (a positive integer, else
        :class:`~neocorrag_core.errors.InputError`), the configured ``k`` otherwise."""
        return self.k if k is None else check_call_k(owner or self._owner(), k)

    def reformulate(
        self, query: str, fetch: Callable[[str], Sequence[T]], read: Reader, copy: Copy[T], k: int
    ) -> list[T]:
        """One call for a query checked at the edge: ``fetch(query)`` asks the wrapped
        retriever, ``read`` reads its documents (raising on foreign objects, which becomes
        a ``RetrievalError``), ``copy`` makes the output objects."""
        call: ReformulationCall[T] = ReformulationCall(read)
        result = self._reformulator.retrieve(query, call.search_with(fetch), k, **self._overrides)
        return call.outputs(result, copy)

    async def areformulate(
        self,
        query: str,
        afetch: Callable[[str], Awaitable[Sequence[T]]],
        read: Reader,
        copy: Copy[T],
        k: int,
    ) -> list[T]:
        """Async :meth:`reformulate`: a round's queries are sent concurrently and the LM
        steps run in a worker thread."""
        call: ReformulationCall[T] = ReformulationCall(read)
        search = call.asearch_with(afetch)
        result = await self._reformulator.aretrieve(query, search, k, **self._overrides)
        return call.outputs(result, copy)


__all__ = ["ReformulationCall", "ReformulationSettings", "content_id"]
