"""Which benchmark methods exist, and how each is built: a registry of lazy factories.

Each :class:`MethodSpec` names its factory as ``"module:function"``; the module is
imported only when the method is built, so listing methods (``neocorrag eval --help``)
imports no model code and no framework. The product's methods (:data:`BUILTIN_METHODS`)
are what a user compares on their own QA file: no refinement, the miner at each setting
of the keep dial, EviReform and the evidence-state controller. Other packages add
methods through the ``neocorrag.eval_methods`` entry point group (each entry point a
:class:`MethodSpec`, or a sequence of them), or at run time with :func:`register_methods`.
The development lab (``benchmarks/neocorrag_lab`` in a checkout, never in the wheel) adds
its ablations, paper variants and peer baselines both ways; the product only knows their
names (:data:`LAB_METHOD_NAMES`), to say where a lab method is found.
"""

from __future__ import annotations

import importlib
import inspect
import logging
from collections.abc import Iterable, Mapping, Sequence
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
_PIPELINE = "neocorrag_core.eval.pipeline_methods"
_GRAPH = "neocorrag_core.eval.graph_methods"


BUILTIN_METHODS: tuple[MethodSpec, ...] = (
    MethodSpec("none", "no refinement: the retrieved top-k", f"{_REFINERS}:build_none"),
    *(
        MethodSpec(
            f"neocorrag-{mode}",
            f"neocorrag, keep={mode!r}",
            f"{_REFINERS}:build_miner",
            version=f"{_REFINERS}:method_version",
        )
        for mode in KEEP_MODES
    ),
    MethodSpec(
        "evireform",
        "EviReform: residual queries, mixing, propagation",
        f"{_EVIREFORM}:build",
        version=f"{_EVIREFORM}:method_version",
    ),
    MethodSpec(
        "evireform-refined",
        "EviReform, then the refiner told what EviReform found on purpose (the pipeline)",
        f"{_PIPELINE}:build",
        version=f"{_PIPELINE}:method_version",
    ),
    MethodSpec(
        "graph",
        "graph retrieval: the search's candidates chosen on the store's corpus graph",
        f"{_GRAPH}:build",
        version=f"{_GRAPH}:method_version",
    ),
    MethodSpec(
        "belief",
        "the evidence-state controller: verify, correct, search, answer or abstain",
        f"{_BELIEF}:build",
        version=f"{_BELIEF}:method_version",
        answers=True,
    ),
    MethodSpec(
        "belief-composed",
        "the evidence-state controller over the pipeline (each search: EviReform, refiner)",
        f"{_PIPELINE}:build",
        version=f"{_PIPELINE}:method_version",
        answers=True,
    ),
)
"""The product's methods, in the order they are listed."""

LAB_METHOD_NAMES: frozenset[str] = frozenset(
    {
        *(f"top-{n}" for n in (2, 3, 4)),
        "neocorrag-beam",
        "neocorrag-rank",
        "neocorrag-none",
        *(
            f"neocorrag-recall-{variant}"
            for variant in (
                "full-chains",
                "no-chains",
                "linking-chains",
                "compact-chains",
                "one-chain",
                "two-chains",
                "whole",
                "focused",
                "focused-all",
                "focused-no-chains",
            )
        ),
        "ablation-naive-search",
        "ablation-free-decoding",
        "ablation-no-filter",
        *(f"evireform-{v}" for v in ("lm", "rounds2", "repeat", "rerank", "neocorrag")),
        "evireform-refined-plain",
        "closed-book",
        "single-shot",
        "iterative",
        *(
            f"belief-{v}"
            for v in (
                "no-correction",
                "prune-only",
                "frozen-answerability",
                "chains",
                "refined",
                "refined-first",
                "unrefined",
                "always-verify",
            )
        ),
        "lc-embeddings-filter",
        *(f"lc-embeddings-filter-{t}" for t in ("0.3", "0.4", "0.6")),
        "lc-llm-filter",
        "lc-llm-filter-logits",
        "lc-multiquery-ef",
    }
)
"""The names of the development lab's methods (ablations, paper variants, peer baselines):
names only, so that asking for one where the lab is not installed says where it is. The
lab's tests check that this list and the lab's registry agree."""

