"""``neocorrag eval``: retrieve once, refine with each method, read, score, cache, report.

This module is the loop: which (question, method) records are left to do, and running
them, each cached as soon as it is done. The pieces it runs live beside it:
``settings`` (:class:`EvalSettings`, the run.json signature), ``records`` (the
per-method cache files and run.json), ``components`` (models, retriever, methods and
reader, built only when something is left to compute), ``replay`` (``--contexts-from``),
``scoring`` (one question's record), ``summary`` (aggregates, comparisons,
results.json, report.md, plots) and ``html_report`` (report.html, the page to browse the
records question by question). Their public names are importable from here as well.

Every (method, question) record is appended to ``<out>/cache/<method>.jsonl`` as soon
as it is done, so an interrupted run resumes where it stopped. ``<out>/run.json``
holds the settings that change results; resuming with different ones is refused
(use another ``--out``). Models are loaded only when something is left to compute.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from neocorrag_core.eval.components import Components, build_components, resolve_triple_source
from neocorrag_core.eval.datasets import QAExample, load_qa
from neocorrag_core.eval.estimate import estimate
from neocorrag_core.eval.html_report import write_html_report
from neocorrag_core.eval.protocol import MethodInput
from neocorrag_core.eval.reader import ReaderOutput
from neocorrag_core.eval.records import ResultCache, check_signature, write_signature
from neocorrag_core.eval.registry import method_versions
from neocorrag_core.eval.replay import ReplayedMethod, check_replay, replay_source
from neocorrag_core.eval.scoring import gold_diagnosis, peak_rss_mb, query_sources, score_record
from neocorrag_core.eval.settings import (
    BASELINE,
    DEFAULT_METHODS,
    ITERATIVE,
    POOLS,
    RETRIEVERS,
    EvalSettings,
    file_identity,
    spacy_identity,
)
from neocorrag_core.eval.splits import in_split
from neocorrag_core.eval.summary import aggregate, summarize, write_outputs
from neocorrag_core.types import Passage


def _pending(
    examples: Sequence[QAExample],
    methods: Sequence[str],
    cache: ResultCache,
    versions: dict[str, str],
) -> list[tuple[QAExample, list[str]]]:
    """Per question, the methods with no current record (none cached, or one cached by
    another version of the method: a changed prompt or coefficient file)."""

    def current(method: str, example: QAExample) -> bool:
        record = cache.load(method).get(example.id)
        if record is None:
            return False
        return method not in versions or record.get("method_version") == versions[method]

    todo = []
    for example in examples:
        missing = [m for m in methods if not current(m, example)]
        if missing:
            todo.append((example, missing))
    return todo


def run_evaluation(
    settings: EvalSettings,
    *,
    embedder: Any = None,
    lm: Any = None,
    reader_lm: Any = None,
    triple_source: Any = None,
    show_progress: bool = True,
    on_record: Callable[[dict[str, Any]], None] | None = None,
    search: Any = None,
) -> dict[str, Any]:
    """Run (or resume) the benchmark and write results.json, report.md, report.html and
    the plots.

    ``search`` (``search(query, k) -> passages``) is the user's own retrieval, used instead
    of the built-in one (see :func:`~neocorrag_core.eval.comparison.compare`). Before the work
    starts, a rough time estimate is logged (:func:`~neocorrag_core.eval.estimate.estimate`).
    """
    from tqdm.auto import tqdm

    out = Path(settings.out)
    if settings.split is None:
        examples, load_report = load_qa(settings.data, settings.limit)
    else:  # the split first, then the limit: the first N questions of that half
        examples, load_report = load_qa(settings.data)
        examples = in_split(examples, settings.split)[: settings.limit]  # type: ignore[arg-type]
    if not examples:
        half = f"; none of them in the {settings.split} half" if settings.split else ""
        raise ValueError(f"{settings.data}: no usable question ({load_report.summary()}{half})")
    unsigned = check_signature(out, settings)
    cache = ResultCache(out / "cache")
    versions = method_versions(
        settings.methods, reader=settings.reader, belief_overrides=settings.belief_overrides
    )
    todo = _pending(examples, settings.methods, cache, versions)
    if todo:
        source = None
        if settings.contexts_from:
            source = replay_source(settings)
            check_replay(source, todo, versions, settings.contexts_from)
        parts = build_components(
            settings,
            examples,
            embedder=embedder,
            lm=lm,
            reader_lm=reader_lm,
            triple_source=triple_source,
            source=source,
            search=search,
        )
        total = sum(len(missing) for _, missing in todo)
        if show_progress:
            tqdm.write(estimate(todo, parts.reader).message(), file=sys.stderr)
        with tqdm(total=total, desc="neocorrag eval", unit="run", disable=not show_progress) as bar:
            for example, missing in todo:
                started = time.perf_counter()
                retrieved = parts.retriever.retrieve(example, settings.top_k)
                retrieve_seconds = time.perf_counter() - started
                for name in missing:
                    bar.set_postfix_str(f"{example.id[:18]} {name}")
                    record = _run_one(parts, example, name, retrieved, retrieve_seconds, settings)
                    if name in versions:
                        # A replayed record's version is its source's (check_replay: the same).
                        record["method_version"] = versions[name]
                    if unsigned:  # run.json first: no record is ever cached without it
                        write_signature(out, settings)
                        unsigned = False
                    cache.add(name, record)
                    if on_record is not None:
                        on_record(record)
                    bar.update(1)
    if unsigned:
        write_signature(out, settings)
    results = summarize(examples, settings, cache, load_report)
    results["machine"] = machine_summary()
    write_outputs(results, out, plots=settings.plots)
    write_html_report(results, out, examples)
    return results


def machine_summary() -> dict[str, Any]:
    """The CPU, its LM float format and threads, for the report (speed figures need it)."""
    from neocorrag_core.models.cpu import choose_cpu_dtype, cpu_info, describe

    info = cpu_info()
    return describe(choose_cpu_dtype(info), info)


def _run_one(
    parts: Components,
    example: QAExample,
    name: str,
    retrieved: list[Passage],
    retrieve_seconds: float,
    settings: EvalSettings,
) -> dict[str, Any]:
    started = time.perf_counter()
    method = parts.methods[name]
    call = MethodInput(
        example.question,
        retrieved,
        parts.retriever.search_fn(example),
        settings.top_k,
        qid=example.id,
    )
    output = method.refine(call)
    method_seconds = time.perf_counter() - started
    if any(output.info.get(flag) for flag in ("replayed", "reused_chains", "reused")):
        method_seconds = output.timings.get("total", sum(output.timings.values()))
    if output.answered:  # the method answered by itself (its answer's cost is in its own)
        answer = ReaderOutput(output.answer or "", output.answer or "", 0, 0, 0.0)
    else:
        answer = parts.reader.answer(example.question, output.passages, output.chain_text)
    timings = {"retrieve": retrieve_seconds}
    timings.update({f"method.{k}": v for k, v in output.timings.items()})
    timings["method"] = method_seconds
    timings["read"] = answer.seconds
    return score_record(example, name, retrieved, output, answer, timings, settings.top_k)


__all__ = [
    "BASELINE",
    "DEFAULT_METHODS",
    "ITERATIVE",
    "POOLS",
    "RETRIEVERS",
    "Components",
    "EvalSettings",
    "ReplayedMethod",
    "ResultCache",
    "aggregate",
    "build_components",
    "check_replay",
    "check_signature",
    "file_identity",
    "gold_diagnosis",
    "machine_summary",
    "peak_rss_mb",
    "query_sources",
    "replay_source",
    "resolve_triple_source",
    "run_evaluation",
    "score_record",
    "spacy_identity",
    "summarize",
    "write_html_report",
    "write_outputs",
    "write_signature",
]
