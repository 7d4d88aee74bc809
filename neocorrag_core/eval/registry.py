"""Which benchmark methods exist, and how each is built: a registry of lazy factories.

Each :class:`MethodSpec` names its factory as ``"module:function"``; the module is
imported only when the method is built, so listing methods (``neocorrag eval --help``)
imports no model code and no framework. Methods from other packages register through
the ``neocorrag.eval_methods`` entry point group: each entry point is a
:class:`MethodSpec` (``neocorrag_integrations.bench`` registers LangChain's filters this
way, which keeps ``neocorrag_core`` free of any framework import).
"""

from __future__ import annotations

import importlib
import inspect
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib.metadata import entry_points
from typing import Any

from neocorrag_core.chains.config import KEEP_MODES
from neocorrag_core.eval.protocol import BuildContext, Method, MethodFactory

logger = logging.getLogger(__name__)

ENTRY_POINT_GROUP = "neocorrag.eval_methods"


@dataclass(frozen=True)
class MethodSpec:
    """A benchmark method: its name, one line saying what it does, and its factory."""

    name: str
    description: str
    factory: str
    """``"package.module:function"``, a :data:`~neocorrag_core.eval.protocol.MethodFactory`."""
    requires: str = ""
    """What to install when the factory's imports fail (shown in the error)."""
    version: str = ""
    """``"package.module:function"`` taking the method name (and, when it has a ``reader``
    parameter, the run's ``--reader`` as ``reader=``) and returning the version of what
    the method's records depend on beyond the run settings (its prompts, a shipped
    coefficient file); a cached record of another version is run again. Empty: none."""
    answers: bool = False
    """The method answers by itself (``MethodOutput.answer``), so the run's reader never
    reads its context: it cannot run with ``--reader none`` or be replayed by
    ``--contexts-from``."""

    def _resolve(self, ref: str) -> Any:
        """The object a ``"module:attribute"`` reference names (its module imported now)."""
        module_name, _, attr = ref.partition(":")
        try:
            module = importlib.import_module(module_name)
        except ImportError as err:
            hint = f"; install {self.requires}" if self.requires else ""
            raise ImportError(f"method {self.name!r} cannot be built ({err}){hint}") from err
        return getattr(module, attr)

    def load_factory(self) -> MethodFactory:
        """Import the factory (the method's module is imported here, not before)."""
        factory: MethodFactory = self._resolve(self.factory)
        return factory

    def current_version(
        self, reader: str = "default", belief_overrides: Mapping[str, Any] | None = None
    ) -> str:
        """The method's version now (``""`` when it declares none) for a run with the
        reader preset ``reader`` and the ``--belief`` settings ``belief_overrides``;
        cheap, loads no model."""
        if not self.version:
            return ""
        version_of = self._resolve(self.version)
        # Version functions written before the reader (or the overrides) mattered take
        # fewer keywords; pass only those a function declares.
        declared = inspect.signature(version_of).parameters
        offered = {"reader": reader, "belief_overrides": dict(belief_overrides or {})}
        return str(version_of(self.name, **{k: v for k, v in offered.items() if k in declared}))


_REFINERS = "neocorrag_core.eval.refiners"
_EVIREFORM = "neocorrag_core.eval.evireform_methods"
_BELIEF = "neocorrag_core.eval.belief_methods"
_BELIEF_VERSION = f"{_BELIEF}:method_version"
_EVIREFORM_VERSION = f"{_EVIREFORM}:method_version"


def _miner_method(name: str, description: str) -> MethodSpec:
    """A variant of the miner (``refiners.NEOCORRAG_METHODS``), versioned by its config."""
    return MethodSpec(
        name, description, f"{_REFINERS}:build_miner", version=f"{_REFINERS}:method_version"
    )


