"""The controller's ordered rules (BeliefRAG, appendix A.4), as one pure function.

In order: the searches scheduled before the first measurement (``min_searches``, ours);
finish a pending correction; correct problematic evidence (VERIFY); ANSWER when
the calibrated answerability reaches its threshold; RETRIEVE while another search is worth
its cost and the budget allows; REWRITE after a search that brought little new; else STOP
with a best-effort answer, or ABSTAIN when even that is unlikely to be right. Every
decision carries its reason in words, for the trajectory.
"""

from __future__ import annotations

from dataclasses import dataclass

from .config import BeliefConfig, BeliefTuning
from .types import Action, Belief, Decision, Diagnostics

DEFAULT_TUNING = BeliefTuning()
"""The research settings of a call that passes none."""


@dataclass(frozen=True)
class Budget:
    """What the episode has left when a decision is taken."""

    rounds_used: int
    tokens_used: int
    corrections_used: int
    pending_correction: int = 0
    """Passages dropped by the last VERIFY that were not replaced yet."""
    searched: bool = False
    """Whether any search has run (the first decision of an episode is always a search)."""
    rewrote_last: bool = False
    """Whether the last action was a REWRITE (never two in a row)."""
    scheduled_left: int = 0
    """Searches still scheduled before the first measurement (``min_searches``)."""
    room: bool = True
    """Whether the workspace has room for a search's new passages (``max_evidence``)."""

    def can_search(self, config: BeliefConfig, search_cost: int) -> bool:
        """A search round and the tokens to read its results are both left."""
        return (
            self.rounds_used < config.max_rounds
            and self.tokens_used + search_cost <= config.max_tokens
        )

    def can_add(self, config: BeliefConfig, search_cost: int) -> bool:
        """A search is left (:meth:`can_search`) and could add evidence: a full workspace
        keeps none of its passages, so only a correction's replacement search, which
        follows the drops that make room, is worth running then."""
        return self.room and self.can_search(config, search_cost)


def retrieval_value(
    belief: Belief, answerability: float, after_search: float | None = None
) -> float:
    """The estimated value of one more search.

    With ``after_search`` (the fitted model's chance that the answer is right after one
    more search): the expected gain in that chance, discounted by the budget spent,
    ``max(0, after_search - answerability) * (1 - cost)``. BeliefRAG fits its
    retrieval-value model per backbone; ours is fitted by the same script as the
    calibrator, on the same split (``docs/belief.md``).

    Without it, the unfitted prior: a gap must be believed, the answer must be in doubt,
    and budget must remain, ``gap * (1 - answerability) * (1 - cost)``.
    """
    if after_search is not None:
        return max(0.0, after_search - answerability) * (1.0 - belief.cost)
    return belief.gap * (1.0 - answerability) * (1.0 - belief.cost)


@dataclass(frozen=True)
class VerifierCheck:
    """Whether a step needs the verifier call, and why (in words, for the trajectory)."""

    needed: bool
    why: str


def verifier_needed(
    answerability: tuple[float, float],
    budget: Budget,
    config: BeliefConfig,
    *,
    cost: float,
    search_cost: int,
    after_search: tuple[float, float] | None = None,
    tuning: BeliefTuning = DEFAULT_TUNING,
) -> VerifierCheck:
    """Whether any verifier reply could change the next decision (``verify="auto"``).

    ``answerability`` and ``after_search`` are the lowest and highest values the fitted
    models can take over every verifier reply (the local diagnostics fixed;
    :meth:`~neocorrag_core.belief.AnswerabilityCalibrator.predict_range`); ``cost`` is the
    budget share spent before the call. The verifier is needed when the answerability
    range spans the ANSWER or the ABSTAIN threshold, when the best case of another search
    reaches ``min_retrieval_value`` (it could lead to RETRIEVE, or to a correction, whose
    replacement search is such a search), or when a correction could drop passages with
    no search after it (prune-only, or no search left), a change the fitted models do not
    value. Otherwise every reply leads to the same action, and the call is skipped. With
    ``verify="always"`` it is always needed (the paper's loop).
    """
    if config.verify == "always":
        return VerifierCheck(True, "verify='always'")
    low, high = answerability
    for threshold, name in (
        (config.answer_threshold, "answer"),
        (config.abstain_below, "abstain"),
    ):
        if low < threshold <= high:
            return VerifierCheck(
                True,
                f"answerability {low:.2f}-{high:.2f} spans the {name} threshold {threshold:.2f}",
            )
    can_search = budget.can_search(config, search_cost)
    correction_open = tuning.correct_problems and budget.corrections_used < config.max_corrections
    if correction_open and not (tuning.replace_dropped and can_search):
        return VerifierCheck(True, "a correction could drop passages with no search after it")
    if budget.can_add(config, search_cost) or (correction_open and can_search):
        gain = max(0.0, after_search[1] - low) if after_search is not None else 1.0 - low
        best = gain * (1.0 - min(max(cost, 0.0), 1.0))
        if best >= tuning.min_retrieval_value:
            return VerifierCheck(True, f"a search could be worth up to {best:.2f}")
        searching = (
            f"a search (or a correction's replacement search) is worth at most {best:.2f} "
            f"< {tuning.min_retrieval_value:.2f}"
        )
    elif can_search:
        searching = (
            f"the workspace is full ({config.max_evidence} passages) and no correction is "
            "left to make room"
        )
    else:
        searching = "no search is left in the budget"
    return VerifierCheck(
        False,
        f"verifier not called: whatever it says, answerability stays in "
        f"{low:.2f}-{high:.2f} and {searching}",
    )


