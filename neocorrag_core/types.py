"""Plain data passed between the stages of the engine.

Every stage takes and returns these frozen dataclasses, so each stage can be
tested alone and the adapters only translate framework objects to and from them.

Plain data only: nothing here knows how it is rendered. :mod:`neocorrag_core.rendering`
asks these types (``rendering.chain_text(result)``, ``rendering.result_context(result)``),
never the reverse; this module imports neither rendering nor any of the three systems (an
architecture test holds it to that).
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Literal

from neocorrag_core.cost import Cost
from neocorrag_core.errors import InputError
from neocorrag_core.validation import clean_text

ChainFormat = Literal["compact", "linking", "full", "none"]
"""How a result's chain block is written (:func:`neocorrag_core.rendering.render_chains`)."""
CHAIN_FORMATS: tuple[ChainFormat, ...] = ("compact", "linking", "full", "none")


@dataclass(frozen=True)
class Passage:
    """One retrieved document, in retrieval order (rank 1 first) when passed to the miner.

    ``metadata`` may carry precomputed triples under ``"triples"`` (see
    :class:`neocorrag_core.triples.MetadataTripleSource`); ``None`` is taken as ``{}``.
    Wrong types raise :class:`~neocorrag_core.errors.InputError` at construction. Lone
    surrogates in ``id``, ``text`` and ``title`` (text that is not valid Unicode) are
    replaced by U+FFFD at construction (:func:`~neocorrag_core.validation.clean_text`).
    """

    id: str
    text: str
    title: str = ""
    score: float | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.id, str) or not self.id:
            raise InputError(f"Passage.id must be a non-empty string, got {self.id!r}")
        if not isinstance(self.text, str):
            raise InputError(f"Passage.text must be a string, got {type(self.text).__name__}")
        if not isinstance(self.title, str):
            raise InputError(f"Passage.title must be a string, got {type(self.title).__name__}")
        for name in ("id", "text", "title"):  # frozen: set the cleaned text the hard way
            value = getattr(self, name)
            cleaned = clean_text(value)
            if cleaned is not value:
                object.__setattr__(self, name, cleaned)
        if self.metadata is None:  # what "no metadata" often looks like in user code
            object.__setattr__(self, "metadata", {})
        if not isinstance(self.metadata, Mapping):
            raise InputError(
                f"Passage.metadata must be a mapping (use {{}} for none), got "
                f"{type(self.metadata).__name__}"
            )
        if self.score is not None and (
            isinstance(self.score, bool) or not isinstance(self.score, (int, float))
        ):
            raise InputError(
                f"Passage.score must be a number or None, got {type(self.score).__name__}"
            )


@dataclass(frozen=True)
class Provenance:
    """What the retrieval step knows about why a passage is in the list, for the refiner.

    EviReform (:func:`neocorrag_core.evireform.provenance.provenance_of`) searches again for
    the hop the first retrieval missed; a passage it found on purpose must not be dropped
    as unlinked by the refinement that follows it (:class:`KeepReason` ``FOUND_HOP`` and
    ``EVIDENCE``).
    """

    bridge: str = ""
    """The bridge entity of the residual query that returned it first, when it is that
    entity's page (:func:`~neocorrag_core.evireform.provenance.names_bridge`; "" when no
    residual query found it so)."""
    evidence: bool = False
    """It holds a fact the reformulation selected as evidence for the question."""


@dataclass(frozen=True)
class Triple:
    """A knowledge-graph fact ``(subject, relation, object)`` and the passages it came from."""

    subject: str
    relation: str
    object: str
    source_ids: tuple[str, ...] = ()

    @property
    def text(self) -> str:
        """The sentence-like form that is embedded and compared with the query."""
        return f"{self.subject} {self.relation} {self.object}"

    def key(self) -> tuple[str, str, str]:
        """Identity of the fact, independent of where it was found."""
        return (self.subject, self.relation, self.object)


