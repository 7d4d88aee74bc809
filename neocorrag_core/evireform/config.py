"""Configuration of evidence-guided query reformulation (EviReform): :class:`ReformulationConfig`,
what a user chooses, and :class:`ReformulationTuning`, the research settings the lab varies.

The two share no field name: :func:`reformulation_settings` applies flat ``name=value`` changes
(per-call overrides, the eval's ``--evireform KEY=VALUE``, the lab's methods) to whichever has it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

from neocorrag_core.lm.prompt_budget import (
    DEFAULT_PASSAGE_TOKENS,
    DEFAULT_PROMPT_TOKENS,
    DEFAULT_QUESTION_TOKENS,
    DEFAULT_TITLE_TOKENS,
)
from neocorrag_core.validation import (
    Settings,
    check_bool,
    check_choice,
    check_int,
    check_number,
    with_changes,
)

ResidualMode = Literal["lm", "entities", "repeat"]
SelectionMode = Literal["beam", "rank", "embedding"]
AggregationMode = Literal["max", "sum"]
RankingMode = Literal["mixed", "chains"]
PromptContext = Literal["passages", "sentences"]


@dataclass(frozen=True)
class ReformulationTuning(Settings):
    """The reformulation loop's research settings: the paper's controls, the evidence and
    ranking rules chosen on tune halves, prompt budgets.

    ``EvidenceReformulator(config, tuning=ReformulationTuning(...))`` takes them; the adapters
    leave them at these defaults (share such an engine with ``reformulator=``). The lab's
    methods and the eval's ``--evireform KEY=VALUE`` name a field of either object.

    Retrieval
        residual_retrieval: ``False`` is the paper's *rerank* control: residual queries
            only re-score the first pool, nothing new is retrieved.

    Evidence selection (stage b)
        max_evidence: propositions selected per round.
        evidence_margin: only propositions whose cosine to the question is within this
            margin of the best candidate's are offered (``None``: no floor), so a first
            pool with one relevant passage does not fill the evidence, and the bridge
            entities drawn from it, with noise; a tighter margin writes fewer residual
            queries at about the same recall.
        relation_evidence: facts that state a relation word the question still asks for
            and name a bridge entity, from passages that name a question entity (or a bridge
            already searched), come first, one per passage in turn; sentences that state
            such a relation become candidates too (triple extractors miss relations, and
            the bridge hides behind them). ``False``: the paper's order (cosine only).
        first_hop_facts: next (after the relation-stating facts), the facts that name a
            bridge entity from the passages whose title the question names (its first
            hop: "Decade (Neil Young album)" for "... the performer of Decade?"), one per
            passage in turn, whatever their cosine to the question: they complete more
            chains and lose none.
        max_selection_candidates: propositions offered to the LM, best first.
        selection_passages / max_passage_chars: passages shown in the selection prompt.
        prompt_context: ``"passages"`` (cut to ``max_passage_chars``) or ``"sentences"``
            (only the sentences that mention an entity of a candidate the passage supplied),
            as ``MinerTuning.prompt_context``.

    Residual queries (stage c)
        relation_words: a bridge-entity query carries the question's relation words that
            the evidence has not covered yet ("Mountrail County capital", kind
            ``"template"``), so it reaches the next hop instead of any passage that
            mentions the entity; ``False``: the bare entity (kind ``"entities"``).
        max_relation_words: at most this many relation words per query.
        question_entity_queries: in the first round, up to this many names of the
            question that no passage of the first search names are searched too (with
            the open relation words; kind ``"question"``), on top of
            ``max_residual_queries``: a chain whose first hop the first search missed
            cannot be reached through any bridge. ``0`` turns it off.
        fill_with_entities: with ``"lm"``, free query slots go to bridge entities that
            the LM's queries do not name (our addition: the 0.5B LM often writes a
            single usable query, and the next hop hides behind another entity).
        max_query_tokens: new-token cap of the query-writing call.
        max_query_words: longer generated lines are not queries and are skipped.
        max_question_tokens / max_title_tokens / max_passage_tokens / max_prompt_tokens:
            token budgets of the selection and query-writing prompts, as in ``MinerConfig``
            (:mod:`neocorrag_core.lm.prompt_budget`): each passage text and each evidence fact
            gets ``max_passage_tokens``; a prompt that cannot fit takes the no-LM path.

    Scoring (stages d-f)
        score_temperature: each query's similarities become a unit of mass by a softmax at
            this temperature; ``None`` = min-max scaling then sum to 1. The paper does not
            give its normalization: min-max spreads the mass over every weak match and
            the final top-k loses recall, which a softmax at 0.1 keeps.
        original_weight: share of the score mass kept on the original question; the
            residual queries share the rest equally (paper: 0.5).
        propagation_weight: share of each proposition's score that comes from its
            shared-entity neighbours after one propagation round (paper: 0.5).
        aggregation: passage score = ``"max"`` (default) or ``"sum"`` of its propositions'.
        ranking: ``"chains"`` (default): the final top-k keeps each found hop together with
            the passage its bridge came from (:mod:`~neocorrag_core.evireform.ranking`), the
            rest by score; ``"mixed"``: the paper's top-k by score alone.
        chain_lead: with ``"chains"``, the best-scored passages kept before any hop.
        max_anchors: with ``"chains"``, up to this many passages whose title the question
            names (:func:`~neocorrag_core.evireform.ranking.question_anchors`) enter the
            top-k before anything else; ``0`` turns anchors off. 3 finds the most complete
            chains; fewer anchors lose some.
        follow_titles: with ``"chains"``, slots left after the anchors, the lead and the
            links go first to passages whose title a chosen passage names (the hop it
            points to; :func:`~neocorrag_core.evireform.ranking.title_pointers`): they
            complete more chains and lose none.
        follow_names: with ``"chains"``, slots left after the title pointers go first to
            passages of the first search that share a name (two or more capitalised
            words, or the title; not one the question gives) with a chosen passage
            (:func:`~neocorrag_core.evireform.ranking.shared_names`).
        max_per_page: with ``"chains"``, the pointer, shared-name and score steps pass
            over a passage whose title already fills this many chosen slots while
            another passage can take the slot; ``None`` = no cap. Both chosen on the tune
            halves of five dev files (3 more complete chains of 305, none lost).
    """

    residual_retrieval: bool = True
    max_evidence: int = 3
    evidence_margin: float | None = 0.1
    relation_evidence: bool = True
    first_hop_facts: bool = True
    max_selection_candidates: int = 40
    selection_passages: int = 5
    max_passage_chars: int = 400
    prompt_context: PromptContext = "passages"
    relation_words: bool = True
    max_relation_words: int = 3
    question_entity_queries: int = 1
    fill_with_entities: bool = True
    max_query_tokens: int = 64
    max_query_words: int = 16
    max_question_tokens: int = DEFAULT_QUESTION_TOKENS
    max_title_tokens: int = DEFAULT_TITLE_TOKENS
    max_passage_tokens: int = DEFAULT_PASSAGE_TOKENS
    max_prompt_tokens: int = DEFAULT_PROMPT_TOKENS
    score_temperature: float | None = 0.1
    original_weight: float = 0.5
    propagation_weight: float = 0.5
    aggregation: AggregationMode = "max"
    ranking: RankingMode = "chains"
    chain_lead: int = 1
    max_anchors: int = 3
    follow_titles: bool = True
    follow_names: bool = True
    max_per_page: int | None = 2

    def __post_init__(self) -> None:
        owner = "ReformulationTuning"
        check_choice(owner, "aggregation", self.aggregation, ("max", "sum"))
        check_choice(owner, "ranking", self.ranking, ("mixed", "chains"))
        check_choice(owner, "prompt_context", self.prompt_context, ("passages", "sentences"))
        for name in (
            "max_evidence",
            "max_selection_candidates",
            "max_query_tokens",
            "max_query_words",
            "max_question_tokens",
            "max_title_tokens",
            "max_passage_tokens",
            "max_prompt_tokens",
            "max_relation_words",
        ):
            check_int(owner, name, getattr(self, name), minimum=1)
        for name in (
            "selection_passages",
            "chain_lead",
            "max_anchors",
            "question_entity_queries",
            "max_passage_chars",
        ):
            check_int(owner, name, getattr(self, name), minimum=0)
        check_int(owner, "max_per_page", self.max_per_page, minimum=1, optional=True)
        for name in (
            "residual_retrieval",
            "fill_with_entities",
            "relation_words",
            "relation_evidence",
            "follow_titles",
            "follow_names",
            "first_hop_facts",
        ):
            check_bool(owner, name, getattr(self, name))
        check_number(owner, "evidence_margin", self.evidence_margin, low=0.0, optional=True)
        for name in ("original_weight", "propagation_weight"):
            check_number(owner, name, getattr(self, name), low=0.0, high=1.0)
        check_number(
            owner, "score_temperature", self.score_temperature, low=0.0, low_open=True,
            optional=True,
        )  # fmt: skip
        self._plain_numbers()


@dataclass(frozen=True)
class ReformulationConfig(Settings):
    """What a user chooses of the reformulation loop: how much it searches, whether the LM
    writes, and its token budget. Defaults follow the EviReform paper where it has one;
    research settings: :class:`ReformulationTuning`.

    Retrieval
        first_k: passages asked of the search for the original question (``None``: the
            ``k`` the caller asked for). A deeper first search is not better: its extra
            passages change the bridges searched, and complete chains are lost.
        residual_k: passages asked for each residual query (fewer or more are no better
            than 5).
        rounds: reformulation rounds at most (paper's main setting: 1). With
            ``ranking="chains"`` a later round's links only continue a chain already in the
            top-k (:func:`~neocorrag_core.evireform.ranking.chain_top_k`).
        adaptive_rounds: a round after the first runs only while the evidence leaves some
            relation word of the question open (:mod:`~neocorrag_core.text.relations`);
            ``False`` runs every round while new passages arrive.
        max_searches: calls of the search per question at most, the first included; a
            round's queries past it are not searched (``notes`` says so). ``None`` = no
            cap. The default leaves room for four rounds of the default queries.
        search_timeout: seconds the residual searches of a question may take in all,
            counted from the first search's answer (that one is waited for, as it would be
            without EviReform). A residual search still running then is given up: its
            results are missing from the ranking and ``notes`` names its query. ``None`` =
            wait for every search. A round's searches run concurrently (in worker threads
            for a sync search); a given-up sync search runs on in its thread and what it
            returns is discarded, an async one is cancelled.

    The LM (none by default)
        selection: ``"beam"`` (trie-constrained beam search over the proposition texts,
            like the chain decoder), ``"rank"`` (exact log-likelihood of every candidate),
            or ``"embedding"`` (cosine to the question; no LM).
        residual_queries: ``"lm"`` (the LM writes them; bridge entities when it writes
            nothing usable or the token budget is spent), ``"entities"`` (bridge entities
            only, no LM), or ``"repeat"`` (the paper's control: the original question
            again, no LM).
        max_residual_queries: at most this many per round (paper: 3).
        max_lm_tokens: prompt + generated tokens the LM may spend per question; a step
            whose worst-case cost would overrun it runs its no-LM fallback instead.
            ``None`` = unlimited.
    """

    research: ClassVar[type[Settings] | None] = ReformulationTuning

    first_k: int | None = None
    residual_k: int = 5
    rounds: int = 1
    adaptive_rounds: bool = True
    selection: SelectionMode = "embedding"
    residual_queries: ResidualMode = "entities"
    max_residual_queries: int = 3
    max_lm_tokens: int | None = 4000
    max_searches: int | None = 16
    search_timeout: float | None = 30.0

    def __post_init__(self) -> None:
        owner = "ReformulationConfig"
        check_int(owner, "max_searches", self.max_searches, minimum=1, optional=True)
        check_number(
            owner, "search_timeout", self.search_timeout, low=0.0, low_open=True, optional=True
        )
        check_int(owner, "first_k", self.first_k, minimum=1, optional=True)
        for name in ("residual_k", "rounds", "max_residual_queries"):
            check_int(owner, name, getattr(self, name), minimum=1)
        check_bool(owner, "adaptive_rounds", self.adaptive_rounds)
        check_choice(owner, "selection", self.selection, ("beam", "rank", "embedding"))
        check_choice(owner, "residual_queries", self.residual_queries, ("lm", "entities", "repeat"))
        check_int(owner, "max_lm_tokens", self.max_lm_tokens, minimum=0, optional=True)
        self._plain_numbers()

    @property
    def uses_lm(self) -> bool:
        """Whether any step may write with the LM (selection or residual queries)."""
        if self.residual_queries == "repeat":
            return False
        return self.selection != "embedding" or self.residual_queries == "lm"


def reformulation_settings(
    config: ReformulationConfig | None = None,
    tuning: ReformulationTuning | None = None,
    changes: Mapping[str, Any] | None = None,
) -> tuple[ReformulationConfig, ReformulationTuning]:
    """``config`` and ``tuning`` (defaults when ``None``) with the flat ``changes`` (field
    name -> value, of either class) applied; an unknown name is a ``ConfigError``."""
    return with_changes(
        config or ReformulationConfig(), tuning or ReformulationTuning(), changes or {}
    )


__all__ = [
    "AggregationMode",
    "RankingMode",
    "ReformulationConfig",
    "ReformulationTuning",
    "ResidualMode",
    "SelectionMode",
    "reformulation_settings",
]
