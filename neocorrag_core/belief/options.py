"""The BeliefRAG adapters' keywords and the controller they build, once for every framework.

LangChain's ``BeliefRAG`` and LlamaIndex's ``BeliefQueryEngine`` take the same keywords
besides the retriever and the LLM (:class:`BeliefOptions`); :class:`BeliefSetup` checks them
and builds the :class:`~neocorrag_core.belief.BeliefController` through
:meth:`~neocorrag_core.belief.BeliefController.from_models`, the one place a controller is
built on shared models. An adapter hands it core objects only: the LLM as a
:class:`~neocorrag_core.lm.chat.ChatModel` or a local LM spec, the embedder as the core takes
one, a refiner passed as ``models=`` as its miner. The episode over the user's retriever is
here too (:meth:`BeliefSetup.run`: the evidence comes back as the retriever's own objects),
with the rules every adapter applies at its edge: the question (:func:`question_of`), the
per-call overrides (:meth:`BeliefSetup.call_overrides`: user settings only) and the
abstention text.

Each setting has one way in. ``k`` is the adapters' own keyword, never a ``config`` field;
the research settings (:class:`~neocorrag_core.belief.BeliefTuning`) are no adapter setting
at all: build a controller with them and pass it as ``controller=``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Literal, TypedDict, TypeVar

from neocorrag_core.chains.miner import EvidenceChainMiner
from neocorrag_core.engine_settings import config_changes, models_of, shared_engine, with_config
from neocorrag_core.errors import ConfigError, InputError
from neocorrag_core.lm.chat import chat_model_or_none
from neocorrag_core.models import LazyModels
from neocorrag_core.records.calls import DocumentCall
from neocorrag_core.records.documents import Reader, check_query
from neocorrag_core.triples import TripleSource
from neocorrag_core.validation import check_bool, check_choice, check_instance, check_int

from .calibrator import AnswerabilityCalibrator
from .config import BeliefConfig, BeliefTuning, default_config
from .controller import BeliefController
from .defaults import answer_miner
from .types import BeliefResult

T = TypeVar("T")

ABSTAIN_MESSAGE = "I cannot answer this from the evidence found."
"""The LlamaIndex response text when the controller abstains (``metadata["abstained"]``
says so too; LangChain returns ``answer=None``)."""

DEFAULT_K = BeliefConfig().k
"""The passages per search of an adapter built without ``k=``."""

_TUNING_HINT = (
    "build a controller with them, BeliefController(..., tuning=BeliefTuning(...)) or "
    "BeliefController.from_models(..., tuning=BeliefTuning(...)), and pass it as controller="
)
"""Where the research settings go instead of an adapter's config or call."""


class BeliefOptions(TypedDict, total=False):
    """The keywords both BeliefRAG adapters take besides the retriever and ``llm``."""

    k: int | None
    """Passages used per search (default 5); the one way to set it (not in ``config``)."""
    config: BeliefConfig | dict[str, Any] | None
    """A :class:`~neocorrag_core.belief.BeliefConfig` or a dict of its fields but ``k``; a
    dict changes the generator's defaults (a bundled preset's settings included)."""
    calibrator: AnswerabilityCalibrator | None
    """The answerability model (default: the coefficient file shipped)."""
    after_search: AnswerabilityCalibrator | None
    """The model of the answer after one more search (default: the file shipped)."""
    embedder: Any
    """For the relevance diagnostic and the chains' miner (``None`` = bundled MiniLM)."""
    models: Any
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
    """A ready controller (your own components, or research settings) instead of every
    setting above."""


def question_of(owner: str, value: Any) -> str:
    """The question of an adapter input, as valid Unicode: a string, or a mapping with a
    ``"question"`` string; anything else (an empty question too) is an
    :class:`~neocorrag_core.errors.InputError`."""
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


