"""``neocorrag store``: look after a triple store (stats, check, repair, export, import, delete).

* ``neocorrag store stats [--json]``: what the store holds, per extractor and embedder (a
  damaged store is reported as such, exit 1, with the commands that say more and fix it);
* ``neocorrag store check [--quick] [--json]``: a verdict on the file: OK (what it holds),
  or DAMAGED / NOT A STORE / OTHER SCHEMA with the cause and the fix; exit 0 when OK, 1
  when not, 2 when there is no file at the path;
* ``neocorrag store repair [--force] [--json]``: salvage what can be read from a damaged
  store into a new one, which takes its place; the damaged file is kept beside it;
* ``neocorrag store export FILE [--extractor ID@VERSION]``: JSON lines (``-`` for stdout);
* ``neocorrag store import FILE [--allow-truncated] [--no-verify]``: add an export's entries
  (stored ones are skipped); a file without its end marker is refused unless
  ``--allow-truncated``, and one whose lines do not match its checksum unless
  ``--no-verify``;
* ``neocorrag store delete (--id ID ... | --hash H ... | --ids-file F)``: remove documents.

Every subcommand takes ``--store PATH`` (default: the default store). ``stats``, ``check``
and ``export`` open the store read-only and never create it; errors are the
:mod:`~neocorrag_core.errors` family, which the main CLI prints as one line (exit 2). Each
subcommand also declares (:class:`~neocorrag_core.cli.failures.OnOSError`) what the main
CLI says of an OS error nothing below explained: what it was doing on which file, the
fix, and the state the store is left in.
The checking and salvaging is :mod:`neocorrag_core.triples.store_repair`; this module
only prints what it finds.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import sys
from pathlib import Path
from typing import Any

from neocorrag_core.cli.failures import OnOSError
from neocorrag_core.errors import InputError, StoreError
from neocorrag_core.triples.store import (
    ExtractorKey,
    StoreSummary,
    TripleStore,
    default_store_path,
)
from neocorrag_core.triples.store_jsonl import ImportReport, check_export_file, import_jsonl
from neocorrag_core.triples.store_repair import (
    MISSING,
    RepairReport,
    StoreCheck,
    check_command,
    check_store,
    repair_command,
    repair_store,
)
from neocorrag_core.triples.store_schema import is_sqlite_file
from neocorrag_core.validation import clean_text


def parse_extractor_key(text: str) -> ExtractorKey:
    """``ID@VERSION`` (as ``neocorrag store stats`` lists them) as an :class:`ExtractorKey`
    (lone surrogates, what an argument that is not UTF-8 becomes, replaced by U+FFFD)."""
    extractor_id, sep, version = clean_text(text).rpartition("@")
    if not sep or not extractor_id or not version:
        raise InputError(
            f"--extractor {text!r} is not ID@VERSION (e.g. spacy:en_core_web_sm@1); "
            "`neocorrag store stats` lists the stored ones"
        )
    return ExtractorKey(extractor_id, version)


def _existing_store(path: str, *, read_only: bool) -> TripleStore:
    """Open a store that must exist already (a typo must not create an empty one)."""
    if not Path(path).expanduser().exists():
        raise StoreError(
            f"there is no triple store at {path}; pass the right --store (default: "
            f"{default_store_path()}), or build one with `neocorrag index CORPUS --store {path}`"
        )
    return TripleStore(path, read_only=True if read_only else None)


def _human_bytes(size: int) -> str:
    """``size`` bytes for people: ``512 B``, ``1.5 MiB``."""
    value = float(size)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{size} B"  # pragma: no cover - the loop always returns


_ONLY_READ = "the store was not modified (this command only reads it)"
"""The store's state after an OS error in a subcommand that opens it read-only."""

_UNUSABLE = ("damaged", "foreign", "schema")
""":class:`StoreError` kinds that mean the file itself is wrong (not a busy or missing one)."""