@dataclass(frozen=True)
class EvidenceChain:
    """A path of triples through the evidence graph, linearized as ``h - r -> t - r2 -> t2``.

    ``text`` is exactly the candidate string the decoder chose, byte for byte.
    ``lm_logprob`` is the length-normalized log-probability the LM gave it
    (``None`` when decoding was ``"none"``). ``forward`` says, per triple, whether the path
    walks it subject -> object (``True``) or backwards; it is ``()`` for a chain built
    outside the search, which the compact and linking chain blocks then show whole.
    """

    triples: tuple[Triple, ...]
    text: str
    search_score: float
    lm_logprob: float | None = None
    forward: tuple[bool, ...] = ()

    @property
    def source_ids(self) -> frozenset[str]:
        """Ids of every passage that supplied a triple of this chain."""
        return frozenset(pid for triple in self.triples for pid in triple.source_ids)


class KeepReason(str, Enum):
    """Why a passage survived refinement."""

    TOP_N = "top_n"
    """Within the top-N retrieval ranks, kept unconditionally (Eq. 8, D_topN)."""
    CHAIN = "chain"
    """Lower-ranked, but the source of a triple in a decoded chain (Eq. 8, D_supplement)."""
    QUERY_ENTITY = "query_entity"
    """Lower-ranked and in no chosen chain, but about an entity the question names."""
    BRIDGE = "bridge"
    """Lower-ranked and in no chosen chain, but linked to the best-ranked or a
    query-entity passage (a shared entity, or that passage names its topic)."""
    FOUND_HOP = "found_hop"
    """Lower-ranked and linked by no rule above, but searched for on purpose: the first
    result of a residual query for a bridge entity, when it is that entity's page
    (EviReform's provenance, :class:`Provenance`)."""
    EVIDENCE = "evidence"
    """Lower-ranked and linked by no rule above, but holding a fact EviReform selected as
    evidence for the question (its provenance, :class:`Provenance`)."""
    PASSTHROUGH = "passthrough"
    """The engine found nothing to filter with, so the input went through unchanged."""

    @property
    def label(self) -> str:
        """A few words for a legend or a table: why a passage with this reason is kept."""
        return _KEEP_LABELS[self]


_KEEP_LABELS = {
    KeepReason.TOP_N: "top-N by retrieval rank",
    KeepReason.CHAIN: "supplies a chain fact",
    KeepReason.QUERY_ENTITY: "about a query entity",
    KeepReason.BRIDGE: "linked to a passage about the question",
    KeepReason.FOUND_HOP: "a hop EviReform searched for",
    KeepReason.EVIDENCE: "holds a fact EviReform selected",
    KeepReason.PASSTHROUGH: "passed through (nothing to filter with)",
}


class LossStage(str, Enum):
    """The first stage of the chain pipeline a dropped passage did not get through.

    Ordered as the pipeline runs; computed by :func:`neocorrag_core.chains.diagnosis.loss_stages`.
    """

    NO_TRIPLES = "no_triples"
    """No triple was extracted from it, so no chain can cite it."""
    NOT_CONNECTED = "not_connected"
    """Its triples are not within ``max_hops`` of a seed node, even without pruning."""
    PRUNED = "pruned"
    """Reachable from a seed only through triples below ``tau_edge`` (Eq. 4)."""
    OUTSIDE_TOP_M = "outside_top_m"
    """Reached by the search, but in none of the ``num_candidates`` best-scored paths."""
    NO_CHOSEN_CHAIN = "no_chosen_chain"
    """In a candidate path, but decoding chose no chain that cites it."""
    KEEP_RULE = "keep_rule"
    """Cited by a chosen chain, yet dropped: the keep mode does not keep chain-cited
    passages (only ``"paper"`` does) and nothing else linked it to the question."""


