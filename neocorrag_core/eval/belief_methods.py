"""The evidence-state controller in the benchmark: ``belief``.

* ``belief``: :class:`~neocorrag_core.belief.BeliefController` with its defaults (and the
  preset settings of the run's reader, :data:`~neocorrag_core.belief.PRESET_SETTINGS`),
  changed by ``--belief KEY=VALUE``.

It answers by itself, with the run's reader LM as the answer generator, so the runner
does not call its reader; the verifier and the query writer run on ``--lm``, the caps
are those of :class:`~neocorrag_core.belief.BeliefConfig`, and tokens are counted as the
paper counts them (every prompt with its contexts, each time it is sent, plus generated
tokens). Its first search asks the question itself, which is the shared top-k: it is
served from ``MethodInput.passages``.

The baselines it is measured against (``closed-book``, ``single-shot``, ``iterative``)
and the paper's ablations live in the development lab (``benchmarks/neocorrag_lab``);
they build on :func:`shared_components`, :func:`controller` and
:func:`controller_version` here.

The version of a controller's records (:func:`controller_version`) names the prompt
versions of its LM components (they stay beside their prompts in ``belief/answer.py``,
``verifier.py`` and ``writer.py``, and are also recorded in a fitted calibrator's
provenance), the fitted models it loads, and the eval-only versions below.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from neocorrag_core.belief import (
    AFTER_SEARCH_FILE,
    AnswerabilityCalibrator,
    BeliefComponents,
    BeliefConfig,
    BeliefController,
    BeliefResult,
    PromptBudget,
    default_components,
)
from neocorrag_core.belief.answer import ANSWER_PROMPT_VERSION, LMAnswerGenerator
from neocorrag_core.belief.calibrator import shipped_pair
from neocorrag_core.belief.components import Verifier
from neocorrag_core.belief.config import BeliefTuning, belief_settings, preset_settings
from neocorrag_core.belief.defaults import answer_miner as default_answer_miner
from neocorrag_core.belief.verifier import VERIFIER_PROMPT_VERSION
from neocorrag_core.belief.writer import REWRITE_PROMPT_VERSION
from neocorrag_core.chains.miner import EvidenceChainMiner
from neocorrag_core.eval.protocol import BuildContext, MethodInput, MethodOutput, SearchFn
from neocorrag_core.eval.refiners import MINER_OUTPUT_VERSION
from neocorrag_core.models import LazyModels
from neocorrag_core.triples import MetadataTripleSource
from neocorrag_core.types import Passage

BELIEF_METHODS = ("belief",)
"""The product's controller methods."""

VERIFY_GATE_VERSION = "verify-auto-1"
"""Part of the version of the controller methods that skip the verifier when no reply could
change the decision (``BeliefConfig.verify="auto"``); the lab's ``belief-always-verify``
runs the measuring of the earlier versions, so its records keep their version."""

ENTITY_QUERY_VERSION = "entity-query-3"
"""The no-LM next-hop query rules (:func:`~neocorrag_core.belief.writer.entity_next_query`)
in a controller's records where the run schedules searches (``min_searches > 1``); bump on
any change of those rules. ``entity-query-1``: bridges in passage order;
``entity-query-2``: the relation-first evidence order; ``entity-query-3``: names cover
relation words only by their own letters (:mod:`~neocorrag_core.text.relations`)."""

REFINED_ANSWER_VERSION = "refined-answer-1"
"""How the answer's evidence is refined
(:func:`~neocorrag_core.belief.refined_answer.refine_for_answer`), in the records of a
controller whose generator reads the refined evidence; bump on any change."""


@dataclass(frozen=True)
class Shared:
    """What every controller method of one run shares: the components, the calibrator and
    the after-search model (each file read once), the caps."""

    components: BeliefComponents
    calibrator: AnswerabilityCalibrator
    after_search: AnswerabilityCalibrator
    config: BeliefConfig
    tuning: BeliefTuning


def first_round_search(call: MethodInput) -> SearchFn:
    """``call.search``, except that the question itself at the shared k returns the shared
    top-k (so every method's first round sees the same passages, retrieved once)."""

    def search(query: str, k: int) -> list[Passage]:
        if query == call.question and k <= len(call.passages):
            return list(call.passages[:k])
        return call.search(query, k)

    return search


