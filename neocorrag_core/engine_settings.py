"""Where an adapter's engine comes from, and the user config it runs with: one mechanism for
the three roles (the refiner, the reformulating retriever, BeliefRAG) in every framework.

An adapter either drives an engine passed in (``miner=``, ``reformulator=``,
``controller=``: the models and triple source are then that engine's, and passing them again
is a :class:`~neocorrag_core.errors.ConfigError`, since they would be silently ignored),
builds one on models shared with ``models=``, or builds one on its own ``embedder`` / ``lm``.
Its config is a dict of the user config's fields (or the dataclass itself), checked once by
that dataclass, whose error names the field.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from neocorrag_core.chains.miner import EvidenceChainMiner
from neocorrag_core.errors import ConfigError
from neocorrag_core.evireform import EvidenceReformulator
from neocorrag_core.models import LazyModels
from neocorrag_core.triples import TripleSource
from neocorrag_core.validation import Settings, check_instance

T = TypeVar("T")
_S = TypeVar("_S", bound=Settings)


def shared_engine(owner: str, keyword: str, engine: T, kind: type, **owned: Any) -> T:
    """``engine``, passed to ``owner`` as ``keyword=``: a ``kind`` with none of the settings
    it owns (``owned``: name -> value, ``None`` when not passed) passed beside it."""
    if given := [name for name, value in owned.items() if value is not None]:
        raise ConfigError(
            f"{', '.join(given)} belong(s) to the {keyword} you passed; set them where that "
            f"{kind.__name__} was built, or leave {keyword}= out"
        )
    check_instance(owner, keyword, engine, kind)
    return engine


def models_of(models: Any, **owned: Any) -> tuple[LazyModels, TripleSource | None]:
    """The models (and triple source, when it has one) of what ``models=`` names: a
    :class:`~neocorrag_core.models.LazyModels`, an ``EvidenceChainMiner`` or an
    ``EvidenceReformulator`` (an adapter passes a refiner's miner); ``owned`` as for
    :func:`shared_engine`."""
    if given := [name for name, value in owned.items() if value is not None]:
        raise ConfigError(
            f"{', '.join(given)} belong(s) to the models you passed; pass them where those "
            "models were built, or leave models= out"
        )
    if isinstance(models, LazyModels):
        return models, None
    if isinstance(models, EvidenceChainMiner | EvidenceReformulator):
        return models.models, models.triple_source
    raise ConfigError(
        "models must be a LazyModels, an EvidenceChainMiner, an EvidenceReformulator, or a "
        f"NeocorRAGCompressor / NeocorRAGPostprocessor; got {type(models).__name__}"
    )


def config_changes(where: str, changes: Any, kind: str, *, whole: bool = False) -> dict[str, Any]:
    """``changes`` (``None``: none) as a dict of ``kind`` field names, else a ``ConfigError``
    naming ``where`` (``whole``: an instance of ``kind`` was accepted too)."""
    if changes is not None and not isinstance(changes, Mapping):
        expected = f"a {kind} or a dict of its fields" if whole else f"a dict of {kind} fields"
        raise ConfigError(f"{where} must be {expected}, got {type(changes).__name__}")
    if bad := [key for key in changes or {} if not isinstance(key, str)]:
        raise ConfigError(f"{where} keys must be field names, got {bad[0]!r}")
    return dict(changes or {})


def with_config(where: str, base: _S, changes: Any, *, whole: bool = True) -> _S:
    """``base`` with ``changes`` (a dict of its fields, or with ``whole`` an instance of its
    class, used as it is), checked by the dataclass; the error names ``where``.

    Examples
    --------
    >>> from neocorrag_core.evireform import ReformulationConfig
    >>> with_config("Retriever.config", ReformulationConfig(), {"residual_k": 3}).residual_k
    3
    """
    if whole and isinstance(changes, type(base)):
        return changes
    given = config_changes(where, changes, type(base).__name__, whole=whole)
    try:
        return base.with_overrides(**given)
    except ConfigError as err:
        raise ConfigError(f"{where}: {err}") from err


__all__ = ["config_changes", "models_of", "shared_engine", "with_config"]
