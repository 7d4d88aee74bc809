"""What every adapter shares: the checks at its edge, reading framework documents into
passages, copies of the caller's objects, the settings base, and the refiner's settings.

An adapter checks the query and the documents once, where it receives them, reads each
framework document once into a :class:`~neocorrag_core.types.Passage`, and writes the
engine's result once into copies of the caller's objects; the engine trusts what it gets.
Imports pydantic (both frameworks depend on it) but neither framework.
"""

from __future__ import annotations

import copy
import hashlib
import reprlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from numbers import Integral
from typing import Any, ClassVar, NamedTuple, TypeVar

from pydantic import BaseModel, Field, PrivateAttr, ValidationError

from neocorrag_core.chains.config import MinerConfig
from neocorrag_core.chains.miner import EvidenceChainMiner
from neocorrag_core.errors import ConfigError, InputError
from neocorrag_core.evireform import EvidenceReformulator
from neocorrag_core.evireform.provenance import provenance_in_metadata
from neocorrag_core.limits import cap_documents, collecting_notes
from neocorrag_core.models import LazyModels
from neocorrag_core.records.refinement import refinement_records
from neocorrag_core.triples import DefaultTripleSource, TripleSource
from neocorrag_core.types import MiningResult, Passage
from neocorrag_core.validation import Settings, check_bool, check_choice, check_instance, clean_text
from neocorrag_integrations._translate import engine_embedder
from neocorrag_integrations.metadata_keys import (
    IS_EVIDENCE_CHAINS,
    RUN_KEYS,
)

T = TypeVar("T")
_short = reprlib.Repr()
_short.maxstring = _short.maxother = 60

Fields = tuple[Any, Any, Any, Any]
"""What an adapter reads of one framework document: its id, text, metadata and score."""
Reader = Callable[[int, Any], Fields]
"""An adapter's reading of the document at a position; an ``InputError`` for a foreign object."""

# ---- the edge: a query, documents, a per-call k


def check_query(owner: str, query: Any) -> str:
    """``query`` as valid Unicode (:func:`~neocorrag_core.validation.clean_text`), or an
    :class:`~neocorrag_core.errors.InputError` when it is not a non-empty string."""
    if not isinstance(query, str):
        raise InputError(
            f"{owner}: the query must be a non-empty string, got {type(query).__name__} "
            f"{_short.repr(query)}"
        )
    if not query.strip():
        raise InputError(f"{owner}: the query is empty or only whitespace; pass the question")
    return clean_text(query)


def check_sequence(owner: str, name: str, documents: Any, kind: str) -> list[Any]:
    """``documents`` as a list, or an ``InputError`` unless it is a list or tuple."""
    if isinstance(documents, (str, bytes, Mapping)) or not isinstance(documents, Sequence):
        raise InputError(
            f"{owner}: {name} must be a list of {kind}, got {type(documents).__name__}"
        )
    return list(documents)


def check_call_k(owner: str, k: Any) -> int:
    """A per-call number of results: a positive integer (not a bool), else ``InputError``."""
    if isinstance(k, bool) or not isinstance(k, Integral) or k < 1:
        raise InputError(
            f"{owner}: k must be a positive integer, got {type(k).__name__} {_short.repr(k)}"
        )
    return int(k)


def read_fields(position: int, fields: Fields) -> Fields:
    """One document's fields, checked and as valid Unicode (id, text, ``metadata["title"]``;
    ``None`` metadata is ``{}``): a text that is not a string or metadata that is not a
    mapping is an ``InputError`` naming the document (a LangChain ``Document`` checks them
    at construction only). The caller's objects are not changed."""
    doc_id, text, metadata, score = fields
    metadata = {} if metadata is None else metadata
    if not isinstance(text, str) or not isinstance(metadata, Mapping):
        what, value, expected = (
            ("text", text, "a string")
            if not isinstance(text, str)
            else ("metadata", metadata, "a dict")
        )
        raise InputError(
            f"documents[{position}] (id {doc_id!r}): its {what} must be {expected}, got "
            f"{type(value).__name__}"
        )
    title = metadata.get("title")
    if isinstance(title, str) and clean_text(title) is not title:
        metadata = {**metadata, "title": clean_text(title)}
    doc_id = clean_text(doc_id) if isinstance(doc_id, str) else doc_id
    return doc_id, clean_text(text), metadata, score


def passage(pid: str, fields: Fields) -> Passage:
    """The engine passage of a document's (checked) fields, under the id ``pid``."""
    _, text, metadata, score = fields
    title = metadata.get("title")
    return Passage(pid, text, title if isinstance(title, str) else "", score, dict(metadata))


def to_passages(fields: Sequence[Fields]) -> list[Passage]:
    """Passages in input order; a missing or repeated document id becomes ``#<rank>`` (the
    engine finds a kept passage by the passage a triple came from, so ids are unique)."""
    out: list[Passage] = []
    used: set[str] = set()
    for rank, item in enumerate(fields, start=1):
        doc_id = item[0]
        pid = doc_id if isinstance(doc_id, str) and doc_id and doc_id not in used else f"#{rank}"
        while pid in used:  # a real id that happens to look like "#<rank>"
            pid = f"#{pid}"
        used.add(pid)
        out.append(passage(pid, item))
    return out