class BeliefMethod:
    """One controller episode per question (``belief``, or one of the lab's ablations:
    ``overrides`` are the fields of :class:`BeliefConfig` or its tuning the method changes)."""

    def __init__(
        self, name: str, controller: BeliefController, overrides: Mapping[str, Any] | None = None
    ) -> None:
        self.name = name
        changes = dict(overrides or {})
        research = {k: changes.pop(k) for k in list(changes) if k in BeliefTuning.field_names()}
        # An ablation's research settings are the controller's; the rest change each call.
        self.controller = controller.tuned(**research) if research else controller
        self.overrides = changes

    def refine(self, call: MethodInput) -> MethodOutput:
        """Run the episode; the controller's final evidence and answer are the output."""
        result = self.controller.run(call.question, self.search(call), **self.overrides)
        return belief_output(result, call, self.controller.calibrator.version)

    def search(self, call: MethodInput) -> SearchFn:
        """What the controller searches with: the run's search, the shared top-k reused for
        the question itself (:func:`first_round_search`)."""
        return first_round_search(call)


def belief_output(result: BeliefResult, call: MethodInput, calibrator: str = "") -> MethodOutput:
    """A controller result as a benchmark record (the trajectory goes into ``info``)."""
    retrieved: dict[str, None] = {}
    for step in result.steps:
        retrieved.update(dict.fromkeys(step.retrieved_ids))
    info = {
        "retrieval_rounds": result.retrieval_rounds,
        "final_action": result.final_action.value,
        "trajectory": result.trajectory,
        "mutations": [
            {"kind": m.kind, "ids": list(m.passage_ids), "step": m.step, "reason": m.reason}
            for m in result.mutations
        ],
        "first_pool_ids": [p.id for p in call.passages],
        "pool_ids": list(retrieved),
        "calibrator": calibrator,
    }
    return MethodOutput(
        passages=list(result.evidence),
        answer=result.answer,
        abstained=result.abstained,
        prompt_tokens=result.prompt_tokens,
        generated_tokens=result.generated_tokens,
        timings=dict(result.timings),
        info=info,
    )


def shared_components(context: BuildContext) -> Shared:
    """The components, fitted models and caps of the run's controller methods (built by the
    first one, then shared: one load of each model)."""
    found = context.shared.get("belief")
    if isinstance(found, Shared):
        return found
    config, tuning = run_settings(context.reader, context.belief_overrides)
    models = context.miner.models
    budget = PromptBudget(max_passages=config.max_evidence)
    components = default_components(
        models=models, config=config, budget=budget, triple_source=context.miner.triple_source
    )
    if context.reader_lm is not None:
        # The answering model is the run's reader, so ``--reader`` changes the generator
        # of every method here alike; the verifier and the writer stay on ``--lm``.
        reader_models = LazyModels(embedder=None, lm=context.reader_lm)
        generator = LMAnswerGenerator(models=reader_models, budget=budget)
        components = BeliefComponents(
            verifier=components.verifier,
            generator=generator,
            writer=components.writer,
            relevance=components.relevance,
        )
    pair = fitted_models(context.reader)
    shared = Shared(components, pair[0], pair[1], config, tuning)
    context.shared["belief"] = shared
    return shared


def answer_miner(context: BuildContext) -> EvidenceChainMiner:
    """The miner that refines a controller method's answer evidence: the run's, except where
    the run reads triples from passage metadata only (no ``--triples``); there, one with the
    run's settings and models and the default triple source (metadata, else the triple
    store, else spaCy), as a controller outside the benchmark gets it. ``--triples`` is not
    the way in: the query writer reads it too, which would change the baselines' searches."""
    miner = context.miner
    if not isinstance(miner.triple_source, MetadataTripleSource):
        return miner
    return default_answer_miner(miner.models, config=miner.config)


def controller(context: BuildContext, *, verifier: Verifier | None = None) -> BeliefController:
    """A controller over the run's shared components (:func:`shared_components`), its
    fitted models and caps; ``verifier`` replaces the shared verifier (the lab's
    ``belief-chains`` gives one that also reads the evidence chains)."""
    shared = shared_components(context)
    parts = shared.components.as_kwargs()
    if verifier is not None:
        parts["verifier"] = verifier
    return BeliefController(
        **parts,
        calibrator=shared.calibrator,
        after_search=shared.after_search,
        config=shared.config,
        tuning=shared.tuning,
        miner=answer_miner(context),
    )


