"""The errors neocorrag raises on purpose: one family, each message saying what to do.

Every error below derives from :class:`NeocorragError`, so ``except NeocorragError`` catches
everything neocorrag raises deliberately, and the CLI turns any of them into one line and exit
code 2. Each class also derives from the built-in exception code written before this family
existed would catch (``ValueError`` for bad configuration and input, ``OSError`` for stores and
models, ``ImportError`` for missing extras, ``RuntimeError`` for a failing retriever), so
adopting the family breaks no caller.
"""

from __future__ import annotations


class NeocorragError(Exception):
    """Base class of every error neocorrag raises deliberately."""


class ConfigError(NeocorragError, ValueError, TypeError):
    """A configuration field has a wrong type or a meaningless value (NaN, inf, 2.5 beams...).

    Raised at construction (``MinerConfig``, ``ReformulationConfig``, the adapters' fields),
    never later from deep inside a call. Also a ``TypeError`` so that a wrong *type* is still
    caught where Python code expects one.
    """


class InputError(NeocorragError, ValueError):
    """A call's input (query, passages, documents, a data file) cannot be used as given."""


class StoreError(NeocorragError, OSError):
    """A triple store cannot be opened, read or written; the message names the file, the cause
    and the fix. A corrupt store is never overwritten.

    ``kind`` sorts the cause: ``"damaged"`` (not a store, or damaged pages), ``"removed"``
    (the file was deleted or replaced while open), ``"read-only"``, ``"busy"``, ``"full"``
    or ``"other"``.
    """

    def __init__(self, *args: object, kind: str = "other") -> None:
        super().__init__(*args)
        self.kind = kind

    def __reduce__(self) -> tuple[object, ...]:  # keep ``kind`` across pickling (workers)
        return (_store_error, (self.args, self.kind))


def _store_error(args: tuple[object, ...], kind: str) -> StoreError:
    return StoreError(*args, kind=kind)


class ModelLoadError(NeocorragError, RuntimeError, OSError):
    """A model could not be loaded, assembled or verified; the message says what was tried and
    what to pass instead. Also an ``OSError``, like the errors transformers raises for missing
    models."""


class MissingDependencyError(NeocorragError, ImportError):
    """An optional package is not installed; the message says what to ``pip install``."""


class RetrievalError(NeocorragError, RuntimeError):
    """A wrapped search / retriever failed or returned something that is not a list of
    passages."""


class ModelCallError(NeocorragError, RuntimeError):
    """A model call inside a loop (verifier, answer generator, query writer, relevance)
    failed; the message names the component and the original error, which is chained."""


class EmbedderError(ModelCallError, ValueError):
    """An embedder raised, or returned vectors that cannot be used (wrong shape or width,
    NaN or infinity); the message names the embedder. Nothing of such a reply is cached.
    Also a ``ValueError``, what a bad reply raised before this class existed."""


__all__ = [
    "ConfigError",
    "EmbedderError",
    "InputError",
    "MissingDependencyError",
    "ModelCallError",
    "ModelLoadError",
    "NeocorragError",
    "RetrievalError",
    "StoreError",
]