LAB_INSTALL = (
    "the development lab (benchmarks/neocorrag_lab in a neocorrag checkout, not part of the "
    "installed package): pip install -e benchmarks, or run `python -m neocorrag_lab eval "
    "...` from the checkout's benchmarks/ folder (docs/development.md, 'The lab')"
)
"""Where the lab's methods are found, for error messages."""

_REGISTERED: dict[str, MethodSpec] = {}


def register_methods(specs: Iterable[MethodSpec]) -> None:
    """Add methods at run time (a package that registers its own when it is imported, as
    the development lab does). A name the product's methods use is refused; registering
    the same spec again is harmless; another spec under a registered name replaces it."""
    for spec in specs:
        if not isinstance(spec, MethodSpec):
            raise TypeError(f"register_methods takes MethodSpec objects, got {spec!r}")
        if spec.name in {s.name for s in BUILTIN_METHODS}:
            raise ValueError(f"eval method {spec.name!r} is one of neocorrag's own")
        _REGISTERED[spec.name] = spec


def _entry_point_specs(point: Any) -> list[MethodSpec]:
    """The specs one entry point declares: a MethodSpec named as the entry point, or a
    sequence of MethodSpecs (a package registering all its methods at once)."""
    loaded = point.load()
    if isinstance(loaded, MethodSpec):
        if loaded.name != point.name:
            raise TypeError(f"its MethodSpec is named {loaded.name!r}")
        return [loaded]
    if isinstance(loaded, (list, tuple)) and all(isinstance(s, MethodSpec) for s in loaded):
        return list(loaded)
    raise TypeError("it is not a MethodSpec or a sequence of MethodSpecs")


def _plugin_specs() -> list[MethodSpec]:
    specs: list[MethodSpec] = []
    for point in entry_points(group=ENTRY_POINT_GROUP):
        try:
            specs.extend(_entry_point_specs(point))
        except Exception as err:  # a broken plug-in must not break the benchmark's own methods
            logger.warning(
                "skipping eval method(s) %r: its entry point failed (%s)", point.name, err
            )
    return specs


def available_methods() -> dict[str, MethodSpec]:
    """Every method by name: the product's first, then those registered at run time
    (:func:`register_methods`), then those of the entry points."""
    methods = {spec.name: spec for spec in BUILTIN_METHODS}
    for spec in [*_REGISTERED.values(), *_plugin_specs()]:
        taken = methods.get(spec.name)
        if taken is not None and taken != spec:
            logger.warning("ignoring plug-in eval method %r: the name is taken", spec.name)
            continue
        methods[spec.name] = spec
    return methods


def unknown_methods_error(names: Sequence[str], known: Mapping[str, MethodSpec]) -> ValueError:
    """The usage error for method ``names`` that ``known`` lacks: a lab method is named as
    one, with where the lab is; any other name is unknown, with the methods there are."""
    lab = [n for n in names if n in LAB_METHOD_NAMES]
    other = [n for n in names if n not in LAB_METHOD_NAMES]
    said = []
    if lab:
        verb = "is a lab method" if len(lab) == 1 else "are lab methods"
        said.append(f"{', '.join(lab)} {verb}: {LAB_INSTALL}")
    if other:
        said.append(f"unknown method(s): {', '.join(other)}")
    return ValueError("; ".join(said) + f"; the methods here are: {', '.join(known)}")


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
        raise unknown_methods_error(unknown, specs)
    return [specs[name].load_factory()(name, context) for name in names]


__all__ = [
    "BUILTIN_METHODS",
    "ENTRY_POINT_GROUP",
    "LAB_INSTALL",
    "LAB_METHOD_NAMES",
    "MethodSpec",
    "available_methods",
    "build_methods",
    "method_descriptions",
    "method_versions",
    "register_methods",
    "unknown_methods_error",
]
