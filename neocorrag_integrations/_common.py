"""What the LangChain and LlamaIndex adapters share: settings, the engine, and the refinement plan.

The adapters only translate framework objects to :class:`SourceDocument` and back; everything
else (which documents stay, their ``neocorrag_*`` metadata, the chain document's text and
metadata, where it goes) is decided here once, so both frameworks behave the same.

Imports pydantic (which both frameworks depend on) but neither framework.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, Field, PrivateAttr, field_validator

from neocorrag_core.config import KeepMode, MinerConfig
from neocorrag_core.miner import EvidenceChainMiner
from neocorrag_core.refine import passthrough
from neocorrag_core.triples import TripleSource
from neocorrag_core.types import MiningResult, Passage
from neocorrag_integrations.metadata_keys import (
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
)

ChainsPosition = Literal["first", "last"]


def reject_owned_settings(owner: str, fix: str, **settings: Any) -> None:
    """Raise when settings that belong to a shared engine were passed beside it.

    An adapter built on a shared engine (``miner=``, ``reformulator=``, ``models=``) uses
    that engine's models and triple source; passing them again would be silently ignored,
    so it is an error that names the settings, the ``owner`` and the ``fix``.
    """
    given = [name for name, value in settings.items() if value is not None]
    if given:
        raise ValueError(f"{', '.join(given)} belong(s) to the {owner} you passed; {fix}")


@dataclass(frozen=True)
class SourceDocument:
    """A framework document reduced to what the engine reads; never modified."""

    id: str | None
    text: str
    metadata: Mapping[str, Any] = field(default_factory=dict)
    score: float | None = None


@dataclass(frozen=True)
class KeptItem:
    """One input document that stays: its input position and the metadata to add to its copy."""

    index: int
    metadata: dict[str, Any]


@dataclass(frozen=True)
class Refinement:
    """What an adapter must output for one query, framework-free.

    ``kept`` is in retrieval order; ``chain_text`` is ``""`` when no chain was found (then
    every document is kept and marked as passed through).
    """

    kept: list[KeptItem]
    chain_text: str
    chain_metadata: dict[str, Any]
    chain_id: str
    source_indices: tuple[int, ...] = ()

    def layout(self, *, include_chains: bool, position: ChainsPosition) -> list[KeptItem | None]:
        """Output order: the kept items, with ``None`` standing for the chain document."""
        if not include_chains or not self.chain_text:
            return list(self.kept)
        items: list[KeptItem | None] = list(self.kept)
        return [None, *items] if position == "first" else [*items, None]


def to_passages(documents: Sequence[SourceDocument]) -> list[Passage]:
    """Engine passages in input order; a missing or repeated document id gets ``#<rank>``.

    The engine needs unique ids (a kept passage is found by which passage a triple came
    from); retrievers may return documents without ids, or the same document twice.
    """
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
    """Mine ``documents`` for ``query`` and decide what the adapter returns."""
    passages = to_passages(documents)
    if query.strip():
        result = miner.mine(query, passages, **overrides)
    else:  # the engine rejects an empty query; a retrieval pipeline should not crash on one
        result = MiningResult(query, [], passthrough(passages), [], 0, fallback="empty_query")
    index_of = {p.id: i for i, p in enumerate(passages)}

    def indices_of(passage_ids: Iterable[str]) -> list[int]:
        return sorted({index_of[pid] for pid in passage_ids if pid in index_of})

    kept = [
        KeptItem(
            index=index_of[k.passage.id],
            metadata={
                KEPT_REASON: k.reason.value,
                RETRIEVAL_RANK: k.rank,
                CHAIN_IDS: [i + 1 for i in k.chain_indices],
                FALLBACK: result.fallback,
            },
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
        DROPPED_RANKS: [d.rank for d in result.dropped],
        DROPPED_IDS: [documents[d.rank - 1].id for d in result.dropped],
        NUM_CANDIDATES: result.num_candidates,
        TIMINGS: dict(result.timings),
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
    decoding: Literal["beam", "rank", "none"] | None = Field(
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
        default=True, description="Add one document holding the evidence chains."
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
            embedder: anything :func:`neocorrag_core.models.resolve_embedder` accepts,
                e.g. a sentence-transformers name, a LangChain or LlamaIndex embeddings object.
            lm: anything :func:`neocorrag_core.models.resolve_lm` accepts.
            triple_source: where triples come from (metadata ``"triples"`` by default; a
                triple store or an extractor plugs in here).
            **data: the pydantic fields above.
        """
        names = {k: v for k, v in (("embedder", embedder), ("lm", lm)) if isinstance(v, str)}
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
                raise TypeError(f"miner must be an EvidenceChainMiner, got {type(miner).__name__}")
            if "query_entities" in self.miner_config:
                raise ValueError(
                    "query_entities is fixed when a miner is built; set it in the shared "
                    "miner's MinerConfig instead of miner_config"
                )
            miner.config.with_overrides(**self.engine_overrides())  # validate now, not per call
            self._miner = miner
        else:
            config = MinerConfig().with_overrides(**self.engine_overrides())
            self._miner = EvidenceChainMiner(
                config, embedder=embedder, lm=lm, triple_source=triple_source
            )

    @field_validator("miner_config")
    @classmethod
    def _known_fields(cls, value: dict[str, Any]) -> dict[str, Any]:
        MinerConfig().with_overrides(**value)  # unknown names and bad values fail here
        return dict(value)

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

    def describe_engine(self) -> str:
        """A short model description for events and logs (loads nothing)."""
        decoding = self.effective_config().decoding
        return f"neocorrag/{decoding}" + (f":{self.lm}" if self.lm and decoding != "none" else "")

    def plan(self, query: str, documents: Sequence[SourceDocument]) -> Refinement:
        """Mine and plan the output for one query (blocking; adapters run it in a thread)."""
        return plan_refinement(self._miner, query, documents, self.engine_overrides())

    # Pickle like a plain pydantic model: fields and the private engine (which drops its
    # loaded models). LlamaIndex's BaseComponent would instead re-run __init__ from the
    # fields, silently replacing an engine built from objects with the default one.
    def __getstate__(self) -> dict[Any, Any]:
        return BaseModel.__getstate__(self)

    def __setstate__(self, state: dict[Any, Any]) -> None:
        BaseModel.__setstate__(self, state)