def run_store_stats(args: argparse.Namespace) -> int:
    """Print the store's summary (:meth:`TripleStore.summary`), as text or JSON.

    A store that is damaged, not a store, or of another schema is reported as such, with
    the commands that diagnose and repair it, and exit code 1 (not the usual one-line
    error, exit 2: the file was found, and what is wrong with it is the answer).
    """
    try:
        with _existing_store(args.store, read_only=True) as store:
            summary = store.summary()
    except StoreError as err:
        if err.kind not in _UNUSABLE:
            raise
        return _report_unusable(args, err)
    if args.json:
        print(json.dumps(summary.to_dict(), indent=2))
        return 0
    _print_summary(summary)
    return 0


def _report_unusable(args: argparse.Namespace, err: StoreError) -> int:
    """``store stats`` on a file that cannot be read as a store: what, and what next."""
    path = str(Path(args.store).expanduser())
    status = {"damaged": "damaged", "foreign": "not-a-store", "schema": "other-schema"}[err.kind]
    if status == "damaged" and not is_sqlite_file(Path(path)):
        status = "not-a-store"  # no SQLite header: nothing in it can be salvaged
    steps = f"run `{check_command(path)}` for a diagnosis"
    if status == "damaged":
        steps += f", and `{repair_command(path)}` to salvage what can still be read"
    if args.json:
        out = {"path": path, "status": status, "error": str(err), "next": steps}
        print(json.dumps(out, indent=2))
    else:
        print(f"neocorrag store stats: {err}", file=sys.stderr)
        print(f"neocorrag store stats: {steps}", file=sys.stderr)
    return 1


def _print_summary(summary: StoreSummary) -> None:
    """The human form of a store's summary (``store stats``, and ``store check`` when OK)."""
    documents = (
        f"{summary.documents}"
        if summary.documents is not None
        else "unknown (schema 1: open the store writable once to migrate it)"
    )
    print(f"store      {summary.path}")
    print(f"schema     {summary.schema}")
    print(f"size       {_human_bytes(summary.file_bytes)}")
    print(f"passages   {summary.passages}")
    print(f"triples    {summary.triples}")
    print(f"documents  {documents}")
    if summary.extractors:
        width = max(len(name) for name in summary.extractors)
        for name, counts in sorted(summary.extractors.items()):
            print(f"  {name:<{width}}  {counts['passages']} passages, {counts['triples']} triples")
    vectors = sum(v["vectors"] for v in summary.vectors.values())
    vector_bytes = sum(v["bytes"] for v in summary.vectors.values())
    print(f"vectors    {vectors} ({_human_bytes(vector_bytes)})")
    if summary.vectors:
        width = max(len(name) for name in summary.vectors)
        for name, counts in sorted(summary.vectors.items()):
            print(
                f"  {name:<{width}}  {counts['vectors']} vectors, {_human_bytes(counts['bytes'])}"
            )


_VERDICTS = {
    "ok": "OK",
    "damaged": "DAMAGED",
    "not-a-store": "NOT A STORE",
    "other-schema": "OTHER SCHEMA",
}


def run_store_check(args: argparse.Namespace) -> int:
    """Print the verdict of :func:`~neocorrag_core.triples.store_repair.check_store`.

    Exit code 0 when the store is OK, 1 when it is damaged, not a store or of another
    schema (the verdict says the cause and the fix), 2 when there is no file at the path.
    """
    verdict = check_store(args.store, quick=args.quick)
    code = 0 if verdict.ok else 2 if verdict.status == MISSING else 1
    if args.json:
        print(json.dumps(verdict.to_dict(), indent=2))
        return code
    if verdict.status == MISSING:
        print(f"neocorrag store check: {verdict.cause}; {verdict.fix}", file=sys.stderr)
        return code
    _print_verdict(verdict)
    return code


def _print_verdict(verdict: StoreCheck) -> None:
    """The human form of ``store check``'s verdict: one headline, then cause and fix."""
    ran = f"SQLite's {verdict.check}" if verdict.check else "the check"
    if verdict.ok:
        print(f"OK: {verdict.path} is a healthy triple store ({ran} passed, {verdict.seconds:g} s)")
        if verdict.summary is not None:
            _print_summary(StoreSummary(**verdict.summary))
        return
    print(f"{_VERDICTS.get(verdict.status, verdict.status.upper())}: {verdict.path}")
    print(f"  cause: {verdict.cause}")
    for problem in verdict.problems[1:5]:
        print(f"         {problem}")
    if len(verdict.problems) > 5:
        print(f"         ... ({len(verdict.problems) - 5} more; --json lists them)")
    print(f"  fix:   {verdict.fix}")


