"""Calling a user's ``search(query, k)``: one place for the checks and errors every loop needs.

EviReform and the evidence-state controller both drive a search function they do not own.
A failing search, or one that returns something other than passages, becomes a
:class:`~neocorrag_core.errors.RetrievalError` naming the query, so the caller sees which
search broke and no loop continues on half a result.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from neocorrag_core.errors import RetrievalError
from neocorrag_core.types import Passage
from neocorrag_core.validation import check_int

SearchFn = Callable[[str, int], Sequence[Passage]]
"""``search(query, k)`` -> up to ``k`` passages, best first."""
AsyncSearchFn = Callable[[str, int], Awaitable[Sequence[Passage]]]


def search_error(query: str, err: Exception) -> RetrievalError:
    """The error for a search that raised ``err``."""
    return RetrievalError(
        f"the wrapped search failed for query {query!r}: {type(err).__name__}: {err}"
    )


def check_results(query: str, results: Any) -> list[Passage]:
    """``results`` as a list of passages, or a :class:`RetrievalError` saying what came back."""
    if isinstance(results, (str, bytes)) or not isinstance(results, Sequence):
        raise RetrievalError(
            f"the search returned a {type(results).__name__} for query {query!r}; "
            "it must return a list of Passage objects"
        )
    passages: list[Passage] = []
    for i, item in enumerate(results):
        if not isinstance(item, Passage):
            raise RetrievalError(
                f"the search returned a {type(item).__name__} at position {i} for query "
                f"{query!r}; it must return neocorrag_core.Passage objects"
            )
        passages.append(item)
    return passages


def call_search(search: SearchFn, query: str, k: int) -> list[Passage]:
    """``search(query, k)``, checked, cut to ``k``; failures become :class:`RetrievalError`."""
    check_int("call_search", "k", k, minimum=1)
    try:
        results = search(query, k)
    except Exception as err:
        raise search_error(query, err) from err
    return check_results(query, results)[:k]


async def acall_search(search: AsyncSearchFn, query: str, k: int) -> list[Passage]:
    """Async :func:`call_search`."""
    check_int("acall_search", "k", k, minimum=1)
    try:
        results = await search(query, k)
    except Exception as err:
        raise search_error(query, err) from err
    return check_results(query, results)[:k]


async def gather_all_or_cancel(calls: list[Awaitable[list[Passage]]]) -> list[list[Passage]]:
    """Run one round's searches concurrently; on the first failure cancel the others
    (no search keeps running, or warns later, after the error is raised)."""
    tasks = [asyncio.ensure_future(call) for call in calls]
    try:
        return list(await asyncio.gather(*tasks))
    except BaseException:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise


__all__ = [
    "AsyncSearchFn",
    "SearchFn",
    "acall_search",
    "call_search",
    "check_results",
    "gather_all_or_cancel",
    "search_error",
]