BUILTIN_METHODS: tuple[MethodSpec, ...] = (
    MethodSpec("none", "no refinement: the retrieved top-k", f"{_REFINERS}:build_none"),
    *(
        MethodSpec(
            f"top-{n}", f"the first {n} passages by retrieval rank", f"{_REFINERS}:build_truncation"
        )
        for n in (2, 3, 4)
    ),
    _miner_method("neocorrag-beam", "neocorrag, trie-constrained beam decoding"),
    _miner_method("neocorrag-rank", "neocorrag, exact candidate ranking"),
    _miner_method("neocorrag-none", "neocorrag, search scores only (no LM)"),
    *(_miner_method(f"neocorrag-{mode}", f"neocorrag, keep={mode!r}") for mode in KEEP_MODES),
    _miner_method(
        "neocorrag-recall-full-chains",
        "neocorrag, keep='recall' with the paper's full chain block (chain_format='full')",
    ),
    _miner_method(
        "neocorrag-recall-no-chains",
        "neocorrag, keep='recall' without a chain block (chain_format='none', the default "
        "since miner-8)",
    ),
    _miner_method(
        "neocorrag-recall-linking-chains",
        "neocorrag, keep='recall' with every chain no kept passage states whole "
        "(chain_format='linking', max_chain_lines=None: the miner-6 block)",
    ),
    _miner_method(
        "neocorrag-recall-compact-chains",
        "neocorrag, keep='recall' with every chain, each fact once (chain_format='compact', "
        "the default before miner-4)",
    ),
    _miner_method(
        "neocorrag-recall-one-chain",
        "neocorrag, keep='recall' with only the first line of the linking chain block "
        "(max_chain_lines=1)",
    ),
    _miner_method(
        "neocorrag-recall-two-chains",
        "neocorrag, keep='recall' with the first two lines of the linking chain block "
        "(the miner-7 default; no block by default since miner-8)",
    ),
    _miner_method(
        "neocorrag-recall-whole",
        "neocorrag, keep='recall' with every kept passage whole (passage_focus='none', "
        "the default before miner-5)",
    ),
    _miner_method(
        "neocorrag-recall-focused",
        "neocorrag, keep='recall' with linked passages cut to their evidence sentences "
        "(passage_focus='linked')",
    ),
    _miner_method(
        "neocorrag-recall-focused-all",
        "neocorrag-recall-focused with the top-N passages cut too (passage_focus='all', "
        "the default)",
    ),
    _miner_method(
        "neocorrag-recall-focused-no-chains",
        "neocorrag-recall-focused without a chain block",
    ),
    _miner_method("ablation-naive-search", "neocorrag-beam with naive chain search (Table 2)"),
    MethodSpec(
        "ablation-free-decoding",
        "neocorrag-beam without constrained decoding (Table 2)",
        f"{_REFINERS}:build_free_decoding",
        version=f"{_REFINERS}:free_decoding_version",
    ),
    _miner_method("ablation-no-filter", "neocorrag-beam without document filtering (Table 2)"),
    MethodSpec(
        "evireform",
        "EviReform: residual queries, mixing, propagation",
        f"{_EVIREFORM}:build",
        version=_EVIREFORM_VERSION,
    ),
    MethodSpec(
        "evireform-lm",
        "EviReform with the LM: beam-selected evidence, LM-written residual queries",
        f"{_EVIREFORM}:build",
        version=_EVIREFORM_VERSION,
    ),
    MethodSpec(
        "evireform-rounds2",
        "EviReform with a second round while the question's relation words stay open",
        f"{_EVIREFORM}:build",
        version=_EVIREFORM_VERSION,
    ),
    MethodSpec(
        "evireform-repeat",
        "EviReform control: the original question asked again",
        f"{_EVIREFORM}:build",
        version=_EVIREFORM_VERSION,
    ),
    MethodSpec(
        "evireform-rerank",
        "EviReform control: residual queries re-score the first pool only",
        f"{_EVIREFORM}:build",
        version=_EVIREFORM_VERSION,
    ),
    MethodSpec(
        "evireform-neocorrag",
        "EviReform top-k, then neocorrag-beam refinement",
        f"{_EVIREFORM}:build",
        version=_EVIREFORM_VERSION,
    ),
    MethodSpec(
        "closed-book",
        "the answer generator without documents",
        f"{_BELIEF}:build",
        version=_BELIEF_VERSION,
        answers=True,
    ),
    MethodSpec(
        "single-shot",
        "the retrieved top-k, answered once",
        f"{_BELIEF}:build",
        version=_BELIEF_VERSION,
        answers=True,
    ),
    MethodSpec(
        "iterative",
        "fixed rounds of evidence-aware query writing and retrieval, then one answer",
        f"{_BELIEF}:build",
        version=_BELIEF_VERSION,
        answers=True,
    ),
    MethodSpec(
        "belief",
        "the evidence-state controller: verify, correct, search, answer or abstain",
        f"{_BELIEF}:build",
        version=_BELIEF_VERSION,
        answers=True,
    ),
    MethodSpec(
        "belief-no-correction",
        "belief ablation: no VERIFY (problematic evidence is never dropped)",
        f"{_BELIEF}:build",
        version=_BELIEF_VERSION,
        answers=True,
    ),
    MethodSpec(
        "belief-prune-only",
        "belief ablation: VERIFY drops passages but fetches no replacement",
        f"{_BELIEF}:build",
        version=_BELIEF_VERSION,
        answers=True,
    ),
    MethodSpec(
        "belief-frozen-answerability",
        "belief ablation: the first step's answerability is reused for the episode",
        f"{_BELIEF}:build",
        version=_BELIEF_VERSION,
        answers=True,
    ),
    MethodSpec(
        "belief-chains",
        "belief whose verifier also sees the NeocorRAG evidence chains",
        f"{_BELIEF}:build",
        version=_BELIEF_VERSION,
        answers=True,
    ),
    MethodSpec(
        "belief-refined",
        "belief whose answer generator reads the NeocorRAG-refined evidence",
        f"{_BELIEF}:build",
        version=_BELIEF_VERSION,
        answers=True,
    ),
    MethodSpec(
        "belief-refined-first",
        "belief whose answer generator reads the refined first search and later passages whole",
        f"{_BELIEF}:build",
        version=_BELIEF_VERSION,
        answers=True,
    ),
    MethodSpec(
        "belief-unrefined",
        "belief whose answer generator reads every passage of the evidence",
        f"{_BELIEF}:build",
        version=_BELIEF_VERSION,
        answers=True,
    ),
    MethodSpec(
        "belief-always-verify",
        "belief with a verifier call at every measured step (the paper's loop)",
        f"{_BELIEF}:build",
        version=_BELIEF_VERSION,
        answers=True,
    ),
)


