"""The evidence-state controller (BeliefRAG): decide per question whether to search again,
fix the evidence, answer, or abstain.

One module per concept: ``types`` (the values passed around), ``config`` (thresholds,
caps, ablation switches), ``workspace`` (the only place evidence changes), ``state`` (the
belief update), ``calibrator`` (answerability), ``fitting`` (refitting the calibrator on
your own episodes; how the shipped files are selected is the development lab's),
``rules`` (the ordered controller rules), ``components`` (what the controller asks of
models), ``controller`` (the episode loop, sync and async); the model-backed
components: ``verifier``, ``answer``, ``writer``, ``relevance``, built together by
``defaults``; NeocorRAG in the loop: ``chains`` (chains for the verifier) and
``refined_answer`` (the refined evidence for the answer generator); ``options`` (the
framework adapters' keywords, the controller they build and their episode, written once).
"""

from .answer import LMAnswerGenerator
from .calibrator import (
    AFTER_SEARCH_FILE,
    AnswerabilityCalibrator,
    brier_score,
    expected_calibration_error,
    reliability_bins,
)
from .chains import ChainEvidenceVerifier
from .components import (
    AnswerGenerator,
    DraftAnswer,
    EntityQueryWriter,
    QueryWriter,
    RelevanceScorer,
    Usage,
    UsageTally,
    Verifier,
    VerifierReply,
)
from .config import (
    PRESET_SETTINGS,
    VERIFY_MODES,
    BeliefConfig,
    BeliefTuning,
    config_with_default_verify,
    default_config,
    default_verify,
    preset_settings,
)
from .controller import BeliefController
from .defaults import BeliefComponents, default_components
from .fitting import (
    CalibrationRow,
    fit_from_episodes,
    fit_from_records,
    fit_split,
    rows_from_trajectories,
)
from .refined_answer import RefinedAnswerGenerator
from .relevance import EmbeddingRelevance
from .rules import Budget, VerifierCheck, decide, retrieval_value, verifier_needed
from .state import PRIOR_COEFFICIENTS, implied_belief, update_belief
from .types import Action, Belief, BeliefResult, Decision, Diagnostics, Mutation, Step
from .verifier import LMVerifier, PromptBudget, VerifierStats
from .workspace import Added, EvidenceWorkspace
from .writer import LMQueryWriter

__all__ = [
    "AFTER_SEARCH_FILE",
    "PRESET_SETTINGS",
    "PRIOR_COEFFICIENTS",
    "VERIFY_MODES",
    "Action",
    "Added",
    "AnswerGenerator",
    "AnswerabilityCalibrator",
    "Belief",
    "BeliefComponents",
    "BeliefConfig",
    "BeliefController",
    "BeliefResult",
    "BeliefTuning",
    "Budget",
    "CalibrationRow",
    "ChainEvidenceVerifier",
    "Decision",
    "Diagnostics",
    "DraftAnswer",
    "EmbeddingRelevance",
    "EntityQueryWriter",
    "EvidenceWorkspace",
    "LMAnswerGenerator",
    "LMQueryWriter",
    "LMVerifier",
    "Mutation",
    "PromptBudget",
    "QueryWriter",
    "RefinedAnswerGenerator",
    "RelevanceScorer",
    "Step",
    "Usage",
    "UsageTally",
    "Verifier",
    "VerifierCheck",
    "VerifierReply",
    "VerifierStats",
    "brier_score",
    "config_with_default_verify",
    "decide",
    "default_components",
    "default_config",
    "default_verify",
    "expected_calibration_error",
    "fit_from_episodes",
    "fit_from_records",
    "fit_split",
    "implied_belief",
    "preset_settings",
    "reliability_bins",
    "retrieval_value",
    "rows_from_trajectories",
    "update_belief",
    "verifier_needed",
]
