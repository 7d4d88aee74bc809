"""``BeliefController``: one question's episode of measure -> believe -> decide -> act.

The episode is written once, as a generator that *yields* the searches it needs and
receives their results (like EviReform's loop); :meth:`BeliefController.run` drives it
with a sync search and :meth:`BeliefController.arun` with an async one, running the
model calls in a worker thread. Each call keeps its own workspace and state, so a
failing search or model leaves nothing half-updated behind, and every episode ends with
a typed action (ANSWER, STOP or ABSTAIN), never by running out of loop.
"""

from __future__ import annotations

import asyncio
import copy
import time
from collections.abc import Callable, Generator
from dataclasses import dataclass, field, replace
from numbers import Real
from typing import Any, TypeVar

from neocorrag_core.chains.miner import EvidenceChainMiner
from neocorrag_core.errors import ConfigError, InputError, ModelCallError, NeocorragError
from neocorrag_core.lm.chat import chat_model_or_none
from neocorrag_core.models import LazyModels
from neocorrag_core.search_calls import AsyncSearchFn, SearchFn, acall_search, call_search
from neocorrag_core.types import Passage
from neocorrag_core.validation import check_instance, clean_text

from .calibrator import AFTER_SEARCH_FILE, AnswerabilityCalibrator, shipped_pair
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
from .config import BeliefConfig, BeliefTuning, config_with_default_verify
from .refined_answer import refine_for_answer
from .rules import Budget, VerifierCheck, decide, out_of_budget, retrieval_value, verifier_needed
from .state import update_belief
from .types import VERIFIER_NAMES, Action, Belief, BeliefResult, Decision, Diagnostics, Step
from .workspace import EvidenceWorkspace

T = TypeVar("T")
_Request = tuple[str, int]
_Episode = Generator[_Request, list[Any], BeliefResult]


@dataclass
class _State:
    """One episode's bookkeeping (never shared between calls)."""

    workspace: EvidenceWorkspace
    tally: UsageTally = field(default_factory=UsageTally)
    steps: list[Step] = field(default_factory=list)
    asked: list[str] = field(default_factory=list)
    belief: Belief | None = None
    diagnostics: Diagnostics = field(default_factory=lambda: _before_any_search())
    draft: DraftAnswer = field(default_factory=lambda: DraftAnswer(""))
    frozen: float | None = None
    rounds: int = 0
    corrections: int = 0
    pending: int = 0
    searched: bool = False
    rewrote_last: bool = False
    novelty: float = 1.0
    measure_cost_per_passage: float = 0.0
    measure_cost: int = 0
    writer_cost: int = 0
    verifier_note: str = ""
    """Why the last measurement skipped the verifier ("" when it called it)."""
    answer_ids: tuple[str, ...] = ()
    """The passages the last draft answer read (the workspace, or its refined part)."""
    first_search: frozenset[str] | None = None
    """The ids the first search returned (``refine_answer="first-search"``); ``None``
    before it."""

    def call(self, outcome: tuple[T, Usage]) -> T:
        """Count one model call's tokens and hand back its value."""
        return self.tally.call(outcome)

    def can_measure(self, config: BeliefConfig) -> bool:
        """Whether measuring the workspace again (draft, verifier) is expected to fit the
        token cap, at the last measurement's cost per passage."""
        # Not scaled down for a smaller workspace: the prompts' fixed part dominates there.
        expected = max(self.measure_cost, self.measure_cost_per_passage * len(self.workspace))
        return self.tally.total + expected <= config.max_tokens

    def search_cost(self, k: int) -> int:
        """Tokens one more search round is expected to cost: writing its query, then
        measuring the larger workspace. The measurement cost is assumed proportional to
        the passages shown, which over-estimates (prompts have a fixed part too), so the
        token cap is kept rather than overrun."""
        shown = min(len(self.workspace) + k, self.workspace.capacity)
        return int(self.writer_cost + self.measure_cost_per_passage * shown + 0.5)