def run_store_repair(args: argparse.Namespace) -> int:
    """Salvage a damaged store (:func:`~neocorrag_core.triples.store_repair.repair_store`)
    and say what was kept, what was lost and where the damaged file went.

    A refusal (healthy store without ``--force``, not a store, an indexer running, a folder
    that is not writable) is a :class:`StoreError`: one line, exit 2, nothing changed.
    """
    report = repair_store(args.store, force=args.force)
    if args.json:
        print(json.dumps(report.to_dict(), indent=2))
        return 0
    _print_repair(report)
    return 0


def _print_repair(report: RepairReport) -> None:
    """The human form of ``store repair``'s report: counts, the old file, what happens next."""
    uncounted = " (and more, uncounted: see below)"
    print(
        f"repaired {report.path} in {report.seconds:g} s: salvaged {report.entries_salvaged} "
        f"entries ({report.triples_salvaged} triples), {report.links_salvaged} document id "
        f"link(s) and {report.vectors_salvaged} vectors; lost {report.entries_lost} entries"
        f"{'' if report.entries_listed else uncounted} and {report.vectors_lost} vectors"
        f"{'' if report.vectors_listed else uncounted}"
    )
    for note in report.notes:
        print(f"  note: {note}")
    which = "old" if report.check.ok else "damaged"
    print(
        f"the {which} file is kept as {report.old_file} (with its -wal/-shm files), byte "
        "for byte as it was; delete it once the repaired store serves you well"
    )
    if report.entries_lost or report.vectors_lost or report.notes:
        print(
            "what was lost is extracted (triples) or computed (vectors) again when its "
            "passages are next seen"
        )
    print(
        "running processes that use this store open the new file by themselves, within a "
        "minute (they notice the damaged file was replaced); nothing needs a restart"
    )


def run_store_export(args: argparse.Namespace) -> int:
    """Write the store (or one extractor's part) as JSON lines to FILE or stdout."""
    key = parse_extractor_key(args.extractor) if args.extractor else None
    with _existing_store(args.store, read_only=True) as store:
        if args.file == "-":
            written = store.export_jsonl(sys.stdout, key=key)
            sys.stdout.flush()
        else:
            written = store.export_jsonl(args.file, key=key, show_progress=not args.quiet)
    where = "stdout" if args.file == "-" else args.file
    print(f"exported {written} entries from {store.path} to {where}", file=sys.stderr)
    return 0


def run_store_import(args: argparse.Namespace) -> int:
    """Add the entries of an export file to the store (created if missing).

    The whole file is checked first, header and end marker: a file that is not an export,
    or one cut short (no end marker, or fewer entries than it says), is refused before
    anything is written, unless ``--allow-truncated`` (then its entries are imported and
    stderr says the file was incomplete)."""
    allow, verify = bool(args.allow_truncated), not args.no_verify
    if args.file != "-":
        # Checked before the store is opened: a failed import must not leave an empty store.
        check_export_file(args.file, allow_truncated=allow, verify=verify)
    # stdin is checked once the store is open (import_jsonl copies it to read it twice), so
    # a store this import created is removed again when the stream is no complete export,
    # or when the import fails (a full disk) before anything is stored in it.
    created = not Path(args.store).expanduser().exists()
    store: TripleStore | None = None
    try:
        with TripleStore(args.store) as store:
            where = store.path
            if args.file == "-":
                report = import_jsonl(store, sys.stdin, allow_truncated=allow, verify=verify)
            else:
                report = import_jsonl(
                    store,
                    args.file,
                    show_progress=not args.quiet,
                    allow_truncated=allow,
                    verify=verify,
                )
    except (InputError, OSError):
        if created and _holds_nothing(store):
            _remove_store_files(Path(args.store).expanduser())
        raise
    skipped = f", {report.invalid} invalid line(s) skipped" if report.invalid else ""
    # The import logged what is wrong with an incomplete file; this says what was read.
    partial = (
        f"; the file is incomplete: these are the {report.imported + report.skipped_existing} "
        "entries it holds (--allow-truncated)"
        if not report.complete
        else ""
    )
    print(
        f"imported {report.imported} entries ({report.triples_written} triples) into "
        f"{where}; {report.skipped_existing} already stored; {report.links_added} "
        f"document id link(s) added{skipped}{partial}{_unverified(report)}"
    )
    return 0


