"""Write ``summary.json`` into ``neocorrag eval`` run folders: what ``report.md``'s tables
are built from (settings, per-method aggregates, paired bootstrap intervals), without the
per-question records.

A run folder (the ``--out`` of ``neocorrag eval``) holds ``run.json`` (the settings that
change a record), ``cache/<method>.jsonl`` (one record per question and method),
``results.json`` (the aggregates and every record again), ``report.md`` and the plots.
Under ``benchmarks/results/`` the records are not committed (``cache/`` and
``results.json``; benchmarks/results/README.md says how to get them back); ``run.json``,
``report.md``, the plots and ``summary.json`` are::

    python benchmarks/summarize_results.py benchmarks/results/eval/<run> [<run> ...]
    python benchmarks/summarize_results.py benchmarks/results/eval   # every run folder below

``summary.json`` is ``results.json`` without ``per_question`` when the folder has one.
Otherwise it is rebuilt from ``cache/*.jsonl`` by the eval's own aggregation
(:func:`neocorrag_core.eval.runner.summarize`) over the methods of ``report.md``'s quality
table that have a cache file (every cached method when there is no report; the others are
listed as ``methods_without_records``) and the questions they all finished;
the bootstrap's resamples and seed and the data line are read from ``report.md``. A rebuilt
summary does not know the run's ``--split`` and ``--limit`` (null) or its machine, and says
``"summarized_from": "cache"``. Each summary's tables are rendered with
:mod:`neocorrag_core.eval.report` and compared with ``report.md``; a table that differs is
named (a report written before a table's current layout differs in layout only).

The other lab scripts read a run's per-question records with :func:`cached_results`
(``results.json``'s shape, from the cache) and name the way back with
:func:`missing_records` when a run has none.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections import Counter
from collections.abc import Sequence
from dataclasses import fields
from pathlib import Path
from typing import Any

from neocorrag_core.errors import InputError
from neocorrag_core.eval import report as tables
from neocorrag_core.eval.datasets import LoadReport, QAExample
from neocorrag_core.eval.runner import EvalSettings, ResultCache, summarize
from neocorrag_core.formats import read_json_or_lines

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the lab, when not installed
import neocorrag_lab  # noqa: F401  (registers the lab's methods: runs name them)

RECORDS_COMMIT = "f4154fccf1f0dd61e77a8df854d7ee2b445a8c91"
"""A commit whose tree holds the per-question records (``cache/``, ``results.json``) of
every run committed under ``benchmarks/results/`` up to then."""

SUMMARY = "summary.json"
TABLES = (
    "quality_table",
    "comparison_table",
    "cost_table",
    "pool_table",
    "source_table",
    "answering_table",
    "iterative_table",
    "loss_table",
)
"""The tables of ``report.md`` that come from the aggregates (not the header lines)."""

_DATA_LINE = re.compile(
    r"^- data: `(?P<path>[^`]*)` \((?P<format>[^;]*); (?P<loaded>\d+) of (?P<rows>\d+) "
    r"rows read loaded; skipped: (?P<skipped>.*)\)$",
    re.MULTILINE,
)
_BOOTSTRAP_LINE = re.compile(
    r"^- bootstrap: (?P<resamples>\d+) paired resamples, seed (?P<seed>\d+)$", re.MULTILINE
)


def restore_command(path: str | Path) -> str:
    """The git command that brings back the per-question records of ``path`` (a run folder
    or one of its record files) as they were at :data:`RECORDS_COMMIT`, into the working
    tree only (``.gitignore`` keeps them out of later commits)."""
    where = Path(path).as_posix().rstrip("/")
    if where.endswith((".json", ".jsonl")):
        return f"git restore --source {RECORDS_COMMIT} -- {where}"
    return (
        f"git restore --source {RECORDS_COMMIT} -- $(git ls-tree -r --name-only "
        f"{RECORDS_COMMIT} -- {where}/cache {where}/results.json)"
    )


def missing_records(path: str | Path) -> str:
    """How to get the per-question records of ``path`` when they are not there: for a run
    committed under ``benchmarks/results/``, the git command and the commands' docs; for
    any other folder, the eval run that writes them."""
    if "benchmarks/results/" in Path(path).resolve().as_posix():
        return (
            "the per-question records of the runs under benchmarks/results/ are not in the "
            f"tree (the last commit that holds them is {RECORDS_COMMIT[:10]}): bring them "
            f"back with `{restore_command(path)}`, or rerun the run's command (docs/benchmarks.md, "
            "docs/lab-log.md; benchmarks/results/README.md)"
        )
    folder = Path(path).parent if Path(path).suffix in (".json", ".jsonl") else Path(path)
    folder = folder.parent if folder.name == "cache" else folder
    return f"run `neocorrag eval --out {folder}` first"


def cached_results(run: str | Path) -> dict[str, Any] | None:
    """``{"per_question": {method: [record, ...]}}`` from the ``cache/*.jsonl`` of the run
    folder ``run`` (the last record of each question, as a resumed run reads them), the
    shape of ``results.json``'s records; None when the folder has no cache file."""
    folder = Path(run) / "cache"
    files = sorted(folder.glob("*.jsonl")) if folder.is_dir() else []
    if not files:
        return None
    cache = ResultCache(folder)
    return {"per_question": {f.stem: list(cache.load(f.stem).values()) for f in files}}


def _read_object(path: Path, what: str) -> dict[str, Any]:
    try:
        data = read_json_or_lines(path, what=what)
    except (OSError, ValueError) as exc:
        raise InputError(f"{path}: not readable as JSON ({exc})") from None
    if not isinstance(data, dict):
        raise InputError(f"{path} is not a neocorrag eval {what} (a JSON object)")
    return data


def report_methods(report: str) -> list[str]:
    """The methods of ``report.md``'s quality table, in its order."""
    quality = (
        report.split("## Quality", 1)[1].split("\n## ", 1)[0] if "## Quality" in report else ""
    )
    rows = [line for line in quality.splitlines() if line.startswith("| ")]
    return [row.split("|")[1].strip() for row in rows[1:]]  # the first row is the header


def _load_report(report: str, fallback: str) -> LoadReport:
    """The data line of ``report.md`` as the loader's report (path and format only when
    the report has no such line)."""
    found = _DATA_LINE.search(report)
    if found is None:
        return LoadReport(path=fallback, format="unknown")
    skipped: Counter[str] = Counter()
    if found["skipped"] != "none":
        for part in found["skipped"].split(", "):
            count, _, why = part.partition(" ")
            skipped[why] = int(count)
    return LoadReport(
        path=found["path"],
        format=found["format"],
        rows=int(found["rows"]),
        loaded=int(found["loaded"]),
        skipped=skipped,
    )


def summary_from_cache(folder: Path) -> dict[str, Any]:
    """The summary of a run folder without ``results.json``, from its cache and run.json."""
    signature = _read_object(folder / "run.json", "settings file (run.json)")
    records = cached_results(folder)
    if records is None:
        raise InputError(
            f"{folder}: no results.json or cache/*.jsonl there; {missing_records(folder)}"
        )
    report_path = folder / "report.md"
    report = report_path.read_text(encoding="utf-8") if report_path.is_file() else ""
    named = report_methods(report) or sorted(records["per_question"])
    methods = [m for m in named if m in records["per_question"]]
    if not methods:
        raise InputError(f"{folder}: no cache file of a method report.md names")
    cache = ResultCache(folder / "cache")
    examples = [
        QAExample(
            id=qid,
            question=record.get("question", ""),
            answers=tuple(record.get("answers") or ()),
            passages=(),
            gold_ids=frozenset(record.get("gold_ids") or ()),
        )
        for qid, record in cache.load(methods[0]).items()
    ]
    bootstrap = _BOOTSTRAP_LINE.search(report)
    known = {f.name for f in fields(EvalSettings)}
    overrides = {"miner_overrides", "evireform_overrides", "belief_overrides", "contexts_from"}
    # Overrides and the replayed folder are taken as recorded (below), not checked against
    # today's settings: they do not enter the aggregation, and a key since removed is valid
    # history.
    given = {k: v for k, v in signature.items() if k in known and k not in overrides}
    if bootstrap:
        given.update(bootstrap=int(bootstrap["resamples"]), seed=int(bootstrap["seed"]))
    try:
        settings = EvalSettings(**given, out=str(folder), methods=tuple(methods), plots=False)
    except (TypeError, ValueError) as exc:
        raise InputError(
            f"{folder}: run.json and report.md give no usable settings ({exc})"
        ) from None
    summary = summarize(examples, settings, cache, _load_report(report, str(signature.get("data"))))
    summary.pop("per_question")
    summary["settings"].update({k: v for k, v in signature.items() if k in overrides})
    summary["summarized_from"] = "cache"
    if len(methods) < len(named):  # the report's other methods' records were not kept
        summary["methods_without_records"] = [m for m in named if m not in methods]
    return summary


def summary_of(folder: Path) -> dict[str, Any]:
    """``results.json`` without its per-question records, or the same rebuilt from the cache."""
    path = folder / "results.json"
    if not path.is_file():
        return summary_from_cache(folder)
    results = _read_object(path, "results.json")
    if not isinstance(results.get("methods"), dict):
        raise InputError(f"{path} has no per-method aggregates ('methods')")
    summary = {k: v for k, v in results.items() if k != "per_question"}
    summary["summarized_from"] = "results.json"
    return summary


def differing_tables(summary: dict[str, Any], report: str) -> list[str]:
    """The report tables that ``summary`` renders with a line that ``report`` (report.md)
    does not hold."""
    lines = set(report.splitlines())
    return [
        name.removesuffix("_table")
        for name in TABLES
        if any(line not in lines for line in getattr(tables, name)(summary).splitlines())
    ]


def run_folders(paths: Sequence[str]) -> list[Path]:
    """Each path that is a run folder (it has run.json), or every run folder below it."""
    folders: list[Path] = []
    for given in paths:
        path = Path(given)
        if not path.is_dir():
            raise InputError(f"{given}: not a folder")
        if (path / "run.json").is_file():
            folders.append(path)
            continue
        below = sorted(p.parent for p in path.rglob("run.json"))
        if not below:
            raise InputError(f"{given}: no run folder (with run.json) there or below")
        folders += below
    return folders


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", help="eval run folders, or folders holding them")
    args = parser.parse_args(argv)
    try:
        folders = run_folders(args.runs)
    except InputError as exc:
        parser.error(str(exc))
    failed = 0
    for folder in folders:
        try:
            summary = summary_of(folder)
        except InputError as exc:
            kept = f" (its {SUMMARY} is left as it was)" if (folder / SUMMARY).is_file() else ""
            print(f"skipped{kept}: {exc}", file=sys.stderr)
            failed += 1
            continue
        text = json.dumps(summary, indent=2, ensure_ascii=False) + "\n"
        (folder / SUMMARY).write_text(text, encoding="utf-8")
        report = folder / "report.md"
        if not report.is_file():
            check = "no report.md to compare"
        elif differ := differing_tables(summary, report.read_text(encoding="utf-8")):
            check = f"differs from report.md in: {', '.join(differ)}"
        else:
            check = "its tables are report.md's"
        print(f"{folder / SUMMARY} (from {summary['summarized_from']}): {check}")
    return 2 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