def decide(
    belief: Belief,
    diagnostics: Diagnostics,
    answerability: float,
    budget: Budget,
    config: BeliefConfig,
    *,
    search_cost: int,
    after_search: float | None = None,
    tuning: BeliefTuning = DEFAULT_TUNING,
) -> Decision:
    """The next action; ``search_cost`` is the tokens a search round is expected to add,
    ``after_search`` the fitted chance of a right answer after one more search (``None``:
    the prior retrieval value, see :func:`retrieval_value`)."""
    can_search = budget.can_search(config, search_cost)
    if not budget.searched:
        if can_search:
            return Decision(Action.RETRIEVE, "first retrieval for the question")
        return Decision(Action.ABSTAIN, "no budget for even one retrieval")

    if budget.scheduled_left and budget.can_add(config, search_cost):
        return Decision(
            Action.RETRIEVE,
            f"scheduled search {budget.rounds_used + 1} of {config.min_searches} "
            "(min_searches): this generator answers better from more evidence, and a "
            "search is cheaper than measuring the evidence first",
        )

    if budget.pending_correction and tuning.replace_dropped and can_search:
        return Decision(
            Action.RETRIEVE,
            f"finish the correction: retrieve replacements for {budget.pending_correction} "
            "dropped passage(s)",
        )

    problem = _problem(belief, tuning)
    if (
        problem
        and tuning.correct_problems
        and diagnostics.drop_ids
        and budget.corrections_used < config.max_corrections
    ):
        flagged = ", ".join(diagnostics.drop_ids)
        return Decision(Action.VERIFY, f"{problem}; drop the flagged passage(s) {flagged}")

    if answerability >= config.answer_threshold:
        return Decision(
            Action.ANSWER,
            f"answerability {answerability:.2f} >= {config.answer_threshold:.2f}",
        )

    value = retrieval_value(belief, answerability, after_search)
    if not can_search:
        return _end(answerability, config, "budget or round cap reached")
    if not budget.room:
        why = f"the workspace is full ({config.max_evidence} passages): a search could add nothing"
        return _end(answerability, config, why)
    if value >= tuning.min_retrieval_value:
        gap = f": {diagnostics.missing_fact}" if diagnostics.missing_fact else ""
        why = (
            f"gap {belief.gap:.2f}{gap}"
            if after_search is None
            else f"answerability {answerability:.2f} -> {after_search:.2f} after a search{gap}"
        )
        return Decision(
            Action.RETRIEVE,
            f"retrieval value {value:.2f} >= {tuning.min_retrieval_value:.2f} ({why})",
        )
    if diagnostics.novelty < tuning.low_novelty and not budget.rewrote_last:
        return Decision(
            Action.REWRITE,
            f"retrieval value {value:.2f} is low and the last search brought little new "
            f"(novelty {diagnostics.novelty:.2f} < {tuning.low_novelty:.2f}); reword the query",
        )
    return _end(
        answerability, config, f"retrieval value {value:.2f} < {tuning.min_retrieval_value:.2f}"
    )


def _problem(belief: Belief, tuning: BeliefTuning) -> str:
    if belief.conflict >= tuning.conflict_threshold:
        return f"conflict {belief.conflict:.2f} >= {tuning.conflict_threshold:.2f}"
    if belief.reliability < tuning.reliability_threshold:
        return f"reliability {belief.reliability:.2f} < {tuning.reliability_threshold:.2f}"
    return ""


def out_of_budget(answerability: float, config: BeliefConfig) -> Decision:
    """The end of an episode whose next measurement would pass the token cap: STOP with
    the last draft, or ABSTAIN when its answerability is below ``abstain_below``."""
    return _end(
        answerability,
        config,
        "measuring the changed evidence would pass the token budget; the last draft stands",
    )


def _end(answerability: float, config: BeliefConfig, why: str) -> Decision:
    if answerability < config.abstain_below:
        return Decision(
            Action.ABSTAIN,
            f"{why}; answerability {answerability:.2f} < {config.abstain_below:.2f}: abstain",
        )
    return Decision(Action.STOP, f"{why}; best-effort answer (answerability {answerability:.2f})")


__all__ = [
    "Budget",
    "VerifierCheck",
    "decide",
    "out_of_budget",
    "retrieval_value",
    "verifier_needed",
]