def search_over(
    fetch: Callable[[str], Sequence[Any]], read: Callable[[int, Any], Fields]
) -> Callable[[str, int], list[Passage]]:
    """``search(query, k)`` over a framework retriever's ``fetch(query) -> documents``: the
    first ``k`` as passages (ids: the documents' own, as :func:`to_passages` gives them)."""

    def search(query: str, k: int) -> list[Passage]:
        found = list(fetch(query))
        return to_passages([read_fields(i, read(i, d)) for i, d in enumerate(found)])[:k]

    return search


def reader_of(llm: Any, translate: Callable[[Any], Any]) -> Any:
    """``evaluate``'s reader: a bundled reader's name as it is (``None``: ``"default"``),
    any other object through the framework's ``as_chat_model``."""
    if llm is None:
        return "default"
    return llm if isinstance(llm, str) else translate(llm)


# ---- copies of the caller's objects

_Model = TypeVar("_Model", bound=BaseModel)


def detached_copy(document: _Model) -> _Model:
    """A copy of a caller's document that may be changed without touching the original: its
    own metadata dict (each value deep-copied where possible; a lock or a client handle is
    shared) and its own excluded-keys lists; other fields are shared, so a LlamaIndex
    ``IndexNode.obj`` stays the caller's object."""
    out = document.model_copy()
    metadata = getattr(document, "metadata", None) or {}
    out.metadata = {key: _copied(value) for key, value in metadata.items()}  # type: ignore[attr-defined]
    for name in ("excluded_llm_metadata_keys", "excluded_embed_metadata_keys"):
        value = getattr(document, name, None)
        if isinstance(value, list):
            setattr(out, name, list(value))
    return out


def _copied(value: Any) -> Any:
    plain = _plain_copy(value)
    if plain is not _NOT_PLAIN:
        return plain
    try:
        return copy.deepcopy(value)
    except Exception:  # deepcopy of arbitrary user objects can raise anything: share it
        return value


_ATOMS = (str, int, float, bool, type(None))
_NOT_PLAIN = object()


def _plain_copy(value: Any, depth: int = 0) -> Any:
    """A copy of JSON-like metadata (lists, tuples and dicts of strings, numbers, ``None``)
    built directly, as ``deepcopy`` would make it but without its bookkeeping (a
    100,000-triple list copies in a tenth of the time); ``_NOT_PLAIN`` for anything else
    or anything nested deeper than 32 levels, which ``deepcopy`` then copies."""
    kind = type(value)
    if kind in _ATOMS:
        return value
    if depth > 32:
        return _NOT_PLAIN
    if kind is list or kind is tuple:
        if all(type(item) in _ATOMS for item in value):
            return list(value) if kind is list else value
        items = []
        for item in value:
            inner = type(item)
            if inner is list and all(type(part) in _ATOMS for part in item):
                items.append(list(item))  # a triple, mostly: copied without a call
                continue
            copied = item if inner in _ATOMS else _plain_copy(item, depth + 1)
            if copied is _NOT_PLAIN:
                return _NOT_PLAIN
            items.append(copied)
        return items if kind is list else tuple(items)
    if kind is dict:
        copied = {key: _plain_copy(item, depth + 1) for key, item in value.items()}
        if any(type(key) not in _ATOMS or item is _NOT_PLAIN for key, item in copied.items()):
            return _NOT_PLAIN
        return copied
    return _NOT_PLAIN


def kept_metadata(original: Mapping[str, Any], added: Mapping[str, Any]) -> dict[str, Any]:
    """A kept copy's metadata: the original's without the run keys an earlier refinement left
    (so one call's chains sit in one place), then this call's ``added`` keys."""
    return {**{k: v for k, v in original.items() if k not in RUN_KEYS}, **added}


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


def reject_owned_settings(owner: str, fix: str, **settings: Any) -> None:
    """A ``ConfigError`` naming the settings passed beside an object that owns them (a shared
    engine, models or controller): they would be silently ignored."""
    given = [name for name, value in settings.items() if value is not None]
    if given:
        raise ConfigError(f"{', '.join(given)} belong(s) to the {owner} you passed; {fix}")