class BeliefController:
    """Decides per question whether to search again, fix the evidence, answer or abstain.

    Args:
        verifier: one structured judgment of the evidence per step.
        generator: writes the (draft and final) answer from the evidence.
        writer: writes the evidence-aware next query (or says SUFFICIENT) and rewordings.
        relevance: the local relevance scorer.
        calibrator: the answerability model (default: the coefficient file shipped).
        after_search: the model of the answer's chance of being right after one more
            search, the fitted part of the retrieval value (default: the file shipped;
            used while ``config.fitted_retrieval_value``). Refit both on your own
            episodes with :func:`~neocorrag_core.belief.fitting.fit_from_episodes`.
        config: thresholds, caps and ablation switches (BeliefRAG's defaults).
        miner: refines the evidence the generator answers from when
            ``config.refine_answer`` is not ``"none"`` (default: an
            ``EvidenceChainMiner()``, which reads triples from passage metadata;
            :meth:`from_models` gives one that shares the controller's models and extracts
            triples where metadata has none).
    """

    def __init__(
        self,
        *,
        verifier: Verifier,
        generator: AnswerGenerator,
        writer: QueryWriter,
        relevance: RelevanceScorer,
        calibrator: AnswerabilityCalibrator | None = None,
        after_search: AnswerabilityCalibrator | None = None,
        config: BeliefConfig | None = None,
        tuning: BeliefTuning | None = None,
        miner: EvidenceChainMiner | None = None,
    ) -> None:
        for name, value, proto in (
            ("verifier", verifier, Verifier),
            ("generator", generator, AnswerGenerator),
            ("writer", writer, QueryWriter),
            ("relevance", relevance, RelevanceScorer),
            ("miner", miner, EvidenceChainMiner),
        ):
            check_instance("BeliefController", name, value, proto, optional=name == "miner")
        _check_settings(calibrator, after_search, config, tuning)
        self.verifier = verifier
        self.generator = generator
        # Kept even when refinement is off: a call may turn it on (run(refine_answer="all")).
        self.miner = miner if miner is not None else EvidenceChainMiner()
        self.writer = writer
        self.relevance = relevance
        self.calibrator = calibrator or AnswerabilityCalibrator.load()
        self.after_search = after_search or AnswerabilityCalibrator.load(shipped=AFTER_SEARCH_FILE)
        self.config = config or BeliefConfig()
        self.tuning = tuning or BeliefTuning()

    @classmethod
    def from_models(
        cls,
        lm: Any = None,
        embedder: Any = None,
        *,
        models: LazyModels | None = None,
        calibrator: AnswerabilityCalibrator | None = None,
        after_search: AnswerabilityCalibrator | None = None,
        config: BeliefConfig | None = None,
        tuning: BeliefTuning | None = None,
        miner: EvidenceChainMiner | None = None,
        **options: Any,
    ) -> BeliefController:
        """A controller whose four components run on one LM and one embedder; the one place
        a controller is built on shared models (the adapters' too,
        :class:`~neocorrag_core.belief.options.BeliefSetup`).

        ``lm``: a local LM spec (``None`` = the bundled default) or a
        :class:`~neocorrag_core.lm.chat.ChatModel` (a LangChain or LlamaIndex LLM wrapped by
        its adapter's ``as_chat_model``; an unwrapped one is a
        :class:`~neocorrag_core.errors.ConfigError` naming that fix); ``embedder``: for
        relevance (``None`` = the bundled default); ``models``: a
        :class:`~neocorrag_core.models.LazyModels` to share with another engine.
        ``options`` go to :func:`~neocorrag_core.belief.defaults.default_components`
        (``budget``, ``triple_source``, ``show_progress``, ``verifier_chains``,
        ``chains_decoding``); ``miner`` refines the answer's evidence (default: one on
        ``models`` reading ``triple_source``). Nothing loads until the first
        episode needs it. Without ``calibrator`` and ``after_search``, a bundled LM preset
        gets the models fitted on its own episodes
        (:data:`~neocorrag_core.belief.calibrator.SHIPPED_MODELS`), any other LM the
        default LM's. Without ``config``, ``verify`` is ``"auto"`` for a bundled LM with
        fitted files or refitted models and ``"always"`` for any other LM
        (:func:`~neocorrag_core.belief.config.default_verify`), and a bundled preset
        gets the settings chosen for it (:data:`~neocorrag_core.belief.config.PRESET_SETTINGS`;
        a ``config`` you pass is used as it is).
        """
        from .defaults import answer_miner, default_components, shared_models

        chat_model_or_none("BeliefController.from_models", lm)  # the fix, before anything
        _check_settings(calibrator, after_search, config, tuning)
        refitted = calibrator is not None or after_search is not None
        config = config_with_default_verify(config, lm, refitted=refitted)
        if not refitted and (pair := shipped_pair(lm)) is not None:
            calibrator, after_search = pair
        if models is None:
            models = shared_models(lm, embedder, show_progress=options.get("show_progress", False))
        parts = default_components(lm, embedder, models=models, config=config, **options)
        if miner is None:
            miner = answer_miner(models, options.get("triple_source"))
        return cls(
            **parts.as_kwargs(),
            calibrator=calibrator,
            after_search=after_search,
            config=config,
            tuning=tuning,
            miner=miner,
        )

    def tuned(self, **research: Any) -> BeliefController:
        """This controller with research settings changed (:class:`BeliefTuning` fields),
        sharing its components and models: how the lab runs an ablation beside the default
        (per-call overrides take ``config`` fields only)."""
        other = copy.copy(self)
        other.tuning = self.tuning.with_overrides(**research)
        return other

    # ------------------------------------------------------------------ drivers

    def run(self, question: str, search: SearchFn, **overrides: Any) -> BeliefResult:
        """One episode for ``question``; ``search(query, k)`` returns passages, best first.

        Keyword overrides change fields of ``config`` for this call only (all but
        ``max_evidence``, which the components' prompts were sized for); a research setting
        is a ``ConfigError``: it belongs to the controller (:meth:`tuned`). Lone
        surrogates in ``question`` are replaced by U+FFFD before any search or model sees it.
        """
        started = time.perf_counter()
        episode = self._episode(question, *self._settings(overrides))
        step = _advance(episode, None)
        while not isinstance(step, BeliefResult):
            query, k = step
            step = _advance(episode, call_search(search, query, k))
        step.timings["total"] = time.perf_counter() - started
        return step

    async def arun(self, question: str, search: AsyncSearchFn, **overrides: Any) -> BeliefResult:
        """Async :meth:`run`: the searches are awaited, model calls run in a worker thread."""
        started = time.perf_counter()
        episode = self._episode(question, *self._settings(overrides))
        step = await asyncio.to_thread(_advance, episode, None)
        while not isinstance(step, BeliefResult):
            query, k = step
            results = await acall_search(search, query, k)
            step = await asyncio.to_thread(_advance, episode, results)
        step.timings["total"] = time.perf_counter() - started
        return step

    def _settings(self, overrides: dict[str, Any]) -> tuple[BeliefConfig, BeliefTuning]:
        if "max_evidence" in overrides and overrides["max_evidence"] != self.config.max_evidence:
            # The components' prompt budgets were sized for it when they were built; a
            # larger workspace would hold passages no model ever sees.
            raise ConfigError(
                "max_evidence cannot change per call (the components' prompts were sized "
                "for it); build a controller with BeliefConfig(max_evidence=...)"
            )
        return self.config.with_overrides(**overrides) if overrides else self.config, self.tuning

    # ------------------------------------------------------------------ the episode

    def _episode(self, question: str, config: BeliefConfig, tuning: BeliefTuning) -> _Episode:
        if not isinstance(question, str) or not question.strip():
            raise InputError("question must be a non-empty string")
        question = clean_text(question)  # lone surrogates: U+FFFD, before any model sees it
        st = _State(EvidenceWorkspace(config.max_evidence))
        while True:
            index = len(st.steps)
            began, before = time.perf_counter(), (st.tally.prompt, st.tally.generated)
            search_cost = st.search_cost(config.k)
            can_search = (
                st.rounds < config.max_rounds and st.tally.total + search_cost <= config.max_tokens
            )
            # A correction in progress decides the next step by itself (rule 1): no need to
            # pay for measuring the evidence it is about to change.
            forced = st.pending > 0 and tuning.replace_dropped and can_search
            # So does a search scheduled before the first measurement (min_searches).
            scheduled_left = config.min_searches - st.rounds if st.belief is None else 0
            room = st.workspace.has_room
            scheduled = st.searched and scheduled_left > 0 and can_search and room
            measured_now = st.searched and not forced and not scheduled
            # After a correction with no replacement search (prune-only, or no budget left
            # for one), measuring again must fit the token cap too; if it does not, the
            # episode ends on the last measurement's draft.
            over_budget = measured_now and st.belief is not None and not st.can_measure(config)
            measured_now = measured_now and not over_budget
            if measured_now:
                self._measure(question, st, config, tuning)
                search_cost = st.search_cost(config.k)
            # Nothing is known before the first measurement (the first search, and any
            # scheduled ones): no answerability to decide on, or to freeze.
            known = st.belief is not None
            answerability = self.calibrator.predict(st.diagnostics) if known else 0.0
            if known and not tuning.live_answerability:
                st.frozen = answerability if st.frozen is None else st.frozen
                answerability = st.frozen
            after = (
                self.after_search.predict(st.diagnostics)
                if known and tuning.fitted_retrieval_value
                else None
            )
            current = st.belief or Belief()
            budget = Budget(
                rounds_used=st.rounds,
                tokens_used=st.tally.total,
                corrections_used=st.corrections,
                pending_correction=st.pending,
                searched=st.searched,
                rewrote_last=st.rewrote_last,
                scheduled_left=scheduled_left if scheduled else 0,
                room=room,
            )
            measured = st.diagnostics
            decision = (
                out_of_budget(answerability, config)
                if over_budget
                else decide(
                    current,
                    measured,
                    answerability,
                    budget,
                    config,
                    search_cost=search_cost,
                    after_search=after,
                    tuning=tuning,
                )
            )
            if measured_now and st.verifier_note:
                decision = replace(decision, reason=f"{decision.reason}; {st.verifier_note}")
            if index >= _step_cap(config) and not decision.action.terminal:
                # Unreachable by the rules (each non-terminal step spends a capped round or
                # correction); kept so that no episode can ever loop.
                decision = Decision(Action.STOP, "step cap reached; best-effort answer")
            if decision.action in (Action.ANSWER, Action.STOP) and not st.draft.text.strip():
                # Nothing to answer with: the episode's end says so, not "answer" + None.
                decision = Decision(
                    Action.ABSTAIN, f"{decision.reason}; the generator gave no answer"
                )
            st.rewrote_last = False
            retrieved: tuple[str, ...] = ()
            if decision.action is Action.VERIFY:
                gone = st.workspace.drop(measured.drop_ids, step=index, reason=decision.reason)
                st.corrections += 1
                st.pending = len(gone) if tuning.replace_dropped else 0
            elif decision.action in (Action.RETRIEVE, Action.REWRITE):
                query, decision = self._query(question, decision, st, scheduled=scheduled)
                if query is not None:
                    results = yield (query, config.k)
                    added = st.workspace.add(
                        results, step=index, reason=f"{decision.action.value}: {query}"
                    )
                    retrieved = tuple(p.id for p in results)
                    if st.first_search is None:
                        st.first_search = frozenset(retrieved)
                    st.novelty = added.novelty
                    st.asked.append(query)
                    st.rounds += 1
                    st.pending = 0
                    st.searched = True
                    st.rewrote_last = decision.action is Action.REWRITE
            st.steps.append(
                Step(
                    index=index,
                    diagnostics=measured,
                    belief=current,
                    answerability=answerability,
                    retrieval_value=retrieval_value(current, answerability, after),
                    decision=decision,
                    evidence_ids=st.workspace.ids,
                    retrieved_ids=retrieved,
                    draft_answer=st.draft.text if measured_now else "",
                    answer_ids=st.answer_ids if measured_now else (),
                    verified=measured_now and st.diagnostics.verified,
                    seconds=time.perf_counter() - began,
                    prompt_tokens=st.tally.prompt - before[0],
                    generated_tokens=st.tally.generated - before[1],
                )
            )
            if decision.action.terminal:
                return self._result(question, decision, st)

    def _query(
        self, question: str, decision: Decision, st: _State, *, scheduled: bool = False
    ) -> tuple[str | None, Decision]:
        """The query a search step uses; the writer saying SUFFICIENT turns it into ANSWER.
        A scheduled search (``min_searches``) takes the writer's no-LM query when it offers
        one: nothing was measured yet that an LM could aim the query at."""
        if not st.asked:
            return question, Decision(decision.action, decision.reason, question)
        before = st.tally.total

        def reword() -> str:
            writer = self.writer.rewrite
            return st.call(
                _ask("query writer", writer, question, st.asked[-1], st.asked, returns=str)
            )

        if scheduled and isinstance(self.writer, EntityQueryWriter):
            text = _ask(
                "query writer",
                self.writer.entity_query,
                question,
                st.workspace.passages,
                st.asked,
                returns=str,
                with_usage=False,
            )
        elif decision.action is Action.REWRITE:
            text = reword()
        else:
            # Replacements after a correction target the missing fact as well: a blind
            # rewording of the last query tends to find the dropped passage's neighbours.
            written = st.call(
                _ask(
                    "query writer",
                    self.writer.next_query,
                    question,
                    st.workspace.passages,
                    st.diagnostics.missing_fact,
                    st.asked,
                    returns=(str, type(None)),
                )
            )
            # Before anything was measured, SUFFICIENT cannot end the episode: there is no
            # draft answer yet (a scheduled search then uses the rewording below).
            if written is None and not st.pending and not scheduled:
                reason = f"{decision.reason}; the query writer judged the evidence sufficient"
                return None, Decision(Action.ANSWER, reason)
            text = written or ""
        if not text.strip() or text in st.asked:
            text = reword()
        st.writer_cost = st.tally.total - before
        return text, Decision(decision.action, decision.reason, text)

    def _measure(
        self, question: str, st: _State, config: BeliefConfig, tuning: BeliefTuning
    ) -> None:
        """A draft answer and the local diagnostics of the current evidence, then the
        verifier call when its reply could change the decision (:meth:`_verifier_check`);
        then the belief update."""
        before = st.tally.total
        passages = st.workspace.passages
        shown = self._answer_passages(question, st, config)
        draft = st.call(
            _ask("answer generator", self.generator.answer, question, shown, returns=DraftAnswer)
        )
        st.answer_ids = tuple(p.id for p in shown)
        relevance = (
            _ask(
                "relevance scorer",
                self.relevance.relevance,
                question,
                passages,
                returns=Real,
                with_usage=False,
            )
            if passages
            else 0.0
        )
        st.draft = draft
        local = Diagnostics(
            relevance=_unit(relevance),
            novelty=st.novelty,
            cost=_unit(st.tally.total / config.max_tokens),
            support=None,
            conflict=None,
            uncertainty=None,
            gap=None,
            answer_confidence=None if draft.confidence is None else _unit(draft.confidence),
        )
        check = self._verifier_check(local, st, config, tuning)
        st.verifier_note = "" if check.needed else check.why
        if check.needed:
            reply = st.call(
                _ask(
                    "verifier",
                    self.verifier.verify,
                    question,
                    passages,
                    draft.text,
                    returns=VerifierReply,
                )
            )
            present = set(st.workspace.ids)
            local = replace(
                local,
                cost=_unit(st.tally.total / config.max_tokens),
                support=_unit(reply.support),
                conflict=_unit(reply.conflict),
                uncertainty=_unit(reply.uncertainty),
                gap=_unit(reply.gap),
                missing_fact=reply.missing_fact,
                drop_ids=tuple(pid for pid in dict.fromkeys(reply.drop_ids) if pid in present),
            )
        st.diagnostics = local
        st.belief = update_belief(st.belief, st.diagnostics, blend=tuning.blend)
        st.measure_cost = st.tally.total - before
        st.measure_cost_per_passage = st.measure_cost / max(1, len(passages))

    def _answer_passages(self, question: str, st: _State, config: BeliefConfig) -> list[Passage]:
        """What the answer generator reads, as ``config.refine_answer`` says (mining tokens,
        if any, are counted)."""
        passages = st.workspace.passages
        if config.refine_answer == "none":
            return passages
        later: tuple[str, ...] = ()
        if config.refine_answer == "first-search":
            # From what the first search returned, not the workspace log: a first search
            # that added nothing writes no log entry, and the next one is not the first.
            first = st.first_search or frozenset()
            later = tuple(pid for pid in st.workspace.ids if pid not in first)
        return st.call(
            _ask(
                "answer refiner",
                refine_for_answer,
                self.miner,
                question,
                passages,
                later,
                returns=list,
            )
        )

    def _verifier_check(
        self, local: Diagnostics, st: _State, config: BeliefConfig, tuning: BeliefTuning
    ) -> VerifierCheck:
        """Whether any verifier reply could change this step's decision: the fitted models
        are bounded over every reply, the local diagnostics fixed (``verify="auto"``)."""
        if config.verify == "always":
            return VerifierCheck(True, "verify='always'")
        if not tuning.live_answerability and st.frozen is not None:
            answerability = (st.frozen, st.frozen)
        else:
            answerability = self.calibrator.predict_range(local, VERIFIER_NAMES)
        after = (
            self.after_search.predict_range(local, VERIFIER_NAMES)
            if tuning.fitted_retrieval_value
            else None
        )
        budget = Budget(
            rounds_used=st.rounds,
            tokens_used=st.tally.total,
            corrections_used=st.corrections,
            searched=True,
            room=st.workspace.has_room,
        )
        return verifier_needed(
            answerability,
            budget,
            config,
            cost=local.cost,
            search_cost=st.search_cost(config.k),
            after_search=after,
            tuning=tuning,
        )

    def _result(self, question: str, decision: Decision, st: _State) -> BeliefResult:
        abstained = decision.action is Action.ABSTAIN
        answer = None if abstained else (st.draft.text.strip() or None)
        return BeliefResult(
            question=question,
            answer=answer,
            abstained=answer is None,
            final_action=decision.action,
            evidence=st.workspace.passages,
            steps=st.steps,
            mutations=st.workspace.log,
            retrieval_rounds=st.rounds,
            prompt_tokens=st.tally.prompt,
            generated_tokens=st.tally.generated,
        )