@dataclass(frozen=True)
class KeptPassage:
    """A passage of the refined context, with the reason it was kept."""

    passage: Passage
    rank: int
    reason: KeepReason
    chain_indices: tuple[int, ...] = ()
    full_text: str | None = None
    """The passage's whole text when ``passage.text`` was cut to its evidence sentences
    (``MinerConfig.passage_focus``); ``None`` when it is whole."""

    def explain(self, top_n: int | None = None) -> str:
        """One human-readable line saying why this passage is in the context; ``top_n``
        (``MiningResult.top_n``) is how many passages were kept by rank, said when given."""
        if self.reason is KeepReason.TOP_N:
            if top_n is None:
                return f"retrieval rank {self.rank}: the best-ranked passages are always kept"
            return f"retrieval rank {self.rank}: the top {top_n} by rank are always kept"
        if self.reason is KeepReason.CHAIN:
            chains = ", ".join(f"#{i + 1}" for i in self.chain_indices)
            return f"source of a triple in evidence chain {chains}"
        if self.reason is KeepReason.QUERY_ENTITY:
            return "about an entity the question names"
        if self.reason is KeepReason.BRIDGE:
            return "linked to a passage about the question (shared entity or named topic)"
        if self.reason is KeepReason.FOUND_HOP:
            return "found on purpose by a search for a bridge entity (EviReform)"
        if self.reason is KeepReason.EVIDENCE:
            return "holds a fact selected as evidence for the question (EviReform)"
        return "passed through unchanged (no filtering evidence)"


@dataclass(frozen=True)
class DroppedPassage:
    """A passage removed by refinement: below the top-N and kept by no rule of the keep mode."""

    passage: Passage
    rank: int
    stage: LossStage | None = None
    """Where the chain pipeline lost it (:mod:`neocorrag_core.chains.diagnosis`); ``None`` when
    the miner did not diagnose it."""


@dataclass
class MiningResult(Cost):
    """Everything one ``mine`` call produced, including what it cost (:class:`Cost`) and why
    it fell back."""

    query: str
    chains: list[EvidenceChain]
    kept: list[KeptPassage]
    dropped: list[DroppedPassage]
    num_candidates: int
    fallback: str | None = None
    """Why no chain was found (``"no_triples"``, ``"no_seed_nodes"``,
    ``"no_candidate_chains"``, ...), ``None`` when chains were found. With no triples the
    input passed through; otherwise the keep mode's link rules decided (``keep="paper"``:
    passed through)."""
    seed_fallback: str | None = None
    query_entities: list[str] = field(default_factory=list)
    seed_nodes: list[str] = field(default_factory=list)
    candidates: list[EvidenceChain] = field(default_factory=list, repr=False)
    """The candidate chains stage a handed to decoding, best search score first."""
    notes: list[str] = field(default_factory=list)
    """Budgets that changed what this call did: a search that hit its work cap, a decoding
    prompt that could not fit (decoding then took the search order)."""
    chain_format: ChainFormat = "none"
    """How :func:`~neocorrag_core.rendering.chain_text` writes the chains
    (``MinerConfig.chain_format``; ``"none"``, the default, writes no block)."""
    max_chain_lines: int | None = 2
    """At most this many lines in :func:`~neocorrag_core.rendering.chain_text`
    (``MinerConfig.max_chain_lines``)."""
    top_n: int | None = None
    """How many best-ranked passages the keep stage kept by retrieval rank alone: the keep
    mode's top-N, one more when no chain was found, 1 when the question was read as a
    comparison; ``None`` when the input passed through before any keep stage (no triples,
    or ``keep="paper"`` with no chain)."""

    @property
    def passages(self) -> list[Passage]:
        """The refined passages, in their original retrieval order."""
        return [k.passage for k in self.kept]

    # Deprecated (kept for one release): plain data does not render itself. Each imports
    # rendering when called, never at module level (the architecture test allows exactly
    # these two function-level imports until they are removed).
    @property
    def chain_text(self) -> str:
        """Deprecated: use :func:`neocorrag_core.rendering.chain_text` (``chain_text(result)``)."""
        from neocorrag_core.rendering import chain_text

        _deprecated("MiningResult.chain_text", "neocorrag_core.rendering.chain_text(result)")
        return chain_text(self)

    def context(self, *, chains_first: bool = True) -> str:
        """Deprecated: use :func:`neocorrag_core.rendering.result_context`
        (``result_context(result, chains_first=...)``)."""
        from neocorrag_core.rendering import result_context

        _deprecated(
            "MiningResult.context()",
            "neocorrag_core.rendering.result_context(result, chains_first=...)",
        )
        return result_context(self, chains_first=chains_first)


def _deprecated(old: str, new: str) -> None:
    warnings.warn(
        f"{old} is deprecated and will be removed in the next release; use {new}",
        DeprecationWarning,
        stacklevel=3,  # the caller of the deprecated member
    )
