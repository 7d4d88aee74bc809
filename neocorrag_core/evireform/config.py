"""Configuration of evidence-guided query reformulation (EviReform)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields, replace
from typing import Any, Literal

ResidualMode = Literal["lm", "entities", "repeat"]
SelectionMode = Literal["beam", "rank", "embedding"]
AggregationMode = Literal["max", "sum"]
PromptContext = Literal["passages", "sentences"]


@dataclass(frozen=True)
class ReformulationConfig:
    """Knobs of the reformulation loop; defaults follow the EviReform paper where it has one.

    Retrieval
        first_k: passages asked of the search for the original question (``None``: the
            ``k`` the caller asked for).
        residual_k: passages asked for each residual query.
        residual_retrieval: ``False`` is the paper's *rerank* control: residual queries
            only re-score the first pool, nothing new is retrieved.
        rounds: reformulation rounds (paper's main setting: 1).

    Evidence selection (stage b)
        selection: ``"beam"`` (trie-constrained beam search over the proposition texts,
            like the chain decoder), ``"rank"`` (exact log-likelihood of every candidate),
            or ``"embedding"`` (cosine to the question; no LM).
        max_evidence: propositions selected per round.
        evidence_margin: only propositions whose cosine to the question is within this
            margin of the best candidate's are offered (``None``: no floor), so a first
            pool with one relevant passage does not fill the evidence, and the bridge
            entities drawn from it, with noise. Measured on the 100 MuSiQue questions
            (corpus pool, bridge-entity queries): margin none / 0.1 / 0.05 gave Recall@5
            0.610 / 0.607 / 0.603, Chain@5 0.33 each, 2.77 / 2.46 / 2.04 queries.
        max_selection_candidates: propositions offered to the LM, best cosine first.
        selection_passages / max_passage_chars: passages shown in the selection prompt.
        prompt_context: ``"passages"`` (cut to ``max_passage_chars``) or ``"sentences"``
            (only the sentences that mention an entity of a candidate the passage supplied),
            as ``MinerConfig.prompt_context``.

    Residual queries (stage c)
        residual_queries: ``"lm"`` (the LM writes them; bridge entities when it writes
            nothing usable or the token budget is spent), ``"entities"`` (bridge entities
            only, no LM), or ``"repeat"`` (the paper's control: the original question
            again, no LM).
        max_residual_queries: at most this many per round (paper: 3).
        fill_with_entities: with ``"lm"``, free query slots go to bridge entities that
            the LM's queries do not name (our addition: the 0.5B LM often writes a
            single usable query, and the next hop hides behind another entity).
        max_query_tokens: new-token cap of the query-writing call.
        max_query_words: longer generated lines are not queries and are skipped.

    Scoring (stages d-f)
        score_temperature: each query's similarities become a unit of mass by a softmax at
            this temperature; ``None`` = min-max scaling then sum to 1. The paper does not
            give its normalization. Chosen on the 100-question MuSiQue set (corpus pool,
            MiniLM, bridge-entity queries): min-max spread the mass over every weak match
            and the final top-5 lost recall (0.534, single-shot 0.612); softmax at 0.1 kept
            it (0.610) and raised Chain@5 from 0.30 to 0.33.
        original_weight: share of the score mass kept on the original question; the
            residual queries share the rest equally (paper: 0.5).
        propagation_weight: share of each proposition's score that comes from its
            shared-entity neighbours after one propagation round (paper: 0.5).
        aggregation: passage score = ``"max"`` (default) or ``"sum"`` of its propositions'.

    Budget
        max_lm_tokens: prompt + generated tokens the LM may spend per question; a step
            whose worst-case cost would overrun it runs its no-LM fallback instead.
            ``None`` = unlimited.
    """

    first_k: int | None = None
    residual_k: int = 5
    residual_retrieval: bool = True
    rounds: int = 1
    selection: SelectionMode = "beam"
    max_evidence: int = 3
    evidence_margin: float | None = 0.1
    max_selection_candidates: int = 40
    selection_passages: int = 5
    max_passage_chars: int = 400
    prompt_context: PromptContext = "passages"
    residual_queries: ResidualMode = "lm"
    max_residual_queries: int = 3
    fill_with_entities: bool = True
    max_query_tokens: int = 64
    max_query_words: int = 16
    score_temperature: float | None = 0.1
    original_weight: float = 0.5
    propagation_weight: float = 0.5
    aggregation: AggregationMode = "max"
    max_lm_tokens: int | None = 4000

    def __post_init__(self) -> None:
        choices = {
            "selection": ("beam", "rank", "embedding"),
            "residual_queries": ("lm", "entities", "repeat"),
            "aggregation": ("max", "sum"),
            "prompt_context": ("passages", "sentences"),
        }
        for name, allowed in choices.items():
            if getattr(self, name) not in allowed:
                raise ValueError(
                    f"{name} must be one of {', '.join(map(repr, allowed))}, "
                    f"got {getattr(self, name)!r}"
                )
        at_least_one: tuple[str, ...] = (
            "residual_k",
            "rounds",
            "max_evidence",
            "max_selection_candidates",
            "max_residual_queries",
            "max_query_tokens",
            "max_query_words",
        )
        for name in (*at_least_one, "first_k", "selection_passages", "max_passage_chars"):
            value = getattr(self, name)
            if name == "first_k" and value is None:
                continue
            if not isinstance(value, int) or isinstance(value, bool):
                raise TypeError(f"{name} must be an int, got {type(value).__name__} {value!r}")
            low = 1 if name in (*at_least_one, "first_k") else 0
            if value < low:
                raise ValueError(f"{name} must be >= {low}, got {value}")
        if self.evidence_margin is not None and self.evidence_margin < 0:
            raise ValueError(f"evidence_margin must be >= 0 or None, got {self.evidence_margin}")
        for name in ("original_weight", "propagation_weight"):
            if not 0.0 <= float(getattr(self, name)) <= 1.0:
                raise ValueError(f"{name} must be within [0, 1], got {getattr(self, name)}")
        if self.score_temperature is not None and self.score_temperature <= 0:
            raise ValueError(f"score_temperature must be > 0 or None, got {self.score_temperature}")
        if self.max_lm_tokens is not None and self.max_lm_tokens < 0:
            raise ValueError(f"max_lm_tokens must be >= 0 or None, got {self.max_lm_tokens}")

    @property
    def uses_lm(self) -> bool:
        """Whether any step may write with the LM (selection or residual queries)."""
        if self.residual_queries == "repeat":
            return False
        return self.selection != "embedding" or self.residual_queries == "lm"

    def with_overrides(self, **overrides: Any) -> ReformulationConfig:
        """A copy with some fields changed; unknown names raise a ``TypeError``."""
        known = {f.name for f in fields(self)}
        unknown = sorted(set(overrides) - known)
        if unknown:
            raise TypeError(
                f"unknown ReformulationConfig field(s): {', '.join(unknown)}; "
                f"known: {', '.join(sorted(known))}"
            )
        return replace(self, **overrides)

    def to_dict(self) -> dict[str, Any]:
        """Plain dict of every field (for reports and caches)."""
        return asdict(self)


__all__ = ["AggregationMode", "ReformulationConfig", "ResidualMode", "SelectionMode"]