class EngineSettings:
    """Base of the adapters' settings holders (the refiner's, the reformulating retriever's,
    BeliefRAG's): where the engine comes from, and the user config it runs with.

    An adapter either drives an engine passed in (``miner=``, ``reformulator=``,
    ``controller=``: then the models and triple source are that engine's, and passing them
    again is a ``ConfigError``), builds one on models shared with ``models=``, or builds
    one on its own ``embedder`` / ``lm``. Its config is a dict of the user config's fields
    (or the dataclass itself), checked once by that dataclass, whose error names the field.
    """

    def _owner(self) -> str:
        """The adapter's name in error messages."""
        return type(self).__name__

    def _shared(self, keyword: str, engine: T, kind: type, **owned: Any) -> T:
        """``engine``, passed as ``keyword=``: a ``kind`` with none of the settings it owns
        (``owned``) passed beside it."""
        reject_owned_settings(
            keyword, f"set them where that {kind.__name__} was built, or leave {keyword}= out",
            **owned,
        )  # fmt: skip
        check_instance(self._owner(), keyword, engine, kind)
        return engine

    def _models(self, models: ModelsSource, **owned: Any) -> tuple[LazyModels, TripleSource | None]:
        """The models (and triple source, when it has one) of what ``models=`` names."""
        reject_owned_settings(
            "models", "pass them where those models were built, or leave models= out", **owned
        )
        source = models.miner if isinstance(models, RefinerSettings) else models
        if isinstance(source, LazyModels):
            return source, None
        if isinstance(source, EvidenceChainMiner | EvidenceReformulator):
            return source.models, source.triple_source
        raise ConfigError(
            "models must be a LazyModels, an EvidenceChainMiner, an EvidenceReformulator, or a "
            f"NeocorRAGCompressor / NeocorRAGPostprocessor; got {type(models).__name__}"
        )

    def _config(self, base: Settings, changes: Any, name: str, *, whole: bool = True) -> Any:
        """``base`` with ``changes`` (a dict of its fields, or with ``whole`` an instance of
        its class), checked by the dataclass; the error names ``<owner>.<name>`` (``name``
        empty: the adapter's own fields)."""
        where = f"{self._owner()}.{name}" if name else self._owner()
        kind = type(base).__name__
        if whole and isinstance(changes, type(base)):
            return changes
        if changes is not None and not isinstance(changes, Mapping):
            expected = f"a {kind} or a dict of its fields" if whole else f"a dict of {kind} fields"
            raise ConfigError(f"{where} must be {expected}, got {type(changes).__name__}")
        bad = [key for key in changes or {} if not isinstance(key, str)]
        if bad:
            raise ConfigError(f"{where} keys must be field names, got {bad[0]!r}")
        try:
            return base.with_overrides(**(changes or {}))
        except ConfigError as err:
            raise ConfigError(f"{where}: {err}") from err


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
        owner = self._owner()
        for name in ("embedder", "lm"):
            check_name(owner, name, getattr(self, name))
        check_bool(owner, "include_chains", self.include_chains)
        check_choice(owner, "chains_position", self.chains_position, ("first", "last"))
        given = self.miner_config if self.miner_config is not None else {}
        dial = [name for name in _DIAL if isinstance(given, Mapping) and name in given]
        if dial:
            raise ConfigError(
                f"{owner}.miner_config: {', '.join(dial)} are settings of {owner} itself: "
                f"{owner}({dial[0]}=...)"
            )
        config = self._config(base, given, "miner_config", whole=False)
        dial_changes = {name: getattr(self, name) for name in _DIAL}
        return self._config(config, {k: v for k, v in dial_changes.items() if v is not None}, "")

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
        """Refine the call's documents (as :meth:`check_call` returns them): their fields
        become passages, the miner's result copies of the kept documents (blocking; the
        async methods run it in one worker thread)."""
        query, documents, fields, config = call
        if not documents:
            return []
        # A chain document of an earlier refinement is our output, not evidence: it is not
        # mined (it would take a top-N slot) and is replaced by this call's.
        positions = [
            i for i, item in enumerate(fields) if item[2].get(IS_EVIDENCE_CHAINS) is not True
        ] or list(range(len(documents)))
        # Documents past the engine's cap are not even made passages: dropped, unread.
        with collecting_notes() as capped:
            read = cap_documents(positions, self._miner.limits)
        passages = to_passages([fields[i] for i in read])
        # What an EviReform retriever before this refiner knows: a hop it searched for on
        # purpose is kept even when nothing links it to the other documents.
        found = provenance_in_metadata(passages)
        result = self._miner.mine_unchecked(query, passages, config, provenance=found)
        result.notes = [*capped, *result.notes]
        doc_ids = [f[0] for f in fields]
        return self._output(query, documents, doc_ids, positions, passages, result, len(read))

    def _output(
        self,
        query: str,
        documents: list[Any],
        doc_ids: list[Any],
        positions: list[int],
        passages: list[Passage],
        result: MiningResult,
        read: int,
    ) -> list[Any]:
        """Copies of the kept documents with the core's records, and the chain document
        when the chain format writes a block."""
        records = refinement_records(
            result, passages, positions, doc_ids, read=read, include_chains=self.include_chains
        )
        out = [self._kept_copy(documents[r.position], r.metadata, r.text) for r in records.kept]
        if not records.block:
            return out
        digest = hashlib.sha256(f"{query}\n{records.block}".encode()).hexdigest()[:16]
        chain_doc = self._chain_document(
            records.block,
            records.chain_metadata,
            f"neocorrag-chains-{digest}",
            [documents[i] for i in records.sources],
        )
        return [chain_doc, *out] if self.chains_position == "first" else [*out, chain_doc]

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


__all__ = [
    "EngineSettings",
    "Fields",
    "ModelsSource",
    "RefineCall",
    "RefinerSettings",
    "check_call_k",
    "check_query",
    "check_sequence",
    "detached_copy",
    "kept_metadata",
    "passage",
    "read_fields",
    "to_passages",
]
