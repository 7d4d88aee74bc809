"""What the two BeliefRAG adapters share: the controller, the search, the result as values.

The adapters only fetch documents from the user's retriever and copy the final evidence
back; the rest is decided here once, so LangChain's ``BeliefRAG`` and LlamaIndex's
``BeliefQueryEngine`` behave the same:

* :class:`BeliefEngine` checks the settings and builds the
  :class:`~neocorrag_core.belief.BeliefController` on the user's LLM, translated by the
  adapter into a :class:`~neocorrag_core.lm.chat.ChatModel` (or a per-call copy of it,
  which the LangChain adapter uses to pass its callbacks down), with the NeocorRAG chains
  as extra verifier evidence when asked;
* every call keeps its own :class:`BeliefCall`, which turns what the retriever returns
  into passages with ids that are stable across the searches of that call (the
  controller's workspace merges and refuses dropped passages by id) and remembers the
  original objects, so the final evidence goes back as copies of them;
* :func:`result_fields` is the episode as plain values (answer, abstained, trajectory...).

Imports neither framework; a framework embeddings object passed as ``embedder=`` is
translated by :mod:`._translate` (the adapters translate ``llm=`` before it gets here).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Generic, Literal, TypeVar

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

from ._common import RefinerSettings, SourceDocument, check_query, reject_owned_settings
from ._reformulation import ModelsSource, ReformulationCall, _shared_models
from ._translate import engine_embedder

T = TypeVar("T")

ChainsDecoding = Literal["none", "beam", "rank"]

ABSTAIN_MESSAGE = "I cannot answer this from the evidence found."
"""The LlamaIndex response text when the controller abstains (``metadata["abstained"]``
says so too; LangChain returns ``answer=None``)."""


class BeliefCall(ReformulationCall[T]):
    """The documents of one episode, as passages with stable ids (see
    :class:`~neocorrag_integrations._reformulation.ReformulationCall`), and the original
    objects behind the final evidence. One instance per call, never shared."""

    def originals(self, passage_ids: Sequence[str]) -> list[T]:
        """The objects the retriever returned for ``passage_ids``, in that order."""
        return [self._originals[pid] for pid in passage_ids]


@dataclass(frozen=True)
class BeliefOutcome(Generic[T]):
    """One episode: the controller's result and the original objects of its evidence."""

    result: BeliefResult
    evidence: list[T]


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


def belief_config(
    owner: str, config: Any, k: Any, base: BeliefConfig | None = None
) -> BeliefConfig:
    """The controller settings: a :class:`BeliefConfig`, a dict of its fields or ``None``
    (``base``, the generator's defaults), with ``k`` (when given) as the passages asked of
    each search; a dict changes ``base``'s fields."""
    check_int(owner, "k", k, minimum=1, optional=True)
    base = base or BeliefConfig()
    if config is None:
        config = base
    elif isinstance(config, Mapping):
        bad = [key for key in config if not isinstance(key, str)]
        if bad:
            raise ConfigError(
                f"{owner}.config keys must be BeliefConfig field names, got {bad[0]!r}"
            )
        config = base.with_overrides(**config)
    elif not isinstance(config, BeliefConfig):
        raise ConfigError(
            f"{owner}.config must be a BeliefConfig, a dict of its fields or None, "
            f"got {type(config).__name__}"
        )
    return config if k is None else config.with_overrides(k=int(k))