class BeliefSetup:
    """One BeliefRAG adapter's checked settings and the controller they build.

    ``llm`` is a :class:`~neocorrag_core.lm.chat.ChatModel` (the adapter's translation of the
    user's LLM) or a local LM spec (``None`` = the bundled LM, loaded on first use);
    ``options`` are :class:`BeliefOptions`, framework objects already translated. Every
    setting is checked here (a bad one is a :class:`~neocorrag_core.errors.ConfigError`, an
    unknown keyword a ``TypeError``); nothing loads until the first episode.
    """

    custom: bool
    """Whether the controller was passed in (``controller=``), not built here."""
    llm: Any
    models: LazyModels | None
    answer_miner: EvidenceChainMiner | None
    """The miner that refines the answer's evidence (``refine_answer``)."""
    miner: EvidenceChainMiner | None
    """The miner whose chains the verifier sees (``chains_for_verifier``), else ``None``."""
    chains_decoding: Literal["none", "beam", "rank"] | None
    config: BeliefConfig
    controller: BeliefController

    def __init__(self, owner: str, llm: Any, options: Mapping[str, Any]) -> None:
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
            shared_engine(owner, "controller", controller, BeliefController, llm=llm, **given)
            self.custom, self.llm, self.models, self.chains_decoding = True, None, None, None
            self.answer_miner = self.miner = None
            self.controller, self.config = controller, controller.config
            return
        self.custom = False
        framework = chat_model_or_none(owner, llm) is not None  # the fix, before anything
        calibrator, after = options.get("calibrator"), options.get("after_search")
        refitted = calibrator is not None or after is not None
        self.config = self._user_config(default_config(llm, refitted=refitted), options)
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
        embedder, local_lm = options.get("embedder"), None if framework else llm
        owned = {"embedder": embedder, "lm": local_lm}
        models, theirs = options.get("models"), None
        if models is not None:
            if miner is not None:
                raise ConfigError(
                    f"{owner}: pass models= or miner= (whose models are shared), not both"
                )
            shared, theirs = models_of(models, **owned)
        elif miner is not None:
            shared = shared_engine(owner, "miner", miner, EvidenceChainMiner, **owned).models
        else:
            shared = LazyModels(embedder=embedder, lm=local_lm)
        self.llm, self.models, self.chains_decoding = llm, shared, decoding
        if miner is None and triples is None and isinstance(models, EvidenceChainMiner):
            miner = models  # a shared miner (a refiner's too) keeps its settings
        # Built even when nothing mines yet (it loads nothing until used): a call may turn
        # refine_answer on, and should refine on the shared models and triples.
        self.answer_miner = miner or answer_miner(shared, triples or theirs)
        self.miner = self.answer_miner if chains else None
        self.controller = self._build(llm, calibrator, after)

    @property
    def chains_for_verifier(self) -> bool:
        """Whether the verifier also sees the evidence chains (adapter-built controllers
        only; a controller passed in says so by its own verifier)."""
        return self.miner is not None

    def build_controller(self, llm: Any) -> BeliefController:
        """A controller like :attr:`controller` whose LM components run on ``llm`` (a
        per-call stand-in for the configured LLM carrying a run's callbacks). Cheap: the
        models and the fitted files are shared."""
        if self.models is None:
            raise ConfigError(f"{self.name}: a controller passed in is used as it is")
        return self._build(llm, self.controller.calibrator, self.controller.after_search)

    def call_overrides(self, overrides: Mapping[str, Any]) -> dict[str, Any]:
        """The keywords of one call, checked: :class:`~neocorrag_core.belief.BeliefConfig`
        fields only (``k`` included); a research setting or an unknown name is a
        :class:`~neocorrag_core.errors.ConfigError` saying where it goes instead."""
        if not overrides:
            return {}
        research = sorted(set(overrides) & set(BeliefTuning.field_names()))
        if research:
            raise ConfigError(
                f"{self.name}: {', '.join(research)}: research setting(s) of BeliefTuning, "
                f"not per-call settings (a call takes BeliefConfig fields); {_TUNING_HINT}"
            )
        try:
            self.config.with_overrides(**overrides)
        except ConfigError as err:
            raise ConfigError(f"{self.name}: {err}") from err
        return dict(overrides)

    def run(
        self,
        question: str,
        fetch: Callable[[str], Sequence[T]],
        read: Reader,
        *,
        controller: BeliefController | None = None,
        overrides: Mapping[str, Any] | None = None,
    ) -> tuple[BeliefResult, list[T]]:
        """One episode for a checked question over the user's retriever: ``fetch(query)``
        asks it (its first ``k`` results are used), ``read`` reads its objects (raising on
        foreign ones, which becomes a ``RetrievalError``); ``controller`` (default
        :attr:`controller`) runs it with ``overrides`` (:meth:`call_overrides`). Returns the
        result and the evidence as the retriever's own objects."""
        call: DocumentCall[T] = DocumentCall(read)
        changes = self.call_overrides(overrides or {})
        ctrl = controller or self.controller
        result = ctrl.run(question, call.search_with(fetch), **changes)
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
        call: DocumentCall[T] = DocumentCall(read)
        changes = self.call_overrides(overrides or {})
        ctrl = controller or self.controller
        result = await ctrl.arun(question, call.asearch_with(afetch), **changes)
        return result, call.originals([p.id for p in result.evidence])

    def _build(
        self,
        llm: Any,
        calibrator: AnswerabilityCalibrator | None,
        after_search: AnswerabilityCalibrator | None,
    ) -> BeliefController:
        return BeliefController.from_models(
            llm,
            models=self.models,
            calibrator=calibrator,
            after_search=after_search,
            config=self.config,
            miner=self.answer_miner,
            verifier_chains=self.miner,
            chains_decoding=self.chains_decoding,
        )

    def _user_config(self, base: BeliefConfig, options: Mapping[str, Any]) -> BeliefConfig:
        """``base`` with ``config`` (a dict of its fields, or a whole ``BeliefConfig``) and
        ``k`` applied; ``k`` inside ``config`` and research fields are ``ConfigError``\\ s
        naming the way in."""
        where, changes, k = f"{self.name}.config", options.get("config"), options.get("k")
        check_int(self.name, "k", k, minimum=1, optional=True)
        given = (
            None if isinstance(changes, BeliefConfig) else
            config_changes(where, changes, "BeliefConfig", whole=True)
        )  # fmt: skip
        if given is not None and "k" in given:
            raise ConfigError(
                f"{where}: k is set with {self.name}'s own k= keyword, not in config: "
                f"{self.name}(..., k={given['k']!r})"
            )
        if isinstance(changes, BeliefConfig) and changes.k != DEFAULT_K:
            raise ConfigError(
                f"{where}: k is set with {self.name}'s own k= keyword, not in config: "
                f"{self.name}(..., k={changes.k!r}), the BeliefConfig's k left at its "
                f"default ({DEFAULT_K})"
            )
        if research := sorted(set(given or {}) & set(BeliefTuning.field_names())):
            raise ConfigError(
                f"{where}: {', '.join(research)}: research setting(s) of BeliefTuning, "
                f"not BeliefConfig fields; {_TUNING_HINT}"
            )
        config = changes if isinstance(changes, BeliefConfig) else with_config(where, base, given)
        return config if k is None else config.with_overrides(k=int(k))


__all__ = [
    "ABSTAIN_MESSAGE",
    "DEFAULT_K",
    "BeliefOptions",
    "BeliefSetup",
    "question_of",
]
