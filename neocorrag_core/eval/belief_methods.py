"""The evidence-state controller in the benchmark, with the baselines it is measured against.

* ``closed-book``: the answer generator with no documents.
* ``single-shot``: the shared top-k, read once by the answer generator.
* ``iterative``: fixed rounds of evidence-aware query writing and retrieval (the
  EviReform query writer the controller uses), then one answer: BeliefRAG's main
  baseline. It searches ``max_rounds`` times, or until the evidence workspace is full
  (a search could then keep nothing new) or the token cap is reached.
* ``belief``: :class:`~neocorrag_core.belief.BeliefController` with its defaults.
* ``belief-no-correction`` / ``belief-prune-only`` / ``belief-frozen-answerability``:
  the paper's ablations (no VERIFY; VERIFY drops without replacement; the first
  answerability reused for the whole episode).
* ``belief-chains``: ``belief`` whose verifier also sees the NeocorRAG evidence chains
  mined from the evidence (:class:`~neocorrag_core.belief.ChainEvidenceVerifier`).
* ``belief-refined`` / ``belief-unrefined``: ``belief`` whose answer generator reads the
  NeocorRAG-refined workspace, or every passage (``BeliefConfig.refine_answer`` ``"all"``
  or ``"none"`` whatever the generator's preset says; the run's miner).
* ``belief-refined-first``: the same with ``refine_answer="first-search"`` (the first
  search's passages refined, later ones whole).
* ``belief-always-verify``: ``belief`` with one verifier call at every measured step
  (``verify="always"``, the paper's loop; the default calls it only when a reply could
  change the decision).

Every method here answers by itself, with one shared answer generator (the reader's LM,
the same prompt), so the runner does not call its reader; all share the retriever, the
query writer, the verifier, the caps (:class:`~neocorrag_core.belief.BeliefConfig`) and
the token accounting (every prompt with its contexts, each time it is sent, plus
generated tokens). The first search of ``iterative`` and the controller asks the
question itself, which is the shared top-k: it is served from ``MethodInput.passages``.
"""

from __future__ import annotations

import time
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
    EvidenceWorkspace,
    PromptBudget,
    UsageTally,
    default_components,
)
from neocorrag_core.belief.answer import ANSWER_PROMPT_VERSION, LMAnswerGenerator
from neocorrag_core.belief.calibrator import shipped_pair
from neocorrag_core.belief.config import preset_settings
from neocorrag_core.belief.defaults import answer_miner
from neocorrag_core.belief.refined_answer import REFINED_ANSWER_VERSION
from neocorrag_core.belief.verifier import VERIFIER_PROMPT_VERSION
from neocorrag_core.belief.writer import ENTITY_QUERY_VERSION, REWRITE_PROMPT_VERSION
from neocorrag_core.chains.miner import EvidenceChainMiner
from neocorrag_core.eval.protocol import BuildContext, MethodInput, MethodOutput, SearchFn
from neocorrag_core.eval.refiners import MINER_OUTPUT_VERSION
from neocorrag_core.models import LazyModels
from neocorrag_core.search_calls import call_search
from neocorrag_core.triples import MetadataTripleSource
from neocorrag_core.types import Passage

BELIEF_METHODS = (
    "closed-book",
    "single-shot",
    "iterative",
    "belief",
    "belief-no-correction",
    "belief-prune-only",
    "belief-frozen-answerability",
    "belief-chains",
    "belief-refined",
    "belief-refined-first",
    "belief-unrefined",
    "belief-always-verify",
)

ABLATIONS: dict[str, dict[str, Any]] = {
    "belief": {},
    "belief-chains": {},
    "belief-refined": {"refine_answer": "all"},
    "belief-refined-first": {"refine_answer": "first-search"},
    "belief-unrefined": {"refine_answer": "none"},
    "belief-no-correction": {"correct_problems": False},
    "belief-prune-only": {"replace_dropped": False},
    "belief-frozen-answerability": {"live_answerability": False},
    "belief-always-verify": {"verify": "always"},
}

VERIFY_GATE_VERSION = "verify-auto-1"
"""Part of the version of the controller methods that skip the verifier when no reply could
change the decision (``BeliefConfig.verify="auto"``); ``belief-always-verify`` runs the
measuring of the earlier versions, so its records keep their version."""


@dataclass(frozen=True)
class Shared:
    """What every method of one run shares: the components, the calibrator and the
    after-search model (each file read once), the caps."""

    components: BeliefComponents
    calibrator: AnswerabilityCalibrator
    after_search: AnswerabilityCalibrator
    config: BeliefConfig


