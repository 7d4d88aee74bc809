"""The evidence-state controller's baselines and the paper's ablations, beside the
product's ``belief``.

* ``closed-book``: the answer generator with no documents.
* ``single-shot``: the shared top-k, read once by the answer generator.
* ``iterative``: fixed rounds of evidence-aware query writing and retrieval (the
  EviReform query writer the controller uses), then one answer: BeliefRAG's main
  baseline. It searches ``max_rounds`` times, or until the evidence workspace is full
  (a search could then keep nothing new) or the token cap is reached. When a run has it,
  the report compares every other method with it.
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

Every method here answers by itself, with the product's shared components
(:func:`~neocorrag_core.eval.belief_methods.shared_components`: one answer generator, the
reader's LM, the same prompt), so the runner does not call its reader; all share the
retriever, the query writer, the verifier, the caps and the token accounting. The first
search of ``iterative`` and the controller asks the question itself, which is the shared
top-k: it is served from ``MethodInput.passages``.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from neocorrag_core.belief import (
    ChainEvidenceVerifier,
    EvidenceWorkspace,
    LMVerifier,
    PromptBudget,
    UsageTally,
)
from neocorrag_core.belief.answer import ANSWER_PROMPT_VERSION
from neocorrag_core.belief.verifier import VERIFIER_PROMPT_VERSION
from neocorrag_core.belief.writer import REWRITE_PROMPT_VERSION
from neocorrag_core.eval.belief_methods import (
    BeliefMethod,
    Shared,
    controller,
    controller_version,
    first_round_search,
    shared_components,
)
from neocorrag_core.eval.protocol import BuildContext, MethodInput, MethodOutput
from neocorrag_core.search_calls import call_search
from neocorrag_core.types import Passage

BASELINES = ("closed-book", "single-shot", "iterative")
ABLATIONS: dict[str, dict[str, Any]] = {
    "belief-no-correction": {"correct_problems": False},
    "belief-prune-only": {"replace_dropped": False},
    "belief-frozen-answerability": {"live_answerability": False},
    "belief-chains": {},
    "belief-refined": {"refine_answer": "all"},
    "belief-refined-first": {"refine_answer": "first-search"},
    "belief-unrefined": {"refine_answer": "none"},
    "belief-always-verify": {"verify": "always"},
}
"""The controller ablations and the :class:`BeliefConfig` fields each changes."""
BELIEF_VARIANTS = (*BASELINES, *ABLATIONS)


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


def chain_verifier(shared: Shared, context: BuildContext) -> ChainEvidenceVerifier:
    """``belief-chains``' verifier: the LM verifier that also reads the chains the run's
    miner finds in the evidence."""
    # Room for the chain document, so a full workspace still shows every passage.
    budget = PromptBudget(max_passages=shared.config.max_evidence + 1)
    inner = LMVerifier(models=context.miner.models, budget=budget)
    return ChainEvidenceVerifier(inner, context.miner)


def method_version(
    name: str, reader: str = "default", belief_overrides: Mapping[str, Any] | None = None
) -> str:
    """What a cached record of ``name`` depends on beyond the run settings: the prompt
    versions it uses (the answer prompt; the verifier and rewrite prompts for the methods
    that search again) and, for a controller ablation, the product's
    :func:`~neocorrag_core.eval.belief_methods.controller_version` over its changes."""
    if name in ("closed-book", "single-shot"):
        return ANSWER_PROMPT_VERSION
    if name == "iterative":
        return " ".join([ANSWER_PROMPT_VERSION, VERIFIER_PROMPT_VERSION, REWRITE_PROMPT_VERSION])
    return controller_version(
        ABLATIONS[name], reader, belief_overrides, reads_chains=name == "belief-chains"
    )


def build(name: str, context: BuildContext) -> Any:
    """Factory of the :data:`BELIEF_VARIANTS`; methods built together share one set of
    components with ``belief`` (and so one load of each model)."""
    if name not in BELIEF_VARIANTS:
        raise ValueError(f"unknown belief method {name!r}")
    shared = shared_components(context)
    if name in ("closed-book", "single-shot"):
        return ReadOnceMethod(name, shared)
    if name == "iterative":
        return IterativeMethod(shared)
    verifier = chain_verifier(shared, context) if name == "belief-chains" else None
    return BeliefMethod(name, controller(context, verifier=verifier), ABLATIONS[name])


__all__ = [
    "ABLATIONS",
    "BASELINES",
    "BELIEF_VARIANTS",
    "IterativeMethod",
    "ReadOnceMethod",
    "build",
    "chain_verifier",
    "method_version",
]
