"""How the ``neocorrag`` command fails: one line for an error, nothing for a closed pipe.

:func:`~neocorrag_core.cli.app.main` catches what a subcommand raises and calls
:func:`error_line` for the line it prints (exit 2). neocorrag's own errors carry their
message; an OS error the code below did not explain (a bare ``[Errno 28] No space left on
device``) is said here instead, from what the subcommand declared with :class:`OnOSError`:
what it was doing, on which file, and what state the store is in after such a failure.

A closed output pipe (``neocorrag store stats | head -1``) is not an error: the reader has
what it wanted. :func:`watch_stdout` tells an error writing stdout (a closed pipe, a full
disk stdout is redirected to) apart from the same error elsewhere, and :func:`quiet_stdout`
points stdout at the null device so that the interpreter's last flush does not fail again
(the recipe of Python's ``signal`` documentation).
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, TextIO, cast

from neocorrag_core.errors import NeocorragError
from neocorrag_core.os_errors import describe_os_error


@dataclass(frozen=True)
class OnOSError:
    """What a subcommand says when an unexplained OS error stops it.

    ``doing`` is formatted with the subcommand's arguments (``{store}``, ``{file}``,
    ``{corpus}``; ``{file}`` reads ``stdout`` / ``stdin`` for ``-``). ``target`` names the
    argument that holds the file an error without a file name most likely concerns (the
    file the subcommand writes). ``state`` is what is true of the store after any such
    failure: only what holds whenever the error came (e.g. "the store was not modified"
    for a subcommand that only reads it).
    """

    doing: str
    state: str = ""
    target: str = "store"
    stream: str = "stdout"
    """What ``-`` means for ``target``: ``stdout`` or ``stdin``."""

    def line(self, args: argparse.Namespace, exc: OSError | sqlite3.Error, out: bool) -> str:
        """The message for ``exc``; ``out``: the error came from writing stdout."""
        fields = {
            name: self.stream if value == "-" else value
            for name in ("store", "file", "corpus")
            if isinstance(value := getattr(args, name, None), str)
        }
        doing = self.doing.format(**fields)
        if isinstance(exc, sqlite3.Error):
            cause = f"SQLite: {' '.join(str(exc).split())}; check the store's disk and run again"
        elif out:
            cause = describe_os_error(exc, stream="stdout")
        else:
            target = getattr(args, self.target, None)
            if target == "-":
                cause = describe_os_error(exc, stream=self.stream)
            else:
                cause = describe_os_error(exc, target)
        tail = f"; {self.state}" if self.state else ""
        if out:
            tail += "; what it wrote to stdout is incomplete"
        return f"cannot {doing}: {cause}{tail}"


def error_line(args: argparse.Namespace, exc: BaseException, *, out: bool = False) -> str:
    """The one line ``main`` prints for ``exc`` (after ``neocorrag <command>: error: ``).

    neocorrag's own errors (and any without an errno) are their message, lines joined; a
    bare OS or SQLite error is said by the subcommand's :class:`OnOSError` where it has
    one, else as the file, the cause and the fix. ``out``: the error came from writing
    stdout."""
    context = getattr(args, "on_os_error", None)
    if isinstance(exc, sqlite3.Error) and isinstance(context, OnOSError):
        return context.line(args, exc, out)
    if isinstance(exc, OSError) and not isinstance(exc, NeocorragError) and exc.errno:
        if isinstance(context, OnOSError):
            return context.line(args, exc, out)
        return describe_os_error(exc, stream="stdout" if out else None)
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return "; ".join(lines) or type(exc).__name__


class StdoutWatch:
    """Stands in for ``sys.stdout`` and remembers the OS error its writes raised.

    An error writing stdout cannot be told from the same error elsewhere by its type (a
    broken pipe to a worker, a full disk the store is on), nor found afterwards (Python's
    buffered stream drops what it failed to write, so flushing again succeeds). So the
    writes themselves are watched; everything else goes to the stream as it is.
    """

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self.error: OSError | None = None

    def write(self, text: str) -> int:
        """Write ``text`` to the stream, remembering an OS error."""
        try:
            return self.stream.write(text)
        except OSError as exc:
            self.error = exc
            raise

    def flush(self) -> None:
        """Flush the stream, remembering an OS error."""
        try:
            self.stream.flush()
        except OSError as exc:
            self.error = exc
            raise

    def __getattr__(self, name: str) -> Any:
        return getattr(self.stream, name)

    def raised(self, exc: BaseException) -> bool:
        """Whether ``exc`` (or the error it was raised from) came from writing stdout."""
        return self.error is not None and self.error in (exc, exc.__cause__, exc.__context__)


@contextmanager
def watch_stdout() -> Iterator[StdoutWatch | None]:
    """``sys.stdout`` replaced by a :class:`StdoutWatch` of it for the block (``None``
    where there is no stdout), and put back after."""
    stream = sys.stdout
    if stream is None:  # pythonw: print() writes nowhere
        yield None
        return
    watch = StdoutWatch(stream)
    sys.stdout = replacement = cast(TextIO, watch)
    try:
        yield watch
    finally:
        if sys.stdout is replacement:
            sys.stdout = stream


def quiet_stdout() -> None:
    """Point stdout's file descriptor at the null device, so that the output it still
    holds goes nowhere and the interpreter's last flush does not raise again."""
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):
        return  # not a real file (a test's stream): nothing is flushed at exit
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, fd)
    finally:
        os.close(devnull)


__all__ = ["OnOSError", "StdoutWatch", "error_line", "quiet_stdout", "watch_stdout"]