class BeliefEngine:
    """The settings of one adapter and the controller they build.

    Args:
        owner: the adapter's name, for error messages.
        llm: a :class:`~neocorrag_core.lm.chat.ChatModel` (the adapter's translation of
            the user's LangChain chat model or LlamaIndex LLM) serving the verifier, the
            answer generator and the query writer; or a local LM spec (``None`` = the
            bundled LM, loaded on first use).
        k: passages asked of each search (``None`` = ``config.k``, 5).
        config: a :class:`~neocorrag_core.belief.BeliefConfig` or a dict of its fields (a
            dict changes the generator's defaults: ``default_config``).
        calibrator: the answerability model (default: the coefficient file shipped).
        after_search: the model of the answer after one more search, in the retrieval
            value (default: the coefficient file shipped).
        embedder: for the relevance diagnostic (and the chains' miner); anything
            :func:`~neocorrag_core.models.resolve_embedder` accepts (``None`` = bundled).
        models: share lazily loaded models: a ``LazyModels``, an ``EvidenceChainMiner``,
            an ``EvidenceReformulator``, a compressor or postprocessor (then ``embedder``
            and a local ``llm`` must be left unset; a miner's, or adapter's, triple source
            serves the chains too).
        chains_for_verifier: mine NeocorRAG evidence chains from the evidence before each
            verifier call and show them to the verifier as one extra document
            (:class:`~neocorrag_core.belief.ChainEvidenceVerifier`). Off by default.
        miner: the chain miner (only with ``chains_for_verifier``; its models are shared,
            so ``embedder`` and a local ``llm`` must be left unset); default: the miner of
            ``models=`` when it has one, else a new one on the shared models.
        triple_source: where the chains' triples come from (default: a
            :class:`~neocorrag_core.triples.DefaultTripleSource`: metadata, else the
            store, else spaCy).
        chains_decoding: how the miner chooses chains (``None`` = the miner's, ``"none"``).
        controller: a ready :class:`~neocorrag_core.belief.BeliefController` (your own
            components, e.g. a verifier wrapped in ``ChainEvidenceVerifier``); then every
            other setting must be left unset, and its LLM calls are its own business (the
            LangChain adapter cannot pass its callbacks into them).

    Every setting is checked here; a bad one raises
    :class:`~neocorrag_core.errors.ConfigError`. Nothing loads until the first episode.
    """

    models: LazyModels | None
    """The shared models (``None`` for a controller passed in)."""
    miner: EvidenceChainMiner | None
    """The chains' miner (``None`` when the verifier does not see chains)."""

    def __init__(
        self,
        owner: str,
        *,
        llm: Any = None,
        k: Any = None,
        config: Any = None,
        calibrator: AnswerabilityCalibrator | None = None,
        after_search: AnswerabilityCalibrator | None = None,
        embedder: Any = None,
        models: ModelsSource | None = None,
        chains_for_verifier: bool = False,
        miner: EvidenceChainMiner | None = None,
        triple_source: TripleSource | None = None,
        chains_decoding: ChainsDecoding | None = None,
        controller: BeliefController | None = None,
    ) -> None:
        self.owner = owner
        if controller is not None:
            self._adopt(
                controller,
                llm=llm,
                k=k,
                config=config,
                calibrator=calibrator,
                after_search=after_search,
                embedder=embedder,
                models=models,
                chains_for_verifier=chains_for_verifier or None,
                miner=miner,
                triple_source=triple_source,
                chains_decoding=chains_decoding,
            )
            return
        self.custom = False
        framework = chat_model_or_none(owner, llm) is not None  # the fix, before anything
        refitted = calibrator is not None or after_search is not None
        self.config = belief_config(owner, config, k, default_config(llm, refitted=refitted))
        check_bool(owner, "chains_for_verifier", chains_for_verifier)
        if chains_decoding is not None:
            check_choice(owner, "chains_decoding", chains_decoding, ("none", "beam", "rank"))
        for name, value, kind in (
            ("calibrator", calibrator, AnswerabilityCalibrator),
            ("after_search", after_search, AnswerabilityCalibrator),
            ("miner", miner, EvidenceChainMiner),
        ):
            check_instance(owner, name, value, kind, optional=True)
        mines = chains_for_verifier or self.config.refine_answer != "none"
        unused = {
            "miner": None if mines else miner,
            "triple_source": None if mines else triple_source,
            "chains_decoding": None if chains_for_verifier else chains_decoding,
        }
        given = [name for name, value in unused.items() if value is not None]
        if given:
            raise ConfigError(
                f"{owner}: {', '.join(given)} only serve(s) the chains; set "
                "chains_for_verifier=True (or, for miner and triple_source, "
                "config={'refine_answer': 'all'}) or leave them unset"
            )
        local_lm = None if framework else llm
        embedder = engine_embedder(embedder)
        theirs: TripleSource | None = None
        if models is not None:
            reject_owned_settings(
                "models",
                "pass them where those models were built, or here without models=",
                embedder=embedder,
                lm=local_lm,
            )
            if miner is not None:
                raise ConfigError(
                    f"{owner}: pass models= or miner= (whose models are shared), not both"
                )
            shared, theirs = _shared_models(models)
        elif miner is not None:
            reject_owned_settings(
                "miner",
                "pass them where that miner was built, or here without miner=",
                embedder=embedder,
                lm=local_lm,
            )
            shared = miner.models  # one embedder for relevance and the chains
        else:
            shared = LazyModels(embedder=embedder, lm=local_lm)
        self.llm = llm
        self.models = shared
        pair = None if refitted or framework else shipped_pair(llm)
        if pair is not None:  # a bundled LM preset: the models fitted on its episodes
            calibrator, after_search = pair
        self.calibrator = calibrator or AnswerabilityCalibrator.load()
        self.after_search = after_search or AnswerabilityCalibrator.load(shipped=AFTER_SEARCH_FILE)
        self.chains_decoding = chains_decoding
        if miner is None and triple_source is None:
            miner = _miner_of(models)  # a shared miner keeps its settings and triples
        if miner is None:
            # Built even when nothing mines yet (it loads nothing until used): a call may
            # turn refine_answer on, and should refine on the shared models and triples.
            miner = answer_miner(shared, theirs if triple_source is None else triple_source)
        self.miner = miner if chains_for_verifier else None
        self.answer_miner: EvidenceChainMiner | None = miner
        self.controller = self.build_controller(llm)

    def _adopt(self, controller: BeliefController, **settings: Any) -> None:
        if not isinstance(controller, BeliefController):
            raise ConfigError(
                f"{self.owner}.controller must be a BeliefController or None, "
                f"got {type(controller).__name__}"
            )
        reject_owned_settings(
            "controller",
            "build the controller with them, or pass them here without controller=",
            **settings,
        )
        self.custom = True
        self.config = controller.config
        self.llm = None
        self.models = None
        self.calibrator = controller.calibrator
        self.after_search = controller.after_search
        self.chains_decoding = None
        self.miner = None
        self.answer_miner = None
        self.controller = controller

    @property
    def chains_for_verifier(self) -> bool:
        """Whether the verifier also sees the evidence chains (adapter-built controllers
        only; a controller passed in says so by its own verifier)."""
        return self.miner is not None

    def build_controller(self, llm: Any) -> BeliefController:
        """A controller whose LM components run on ``llm`` (the configured LLM, or a
        per-call stand-in for it) and whose relevance runs on the shared embedder. Cheap:
        the models are shared and load on first use."""
        if self.models is None:
            raise ConfigError(f"{self.owner}: a controller passed in is used as it is")
        budget = PromptBudget(max_passages=self.config.max_evidence)
        parts = default_components(llm, models=self.models, config=self.config, budget=budget)
        verifier: Any = parts.verifier
        if self.miner is not None:
            # Room for the chain document beside a full workspace.
            roomy = replace(budget, max_passages=budget.max_passages + 1)
            chat = chat_model_or_none(self.owner, llm)
            inner = LMVerifier(chat, models=self.models, budget=roomy)
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
        to_sources: Callable[[Sequence[T]], list[SourceDocument]],
        *,
        controller: BeliefController | None = None,
        overrides: Mapping[str, Any] | None = None,
    ) -> BeliefOutcome[T]:
        """One episode: ``fetch(query)`` asks the retriever (its first ``k`` results are
        used); ``to_sources`` reduces its objects, raising on foreign ones (which becomes a
        :class:`~neocorrag_core.errors.RetrievalError`, as does any retriever failure)."""
        call: BeliefCall[T] = BeliefCall(to_sources)
        ctrl = controller or self.controller
        result = ctrl.run(question, call.search_with(fetch), **dict(overrides or {}))
        return BeliefOutcome(result, call.originals([p.id for p in result.evidence]))

    async def arun(
        self,
        question: str,
        afetch: Callable[[str], Awaitable[Sequence[T]]],
        to_sources: Callable[[Sequence[T]], list[SourceDocument]],
        *,
        controller: BeliefController | None = None,
        overrides: Mapping[str, Any] | None = None,
    ) -> BeliefOutcome[T]:
        """Async :meth:`run`: searches are awaited, model calls run in a worker thread."""
        call: BeliefCall[T] = BeliefCall(to_sources)
        ctrl = controller or self.controller
        result = await ctrl.arun(question, call.asearch_with(afetch), **dict(overrides or {}))
        return BeliefOutcome(result, call.originals([p.id for p in result.evidence]))


def _miner_of(source: ModelsSource | None) -> EvidenceChainMiner | None:
    if isinstance(source, RefinerSettings):
        return source.miner
    return source if isinstance(source, EvidenceChainMiner) else None


def result_fields(result: BeliefResult) -> dict[str, Any]:
    """The episode as JSON-ready values (everything but the evidence documents)."""
    return {
        "question": result.question,
        "answer": result.answer,
        "abstained": result.abstained,
        "final_action": result.final_action.value,
        "retrieval_rounds": result.retrieval_rounds,
        "tokens": {
            "prompt": result.prompt_tokens,
            "generated": result.generated_tokens,
            "total": result.prompt_tokens + result.generated_tokens,
        },
        "trajectory": result.trajectory,
        "mutations": [
            {
                "kind": m.kind,
                "passage_ids": list(m.passage_ids),
                "step": m.step,
                "reason": m.reason,
            }
            for m in result.mutations
        ],
    }


__all__ = [
    "ABSTAIN_MESSAGE",
    "BeliefCall",
    "BeliefEngine",
    "BeliefOutcome",
    "ChainsDecoding",
    "belief_config",
    "question_of",
    "result_fields",
]
