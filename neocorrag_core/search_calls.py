"""Calling a user's ``search(query, k)``: one place for the checks and errors every loop needs.

EviReform and the evidence-state controller both drive a search function they do not own.
A failing search, or one that returns something other than passages, becomes a
:class:`~neocorrag_core.errors.RetrievalError` naming the query, so the caller sees which
search broke and no loop continues on half a result.
"""

from __future__ import annotations

import asyncio
import contextvars
import time
from collections.abc import Awaitable, Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import wait as wait_futures
from dataclasses import dataclass, field
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


@dataclass
class SearchRound:
    """The results of one round of searches, in request order; a search that did not
    answer by the deadline has ``[]`` and its query is in ``timed_out``."""

    results: list[list[Passage]]
    timed_out: list[str] = field(default_factory=list)


def run_searches(
    search: SearchFn, requests: Sequence[tuple[str, int]], deadline: float | None = None
) -> SearchRound:
    """``call_search`` for each ``(query, k)`` of one round, concurrently in worker threads
    (each in a copy of the caller's context), as the async driver awaits them.

    ``deadline`` (a :func:`time.monotonic` time; ``None``: wait for all): a search still
    running then is given up, its result ``[]``; Python cannot stop a thread, so it runs to
    its end in the background and what it returns is discarded. The first failed search,
    in request order, raises its :class:`RetrievalError` once the round has ended.
    A single search with no deadline runs in the calling thread.
    """
    if len(requests) == 1 and deadline is None:
        query, k = requests[0]
        return SearchRound([call_search(search, query, k)])
    pool = ThreadPoolExecutor(max_workers=max(1, len(requests)), thread_name_prefix="search")
    try:
        futures: list[Future[list[Passage]]] = [
            pool.submit(contextvars.copy_context().run, call_search, search, query, k)
            for query, k in requests
        ]
        timeout = None if deadline is None else max(0.0, deadline - time.monotonic())
        wait_futures(futures, timeout=timeout)
    finally:
        pool.shutdown(wait=False, cancel_futures=True)
    return _round_of(requests, futures)


async def arun_searches(
    search: AsyncSearchFn, requests: Sequence[tuple[str, int]], deadline: float | None = None
) -> SearchRound:
    """Async :func:`run_searches`: the searches run concurrently as tasks; those still
    running at ``deadline`` are cancelled. The first failure cancels the rest and raises
    (the first failed search in request order)."""
    tasks = [asyncio.ensure_future(acall_search(search, query, k)) for query, k in requests]
    try:
        timeout = None if deadline is None else max(0.0, deadline - time.monotonic())
        await asyncio.wait(tasks, timeout=timeout, return_when=asyncio.FIRST_EXCEPTION)
    finally:
        await _cancel_all(tasks)  # those still running at the deadline, or after a failure
    return _round_of(requests, tasks)


async def _cancel_all(tasks: Sequence[asyncio.Future[Any]]) -> None:
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


def _round_of(
    requests: Sequence[tuple[str, int]],
    futures: Sequence[Future[list[Passage]] | asyncio.Future[list[Passage]]],
) -> SearchRound:
    """The round's results from finished futures (in request order); raises the first
    failure; a future not done (or cancelled at the deadline) counts as timed out."""
    out = SearchRound([])
    for (query, _), future in zip(requests, futures, strict=True):
        if not future.done() or future.cancelled():
            out.results.append([])
            out.timed_out.append(query)
            continue
        error = future.exception()
        if error is not None:
            raise error
        out.results.append(future.result())
    return out


__all__ = [
    "AsyncSearchFn",
    "SearchFn",
    "SearchRound",
    "acall_search",
    "arun_searches",
    "call_search",
    "check_results",
    "run_searches",
    "search_error",
]