def first_round_search(call: MethodInput) -> SearchFn:
    """``call.search``, except that the question itself at the shared k returns the shared
    top-k (so every method's first round sees the same passages, retrieved once)."""

    def search(query: str, k: int) -> list[Passage]:
        if query == call.question and k <= len(call.passages):
            return list(call.passages[:k])
        return call.search(query, k)

    return search


def _answered(
    passages: list[Passage],
    answer: str | None,
    tally: UsageTally,
    started: float,
    info: dict[str, Any],
    abstained: bool = False,
) -> MethodOutput:
    return MethodOutput(
        passages=passages,
        answer=answer,
        abstained=abstained,
        prompt_tokens=tally.prompt,
        generated_tokens=tally.generated,
        timings={"total": time.perf_counter() - started},
        info=info,
    )


class ReadOnceMethod:
    """``closed-book`` (no documents) or ``single-shot`` (the shared top-k, read once)."""

    def __init__(self, name: str, shared: Shared) -> None:
        self.name = name
        self.shared = shared

    def refine(self, call: MethodInput) -> MethodOutput:
        """Answer from no documents, or from the shared top-k."""
        started, tally = time.perf_counter(), UsageTally()
        passages = [] if self.name == "closed-book" else list(call.passages[: call.k])
        draft = tally.call(self.shared.components.generator.answer(call.question, passages))
        rounds = 0 if self.name == "closed-book" else 1
        info = {"retrieval_rounds": rounds, "final_action": "answer"}
        return _answered(passages, draft.text.strip() or None, tally, started, info)


class IterativeMethod:
    """Fixed rounds of query writing and retrieval, then one answer (no controller)."""

    name = "iterative"

    def __init__(self, shared: Shared) -> None:
        self.shared = shared

    def refine(self, call: MethodInput) -> MethodOutput:
        """Search ``max_rounds`` times (fewer when the evidence is full or the token cap
        would be passed), then answer from everything kept."""
        started, tally = time.perf_counter(), UsageTally()
        config, parts = self.shared.config, self.shared.components
        search = first_round_search(call)
        workspace = EvidenceWorkspace(config.max_evidence)
        asked: list[str] = []
        queries: list[str] = []
        stopped = "rounds"
        round_cost = 0
        for round_index in range(config.max_rounds):
            if round_index and len(workspace) >= workspace.capacity:
                stopped = "evidence full"
                break
            if round_index and tally.total + round_cost > config.max_tokens:
                stopped = "token cap"
                break
            before = tally.total
            if not asked:
                query = call.question
            else:
                written = tally.call(
                    parts.writer.next_query(call.question, workspace.passages, "", asked)
                )
                query = written or ""
                if not query.strip() or query in asked:
                    # Fixed rounds: a writer that judges the evidence sufficient (or repeats
                    # itself) is asked for a rewording instead; the round is spent anyway.
                    query = tally.call(parts.writer.rewrite(call.question, asked[-1], asked))
            results = call_search(search, query, config.k)
            workspace.add(results, step=round_index, reason=f"round {round_index + 1}: {query}")
            asked.append(query)
            queries.append(query)
            round_cost = max(round_cost, tally.total - before)
        draft = tally.call(parts.generator.answer(call.question, workspace.passages))
        info = {
            "retrieval_rounds": len(asked),
            "queries": queries,
            "stopped": stopped,
            "final_action": "answer",
            "first_pool_ids": [p.id for p in call.passages],
        }
        return _answered(workspace.passages, draft.text.strip() or None, tally, started, info)


class BeliefMethod:
    """One controller episode per question (``belief`` or one of its ablations)."""

    def __init__(self, name: str, controller: BeliefController, overrides: dict[str, Any]) -> None:
        self.name = name
        self.controller = controller
        self.overrides = overrides

    def refine(self, call: MethodInput) -> MethodOutput:
        """Run the episode; the controller's final evidence and answer are the output."""
        result = self.controller.run(call.question, first_round_search(call), **self.overrides)
        return belief_output(result, call, self.controller.calibrator.version)


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


def _shared(context: BuildContext) -> Shared:
    found = context.shared.get("belief")
    if isinstance(found, Shared):
        return found
    config = run_config(context.reader, context.belief_overrides)
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
    shared = Shared(components, pair[0], pair[1], config)
    context.shared["belief"] = shared
    return shared


def _chain_verifier(shared: Shared, context: BuildContext) -> Any:
    from neocorrag_core.belief import ChainEvidenceVerifier, LMVerifier

    # Room for the chain document, so a full workspace still shows every passage.
    budget = PromptBudget(max_passages=shared.config.max_evidence + 1)
    inner = LMVerifier(models=context.miner.models, budget=budget)
    return ChainEvidenceVerifier(inner, context.miner)


