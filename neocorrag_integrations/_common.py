"""What the LangChain and LlamaIndex adapters share: settings, the engine, and the refinement plan.

The adapters only translate framework objects to :class:`SourceDocument` and back; everything
else (which documents stay, their ``neocorrag_*`` metadata, the chain document's text and
metadata, where it goes) is decided here once, so both frameworks behave the same.

Imports pydantic (which both frameworks depend on) but neither framework; a framework
embeddings object passed as ``embedder=`` is translated by :mod:`._translate`.
"""

from __future__ import annotations

import copy
import hashlib
import reprlib
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from numbers import Integral
from typing import Any, Literal, TypeVar, get_args

from pydantic import BaseModel, Field, PrivateAttr, ValidationError, ValidationInfo, field_validator

from neocorrag_core.chains.config import KeepMode, MinerConfig
from neocorrag_core.chains.miner import EvidenceChainMiner
from neocorrag_core.errors import ConfigError, InputError
from neocorrag_core.triples import DefaultTripleSource, TripleSource
from neocorrag_core.types import Passage
from neocorrag_core.validation import check_bool, check_choice, check_int, clean_text
from neocorrag_integrations._translate import engine_embedder
from neocorrag_integrations.metadata_keys import (
    CHAIN_IDS,
    CHAINS,
    DROPPED_IDS,
    DROPPED_RANKS,
    FALLBACK,
    FOCUSED,
    IS_EVIDENCE_CHAINS,
    KEPT_REASON,
    NOTES,
    NUM_CANDIDATES,
    RETRIEVAL_RANK,
    RUN_KEYS,
    TIMINGS,
)

ChainsPosition = Literal["first", "last"]
Decoding = Literal["beam", "rank", "none"]


def reject_owned_settings(owner: str, fix: str, **settings: Any) -> None:
    """Raise a :class:`~neocorrag_core.errors.ConfigError` when settings that belong to a
    shared engine were passed beside it.

    An adapter built on a shared engine (``miner=``, ``reformulator=``, ``models=``) uses
    that engine's models and triple source; passing them again would be silently ignored,
    so it is an error that names the settings, the ``owner`` and the ``fix``.
    """
    given = [name for name, value in settings.items() if value is not None]
    if given:
        raise ConfigError(f"{', '.join(given)} belong(s) to the {owner} you passed; {fix}")


# ---- construction: every bad setting is a ConfigError

_short = reprlib.Repr()
_short.maxstring = 60
_short.maxother = 60


def config_error(owner: str, err: ValidationError) -> ConfigError:
    """The :class:`~neocorrag_core.errors.ConfigError` for a pydantic ``ValidationError``.

    Pydantic wraps what a field validator raises (our checks raise ``ConfigError``) in a
    ``ValidationError``; this unwraps it again, so constructing an adapter with a bad field
    raises ``ConfigError`` whatever found the problem. The message names every bad field:
    the check's own words where one of ours raised, pydantic's (with the value) otherwise.
    """
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


def check_name(owner: str, name: str, value: Any) -> Any:
    """A model name or folder field: ``None`` or a non-empty string."""
    if value is not None and (not isinstance(value, str) or not value.strip()):
        raise ConfigError(
            f"{owner}.{name} must be a model name or folder (a non-empty string) or None, "
            f"got {type(value).__name__} {_short.repr(value)}"
        )
    return value


