"""The plain values the evidence-state controller passes between its stages.

Diagnostics are measured, the belief is derived from them, a decision is taken from the
belief, and each step of an episode records all three with its cost; the result holds
the whole trajectory. Every field is a number in ``[0, 1]`` unless it says otherwise.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from neocorrag_core.cost import Cost
from neocorrag_core.types import Passage


class Action(str, Enum):
    """What the controller does next (BeliefRAG's action set)."""

    RETRIEVE = "retrieve"
    """Search with the evidence-aware query (or the question, in round 1)."""
    REWRITE = "rewrite"
    """Search with a reworded query after a search that brought little new."""
    VERIFY = "verify"
    """Drop the passages the verifier flagged, then retrieve replacements."""
    ANSWER = "answer"
    """Answer now: the calibrated answerability passed its threshold."""
    STOP = "stop"
    """Stop searching and give the best-effort answer."""
    ABSTAIN = "abstain"
    """Stop without an answer: the evidence is judged too weak to answer from."""

    @property
    def terminal(self) -> bool:
        """Whether the action ends the episode."""
        return self in (Action.ANSWER, Action.STOP, Action.ABSTAIN)


DIAGNOSTIC_NAMES = ("relevance", "novelty", "cost", "support", "conflict", "uncertainty", "gap")
"""The seven diagnostics of the paper, in the order calibrator files list them."""

VERIFIER_NAMES = ("support", "conflict", "uncertainty", "gap")
"""The diagnostics that come from the verifier call (the rest are measured locally)."""

FEATURE_NAMES = (*DIAGNOSTIC_NAMES, "answer_confidence")
"""Every numeric diagnostic a calibrator can read (:meth:`Diagnostics.features` keys), in
the order fitted files list them."""


@dataclass(frozen=True)
class Diagnostics:
    """What is measured before each decision.

    Local: ``relevance`` (calibrated retrieval relevance of the kept evidence), ``novelty``
    (share of the last retrieval that was new to the workspace; 1 before any), ``cost``
    (tokens spent over the budget), ``answer_confidence`` (the generator's mean token
    probability on a draft answer, when the local LM exposes it; ``None`` otherwise).
    From one verifier call: ``support``, ``conflict``, ``uncertainty``, ``gap`` (how
    likely a required fact is missing), ``missing_fact`` (which one, in words) and
    ``drop_ids`` (passages the verifier calls misleading or useless). The four numbers
    are ``None`` on a step where the controller did not call the verifier because no
    reply could have changed its decision (``BeliefConfig.verify="auto"``).
    """

    relevance: float
    novelty: float
    cost: float
    support: float | None
    conflict: float | None
    uncertainty: float | None
    gap: float | None
    missing_fact: str = ""
    drop_ids: tuple[str, ...] = ()
    answer_confidence: float | None = None

    @property
    def verified(self) -> bool:
        """Whether the verifier judged this evidence (its four numbers are measured)."""
        return all(getattr(self, name) is not None for name in VERIFIER_NAMES)

    def features(self) -> dict[str, float]:
        """The measured numeric diagnostics by name: the verifier's four only when it was
        called, ``answer_confidence`` only when the LM exposes it. A model reading these
        takes a missing one at its training mean."""
        out: dict[str, float] = {}
        for name in FEATURE_NAMES:
            value = getattr(self, name)
            if value is not None:
                out[name] = float(value)
        return out


BELIEF_NAMES = ("sufficiency", "reliability", "conflict", "uncertainty", "gap", "cost")
"""The six belief dimensions."""


@dataclass(frozen=True)
class Belief:
    """The evidence state over BeliefRAG's six dimensions.

    ``sufficiency``: the kept evidence answers the question; ``reliability``: it can be
    trusted; ``conflict``: it contradicts itself; ``uncertainty``: the answer is unsure;
    ``gap``: a required fact is still missing; ``cost``: share of the budget spent
    (observed, not inferred).
    """

    sufficiency: float = 0.5
    reliability: float = 0.5
    conflict: float = 0.5
    uncertainty: float = 0.5
    gap: float = 0.5
    cost: float = 0.0

    def as_dict(self) -> dict[str, float]:
        """The six dimensions by name."""
        return {name: float(getattr(self, name)) for name in BELIEF_NAMES}


@dataclass(frozen=True)
class Decision:
    """One action and the rule (in words) that chose it."""

    action: Action
    reason: str
    query: str | None = None
    """The query a RETRIEVE / REWRITE / VERIFY step searches with."""


@dataclass(frozen=True)
class Mutation:
    """One logged change of the evidence workspace."""

    kind: str
    """``"add"`` or ``"drop"``."""
    passage_ids: tuple[str, ...]
    step: int
    reason: str


@dataclass
class Step(Cost):
    """One step of an episode: what was measured, believed and done, and what it cost."""

    index: int
    diagnostics: Diagnostics
    belief: Belief
    answerability: float
    retrieval_value: float
    decision: Decision
    evidence_ids: tuple[str, ...] = ()
    """The workspace after the step's action."""
    retrieved_ids: tuple[str, ...] = ()
    """What the step's search returned (before the workspace refused dropped ids)."""
    draft_answer: str = ""
    """The draft answer measured at this step (empty when the step measured nothing);
    the calibrator's fit script labels each step's diagnostics by whether it is right."""
    verified: bool = False
    """Whether the verifier was called at this step (``BeliefConfig.verify``)."""
    answer_ids: tuple[str, ...] = ()
    """The passages the step's draft answer read: the workspace, or with
    ``BeliefConfig.refine_answer`` its refined part (empty when the step measured nothing)."""
    seconds: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready record of the step (for traces, metadata and reports)."""
        return {
            "step": self.index,
            "action": self.decision.action.value,
            "reason": self.decision.reason,
            "query": self.decision.query,
            "diagnostics": self.diagnostics.features()
            | {
                "missing_fact": self.diagnostics.missing_fact,
                "drop_ids": list(self.diagnostics.drop_ids),
            },
            "verified": self.verified,
            "belief": self.belief.as_dict(),
            "answerability": self.answerability,
            "retrieval_value": self.retrieval_value,
            "evidence_ids": list(self.evidence_ids),
            "retrieved_ids": list(self.retrieved_ids),
            "draft_answer": self.draft_answer,
            "answer_ids": list(self.answer_ids),
            "prompt_tokens": self.prompt_tokens,
            "generated_tokens": self.generated_tokens,
            "seconds": self.seconds,
        }


@dataclass
class BeliefResult(Cost):
    """The end of one episode: the answer or the abstention, the evidence, the trajectory.

    The cost is ``prompt_tokens`` and ``generated_tokens`` (their sum ``lm_tokens``, from
    :class:`~neocorrag_core.cost.Cost`): every prompt, with every passage each time it was
    sent to a model (verifier, writer, answer), and every generated token; the paper's
    cost accounting. ``abstained`` is ``True`` exactly when ``answer`` is ``None``.
    """

    question: str
    answer: str | None
    abstained: bool
    final_action: Action
    evidence: list[Passage]
    steps: list[Step] = field(default_factory=list)
    mutations: list[Mutation] = field(default_factory=list)
    retrieval_rounds: int = 0

    @property
    def trajectory(self) -> list[dict[str, Any]]:
        """Every step as a JSON-ready dict, in order."""
        return [step.as_dict() for step in self.steps]

    def as_dict(self) -> dict[str, Any]:
        """The episode as JSON-ready values, everything but the evidence passages (their
        ids are in the trajectory): what the adapters return beside their own documents."""
        return {
            "question": self.question,
            "answer": self.answer,
            "abstained": self.abstained,
            "final_action": self.final_action.value,
            "retrieval_rounds": self.retrieval_rounds,
            "tokens": {
                "prompt": self.prompt_tokens,
                "generated": self.generated_tokens,
                "total": self.prompt_tokens + self.generated_tokens,
            },
            "trajectory": self.trajectory,
            "mutations": [
                {
                    "kind": m.kind,
                    "passage_ids": list(m.passage_ids),
                    "step": m.step,
                    "reason": m.reason,
                }
                for m in self.mutations
            ],
        }


__all__ = [
    "BELIEF_NAMES",
    "DIAGNOSTIC_NAMES",
    "FEATURE_NAMES",
    "VERIFIER_NAMES",
    "Action",
    "Belief",
    "BeliefResult",
    "Decision",
    "Diagnostics",
    "Mutation",
    "Step",
]