def _unverified(report: ImportReport) -> str:
    """What the import's summary says of a file whose lines were not checked against a
    checksum (empty when they were, or when the file was cut short: said already)."""
    if report.verified or not report.complete:
        return ""
    if report.checksum_mismatch:
        return "; its lines do not match its checksum: imported as they are (--no-verify)"
    return "; not verified: its end marker has no checksum (an export of an older neocorrag)"


def _holds_nothing(store: TripleStore | None) -> bool:
    """Whether a store this import created holds no entry (or could not even be opened):
    then it is removed again, rather than left as an empty file. A store that could not be
    read holds nothing this import put there either."""
    if store is None:
        return True
    try:
        return store.count() == 0
    except (OSError, sqlite3.Error):
        return True
    finally:
        store.close()


def _remove_store_files(path: Path) -> None:
    """Delete a store file and the journal files SQLite may keep beside it."""
    for name in (path, Path(f"{path}-wal"), Path(f"{path}-shm"), Path(f"{path}-journal")):
        name.unlink(missing_ok=True)


def _read_ids(path: str) -> list[str]:
    try:
        with open(Path(path).expanduser(), encoding="utf-8") as fh:
            return [line.strip() for line in fh if line.strip()]
    except FileNotFoundError:
        raise InputError(f"there is no ids file {path}; check the path") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(
            f"cannot read the ids file {path}: {exc}; it must be UTF-8 text, one id a line"
        ) from None


def run_store_delete(args: argparse.Namespace) -> int:
    """Delete documents by id, or passages by content hash (:meth:`TripleStore.delete`)."""
    # Arguments that are not UTF-8 reach Python as lone surrogates (surrogateescape); ids
    # were stored with U+FFFD in their place, and SQLite cannot take them as they are.
    ids = [clean_text(doc_id) for doc_id in args.id or []]
    if args.ids_file:
        ids.extend(_read_ids(args.ids_file))
    key = parse_extractor_key(args.extractor) if args.extractor else None
    with _existing_store(args.store, read_only=False) as store:
        hashes = [clean_text(digest) for digest in args.hash or []]
        report = store.delete(document_ids=ids, hashes=hashes, key=key)
    not_found = report.documents_not_found + report.hashes_not_found
    print(
        f"deleted {report.passages_deleted} stored passage(s) ({report.triples_deleted} "
        f"triples) and {report.links_removed} document id link(s) from {store.path}; "
        f"{report.kept_shared} passage(s) kept (another document id still links them); "
        f"{not_found} id(s)/hash(es) not found"
    )
    return 0


