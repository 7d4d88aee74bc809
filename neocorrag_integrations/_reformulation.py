"""The settings of the two ``EvidenceReformulationRetriever`` adapters and the engine they
drive. Each call's documents are the core's
(:class:`~neocorrag_core.records.calls.DocumentCall`: passage ids stable across the call's
queries, copies with the ``neocorrag_*`` records). Imports pydantic but neither framework.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

from pydantic import BaseModel, Field, PrivateAttr

from neocorrag_core.evireform import EvidenceReformulator, ReformulationConfig
from neocorrag_core.models import LazyModels
from neocorrag_core.records.calls import Copy, DocumentCall
from neocorrag_core.records.documents import Reader, check_call_k
from neocorrag_core.triples import DefaultTripleSource, TripleSource
from neocorrag_core.validation import check_int

from ._common import EngineSettings, ModelsSource, check_name, config_errors
from ._translate import engine_embedder

T = TypeVar("T")


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
        call: DocumentCall[T] = DocumentCall(read)
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
        call: DocumentCall[T] = DocumentCall(read)
        search = call.asearch_with(afetch)
        result = await self._reformulator.aretrieve(query, search, k, **self._overrides)
        return call.outputs(result, copy)


__all__ = ["ReformulationSettings"]