def _plugin_specs() -> list[MethodSpec]:
    specs: list[MethodSpec] = []
    for point in entry_points(group=ENTRY_POINT_GROUP):
        try:
            spec = point.load()
        except Exception as err:  # a broken plug-in must not break the benchmark's own methods
            logger.warning("skipping eval method %r: its entry point failed (%s)", point.name, err)
            continue
        if not isinstance(spec, MethodSpec) or spec.name != point.name:
            logger.warning(
                "skipping eval method %r: its entry point is not a MethodSpec of that name",
                point.name,
            )
            continue
        specs.append(spec)
    return specs


def available_methods() -> dict[str, MethodSpec]:
    """Every method by name: the built-in ones first, then registered plug-ins."""
    methods = {spec.name: spec for spec in BUILTIN_METHODS}
    for spec in _plugin_specs():
        if spec.name in methods:
            logger.warning("ignoring plug-in eval method %r: the name is taken", spec.name)
            continue
        methods[spec.name] = spec
    return methods


def method_descriptions() -> dict[str, str]:
    """Name -> one-line description of every available method."""
    return {name: spec.description for name, spec in available_methods().items()}


def method_versions(
    names: Sequence[str],
    *,
    reader: str = "default",
    belief_overrides: Mapping[str, Any] | None = None,
) -> dict[str, str]:
    """The current version of each named method that declares one (see
    :attr:`MethodSpec.version`) in a run whose reader preset is ``reader`` and whose
    ``--belief`` settings are ``belief_overrides``; unknown names are left to
    :func:`build_methods`."""
    specs = available_methods()
    found = {
        name: specs[name].current_version(reader, belief_overrides)
        for name in names
        if name in specs
    }
    return {name: version for name, version in found.items() if version}


def build_methods(names: Sequence[str], context: BuildContext) -> list[Method]:
    """The methods called ``names``, built together so they share ``context.shared``."""
    specs = available_methods()
    unknown = [n for n in names if n not in specs]
    if unknown:
        raise ValueError(f"unknown method(s) {', '.join(unknown)}; choose from {', '.join(specs)}")
    return [specs[name].load_factory()(name, context) for name in names]


__all__ = [
    "BUILTIN_METHODS",
    "ENTRY_POINT_GROUP",
    "MethodSpec",
    "available_methods",
    "build_methods",
    "method_descriptions",
    "method_versions",
]