def add_store_parser(sub: Any) -> None:
    """The ``neocorrag store`` subcommand and its ``stats``/``check``/``repair``/``export``/
    ``import``/``delete``."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--store", default=str(default_store_path()), help="SQLite file (default: %(default)s)"
    )
    common.add_argument("-v", "--verbose", action="store_true", help="log what the store does")
    st = sub.add_parser(
        "store",
        help="look after a triple store: stats, check, repair, export, import, delete",
        description="Inspect a triple store, check it for damage and salvage a damaged one, "
        "move it between machines as JSON lines, or delete documents from it by the ids "
        "they were indexed under.",
    )
    actions = st.add_subparsers(dest="store_command", required=True)

    stats = actions.add_parser(
        "stats", parents=[common], help="what the store holds, per extractor and embedder"
    )
    stats.add_argument("--json", action="store_true", help="print the summary as JSON")
    stats.set_defaults(
        func=run_store_stats,
        on_os_error=OnOSError("read the triple store {store}", _ONLY_READ),
    )

    check = actions.add_parser(
        "check",
        parents=[common],
        help="check the store for damage (read-only); exit 0 OK, 1 damaged or not a store",
        description="Open the store read-only (it is never written or created), check that "
        "it is a neocorrag triple store of a schema this version reads, and run SQLite's "
        "integrity_check over every page. Prints OK with what the store holds, or DAMAGED / "
        "NOT A STORE / OTHER SCHEMA with the cause and the fix. Exit code: 0 OK; 1 damaged, "
        "not a store or another schema; 2 no file at the path, or bad arguments.",
    )
    check.add_argument(
        "--quick",
        action="store_true",
        help="run SQLite's quick_check instead (finds damaged pages, but does not check that "
        "the indexes agree with their tables; about 4x faster on a large store)",
    )
    check.add_argument("--json", action="store_true", help="print the verdict as JSON")
    check.set_defaults(
        func=run_store_check,
        on_os_error=OnOSError("check the triple store {store}", _ONLY_READ),
    )

    repair = actions.add_parser(
        "repair",
        parents=[common],
        help="salvage what can be read of a damaged store into a new one (the damaged file "
        "is kept)",
        description="Copy every entry (triples and document id links) and vector that can "
        "still be read from a damaged store into a new store, then move the damaged file "
        "aside as <name>.damaged-<time> (unchanged) and the new one into its place. Refused "
        "(exit 2, nothing changed) for a healthy store unless --force, for a file that is "
        "not a neocorrag store, while `neocorrag index` runs on the store, or when the "
        "store's folder is not writable.",
    )
    repair.add_argument(
        "--force", action="store_true", help="rebuild a store even if it passes the check"
    )
    repair.add_argument("--json", action="store_true", help="print the report as JSON")
    repair.set_defaults(
        func=run_store_repair,
        on_os_error=OnOSError(
            "repair the triple store {store}",
            "`neocorrag store check --store {store}` tells whether the store is whole",
        ),
    )

    export = actions.add_parser("export", parents=[common], help="write the store as JSON lines")
    export.add_argument("file", help="output file (- for stdout)")
    export.add_argument(
        "--extractor", default=None, metavar="ID@VERSION", help="only this extractor's triples"
    )
    export.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    export.set_defaults(
        func=run_store_export,
        on_os_error=OnOSError("export the triple store {store} to {file}", _ONLY_READ, "file"),
    )

    imp = actions.add_parser(
        "import",
        parents=[common],
        help="add the entries of an export (stored ones are skipped)",
    )
    imp.add_argument("file", help="a file written by `neocorrag store export` (- for stdin)")
    imp.add_argument(
        "--allow-truncated",
        action="store_true",
        help="import the entries of a file without its end marker (cut short, or exported "
        "by an older neocorrag) instead of refusing it",
    )
    imp.add_argument(
        "--no-verify",
        action="store_true",
        help="import a file whose lines do not match the checksum in its end marker (a "
        "file you edited on purpose) instead of refusing it as edited or damaged",
    )
    imp.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    imp.set_defaults(
        func=run_store_import,
        on_os_error=OnOSError(
            "import {file} into the triple store {store}",
            "the entries imported before the error stay in the store, and importing the "
            "file again skips them",
            stream="stdin",
        ),
    )

    delete = actions.add_parser(
        "delete",
        parents=[common],
        help="delete documents by id, or passages by content hash",
        description="Drop the given document ids; passages no other document id links lose "
        "their triples. --hash drops passages by content hash (as exported).",
    )
    which = delete.add_mutually_exclusive_group(required=True)
    which.add_argument("--id", nargs="+", action="extend", metavar="ID", help="document ids")
    which.add_argument(
        "--hash", nargs="+", action="extend", metavar="H", help="passage content hashes"
    )
    which.add_argument("--ids-file", metavar="F", help="a file of document ids, one a line")
    delete.add_argument(
        "--extractor", default=None, metavar="ID@VERSION", help="only this extractor's triples"
    )
    delete.set_defaults(
        func=run_store_delete,
        on_os_error=OnOSError(
            "delete from the triple store {store}",
            "the delete is one transaction: all of it was done or none "
            "(`neocorrag store stats` tells)",
        ),
    )
