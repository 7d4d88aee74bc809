"""What every adapter shares on the pydantic side: copies of the caller's objects, the
settings base, and the refiner's settings.

The checks at the edge and the reading of documents into passages are the core's
(:mod:`neocorrag_core.records.documents`). Imports pydantic (both frameworks depend on it)
but neither framework.
"""

from __future__ import annotations

import reprlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, ClassVar, NamedTuple, TypedDict, TypeVar

from pydantic import BaseModel, Field, PrivateAttr, ValidationError

from neocorrag_core.chains.config import MinerConfig
from neocorrag_core.chains.miner import EvidenceChainMiner
from neocorrag_core.engine_settings import config_changes, models_of, shared_engine, with_config
from neocorrag_core.errors import ConfigError
from neocorrag_core.eval.comparison import DEFAULT_COMPARISON, compare
from neocorrag_core.models import LazyModels, TextEmbedder, resolve_embedder
from neocorrag_core.once import LoadOnce
from neocorrag_core.records.documents import (
    Fields,
    check_query,
    check_sequence,
    check_texts,
    copied_value,
    read_fields,
)
from neocorrag_core.records.refine import refine_fields
from neocorrag_core.triples import DefaultTripleSource, TripleSource
from neocorrag_core.validation import Settings, check_bool, check_choice
from neocorrag_integrations._translate import engine_embedder

T = TypeVar("T")
_short = reprlib.Repr()
_short.maxstring = _short.maxother = 60


class PipelineOptions(TypedDict, total=False):
    """The keywords of both frameworks' ``EvidencePipelineRetriever.from_retriever``."""

    k: int
    """Documents EviReform hands to the refiner (default 5); the retriever returns at least
    that many."""
    keep: str
    """The refiner's recall/noise dial: ``"recall"`` (default), ``"balanced"``,
    ``"precise"``, ``"paper"``."""
    config: Any
    """``ReformulationConfig`` fields (a dict)."""
    miner_config: Any
    """The other ``MinerConfig`` fields (a dict)."""
    embedder: Any
    """As the refiner's; a framework embeddings object is used as it is (share your vector
    store's, so the question is embedded once per model)."""
    lm: Any
    """As the refiner's."""
    triple_source: Any
    """As the refiner's."""


def pipeline_parts(
    owner: str, refiner: Callable[..., T], options: PipelineOptions
) -> tuple[T, dict[str, Any]]:
    """The refiner of a pipeline and its reformulation settings (``k``, ``config``,
    ``models``: the refiner's), so both stages run on one engine."""
    if unknown := sorted(set(options) - set(PipelineOptions.__annotations__)):
        raise TypeError(f"{owner}() got unexpected keyword argument(s): {', '.join(unknown)}")
    engine = {name: options.get(name) for name in ("embedder", "lm", "triple_source")}
    stage = refiner(
        keep=options.get("keep", "recall"), miner_config=options.get("miner_config"), **engine
    )
    return stage, {"k": options.get("k", 5), "config": options.get("config") or {}, "models": stage}


class EvaluateOptions(TypedDict, total=False):
    """The keywords of both frameworks' ``evaluate`` besides the questions, the retriever
    and ``out`` (:func:`neocorrag_core.eval.compare`'s)."""

    llm: Any
    """Your framework's chat model or LLM (``None``: the bundled reader; ``"none"``: retrieval
    scores only)."""
    methods: Sequence[str]
    """The methods compared (default: none, the refiner's dial, EviReform, the pipeline)."""
    k: int
    """Documents handed to the reader (default 5)."""
    embedder: Any
    """As the refiner's."""
    triple_source: Any
    """As the refiner's."""
    limit: int | None
    """The first N questions only."""


def evaluate_over(
    questions: Any,
    search: Callable[[str, int], Sequence[Any]],
    *,
    out: str,
    name: str,
    translate: Callable[[Any], Any],
    options: EvaluateOptions,
) -> dict[str, Any]:
    """``compare`` over a framework retriever's ``search``: the LLM translated by the
    framework's ``as_chat_model`` (a bundled reader's name as it is)."""
    if unknown := sorted(set(options) - set(EvaluateOptions.__annotations__)):
        raise TypeError(f"evaluate() got unexpected keyword argument(s): {', '.join(unknown)}")
    llm = options.get("llm")
    reader = "default" if llm is None else llm if isinstance(llm, str) else translate(llm)
    return compare(
        questions,
        search,
        out=out,
        reader=reader,
        methods=options.get("methods", DEFAULT_COMPARISON),
        k=options.get("k", 5),
        embedder=engine_embedder(options.get("embedder")),
        triple_source=options.get("triple_source"),
        limit=options.get("limit"),
        search_name=name,
    )