def _ask(
    component: str,
    method: Callable[..., T],
    *args: Any,
    returns: type | tuple[type, ...],
    with_usage: bool = True,
) -> T:
    """Call one component; its failure becomes a :class:`ModelCallError` naming it (our own
    errors, e.g. a prompt that cannot fit, pass through unchanged), and so does a reply of
    the wrong shape (``(value, Usage)`` with a ``returns`` value, or the bare value without
    ``with_usage``): a custom component's mistake is named here, not deep in the episode."""
    try:
        out = method(*args)
    except NeocorragError:
        raise
    except Exception as err:
        raise ModelCallError(f"the {component} failed: {type(err).__name__}: {err}") from err
    value: Any = out
    if with_usage:
        if not (isinstance(out, tuple) and len(out) == 2 and isinstance(out[1], Usage)):
            raise ModelCallError(
                f"the {component} must return (value, Usage), got {type(out).__name__}"
            )
        value = out[0]
    if not isinstance(value, returns):
        kinds = returns if isinstance(returns, tuple) else (returns,)
        expected = " or ".join(k.__name__ for k in kinds)
        raise ModelCallError(
            f"the {component} returned a {type(value).__name__}, expected {expected}"
        )
    if isinstance(value, VerifierReply):
        _check_verifier_reply(value)
    return out


