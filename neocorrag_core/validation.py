"""Field checks shared by every configuration object, raising :class:`ConfigError` at construction;
:class:`Settings`, the base of the configuration dataclasses (changed copies, plain dicts, field
names routed to the object that owns them); and :func:`clean_text`, which makes untrusted text
valid Unicode where it enters.

One place decides what a valid integer, number, flag or choice is, so ``MinerConfig``,
``ReformulationConfig`` and the adapters reject the same things with the same words: NaN and
infinities, ``2.5`` where a count is meant, ``"3"`` or ``"no"`` where a number or a flag is
meant. ``bool`` is not accepted as an integer (``True`` beams is a mistake, not 1 beam).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import asdict, fields, replace
from numbers import Integral, Real
from typing import Any, ClassVar, TypeVar

from neocorrag_core.errors import ConfigError


def _where(owner: str, name: str) -> str:
    return f"{owner}.{name}" if owner else name


def check_int(
    owner: str, name: str, value: Any, *, minimum: int | None = None, optional: bool = False
) -> None:
    """``value`` must be an integer (not a bool, not a float such as 2.0) >= ``minimum``."""
    if value is None and optional:
        return
    if isinstance(value, bool) or not isinstance(value, Integral):
        hint = " or None" if optional else ""
        raise ConfigError(
            f"{_where(owner, name)} must be an integer{hint}, got {type(value).__name__} {value!r}"
        )
    if minimum is not None and value < minimum:
        raise ConfigError(f"{_where(owner, name)} must be >= {minimum}, got {value}")


def check_number(
    owner: str,
    name: str,
    value: Any,
    *,
    low: float | None = None,
    high: float | None = None,
    low_open: bool = False,
    optional: bool = False,
) -> None:
    """``value`` must be a finite real number within ``[low, high]`` (``(low, high]`` with
    ``low_open``)."""
    if value is None and optional:
        return
    if isinstance(value, bool) or not isinstance(value, Real):
        hint = " or None" if optional else ""
        raise ConfigError(
            f"{_where(owner, name)} must be a number{hint}, got {type(value).__name__} {value!r}"
        )
    try:
        number = float(value)
    except OverflowError:  # an int too large for a float (10**400)
        raise ConfigError(
            f"{_where(owner, name)} must be a finite number, got an integer too large for a float"
        ) from None
    if not math.isfinite(number):
        raise ConfigError(f"{_where(owner, name)} must be a finite number, got {value}")
    below = low is not None and (number <= low if low_open else number < low)
    if below or (high is not None and number > high):
        left = "(" if low_open else "["
        lo = "-inf" if low is None else f"{low:g}"
        hi = "inf" if high is None else f"{high:g}"
        raise ConfigError(f"{_where(owner, name)} must be within {left}{lo}, {hi}], got {value}")


def check_bool(owner: str, name: str, value: Any, *, optional: bool = False) -> None:
    """``value`` must be ``True`` or ``False`` (``"no"`` and ``0`` are not flags)."""
    if value is None and optional:
        return
    if not isinstance(value, bool):
        hint = ", False or None" if optional else " or False"
        raise ConfigError(
            f"{_where(owner, name)} must be True{hint}, got {type(value).__name__} {value!r}"
        )


def check_choice(owner: str, name: str, value: Any, choices: Iterable[str]) -> None:
    """``value`` must be one of ``choices``."""
    allowed = tuple(choices)
    if not isinstance(value, str) or value not in allowed:
        raise ConfigError(
            f"{_where(owner, name)} must be one of {', '.join(map(repr, allowed))}, got {value!r}"
        )


def check_instance(
    owner: str, name: str, value: Any, kind: type, *, optional: bool = False
) -> None:
    """``value`` must be an instance of ``kind`` (a class, or a runtime-checkable protocol,
    which it must then implement)."""
    if (value is None and optional) or isinstance(value, kind):
        return
    article = "an" if kind.__name__[:1] in "AEIOU" else "a"
    what = "implement" if getattr(kind, "_is_protocol", False) else f"be {article}"
    hint = " or None" if optional else ""
    raise ConfigError(
        f"{_where(owner, name)} must {what} {kind.__name__}{hint}, got {type(value).__name__}"
    )


_S = TypeVar("_S", bound="Settings")


class Settings:
    """Base of the frozen configuration dataclasses.

    Each system has two: the settings a user chooses (``MinerConfig``,
    ``ReformulationConfig``, ``BeliefConfig``; at most 12 fields) and its research settings
    (``MinerTuning``, ``ReformulationTuning``, ``BeliefTuning``: the paper's fixed
    hyper-parameters, work caps, prompt budgets and ablation switches, which the lab varies).
    The two of a system share no field name, so a flat ``name=value`` (per-call overrides, the
    eval's ``--miner KEY=VALUE``, the lab's methods) reaches the one object that has it
    (:func:`with_changes`). Subclasses check their fields in ``__post_init__`` and end it with
    :meth:`_plain_numbers`.
    """

    __dataclass_fields__: ClassVar[dict[str, Any]]
    research: ClassVar[type[Settings] | None] = None
    """For a user config: the class of its system's research settings (named in the error
    for a research field passed where only user settings are taken)."""

    @classmethod
    def field_names(cls) -> tuple[str, ...]:
        """The names of the fields, in declaration order."""
        return tuple(f.name for f in fields(cls))

    def with_overrides(self: _S, **changes: Any) -> _S:
        """A copy with some fields changed, checked like the original; an unknown name is a
        :class:`ConfigError` naming it (and the research settings that have it, if any)."""
        unknown = sorted(set(changes) - set(self.field_names()))
        if unknown:
            owner = type(self).__name__
            research = self.research
            if research is not None and set(unknown) <= set(research.field_names()):
                raise ConfigError(
                    f"{', '.join(unknown)}: research setting(s) of {research.__name__}, not "
                    f"{owner} field(s); the engine takes them as tuning={research.__name__}(...)"
                )
            raise ConfigError(
                f"unknown {owner} field(s): {', '.join(unknown)}; "
                f"known: {', '.join(self.field_names())}"
            )
        return replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        """Plain dict of every field (reports, caches, run metadata)."""
        return asdict(self)

    def _plain_numbers(self) -> None:
        """Integer fields as plain ``int`` (a numpy integer passes :func:`check_int`), so the
        settings serialize to JSON as given."""
        for name in self.field_names():
            value = getattr(self, name)
            if isinstance(value, Integral) and not isinstance(value, int):
                object.__setattr__(self, name, int(value))


_Config = TypeVar("_Config", bound=Settings)
_Tuning = TypeVar("_Tuning", bound=Settings)


def with_changes(
    config: _Config, tuning: _Tuning, changes: Mapping[str, Any]
) -> tuple[_Config, _Tuning]:
    """``config`` and ``tuning`` (a system's user and research settings) with ``changes``
    applied, each name to the one that has the field; a name neither has is a
    :class:`ConfigError` naming both classes. Unchanged objects are returned as they are."""
    if not changes:
        return config, tuning
    user = {k: v for k, v in changes.items() if k in config.field_names()}
    research = {k: v for k, v in changes.items() if k not in user}
    unknown = sorted(set(research) - set(tuning.field_names()))
    if unknown:
        raise ConfigError(
            f"unknown {type(config).__name__} or {type(tuning).__name__} field(s): "
            f"{', '.join(unknown)}"
        )
    return (
        config.with_overrides(**user) if user else config,
        tuning.with_overrides(**research) if research else tuning,
    )


def clean_text(value: str) -> str:
    """``value`` as valid Unicode: each lone surrogate replaced by U+FFFD.

    A Python string can hold code points U+D800-U+DFFF that encode no character: what
    ``json.loads('"\\ud800"')`` returns, or a ``surrogateescape`` decode of bytes that are
    not UTF-8 (file names, ``sys.argv``). Such a string is not UTF-8, so a tokenizer raises
    ``TypeError`` on it and ``str.encode``, ``hashlib`` and SQLite a ``UnicodeEncodeError``,
    deep inside a call. Every place where text enters neocorrag (passages, triples, queries,
    documents, data files, store imports) passes it through here, so the rest of the code
    only ever sees valid text. A high and a low surrogate in a row (a character written as
    two UTF-16 halves) become the character they encode. Returns ``value`` itself when it
    is valid, the common case, which costs one ``isascii`` or one encode.
    """
    if value.isascii():
        return value
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        # UTF-16 pairs the halves that belong together; "replace" turns each lone one
        # into U+FFFD.
        return value.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
    return value


__all__ = [
    "Settings",
    "check_bool",
    "check_choice",
    "check_instance",
    "check_int",
    "check_number",
    "clean_text",
    "with_changes",
]