def _answer_miner(context: BuildContext) -> EvidenceChainMiner:
    """The miner that refines a controller method's answer evidence: the run's, except where
    the run reads triples from passage metadata only (no ``--triples``); there, one with the
    run's settings and models and the default triple source (metadata, else the triple
    store, else spaCy), as a controller outside the benchmark gets it. ``--triples`` is not
    the way in: the query writer reads it too, which would change the baselines' searches."""
    miner = context.miner
    if not isinstance(miner.triple_source, MetadataTripleSource):
        return miner
    return answer_miner(miner.models, config=miner.config)


def refines_answer(
    name: str, reader: str = "default", belief_overrides: Mapping[str, Any] | None = None
) -> bool:
    """Whether the controller method ``name`` answers from the refined evidence in a run
    with generator ``reader`` (its preset settings, ``--belief``, then the method's own)."""
    config = run_config(reader, belief_overrides).with_overrides(**ABLATIONS.get(name, {}))
    return config.refine_answer != "none"


def fitted_models(reader: str) -> tuple[AnswerabilityCalibrator, AnswerabilityCalibrator]:
    """The answerability and after-search models of a run whose generator is the reader
    preset ``reader``: its own shipped pair when one is fitted, else the default LM's."""
    return shipped_pair(None if reader == "default" else reader) or (
        AnswerabilityCalibrator.load(),
        AnswerabilityCalibrator.load(shipped=AFTER_SEARCH_FILE),
    )


def run_config(reader: str = "default", overrides: Mapping[str, Any] | None = None) -> BeliefConfig:
    """The controller settings of a run: the generator's own preset settings
    (``PRESET_SETTINGS``), as a controller built for it gets them, changed by ``--belief``
    (``overrides``) like any other field."""
    return BeliefConfig(**preset_settings(reader)).with_overrides(**(overrides or {}))


def method_version(
    name: str, reader: str = "default", belief_overrides: Mapping[str, Any] | None = None
) -> str:
    """What a cached record of ``name`` depends on beyond the run settings: the prompt
    versions it uses and, for the controller, the versions of the fitted models its
    generator (``reader``) uses (so refitting them, or fitting a pair for that reader,
    or changing a prompt reruns the records it changes), and the no-LM query rules where
    the run's settings (preset and ``belief_overrides``) schedule searches."""
    parts = [ANSWER_PROMPT_VERSION]
    if name not in ("closed-book", "single-shot"):
        parts += [VERIFIER_PROMPT_VERSION, REWRITE_PROMPT_VERSION]
    if name.startswith("belief"):
        calibrator, after = fitted_models(reader)
        parts.append(f"calibrator {calibrator.version}")
        parts.append(f"after-search {after.version}")
        if ABLATIONS.get(name, {}).get("verify", "auto") == "auto":
            parts.append(VERIFY_GATE_VERSION)
        settings = preset_settings(reader)
        if settings:
            parts.append("preset " + " ".join(f"{k}={v}" for k, v in sorted(settings.items())))
        # Scheduled searches (min_searches > 1) use the no-LM next-hop query.
        if run_config(reader, belief_overrides).min_searches > 1:
            parts.append(ENTITY_QUERY_VERSION)
    if name == "belief-chains":  # its verifier reads the miner's chain block
        parts.append(MINER_OUTPUT_VERSION)
    if name.startswith("belief") and refines_answer(name, reader, belief_overrides):
        parts += [MINER_OUTPUT_VERSION, REFINED_ANSWER_VERSION]  # the generator reads the miner's
    return " ".join(parts)


def build(name: str, context: BuildContext) -> Any:
    """Factory of the :data:`BELIEF_METHODS`; methods built together share one set of
    components (and so one load of each model)."""
    if name not in BELIEF_METHODS:
        raise ValueError(f"unknown belief method {name!r}")
    shared = _shared(context)
    if name in ("closed-book", "single-shot"):
        return ReadOnceMethod(name, shared)
    if name == "iterative":
        return IterativeMethod(shared)
    parts = shared.components.as_kwargs()
    if name == "belief-chains":
        parts["verifier"] = _chain_verifier(shared, context)
    controller = BeliefController(
        **parts,
        calibrator=shared.calibrator,
        after_search=shared.after_search,
        config=shared.config,
        miner=_answer_miner(context),
    )
    return BeliefMethod(name, controller, ABLATIONS[name])


__all__ = [
    "ABLATIONS",
    "BELIEF_METHODS",
    "VERIFY_GATE_VERSION",
    "BeliefMethod",
    "IterativeMethod",
    "ReadOnceMethod",
    "Shared",
    "belief_output",
    "build",
    "first_round_search",
    "fitted_models",
    "method_version",
    "run_config",
]