def _check_verifier_reply(reply: VerifierReply) -> None:
    for name in ("support", "conflict", "uncertainty", "gap"):
        number = getattr(reply, name)
        if isinstance(number, bool) or not isinstance(number, Real):
            raise ModelCallError(
                f"the verifier's {name} must be a number, got {type(number).__name__}"
            )
    drops = reply.drop_ids
    if isinstance(drops, (str, bytes)) or not all(isinstance(pid, str) for pid in drops):
        raise ModelCallError("the verifier's drop_ids must be a sequence of passage ids")
    if not isinstance(reply.missing_fact, str):
        raise ModelCallError("the verifier's missing_fact must be a string")


def _before_any_search() -> Diagnostics:
    return Diagnostics(
        relevance=0.0, novelty=1.0, cost=0.0, support=0.0, conflict=0.0, uncertainty=1.0, gap=1.0
    )


def _step_cap(config: BeliefConfig) -> int:
    return config.max_rounds + config.max_corrections + 2


def _unit(value: float) -> float:
    number = float(value)
    if number != number:  # NaN from a broken scorer: treat as no information
        return 0.5
    return min(max(number, 0.0), 1.0)


def _advance(episode: _Episode, results: list[Any] | None) -> _Request | BeliefResult:
    """The episode's next search request, or its result (StopIteration cannot cross into
    an asyncio future, hence the conversion)."""
    try:
        return next(episode) if results is None else episode.send(results)
    except StopIteration as done:
        result: BeliefResult = done.value
        return result


def _check_settings(
    calibrator: object, after_search: object, config: object, tuning: object
) -> None:
    """A clear error at construction, not an AttributeError after the first search."""
    for name, value, kind in (
        ("calibrator", calibrator, AnswerabilityCalibrator),
        ("after_search", after_search, AnswerabilityCalibrator),
        ("config", config, BeliefConfig),
        ("tuning", tuning, BeliefTuning),
    ):
        if value is not None and not isinstance(value, kind):
            hint = (
                " (load a file with AnswerabilityCalibrator.load(path))"
                if kind is AnswerabilityCalibrator
                else f" (build one with {kind.__name__}(**fields))"
            )
            raise ConfigError(
                f"BeliefController: {name} must be a {kind.__name__} or None, got "
                f"{type(value).__name__}{hint}"
            )


__all__ = ["BeliefController"]
