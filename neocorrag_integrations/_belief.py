"""What the two BeliefRAG adapters share: their keywords, the controller, the episode as values.

LangChain's ``BeliefRAG`` and LlamaIndex's ``BeliefQueryEngine`` fetch documents from the
user's retriever and copy the final evidence back; the rest is here once. Their keywords are
:class:`BeliefOptions` (written once; each adapter's ``__init__`` takes ``**options``);
:class:`BeliefEngine` checks them and builds the
:class:`~neocorrag_core.belief.BeliefController` on the user's LLM (translated by the
adapter into a :class:`~neocorrag_core.lm.chat.ChatModel`). Imports neither framework.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any, Generic, Literal, TypedDict, TypeVar

from neocorrag_core.belief import (
    AFTER_SEARCH_FILE,
    AnswerabilityCalibrator,
    BeliefConfig,
    BeliefController,
    BeliefResult,
    ChainEvidenceVerifier,
    LMVerifier,
    PromptBudget,
    default_components,
    default_config,
)
from neocorrag_core.belief.calibrator import shipped_pair
from neocorrag_core.belief.defaults import answer_miner
from neocorrag_core.chains.miner import EvidenceChainMiner
from neocorrag_core.errors import ConfigError, InputError
from neocorrag_core.lm.chat import chat_model_or_none
from neocorrag_core.models import LazyModels
from neocorrag_core.triples import TripleSource
from neocorrag_core.validation import check_bool, check_choice, check_instance, check_int

from ._common import EngineSettings, ModelsSource, Reader, RefinerSettings, check_query
from ._reformulation import ReformulationCall
from ._translate import engine_embedder

T = TypeVar("T")

ABSTAIN_MESSAGE = "I cannot answer this from the evidence found."
"""The LlamaIndex response text when the controller abstains (``metadata["abstained"]``
says so too; LangChain returns ``answer=None``)."""


class BeliefOptions(TypedDict, total=False):
    """The keywords both BeliefRAG adapters take besides the retriever and ``llm``."""

    k: int | None
    """Passages used per search (default ``config.k``, 5)."""
    config: BeliefConfig | dict[str, Any] | None
    """A :class:`~neocorrag_core.belief.BeliefConfig` or a dict of its fields; a dict
    changes the generator's defaults (a bundled preset's settings included)."""
    calibrator: AnswerabilityCalibrator | None
    """The answerability model (default: the coefficient file shipped)."""
    after_search: AnswerabilityCalibrator | None
    """The model of the answer after one more search (default: the file shipped)."""
    embedder: Any
    """For the relevance diagnostic and the chains' miner (``None`` = bundled MiniLM)."""
    models: ModelsSource | None
    """Share lazily loaded models with a refiner, a miner, a reformulator or a
    ``LazyModels`` (then ``embedder`` and a local ``llm`` belong to them)."""
    chains_for_verifier: bool
    """Show the verifier the NeocorRAG chains of the evidence as one extra document."""
    miner: EvidenceChainMiner | None
    """The chains' miner, which also refines the answer's evidence with ``refine_answer``."""
    triple_source: TripleSource | None
    """The chains' triples (default: metadata, else the triple store, else spaCy)."""
    chains_decoding: Literal["none", "beam", "rank"] | None
    """How the miner chooses the verifier's chains (``None``: the miner's, ``"none"``)."""
    controller: BeliefController | None
    """A ready controller (your own components) instead of every setting above."""


def question_of(owner: str, value: Any) -> str:
    """The question of an adapter input: a string, or a mapping with a ``"question"``
    string; anything else is an :class:`~neocorrag_core.errors.InputError`."""
    if isinstance(value, Mapping):
        if "question" not in value:
            keys = ", ".join(repr(k) for k in list(value)[:5]) or "none"
            raise InputError(
                f"{owner}: a dict input needs a 'question' key (got keys: {keys}); "
                'pass {"question": "..."} or the question string itself'
            )
        value = value["question"]
    elif not isinstance(value, str):
        raise InputError(
            f"{owner}: the input must be a question string or a dict with a 'question' "
            f"string, got {type(value).__name__}"
        )
    return check_query(owner, value)