def refines_answer(
    overrides: Mapping[str, Any] | None = None,
    reader: str = "default",
    belief_overrides: Mapping[str, Any] | None = None,
) -> bool:
    """Whether a controller method with config ``overrides`` answers from the refined
    evidence in a run with generator ``reader`` (its preset settings, ``--belief``, then the
    method's own)."""
    config, _ = belief_settings(*run_settings(reader, belief_overrides), overrides)
    return config.refine_answer != "none"


def fitted_models(reader: str) -> tuple[AnswerabilityCalibrator, AnswerabilityCalibrator]:
    """The answerability and after-search models of a run whose generator is the reader
    preset ``reader``: its own shipped pair when one is fitted, else the default LM's."""
    return shipped_pair(None if reader == "default" else reader) or (
        AnswerabilityCalibrator.load(),
        AnswerabilityCalibrator.load(shipped=AFTER_SEARCH_FILE),
    )


def run_settings(
    reader: str = "default", overrides: Mapping[str, Any] | None = None
) -> tuple[BeliefConfig, BeliefTuning]:
    """The controller settings of a run: the generator's own preset settings
    (``PRESET_SETTINGS``), as a controller built for it gets them, changed by ``--belief``
    (``overrides``, fields of either settings object) like any other field."""
    return belief_settings(BeliefConfig(**preset_settings(reader)), None, overrides)


def controller_version(
    overrides: Mapping[str, Any] | None = None,
    reader: str = "default",
    belief_overrides: Mapping[str, Any] | None = None,
    *,
    reads_chains: bool = False,
) -> str:
    """What a cached record of a controller method with config ``overrides`` depends on
    beyond the run settings: the prompt versions of its LM components, the versions of the
    fitted models its generator (``reader``) uses (so refitting them, or fitting a pair for
    that reader, or changing a prompt reruns the records it changes), the verifier gate,
    the reader's preset settings, the no-LM query rules where the run's settings (preset and
    ``belief_overrides``) schedule searches, and the miner's output and the refinement rules
    where the generator reads refined evidence (or, ``reads_chains``, the verifier reads
    the chain block)."""
    overrides = dict(overrides or {})
    parts = [ANSWER_PROMPT_VERSION, VERIFIER_PROMPT_VERSION, REWRITE_PROMPT_VERSION]
    calibrator, after = fitted_models(reader)
    parts.append(f"calibrator {calibrator.version}")
    parts.append(f"after-search {after.version}")
    if overrides.get("verify", "auto") == "auto":
        parts.append(VERIFY_GATE_VERSION)
    settings = preset_settings(reader)
    if settings:
        parts.append("preset " + " ".join(f"{k}={v}" for k, v in sorted(settings.items())))
    # Scheduled searches (min_searches > 1) use the no-LM next-hop query.
    if run_settings(reader, belief_overrides)[0].min_searches > 1:
        parts.append(ENTITY_QUERY_VERSION)
    if reads_chains:  # the verifier reads the miner's chain block
        parts.append(MINER_OUTPUT_VERSION)
    if refines_answer(overrides, reader, belief_overrides):
        parts += [MINER_OUTPUT_VERSION, REFINED_ANSWER_VERSION]  # the generator reads the miner's
    return " ".join(parts)


def method_version(
    name: str, reader: str = "default", belief_overrides: Mapping[str, Any] | None = None
) -> str:
    """The version of ``belief``'s records (:func:`controller_version` with no method
    overrides) in a run with generator ``reader`` and ``--belief`` settings."""
    return controller_version({}, reader, belief_overrides)


def build(name: str, context: BuildContext) -> BeliefMethod:
    """Factory of ``belief``: the run's controller (:func:`controller`) with its defaults."""
    if name not in BELIEF_METHODS:
        raise ValueError(f"unknown belief method {name!r}")
    return BeliefMethod(name, controller(context))


__all__ = [
    "BELIEF_METHODS",
    "ENTITY_QUERY_VERSION",
    "REFINED_ANSWER_VERSION",
    "VERIFY_GATE_VERSION",
    "BeliefMethod",
    "Shared",
    "answer_miner",
    "belief_output",
    "build",
    "controller",
    "controller_version",
    "first_round_search",
    "fitted_models",
    "method_version",
    "refines_answer",
    "run_settings",
    "shared_components",
]