def check_fields(owner: str, name: str, value: Any) -> dict[str, Any]:
    """A dict of engine configuration fields: a mapping with string keys (``None`` = ``{}``)."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ConfigError(f"{owner}.{name} must be a dict, got {type(value).__name__}")
    bad = [key for key in value if not isinstance(key, str)]
    if bad:
        raise ConfigError(f"{owner}.{name} keys must be field names, got {bad[0]!r}")
    return dict(value)


# ---- calls: a query and a list of documents, or an InputError


def check_query(owner: str, query: Any) -> str:
    """``query`` with lone surrogates replaced by U+FFFD
    (:func:`~neocorrag_core.validation.clean_text`; callers go on with the returned
    string), or an :class:`~neocorrag_core.errors.InputError` when it is not a non-empty
    string (the engine needs a question to tie the documents to)."""
    if not isinstance(query, str):
        raise InputError(
            f"{owner}: the query must be a non-empty string, got {type(query).__name__} "
            f"{_short.repr(query)}"
        )
    if not query.strip():
        raise InputError(
            f"{owner}: the query is empty or only whitespace; pass the question to answer"
        )
    return clean_text(query)


def check_sequence(owner: str, name: str, documents: Any, kind: str) -> list[Any]:
    """``documents`` as a list, or an :class:`~neocorrag_core.errors.InputError` when it is
    not a sequence (a list or tuple; a string, a mapping or a one-pass iterator is not)."""
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


@dataclass(frozen=True)
class SourceDocument:
    """A framework document reduced to what the engine reads; never modified."""

    id: str | None
    text: str
    metadata: Mapping[str, Any] = field(default_factory=dict)
    score: float | None = None


@dataclass(frozen=True)
class KeptItem:
    """One input document that stays: its input position, the metadata to add to its copy
    and, when the engine cut it to its evidence sentences, the text its copy gets."""

    index: int
    metadata: dict[str, Any]
    text: str | None = None


@dataclass(frozen=True)
class Refinement:
    """What an adapter must output for one query, framework-free.

    ``kept`` is in retrieval order; ``chain_text`` is the block the miner's
    ``chain_format`` writes: ``""`` by default (``"none"``), and whenever no chain was
    found (then the keep mode's link rules alone decide, or, with no triples or
    ``keep="paper"``, every document is kept and marked as passed through).
    """

    kept: list[KeptItem]
    chain_text: str
    chain_metadata: dict[str, Any]
    chain_id: str
    source_indices: tuple[int, ...] = ()

    def layout(self, *, include_chains: bool, position: ChainsPosition) -> list[KeptItem | None]:
        """Output order: the kept items, with ``None`` standing for the chain document.

        Without a chain document (``include_chains=False``, or a block with no text:
        ``chain_format="none"``, ``"linking"`` with nothing that links, no chain found) the
        run's metadata (every chain, the dropped documents, counts, timings) goes on the
        first kept item instead, so it is never lost; see
        :func:`~neocorrag_integrations.metadata_keys.run_metadata`.
        """
        if include_chains and self.chain_text:
            items: list[KeptItem | None] = list(self.kept)
            return [None, *items] if position == "first" else [*items, None]
        if not self.kept:
            return []
        first = self.kept[0]
        run = {k: v for k, v in self.chain_metadata.items() if k in RUN_KEYS}
        return [replace(first, metadata={**first.metadata, **run}), *self.kept[1:]]


_Model = TypeVar("_Model", bound=BaseModel)
_OWN_LISTS = ("excluded_llm_metadata_keys", "excluded_embed_metadata_keys")


def detached_copy(document: _Model) -> _Model:
    """A copy of a caller's document (LangChain ``Document``, LlamaIndex node) that an
    adapter may change without touching the original: its own metadata dict (empty for
    ``None``), each value deep-copied, and its own excluded-keys lists.

    Not one deep copy of the whole object: a value that cannot be deep-copied (a lock, a
    client handle) would fail the whole call, and a LlamaIndex ``IndexNode.obj`` (a
    sub-retriever or query engine) would be copied on every query and no longer be the
    caller's object. Such values, and fields other than metadata, are shared.
    """
    out = document.model_copy()
    metadata = getattr(document, "metadata", None) or {}
    out.metadata = {key: _copied(value) for key, value in metadata.items()}  # type: ignore[attr-defined]
    for name in _OWN_LISTS:
        value = getattr(document, name, None)
        if isinstance(value, list):
            setattr(out, name, list(value))
    return out


def _copied(value: Any) -> Any:
    try:
        return copy.deepcopy(value)
    except Exception:  # deepcopy of arbitrary user objects can raise anything: share it
        return value


def kept_metadata(original: Mapping[str, Any], added: Mapping[str, Any]) -> dict[str, Any]:
    """A kept copy's metadata: the original's, then this call's ``added`` keys. The run
    keys (:data:`~neocorrag_integrations.metadata_keys.RUN_KEYS`) an earlier refinement
    left on the document are dropped first, so refining an output again leaves one
    call's chains in one place (this call's, where ``added`` or its chain document has
    them)."""
    return {**{k: v for k, v in original.items() if k not in RUN_KEYS}, **added}


def checked_sources(documents: Sequence[SourceDocument]) -> list[SourceDocument]:
    """``documents`` with ``None`` metadata read as empty; a text that is not a string or
    metadata that is not a mapping is an :class:`InputError` naming the document.

    A LangChain ``Document`` validates them at construction but not on assignment, so one
    changed after it was built reaches us unchecked (LlamaIndex nodes validate both).
    Lone surrogates in the id, the text and ``metadata["title"]`` are replaced by U+FFFD
    (:func:`~neocorrag_core.validation.clean_text`), so ids, content hashes and store keys
    are computed on valid text; the caller's document is not changed.
    """
    out = []
    for i, doc in enumerate(documents):
        if doc.metadata is None:
            doc = replace(doc, metadata={})
        if not isinstance(doc.text, str) or not isinstance(doc.metadata, Mapping):
            what, value, expected = (
                ("text", doc.text, "a string")
                if not isinstance(doc.text, str)
                else ("metadata", doc.metadata, "a dict")
            )
            raise InputError(
                f"documents[{i}] (id {doc.id!r}): its {what} must be {expected}, got "
                f"{type(value).__name__}"
            )
        out.append(_clean_source(doc))
    return out


def _clean_source(doc: SourceDocument) -> SourceDocument:
    """``doc`` with its id, text and title cleaned (:func:`clean_text`); ``doc`` itself when
    they are valid already."""
    doc_id = clean_text(doc.id) if isinstance(doc.id, str) else doc.id
    text = clean_text(doc.text)
    metadata = doc.metadata
    title = metadata.get("title")
    if isinstance(title, str) and clean_text(title) is not title:
        metadata = {**metadata, "title": clean_text(title)}
    if doc_id is doc.id and text is doc.text and metadata is doc.metadata:
        return doc
    return replace(doc, id=doc_id, text=text, metadata=metadata)


def to_passages(documents: Sequence[SourceDocument]) -> list[Passage]:
    """Engine passages in input order; a missing or repeated document id gets ``#<rank>``.

    The engine needs unique ids (a kept passage is found by which passage a triple came
    from); retrievers may return documents without ids, or the same document twice.
    """
    documents = checked_sources(documents)
    passages: list[Passage] = []
    used: set[str] = set()
    for rank, doc in enumerate(documents, start=1):
        pid = doc.id if isinstance(doc.id, str) and doc.id and doc.id not in used else f"#{rank}"
        while pid in used:  # a real id that happens to look like "#<rank>"
            pid = f"#{pid}"
        used.add(pid)
        title = doc.metadata.get("title")
        passages.append(
            Passage(
                id=pid,
                text=doc.text,
                title=title if isinstance(title, str) else "",
                score=doc.score,
                metadata=dict(doc.metadata),
            )
        )
    return passages


def plan_refinement(
    miner: EvidenceChainMiner,
    query: str,
    documents: Sequence[SourceDocument],
    overrides: Mapping[str, Any],
) -> Refinement:
    """Mine ``documents`` for ``query`` and decide what the adapter returns.

    Raises :class:`~neocorrag_core.errors.InputError` for a query that is not a non-empty
    string, as the engine does; lone surrogates in it are replaced (:func:`check_query`).
    """
    query = check_query("neocorrag", query)
    documents = checked_sources(documents)
    # A chain document from an earlier refinement is our own output, not evidence: it is not
    # mined (it would take a top-N slot) and is replaced by this pass's chain document.
    positions = [
        i for i, doc in enumerate(documents) if doc.metadata.get(IS_EVIDENCE_CHAINS) is not True
    ] or list(range(len(documents)))
    passages = to_passages([documents[i] for i in positions])
    result = miner.mine(query, passages, **overrides)
    index_of = {p.id: positions[j] for j, p in enumerate(passages)}

    def indices_of(passage_ids: Iterable[str]) -> list[int]:
        return sorted({index_of[pid] for pid in passage_ids if pid in index_of})

    kept = [
        KeptItem(
            index=index_of[k.passage.id],
            metadata={
                KEPT_REASON: k.reason.value,
                RETRIEVAL_RANK: positions[k.rank - 1] + 1,
                CHAIN_IDS: [i + 1 for i in k.chain_indices],
                FALLBACK: result.fallback,
                **({FOCUSED: True} if k.full_text is not None else {}),
            },
            text=None if k.full_text is None else k.passage.text,
        )
        for k in result.kept
    ]
    chains = []
    sources: set[int] = set()
    for number, chain in enumerate(result.chains, start=1):
        indices = indices_of(chain.source_ids)
        sources.update(indices)
        chains.append(
            {
                "number": number,
                "text": chain.text,
                "triples": [
                    {
                        "subject": t.subject,
                        "relation": t.relation,
                        "object": t.object,
                        "source_ranks": [i + 1 for i in indices_of(t.source_ids)],
                    }
                    for t in chain.triples
                ],
                "source_ranks": [i + 1 for i in indices],
                "source_ids": [documents[i].id for i in indices],
                "search_score": float(chain.search_score),
                "lm_logprob": None if chain.lm_logprob is None else float(chain.lm_logprob),
            }
        )
    chain_text = result.chain_text
    chain_metadata = {
        IS_EVIDENCE_CHAINS: True,
        CHAINS: chains,
        DROPPED_RANKS: [positions[d.rank - 1] + 1 for d in result.dropped],
        DROPPED_IDS: [documents[positions[d.rank - 1]].id for d in result.dropped],
        NUM_CANDIDATES: result.num_candidates,
        TIMINGS: dict(result.timings),
        NOTES: list(result.notes),
    }
    digest = hashlib.sha256(f"{query}\n{chain_text}".encode()).hexdigest()[:16]
    return Refinement(
        kept=kept,
        chain_text=chain_text,
        chain_metadata=chain_metadata,
        chain_id=f"neocorrag-chains-{digest}",
        source_indices=tuple(sorted(sources)),
    )


class RefinerSettings(BaseModel):
    """Configuration shared by both adapters (pydantic fields), and the engine they drive.

    The engine (an :class:`~neocorrag_core.EvidenceChainMiner`) lives in a private
    attribute. It is built at construction, which is cheap: models load on first use. Pass
    ``miner=`` to share one engine (and its loaded models) between several adapters; the
    settings below then apply per call on top of that miner's own configuration.

    Every setting is checked at construction, and a bad one (``top_n=2.5``, ``"3"``,
    ``beam_width=True``, a NaN threshold or an unknown name in ``miner_config``, a wrong
    type) raises :class:`~neocorrag_core.errors.ConfigError` naming the field, never a
    pydantic ``ValidationError``: ``ConfigError`` is a ``ValueError`` (as
    ``ValidationError`` is) and a ``TypeError``. Assigning a field later is not checked
    here: a bad value set that way is rejected on the next call.
    """

    keep: KeepMode | None = Field(
        default=None,
        description="The recall/noise dial: 'recall' (keeps the evidence), 'balanced', "
        "'precise' or 'paper' (Eq. 8 as published); None = the engine's ('recall').",
    )
    top_n: int | None = Field(
        default=None,
        ge=0,
        description="Documents kept by retrieval rank alone (Eq. 8); None = the keep mode's.",
    )
    decoding: Decoding | None = Field(
        default=None,
        description="How chains are chosen: 'none' (search scores, no LM), 'beam' or 'rank' "
        "(the LM); None = the engine's ('none').",
    )
    beam_width: int | None = Field(
        default=None, ge=1, description="Chains chosen per query; None = the engine's (5)."
    )
    miner_config: dict[str, Any] = Field(
        default_factory=dict,
        description="Any other MinerConfig field, e.g. {'tau_edge': 0.4}.",
    )
    embedder: str | None = Field(
        default=None,
        description="Embedder name or folder; None = bundled MiniLM. An embeddings object "
        "passed to the constructor goes to the engine instead and is not serialized.",
    )
    lm: str | None = Field(
        default=None,
        description="Decoding LM: Hugging Face id or folder; None = bundled Qwen2.5-0.5B. "
        "A model object passed to the constructor goes to the engine and is not serialized.",
    )
    include_chains: bool = Field(
        default=True,
        description="Add one document holding the evidence chains when the miner's "
        "chain_format writes a block (the default, 'none', writes none).",
    )
    chains_position: ChainsPosition = Field(
        default="first", description="Where the chain document goes: 'first' or 'last'."
    )

    _miner: EvidenceChainMiner = PrivateAttr()

    def __init__(
        self,
        *,
        miner: EvidenceChainMiner | None = None,
        embedder: Any = None,
        lm: Any = None,
        triple_source: TripleSource | None = None,
        **data: Any,
    ) -> None:
        """Build the settings and the (not yet loaded) engine.

        Args:
            miner: an engine to share; then ``embedder``, ``lm`` and ``triple_source``
                must be left unset (they belong to that engine).
            embedder: anything :func:`neocorrag_core.models.resolve_embedder` accepts
                (e.g. a sentence-transformers name), or a LangChain or LlamaIndex
                embeddings object (translated by its framework's ``as_embedder``).
            lm: anything :func:`neocorrag_core.models.resolve_lm` accepts.
            triple_source: where triples come from. Default: a
                :class:`~neocorrag_core.triples.DefaultTripleSource` — ``metadata["triples"]``
                where present, else the triple store, else spaCy (the ``spacy`` extra; what
                it extracts is stored), else the document passes through with one warning.
            **data: the pydantic fields above.
        """
        owner = type(self).__name__
        names = {k: v for k, v in (("embedder", embedder), ("lm", lm)) if isinstance(v, str)}
        with config_errors(owner):
            super().__init__(**names, **data)
        if miner is not None:
            reject_owned_settings(
                "miner",
                "set them on that EvidenceChainMiner, or pass them here without miner=",
                embedder=embedder,
                lm=lm,
                triple_source=triple_source,
            )
            if not isinstance(miner, EvidenceChainMiner):
                raise ConfigError(
                    f"{owner}: miner must be an EvidenceChainMiner, got {type(miner).__name__}"
                )
            miner.config.with_overrides(**self.engine_overrides())  # validate now, not per call
            self._miner = miner
        else:
            config = MinerConfig().with_overrides(**self.engine_overrides())
            self._miner = EvidenceChainMiner(
                config,
                embedder=engine_embedder(embedder),
                lm=lm,
                triple_source=triple_source if triple_source is not None else DefaultTripleSource(),
            )

    # Our own checks run before pydantic's (which would take "3" or 2.0 as an integer and
    # "yes" as a flag); each raises ConfigError, which __init__ unwraps from pydantic's.
    @field_validator("top_n", "beam_width", mode="before")
    @classmethod
    def _integers(cls, value: Any, info: ValidationInfo) -> Any:
        minimum = 0 if info.field_name == "top_n" else 1
        check_int(cls.__name__, str(info.field_name), value, minimum=minimum, optional=True)
        return value if value is None else int(value)

    @field_validator("keep", "decoding", "chains_position", mode="before")
    @classmethod
    def _choices(cls, value: Any, info: ValidationInfo) -> Any:
        name = str(info.field_name)
        if value is None and name != "chains_position":
            return value  # None = the engine's
        choices = {"keep": KeepMode, "decoding": Decoding, "chains_position": ChainsPosition}
        check_choice(cls.__name__, name, value, get_args(choices[name]))
        return value

    @field_validator("include_chains", mode="before")
    @classmethod
    def _flags(cls, value: Any, info: ValidationInfo) -> Any:
        check_bool(cls.__name__, str(info.field_name), value)
        return value

    @field_validator("embedder", "lm", mode="before")
    @classmethod
    def _names(cls, value: Any, info: ValidationInfo) -> Any:
        return check_name(cls.__name__, str(info.field_name), value)

    @field_validator("miner_config", mode="before")
    @classmethod
    def _known_fields(cls, value: Any) -> dict[str, Any]:
        fields = check_fields(cls.__name__, "miner_config", value)
        try:
            MinerConfig().with_overrides(**fields)  # unknown names and bad values fail here
        except ConfigError as err:
            raise ConfigError(f"{cls.__name__}.miner_config: {err}") from err
        return fields

    @property
    def miner(self) -> EvidenceChainMiner:
        """The engine this adapter drives (share it with ``miner=`` in another adapter)."""
        return self._miner

    def engine_overrides(self) -> dict[str, Any]:
        """MinerConfig fields set on this adapter, applied on every call."""
        overrides = dict(self.miner_config)
        for name in ("keep", "top_n", "decoding", "beam_width"):
            value = getattr(self, name)
            if value is not None:
                overrides[name] = value
        return overrides

    def effective_config(self) -> MinerConfig:
        """The engine configuration in force for this adapter's calls."""
        return self._miner.config.with_overrides(**self.engine_overrides())

    def warm_up(self) -> None:
        """Load the engine's models and open its store now, not at the first call
        (:meth:`~neocorrag_core.EvidenceChainMiner.warm_up`); for service start-up."""
        self._miner.warm_up()

    def describe_engine(self) -> str:
        """A short model description for events and logs (loads nothing)."""
        decoding = self.effective_config().decoding
        return f"neocorrag/{decoding}" + (f":{self.lm}" if self.lm and decoding != "none" else "")

    def plan(self, query: str, documents: Sequence[SourceDocument]) -> Refinement:
        """Mine and plan the output for one query (blocking; adapters run it in a thread).

        Raises :class:`~neocorrag_core.errors.InputError` for a query that is not a
        non-empty string.
        """
        owner = type(self).__name__
        query = check_query(owner, query)
        # The two output settings never reach the engine: check a value assigned later here.
        check_bool(owner, "include_chains", self.include_chains)
        check_choice(owner, "chains_position", self.chains_position, ("first", "last"))
        return plan_refinement(self._miner, query, documents, self.engine_overrides())

    # Pickle like a plain pydantic model: fields and the private engine (which drops its
    # loaded models). LlamaIndex's BaseComponent would instead re-run __init__ from the
    # fields, silently replacing an engine built from objects with the default one.
    def __getstate__(self) -> dict[Any, Any]:
        return BaseModel.__getstate__(self)

    def __setstate__(self, state: dict[Any, Any]) -> None:
        BaseModel.__setstate__(self, state)