# ---- copies of the caller's objects

_Model = TypeVar("_Model", bound=BaseModel)


def detached_copy(document: _Model) -> _Model:
    """A copy of a caller's document that may be changed without touching the original: its
    own metadata dict (each value deep-copied where possible; a lock or a client handle is
    shared) and its own excluded-keys lists; other fields are shared, so a LlamaIndex
    ``IndexNode.obj`` stays the caller's object."""
    out = document.model_copy()
    metadata = getattr(document, "metadata", None) or {}
    out.metadata = {key: copied_value(value) for key, value in metadata.items()}  # type: ignore[attr-defined]
    for name in ("excluded_llm_metadata_keys", "excluded_embed_metadata_keys"):
        value = getattr(document, name, None)
        if isinstance(value, list):
            setattr(out, name, list(value))
    return out


# ---- settings: the engine an adapter drives, and its user config

ModelsSource = Any
"""What ``models=`` accepts: a :class:`~neocorrag_core.models.LazyModels`, or an engine or
adapter holding them (``EvidenceChainMiner``, ``EvidenceReformulator``, a refiner)."""


def config_error(owner: str, err: ValidationError) -> ConfigError:
    """Pydantic's ``ValidationError`` (an unknown keyword, mostly: the fields' values are the
    config dataclasses' to check) as a ``ConfigError`` naming each field."""
    parts = []
    for detail in err.errors(include_url=False):
        cause = (detail.get("ctx") or {}).get("error")
        if isinstance(cause, ConfigError):
            parts.append(str(cause))
            continue
        where = ".".join(str(part) for part in detail["loc"]) or "settings"
        value = detail.get("input")
        parts.append(
            f"{owner}.{where}: {detail['msg']}, got {type(value).__name__} {_short.repr(value)}"
        )
    return ConfigError("; ".join(parts) or str(err))


@contextmanager
def config_errors(owner: str) -> Iterator[None]:
    """Turn a pydantic ``ValidationError`` raised inside into :func:`config_error`'s."""
    try:
        yield
    except ValidationError as err:
        raise config_error(owner, err) from err


class EngineSettings:
    """Base of the adapters' settings holders (the refiner's, the reformulating retriever's):
    where the engine comes from and the user config it runs with, by the core's one mechanism
    (:mod:`neocorrag_core.engine_settings`, which BeliefRAG's setup uses too)."""

    def _owner(self) -> str:
        """The adapter's name in error messages."""
        return type(self).__name__

    def _shared(self, keyword: str, engine: T, kind: type, **owned: Any) -> T:
        """``engine`` passed as ``keyword=``, with none of the settings it owns beside it."""
        return shared_engine(self._owner(), keyword, engine, kind, **owned)

    def _models(self, models: ModelsSource, **owned: Any) -> tuple[LazyModels, TripleSource | None]:
        """The models (and triple source) of what ``models=`` names (a refiner: its miner's)."""
        return models_of(models.miner if isinstance(models, RefinerSettings) else models, **owned)

    def _config(self, base: Settings, changes: Any, name: str, *, whole: bool = True) -> Any:
        """``base`` with ``changes``; the error names ``<owner>.<name>``."""
        return with_config(f"{self._owner()}.{name}", base, changes, whole=whole)


def check_name(owner: str, name: str, value: Any) -> None:
    """A model name or folder setting: ``None`` or a non-empty string."""
    if value is not None and (not isinstance(value, str) or not value.strip()):
        raise ConfigError(
            f"{owner}.{name} must be a model name or folder (a non-empty string) or None, "
            f"got {type(value).__name__} {_short.repr(value)}"
        )


# ---- the refiner (NeocorRAGCompressor, NeocorRAGPostprocessor)

_DIAL = ("keep", "top_n", "decoding", "beam_width")
"""The MinerConfig fields that are the refiner's own settings (the rest: ``miner_config``)."""


class RefineCall(NamedTuple):
    """One refiner call as :meth:`RefinerSettings.check_call` checked it."""

    query: str
    documents: list[Any]
    fields: list[Fields]
    config: MinerConfig
    """The configuration the call runs (the adapter's settings over its miner's)."""


