"""The lab scripts' argparse types: counts given on the command line.

The scripts (``benchmarks/*.py``) take the product's public API and keep their own command
line helpers here, rather than borrowing the ``neocorrag`` command's internals
(``neocorrag_core.cli``), which may change with the command. The messages are the
command's, so a script refuses a bad count the way ``neocorrag index`` does.
"""

from __future__ import annotations

import argparse


def whole_number(text: str, *, minimum: int) -> int:
    """``text`` as an int of at least ``minimum``, or ``argparse.ArgumentTypeError``."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a whole number, got {text!r}") from None
    if value < minimum:
        raise argparse.ArgumentTypeError(f"must be at least {minimum}, got {value}")
    return value


def at_least_one(text: str) -> int:
    """argparse type of a count option: a whole number of at least 1."""
    return whole_number(text, minimum=1)


def at_least_zero(text: str) -> int:
    """argparse type of a count option where 0 means none: a whole number of at least 0."""
    return whole_number(text, minimum=0)


__all__ = ["at_least_one", "at_least_zero", "whole_number"]