class BeliefEngine(EngineSettings, Generic[T]):
    """One BeliefRAG adapter's settings and the controller they build.

    ``llm`` is a :class:`~neocorrag_core.lm.chat.ChatModel` (the adapter's translation of
    the user's LLM) or a local LM spec (``None`` = the bundled LM, loaded on first use);
    ``options`` are :class:`BeliefOptions`. Every setting is checked here (a bad one is a
    :class:`~neocorrag_core.errors.ConfigError`); nothing loads until the first episode.
    """

    def __init__(self, owner: str, llm: Any, options: BeliefOptions) -> None:
        self.name = owner
        unknown = sorted(set(options) - set(BeliefOptions.__annotations__))
        if unknown:
            raise TypeError(f"{owner}() got unexpected keyword argument(s): {', '.join(unknown)}")
        controller = options.get("controller")
        if controller is not None:
            given = {
                k: v
                for k, v in options.items()
                if k != "controller" and v is not None and v is not False
            }
            self.controller = self._shared(
                "controller", controller, BeliefController, llm=llm, **given
            )
            self.custom, self.llm, self.models, self.miner = True, None, None, None
            self.config = controller.config
            return
        self.custom = False
        framework = chat_model_or_none(owner, llm) is not None  # the fix, before anything
        calibrator, after = options.get("calibrator"), options.get("after_search")
        refitted = calibrator is not None or after is not None
        base = default_config(llm, refitted=refitted)
        self.config = self._config(base, options.get("config"), "config")
        k = options.get("k")
        check_int(owner, "k", k, minimum=1, optional=True)
        if k is not None:
            self.config = self.config.with_overrides(k=int(k))
        chains = options.get("chains_for_verifier", False)
        check_bool(owner, "chains_for_verifier", chains)
        decoding = options.get("chains_decoding")
        if decoding is not None:
            check_choice(owner, "chains_decoding", decoding, ("none", "beam", "rank"))
        miner, triples = options.get("miner"), options.get("triple_source")
        for name, value, kind in (
            ("calibrator", calibrator, AnswerabilityCalibrator),
            ("after_search", after, AnswerabilityCalibrator),
            ("miner", miner, EvidenceChainMiner),
        ):
            check_instance(owner, name, value, kind, optional=True)
        mines = chains or self.config.refine_answer != "none"
        unused: dict[str, Any] = {"miner": miner, "triple_source": triples} if not mines else {}
        unused |= {"chains_decoding": decoding} if not chains else {}
        if idle := [name for name, value in unused.items() if value is not None]:
            raise ConfigError(
                f"{owner}: {', '.join(idle)} only serve(s) the chains; set "
                "chains_for_verifier=True (or, for miner and triple_source, "
                "config={'refine_answer': 'all'}) or leave them unset"
            )
        local_lm = None if framework else llm
        embedder = engine_embedder(options.get("embedder"))
        models, theirs = options.get("models"), None
        if models is not None:
            if miner is not None:
                raise ConfigError(
                    f"{owner}: pass models= or miner= (whose models are shared), not both"
                )
            shared, theirs = self._models(models, embedder=embedder, lm=local_lm)
        elif miner is not None:
            reject = {"embedder": embedder, "lm": local_lm}
            shared = self._shared("miner", miner, EvidenceChainMiner, **reject).models
        else:
            shared = LazyModels(embedder=embedder, lm=local_lm)
        self.llm, self.models, self.chains_decoding = llm, shared, decoding
        pair = None if refitted or framework else shipped_pair(llm)
        if pair is not None:  # a bundled LM preset: the models fitted on its episodes
            calibrator, after = pair
        self.calibrator = calibrator or AnswerabilityCalibrator.load()
        self.after_search = after or AnswerabilityCalibrator.load(shipped=AFTER_SEARCH_FILE)
        if miner is None and triples is None:  # a shared refiner's miner keeps its settings
            miner = models.miner if isinstance(models, RefinerSettings) else None
            miner = models if isinstance(models, EvidenceChainMiner) else miner
        # Built even when nothing mines yet (it loads nothing until used): a call may turn
        # refine_answer on, and should refine on the shared models and triples.
        self.answer_miner = miner or answer_miner(shared, triples or theirs)
        self.miner = self.answer_miner if chains else None
        self.controller = self.build_controller(llm)

    def _owner(self) -> str:
        return self.name

    @property
    def chains_for_verifier(self) -> bool:
        """Whether the verifier also sees the evidence chains (adapter-built controllers
        only; a controller passed in says so by its own verifier)."""
        return self.miner is not None

    def build_controller(self, llm: Any) -> BeliefController:
        """A controller whose LM components run on ``llm`` (the configured LLM, or a
        per-call stand-in for it carrying a run's callbacks). Cheap: models are shared."""
        if self.models is None:
            raise ConfigError(f"{self.name}: a controller passed in is used as it is")
        budget = PromptBudget(max_passages=self.config.max_evidence)
        parts = default_components(llm, models=self.models, config=self.config, budget=budget)
        verifier: Any = parts.verifier
        if self.miner is not None:  # room for the chain document beside a full workspace
            roomy = replace(budget, max_passages=budget.max_passages + 1)
            inner = LMVerifier(chat_model_or_none(self.name, llm), models=self.models, budget=roomy)
            verifier = ChainEvidenceVerifier(inner, self.miner, decoding=self.chains_decoding)
        return BeliefController(
            verifier=verifier,
            generator=parts.generator,
            writer=parts.writer,
            relevance=parts.relevance,
            calibrator=self.calibrator,
            after_search=self.after_search,
            config=self.config,
            miner=self.answer_miner,
        )

    def run(
        self,
        question: str,
        fetch: Callable[[str], Sequence[T]],
        read: Reader,
        *,
        controller: BeliefController | None = None,
        overrides: Mapping[str, Any] | None = None,
    ) -> tuple[BeliefResult, list[T]]:
        """One episode for a checked question: ``fetch(query)`` asks the retriever (its first
        ``k`` results are used), ``read`` reads its objects (raising on foreign ones, which
        becomes a ``RetrievalError``); returns the result and the evidence's originals."""
        call: ReformulationCall[T] = ReformulationCall(read)
        ctrl = controller or self.controller
        result = ctrl.run(question, call.search_with(fetch), **dict(overrides or {}))
        return result, call.originals([p.id for p in result.evidence])

    async def arun(
        self,
        question: str,
        afetch: Callable[[str], Awaitable[Sequence[T]]],
        read: Reader,
        *,
        controller: BeliefController | None = None,
        overrides: Mapping[str, Any] | None = None,
    ) -> tuple[BeliefResult, list[T]]:
        """Async :meth:`run`: searches are awaited, model calls run in a worker thread."""
        call: ReformulationCall[T] = ReformulationCall(read)
        ctrl = controller or self.controller
        result = await ctrl.arun(question, call.asearch_with(afetch), **dict(overrides or {}))
        return result, call.originals([p.id for p in result.evidence])


def result_fields(result: BeliefResult) -> dict[str, Any]:
    """The episode as JSON-ready values (everything but the evidence documents)."""
    tokens = {"prompt": result.prompt_tokens, "generated": result.generated_tokens}
    return {
        "question": result.question,
        "answer": result.answer,
        "abstained": result.abstained,
        "final_action": result.final_action.value,
        "retrieval_rounds": result.retrieval_rounds,
        "tokens": {**tokens, "total": result.prompt_tokens + result.generated_tokens},
        "trajectory": result.trajectory,
        "mutations": [
            {"kind": m.kind, "passage_ids": list(m.passage_ids), "step": m.step, "reason": m.reason}
            for m in result.mutations
        ],
    }


__all__ = ["ABSTAIN_MESSAGE", "BeliefEngine", "BeliefOptions", "question_of", "result_fields"]