class RefinerSettings(EngineSettings, BaseModel):
    """The refiner's settings and the miner it drives; both frameworks' refiners subclass it.

    The fields hold what was given (they serialize: LlamaIndex ``to_dict`` / ``to_json``);
    :class:`~neocorrag_core.chains.config.MinerConfig` checks them, at construction and
    again only after one changed (a bad value assigned later is a ``ConfigError`` at the
    next call). ``miner=`` shares an engine and its loaded models; the settings then apply
    on top of its configuration. The miner's research settings
    (:class:`~neocorrag_core.chains.config.MinerTuning`) are the engine's: share an
    ``EvidenceChainMiner(tuning=...)`` to change them.
    """

    keep: Any = Field(
        default=None,
        description="The recall/noise dial: 'recall' (default), 'balanced', 'precise' or "
        "'paper' (Eq. 8 as published); None = the miner's.",
    )
    top_n: Any = Field(
        default=None, description="Documents kept by retrieval rank alone; None = the keep mode's."
    )
    decoding: Any = Field(
        default=None,
        description="'none' (search scores, no LM; default), 'beam' or 'rank' (the LM chooses).",
    )
    beam_width: Any = Field(default=None, description="Chains chosen; None = the miner's (5).")
    miner_config: Any = Field(
        default_factory=dict,
        description="The other MinerConfig fields: passage_focus, chain_format, "
        "max_chain_lines, query_entities, tau_node, tau_edge, tau_boost.",
    )
    embedder: Any = Field(
        default=None,
        description="Embedder name or folder; None = bundled MiniLM (an embeddings object "
        "passed to the constructor goes to the engine and is not serialized).",
    )
    lm: Any = Field(
        default=None,
        description="Decoding LM name or folder; None = bundled Qwen2.5-0.5B (an object goes "
        "to the engine and is not serialized).",
    )
    include_chains: Any = Field(
        default=True,
        description="Add the chain document when the chain_format writes a block.",
    )
    chains_position: Any = Field(
        default="first", description="Where the chain document goes: 'first' or 'last'."
    )

    documents_name: ClassVar[str] = "documents"
    documents_kind: ClassVar[str] = "documents, in retrieval order"
    _miner: EvidenceChainMiner = PrivateAttr()
    _checked: tuple[Any, MinerConfig] = PrivateAttr()

    def __init__(
        self,
        *,
        miner: EvidenceChainMiner | None = None,
        embedder: Any = None,
        lm: Any = None,
        triple_source: TripleSource | None = None,
        **data: Any,
    ) -> None:
        """``miner``: an engine to share (then ``embedder``, ``lm`` and ``triple_source``
        belong to it); ``embedder``: a name, folder, or an embeddings object of either
        framework; ``lm``: anything :func:`~neocorrag_core.models.resolve_lm` accepts;
        ``triple_source``: default :class:`~neocorrag_core.triples.DefaultTripleSource`
        (``metadata["triples"]``, else the triple store, else spaCy); ``data``: the fields."""
        owner = self._owner()
        names = {k: v for k, v in (("embedder", embedder), ("lm", lm)) if isinstance(v, str)}
        with config_errors(owner):
            super().__init__(**names, **data)
        if miner is not None:
            self._miner = self._shared(
                "miner", miner, EvidenceChainMiner,
                embedder=embedder, lm=lm, triple_source=triple_source,
            )  # fmt: skip
            config = self._check(miner.config)
        else:
            config = self._check(MinerConfig())
            self._miner = EvidenceChainMiner(
                config,
                embedder=engine_embedder(embedder),
                lm=lm,
                triple_source=triple_source or DefaultTripleSource(),
            )
        for name in _DIAL:  # as the config holds them (a numpy integer as int)
            if getattr(self, name) is not None:
                setattr(self, name, getattr(config, name))
        self._checked = (self._key(), config)

    def _key(self) -> Any:
        given = self.miner_config
        settings = [getattr(self, name) for name in (*_DIAL, "include_chains", "chains_position")]
        return (self._miner.config, dict(given) if isinstance(given, Mapping) else given, settings)

    def _check(self, base: MinerConfig) -> MinerConfig:
        """``base`` with ``miner_config`` and the dial fields: one MinerConfig, checked once."""
        owner = self._owner()
        for name in ("embedder", "lm"):
            check_name(owner, name, getattr(self, name))
        check_bool(owner, "include_chains", self.include_chains)
        check_choice(owner, "chains_position", self.chains_position, ("first", "last"))
        given = config_changes(f"{owner}.miner_config", self.miner_config, "MinerConfig")
        dial = {name: getattr(self, name) for name in _DIAL}
        if clash := [name for name in _DIAL if name in given]:
            raise ConfigError(
                f"{owner}.miner_config: {', '.join(clash)} are settings of {owner} itself: "
                f"{owner}({clash[0]}=...)"
            )
        changes = {**given, **{k: v for k, v in dial.items() if v is not None}}
        try:
            return base.with_overrides(**changes)
        except ConfigError as err:  # named where the bad field was given
            named = any(f"MinerConfig.{name} " in str(err) for name in given)
            raise ConfigError(f"{owner}{'.miner_config' if named else ''}: {err}") from err

    @property
    def miner(self) -> EvidenceChainMiner:
        """The engine this adapter drives (share it with ``miner=`` in another adapter)."""
        return self._miner

    def effective_config(self) -> MinerConfig:
        """The MinerConfig of this adapter's calls: its miner's with the settings above
        (checked again only after a setting changed)."""
        key = self._key()
        if key != self._checked[0]:
            self._checked = (key, self._check(self._miner.config))
        return self._checked[1]

    def warm_up(self) -> None:
        """Load the engine's models and open its store now, not at the first call."""
        self._miner.warm_up()

    def describe_engine(self, config: MinerConfig | None = None) -> str:
        """A short model description for events and logs (loads nothing); ``config``: the
        call's (:meth:`effective_config` when ``None``)."""
        decoding = (config or self.effective_config()).decoding
        return f"neocorrag/{decoding}" + (f":{self.lm}" if self.lm and decoding != "none" else "")

    def check_call(self, query: Any, documents: Any) -> RefineCall:
        """One call, checked once, here at the edge: the query, the documents, what is read
        of each (an ``InputError`` for a foreign object or field), and the configuration
        the call runs (resolved once)."""
        owner = self._owner()
        query = check_query(owner, query)
        documents = check_sequence(owner, self.documents_name, documents, self.documents_kind)
        fields = [read_fields(i, self._fields(i, doc)) for i, doc in enumerate(documents)]
        return RefineCall(query, documents, fields, self.effective_config())

    def refine(self, call: RefineCall) -> list[Any]:
        """Refine the call's documents (as :meth:`check_call` returns them) with
        :func:`~neocorrag_core.records.refine.refine_fields`: copies of the kept documents
        and the chain document (blocking; the async methods run it in one worker thread)."""
        if not call.documents:
            return []
        refined = refine_fields(
            self._miner, call.query, call.fields, call.config, include_chains=self.include_chains
        )
        records, documents = refined.records, call.documents
        out = [self._kept_copy(documents[r.position], r.metadata, r.text) for r in records.kept]
        if not records.block:
            return out
        sources = [documents[i] for i in records.sources]
        chain = self._chain_document(
            records.block, records.chain_metadata, refined.chain_id, sources
        )
        return [chain, *out] if self.chains_position == "first" else [*out, chain]

    # The framework's part: read a document, copy a kept one, make the chain document.
    def _fields(self, position: int, document: Any) -> Fields:
        raise NotImplementedError

    def _kept_copy(self, original: Any, added: dict[str, Any], text: str | None) -> Any:
        raise NotImplementedError

    def _chain_document(
        self, text: str, metadata: dict[str, Any], chain_id: str, sources: list[Any]
    ) -> Any:
        raise NotImplementedError

    # Pickle like a plain pydantic model: fields and the private engine (which drops its
    # loaded models). LlamaIndex's BaseComponent would instead re-run __init__ from the
    # fields, silently replacing an engine built from objects with the default one.
    def __getstate__(self) -> dict[Any, Any]:
        return BaseModel.__getstate__(self)

    def __setstate__(self, state: dict[Any, Any]) -> None:
        BaseModel.__setstate__(self, state)


class OwnEmbedder:
    """Our embeddings objects' part in both frameworks (``NeocorRAGEmbeddings``,
    ``NeocorRAGEmbedding``): the core embedder behind them, loaded on first use, which an
    engine given the object shares (one model, one cache: a query the retriever embedded
    is not embedded again)."""

    _spec: Any
    _embedder: LoadOnce[TextEmbedder]

    def text_embedder(self) -> TextEmbedder:
        """The embedder behind this object."""
        embedder: TextEmbedder = self._embedder.get(
            lambda: resolve_embedder(engine_embedder(self._spec))
        )
        return embedder

    def _vectors(self, owner: str, texts: Any) -> list[list[float]]:
        """Unit-length vectors of ``texts`` (checked: a list of strings, else an
        ``InputError`` naming ``owner``)."""
        texts = check_texts(owner, texts)
        return self.text_embedder().embed(texts).tolist() if texts else []


__all__ = [
    "EngineSettings",
    "EvaluateOptions",
    "ModelsSource",
    "OwnEmbedder",
    "PipelineOptions",
    "RefineCall",
    "RefinerSettings",
    "detached_copy",
    "evaluate_over",
    "pipeline_parts",
]
