"""Settings of the evidence-state controller: :class:`BeliefConfig`, what a user chooses (when it
answers, its caps, how it measures), and :class:`BeliefTuning`, the research settings (the
paper's other thresholds, the belief update, the ablation switches) the lab varies."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from neocorrag_core.validation import (
    Settings,
    check_bool,
    check_choice,
    check_int,
    check_number,
    with_changes,
)

REFINE_MODES = ("none", "all", "first-search")
"""``BeliefConfig.refine_answer``: what the answer generator reads (every passage, the
refined workspace, or the refined first search and every later passage whole)."""

VERIFY_MODES = ("auto", "always")
"""``BeliefConfig.verify``: call the verifier only when it could change the decision, or at
every measured step (the paper's loop)."""


@dataclass(frozen=True)
class BeliefTuning(Settings):
    """The controller's research settings: the paper's other thresholds, the belief update's
    blend, and the ablation switches of its Table 4.

    ``BeliefController(..., tuning=BeliefTuning(...))`` takes them; the adapters leave them at
    these defaults (pass a ready ``controller=``). The lab's methods and the eval's
    ``--belief KEY=VALUE`` name a field of either object (:func:`belief_settings`).

    Thresholds
        conflict_threshold: evidence whose conflict belief reaches it is corrected (0.50).
        reliability_threshold: evidence whose reliability belief falls below it is
            corrected (0.30).
        min_retrieval_value: RETRIEVE only while the estimated value of another search
            reaches it (0.10).
        low_novelty: a search whose share of new passages is below it is followed by a
            REWRITE instead of another RETRIEVE with the same query style (0.20).

    Belief update
        blend: weight of the previous belief in the logit-space blend with the belief the
            new diagnostics imply (0: forget the past; the paper gives no value).
        correct_problems: ``False`` is the ablation without correction (no VERIFY).
        replace_dropped: ``False`` is the prune-only ablation: VERIFY drops without
            searching for replacements.
        live_answerability: ``False`` is the frozen-answerability ablation: the first
            step's answerability is reused for the whole episode.
        fitted_retrieval_value: ``True``: the value of another search is the expected
            gain of the fitted after-search model over the answerability; ``False``: the
            unfitted prior ``gap * (1 - answerability) * (1 - cost)``
            (:func:`~neocorrag_core.belief.rules.retrieval_value`).
    """

    conflict_threshold: float = 0.50
    reliability_threshold: float = 0.30
    min_retrieval_value: float = 0.10
    low_novelty: float = 0.20
    blend: float = 0.3
    correct_problems: bool = True
    replace_dropped: bool = True
    live_answerability: bool = True
    fitted_retrieval_value: bool = True

    def __post_init__(self) -> None:
        owner = "BeliefTuning"
        for name in (
            "conflict_threshold",
            "reliability_threshold",
            "min_retrieval_value",
            "low_novelty",
            "blend",
        ):
            check_number(owner, name, getattr(self, name), low=0.0, high=1.0)
        for name in (
            "correct_problems",
            "replace_dropped",
            "live_answerability",
            "fitted_retrieval_value",
        ):
            check_bool(owner, name, getattr(self, name))
        self._plain_numbers()


@dataclass(frozen=True)
class BeliefConfig(Settings):
    """What a user chooses of the controller: when it answers or abstains, its caps, and how
    it measures; defaults are BeliefRAG's (appendix A.4) where it has one. Research
    settings: :class:`BeliefTuning`.

    Answer or abstain
        answer_threshold: ANSWER once the calibrated answerability reaches it (paper: 0.50).
        abstain_below: when the controller runs out of useful actions it ABSTAINs if the
            answerability is below this, else it STOPs with a best-effort answer. The
            paper gives no value. 0.05: abstain only where a right answer is very
            unlikely. A calibrated answerability is about the generator's hit rate, which
            is near 0.1 for the bundled 0.5B on multi-hop questions, so 0.20 (the earlier
            prior) abstained on every MuSiQue tune question (docs/belief.md). Raise it
            when a wrong answer costs you more than no answer.

    Caps (every episode ends with a typed action when one is hit)
        k: passages asked of each search.
        max_rounds: searches per question (RETRIEVE, REWRITE and correction searches).
        max_tokens: model-facing tokens per question (contexts each time they are sent,
            verifier, writer and answer calls); a step that would overrun it is not taken.
        max_evidence: passages the workspace keeps (the best-ranked, in retrieval order);
            more are not shown to any model.
        max_corrections: VERIFY actions per question.
        min_searches: searches made before the first measurement (draft answer,
            verifier). Ours, not the paper's (which measures after every search): for a
            generator that answers better from more evidence whatever the evidence says
            (the 1.5B reader, docs/belief.md), measuring after the first search costs
            more tokens than the second search, and no measured signal predicted when
            that search pays. A scheduled search uses the writer's no-LM query
            (:meth:`~neocorrag_core.belief.LMQueryWriter.entity_query`) when it has one.
            1 (default): measure after every search, as in the paper.

    Measuring
        verify: ``"auto"`` (default): the verifier is called only when some reply of it
            could change the decision. After the draft answer and the local diagnostics,
            the controller bounds the answerability and the value of another search over
            every possible verifier reply (:func:`~neocorrag_core.belief.rules.verifier_needed`);
            when neither can cross its threshold, the call is skipped and the step's
            verifier numbers are ``None``. A correction (VERIFY) ends in a search for
            replacements, so it is skipped with the verifier when no search can be worth
            its cost. Our addition to the paper, which measures every step: with the
            shipped models for the bundled 0.5B the verifier never changes a decision, and
            it costs more tokens than the answer (docs/belief.md). ``"always"``: the
            paper's loop, one verifier call per measured step; use it with a verifier
            whose judgments the fitted models do not know (e.g. a source policy).
        refine_answer: what the answer generator reads. ``"none"`` (default): every
            passage of the workspace, as in the paper. ``"all"``: the workspace refined by
            NeocorRAG (the passages the miner keeps, cut to their evidence sentences;
            :class:`~neocorrag_core.belief.RefinedAnswerGenerator`). ``"first-search"``:
            the first search's passages (the question's own top-k, the noise NeocorRAG
            is built for) refined, the passages later searches added shown whole. The
            workspace, the verifier, the query writer and relevance see every passage
            whatever the mode. Ours, not the paper's (docs/belief.md, "Refining the
            answer's evidence").
    """

    research: ClassVar[type[Settings] | None] = BeliefTuning

    answer_threshold: float = 0.50
    abstain_below: float = 0.05
    k: int = 5
    max_rounds: int = 4
    max_tokens: int = 12000
    max_evidence: int = 8
    max_corrections: int = 2
    min_searches: int = 1
    verify: str = "auto"
    refine_answer: str = "none"

    def __post_init__(self) -> None:
        owner = "BeliefConfig"
        for name in ("answer_threshold", "abstain_below"):
            check_number(owner, name, getattr(self, name), low=0.0, high=1.0)
        for name in ("k", "max_rounds", "max_tokens", "max_evidence", "min_searches"):
            check_int(owner, name, getattr(self, name), minimum=1)
        check_int(owner, "max_corrections", self.max_corrections, minimum=0)
        check_choice(owner, "verify", self.verify, VERIFY_MODES)
        check_choice(owner, "refine_answer", self.refine_answer, REFINE_MODES)
        self._plain_numbers()


def belief_settings(
    config: BeliefConfig | None = None,
    tuning: BeliefTuning | None = None,
    changes: Mapping[str, Any] | None = None,
) -> tuple[BeliefConfig, BeliefTuning]:
    """``config`` and ``tuning`` (defaults when ``None``) with the flat ``changes`` (field
    name -> value, of either class) applied; an unknown name is a ``ConfigError``."""
    return with_changes(config or BeliefConfig(), tuning or BeliefTuning(), changes or {})


def default_verify(lm: Any, *, refitted: bool) -> str:
    """The ``verify`` mode of a controller built without one: ``"auto"`` where the fitted
    models know the generator, ``"always"`` where they do not.

    The shipped answerability and after-search files are fitted on a bundled LM's
    episodes, so they can say that no verifier reply matters only for that LM (``lm`` is
    ``None`` or a preset of :data:`~neocorrag_core.belief.calibrator.SHIPPED_MODELS`) or
    for models refitted on the user's own generator (``refitted``). With any other LM (a
    chat model such as a wrapped LangChain or LlamaIndex LLM, another local model) the
    verifier runs at every measured step, as in the paper, so its corrections are not
    skipped on the word of models fitted for another generator.
    """
    from .calibrator import SHIPPED_MODELS

    known = lm is None or (isinstance(lm, str) and lm in SHIPPED_MODELS)
    return "auto" if known or refitted else "always"


PRESET_SETTINGS: dict[str, dict[str, Any]] = {
    "qwen-1.5b": {"min_searches": 2, "max_corrections": 0, "refine_answer": "first-search"},
}
"""Bundled generator preset (``resolve_lm`` name) -> the :class:`BeliefConfig` fields chosen
for it on its own tune episodes (docs/belief.md, "The 1.5B reader's settings"). The 1.5B
answers better from a second search's passages whatever the evidence says, so it searches
twice before measuring; and the bundled verifier flagged no passage in any of its 99 tune
verifier calls, so with corrections open the verifier gate would pay a call (more tokens
than the answer) at nearly every step for a correction that never came. It answers from
the first search refined by NeocorRAG and the second search's passages whole: on its tune
episodes that was 0.9 F1 points better at 0.76x the tokens (docs/belief.md, "Refining the
answer's evidence")."""


def preset_settings(lm: Any) -> dict[str, Any]:
    """The :data:`PRESET_SETTINGS` of the generator ``lm`` (``None`` = the bundled default,
    a preset name); ``{}`` for any other LM."""
    from .calibrator import preset_key

    return dict(PRESET_SETTINGS.get(preset_key(lm), {}))


def default_config(lm: Any, *, refitted: bool) -> BeliefConfig:
    """The settings of a controller of the generator ``lm`` built without a config: the
    paper's defaults, :func:`default_verify`'s mode and the preset's own settings."""
    return BeliefConfig(verify=default_verify(lm, refitted=refitted), **preset_settings(lm))


def config_with_default_verify(
    config: BeliefConfig | None, lm: Any, *, refitted: bool
) -> BeliefConfig:
    """``config``, or :func:`default_config` for ``lm`` when it is ``None``."""
    if config is not None:
        return config
    return default_config(lm, refitted=refitted)


__all__ = [
    "PRESET_SETTINGS",
    "VERIFY_MODES",
    "BeliefConfig",
    "BeliefTuning",
    "belief_settings",
    "config_with_default_verify",
    "default_config",
    "default_verify",
    "preset_settings",
]
