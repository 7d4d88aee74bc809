"""``neocorrag store``: look after a triple store (stats, export, import, delete).

* ``neocorrag store stats [--json]``: what the store holds, per extractor;
* ``neocorrag store export FILE [--extractor ID@VERSION]``: JSON lines (``-`` for stdout);
* ``neocorrag store import FILE``: add an export's entries (stored ones are skipped);
* ``neocorrag store delete (--id ID ... | --hash H ... | --ids-file F)``: remove documents.

Every subcommand takes ``--store PATH`` (default: the default store). ``stats`` and ``export``
open the store read-only and never create it; errors are the
:mod:`~neocorrag_core.errors` family, which the main CLI prints as one line (exit 2).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from neocorrag_core.errors import InputError, StoreError
from neocorrag_core.triples.store import ExtractorKey, TripleStore, default_store_path
from neocorrag_core.triples.store_jsonl import check_export_file


def parse_extractor_key(text: str) -> ExtractorKey:
    """``ID@VERSION`` (as ``neocorrag store stats`` lists them) as an :class:`ExtractorKey`."""
    extractor_id, sep, version = text.rpartition("@")
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
    value = float(size)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{size} B"  # pragma: no cover - the loop always returns


def run_store_stats(args: argparse.Namespace) -> int:
    """Print the store's summary (:meth:`TripleStore.summary`), as text or JSON."""
    with _existing_store(args.store, read_only=True) as store:
        summary = store.summary()
    if args.json:
        print(json.dumps(summary.to_dict(), indent=2))
        return 0
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
    return 0


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
    """Add the entries of an export file to the store (created if missing)."""
    if args.file != "-":
        # Checked before the store is opened: a failed import must not leave an empty store.
        check_export_file(args.file)
    # stdin cannot be read ahead and replayed, so a store this import created is removed
    # again when the stream turns out not to be an export.
    created = not Path(args.store).expanduser().exists()
    try:
        with TripleStore(args.store) as store:
            if args.file == "-":
                report = store.import_jsonl(sys.stdin)
            else:
                report = store.import_jsonl(args.file, show_progress=not args.quiet)
    except InputError:
        if created:
            _remove_store_files(Path(args.store).expanduser())
        raise
    skipped = f", {report.invalid} invalid line(s) skipped" if report.invalid else ""
    print(
        f"imported {report.imported} entries ({report.triples_written} triples) into "
        f"{store.path}; {report.skipped_existing} already stored; {report.links_added} "
        f"document id link(s) added{skipped}"
    )
    return 0


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
    ids = list(args.id or [])
    if args.ids_file:
        ids.extend(_read_ids(args.ids_file))
    key = parse_extractor_key(args.extractor) if args.extractor else None
    with _existing_store(args.store, read_only=False) as store:
        report = store.delete(document_ids=ids, hashes=list(args.hash or []), key=key)
    not_found = report.documents_not_found + report.hashes_not_found
    print(
        f"deleted {report.passages_deleted} stored passage(s) ({report.triples_deleted} "
        f"triples) and {report.links_removed} document id link(s) from {store.path}; "
        f"{report.kept_shared} passage(s) kept (another document id still links them); "
        f"{not_found} id(s)/hash(es) not found"
    )
    return 0


def add_store_parser(sub: Any) -> None:
    """The ``neocorrag store`` subcommand and its ``stats``/``export``/``import``/``delete``."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--store", default=str(default_store_path()), help="SQLite file (default: %(default)s)"
    )
    common.add_argument("-v", "--verbose", action="store_true", help="log what the store does")
    st = sub.add_parser(
        "store",
        help="look after a triple store: stats, export, import, delete",
        description="Inspect a triple store, move it between machines as JSON lines, or "
        "delete documents from it by the ids they were indexed under.",
    )
    actions = st.add_subparsers(dest="store_command", required=True)

    stats = actions.add_parser(
        "stats", parents=[common], help="what the store holds, per extractor"
    )
    stats.add_argument("--json", action="store_true", help="print the summary as JSON")
    stats.set_defaults(func=run_store_stats)

    export = actions.add_parser("export", parents=[common], help="write the store as JSON lines")
    export.add_argument("file", help="output file (- for stdout)")
    export.add_argument(
        "--extractor", default=None, metavar="ID@VERSION", help="only this extractor's triples"
    )
    export.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    export.set_defaults(func=run_store_export)

    imp = actions.add_parser(
        "import",
        parents=[common],
        help="add the entries of an export (stored ones are skipped)",
    )
    imp.add_argument("file", help="a file written by `neocorrag store export` (- for stdin)")
    imp.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    imp.set_defaults(func=run_store_import)

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
    delete.set_defaults(func=run_store_delete)
