"""The JSON-lines format of a triple store export, written and read.

A header line ``{"neocorrag_triple_store_export": 1, "schema": 3}``, then one line per
stored (hash, extractor, version), then an end marker ``{"neocorrag_triple_store_export_end":
N, "sha256": "<64 hex digits>"}`` with N the number of entry lines and the sha256 of every
line before it (header included), each without its line ending, followed by ``\n``
(:func:`_line_bytes`; so a copy whose line endings became CRLF still matches). The entry
points are
:meth:`~neocorrag_core.triples.store.TripleStore.export_jsonl` and
:meth:`~neocorrag_core.triples.store.TripleStore.import_jsonl`, which delegate here; the
SQL runs in the store's own transactions.

An import reads the file twice: a first pass checks the header (a format and a store schema
this version reads) and that the last line is an end marker whose count matches the lines
before it (a cut-off copy, or an export of a version that wrote no marker, fails here,
before anything is written) and whose checksum matches them (lines edited or damaged since
the export fail here too, unless ``verify=False``; a marker without a checksum, written by
an older neocorrag, is accepted with a warning), and a second pass imports, a batch per
transaction. Both stream: memory does not grow with the file. A
stream that cannot be read twice (stdin) is copied to a temporary file first.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from neocorrag_core.errors import ConfigError, InputError, StoreError
from neocorrag_core.os_errors import describe_os_error
from neocorrag_core.triples.extractor import clean_triples
from neocorrag_core.triples.keys import ExtractorKey
from neocorrag_core.triples.store_schema import (
    SCHEMA_VERSION,
    insert_entry,
    is_sqlite_file,
    key_filter,
)
from neocorrag_core.types import Triple
from neocorrag_core.validation import clean_text

if TYPE_CHECKING:
    from neocorrag_core.triples.store import TripleStore

# Records go to the store's logger: the name users configure for everything the store does.
logger = logging.getLogger("neocorrag_core.triples.store")

_EXPORT_FORMAT = 1
_EXPORT_HEADER = "neocorrag_triple_store_export"
_EXPORT_END = "neocorrag_triple_store_export_end"
_CHECKSUM = "sha256"
"""The end marker's checksum key, named after its algorithm."""
_HEX = frozenset("0123456789abcdef")
_SCHEMAS = range(1, SCHEMA_VERSION + 1)
"""The store schemas whose exports this version reads (the entry lines are the same)."""


@dataclass(frozen=True)
class ImportReport:
    """What :meth:`TripleStore.import_jsonl` did."""

    imported: int
    """Entries stored."""
    skipped_existing: int
    """Entries already stored, left as they were (the first writer wins)."""
    triples_written: int
    links_added: int
    invalid: int
    """Lines skipped as invalid."""
    invalid_lines: tuple[int, ...]
    """Their line numbers (the first 100)."""
    complete: bool = True
    """Whether the file ended with its end marker and held as many entries as it says;
    ``False`` only for a file imported with ``allow_truncated=True`` that did not."""
    verified: bool = True
    """Whether its lines matched the sha256 checksum of its end marker; ``False`` for an
    export of an older neocorrag (its marker has none), a file cut short, and a file
    imported with ``verify=False`` that did not match."""
    checksum_mismatch: bool = False
    """Whether its lines did not match the checksum (imported with ``verify=False``)."""


def export_jsonl(
    store: TripleStore,
    dest: str | os.PathLike[str] | TextIO,
    *,
    key: ExtractorKey | None = None,
    show_progress: bool = False,
) -> int:
    """:meth:`TripleStore.export_jsonl <neocorrag_core.triples.store.TripleStore.export_jsonl>`:
    write ``store`` to ``dest`` (a path, replaced at the end, or an open text file)."""
    if not isinstance(dest, (str, os.PathLike)):
        return _export_lines(store, dest, key, show_progress)
    target = Path(dest).expanduser()
    # An export replaces its target: never a database (the store itself, or another one
    # named by a slip such as `store export my.sqlite`), which would be lost for good.
    if is_sqlite_file(target):
        raise InputError(
            f"{target} is an SQLite database (a triple store?); an export would replace it. "
            "Choose a new file name for the export, e.g. triples.jsonl"
        )
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "w", encoding="utf-8", newline="\n") as fh:
            written = _export_lines(store, fh, key, show_progress)
        os.replace(tmp, target)
    except StoreError:
        raise
    except OSError as exc:
        raise InputError(
            f"cannot write the export file {target}: {describe_os_error(exc, target)}; the "
            f"store was not modified, and {target} was left as it was"
        ) from None
    finally:
        with suppress(OSError):
            tmp.unlink()
    return written


def _export_lines(
    store: TripleStore, fh: TextIO, key: ExtractorKey | None, show_progress: bool
) -> int:
    from tqdm.auto import tqdm

    where, params = key_filter(key, "WHERE")
    total = store.count(key) if show_progress else None
    checksum = hashlib.sha256()

    def write(line: str) -> None:
        fh.write(line + "\n")
        checksum.update(_line_bytes(line))

    write(json.dumps({_EXPORT_HEADER: _EXPORT_FORMAT, "schema": SCHEMA_VERSION}))
    written = 0
    with (
        store._transaction(write=False, action="export") as conn,
        tqdm(total=total, unit="passage", desc="export", disable=not show_progress) as bar,
    ):
        # Three scans in key order, merged: every query reads an index in order, so the
        # export streams in constant memory. Python's str order is SQLite's BINARY order.
        entries = conn.execute(
            f"SELECT text_sha256, extractor, version FROM passages {where} "
            "ORDER BY text_sha256, extractor, version",
            params,
        )
        triples = conn.execute(
            "SELECT text_sha256, extractor, version, subject, relation, object "
            f"FROM triples {where} ORDER BY text_sha256, extractor, version, position",
            params,
        )
        docs = conn.execute(
            "SELECT text_sha256, doc_id FROM documents ORDER BY text_sha256, doc_id"
            if store.schema_version >= 2
            else "SELECT NULL, NULL WHERE 0"
        )
        triple = triples.fetchone()
        doc = docs.fetchone()
        doc_hash: str | None = None
        doc_ids: list[str] = []
        for digest, extractor, version in entries:
            entry = (digest, extractor, version)
            rows = []
            while triple is not None and tuple(triple[:3]) < entry:  # no entry: skipped
                triple = triples.fetchone()
            while triple is not None and tuple(triple[:3]) == entry:
                rows.append(list(triple[3:]))
                triple = triples.fetchone()
            if digest != doc_hash:
                doc_hash, doc_ids = digest, []
                while doc is not None and doc[0] < digest:
                    doc = docs.fetchone()
                while doc is not None and doc[0] == digest:
                    doc_ids.append(doc[1])
                    doc = docs.fetchone()
            record = {
                "text_sha256": digest,
                "extractor": extractor,
                "version": version,
                "triples": rows,
                "document_ids": doc_ids,
            }
            write(json.dumps(record))
            written += 1
            bar.update(1)
        for cursor in (entries, triples, docs):
            cursor.close()
    # Last: an export without it was cut short (a full disk, a copy stopped halfway), and
    # one whose lines do not match its checksum was edited or damaged since.
    fh.write(json.dumps({_EXPORT_END: written, _CHECKSUM: checksum.hexdigest()}) + "\n")
    return written


def _line_bytes(line: str) -> bytes:
    """What the checksum reads of one line: its text without the line ending, then ``\n``."""
    return line.rstrip("\r\n").encode("utf-8", "surrogateescape") + b"\n"


def import_jsonl(
    store: TripleStore,
    src: str | os.PathLike[str] | TextIO,
    *,
    batch_size: int = 500,
    show_progress: bool = False,
    allow_truncated: bool = False,
    verify: bool = True,
) -> ImportReport:
    """:meth:`TripleStore.import_jsonl <neocorrag_core.triples.store.TripleStore.import_jsonl>`:
    add the entries of ``src`` (a path or an open text file) to ``store``.

    The whole file is checked first (:func:`check_export_file`), and
    :class:`~neocorrag_core.errors.InputError` is raised with nothing imported when its
    header names a format or store schema this version does not read; when it has no end
    marker, or another number of entries than the marker says, unless
    ``allow_truncated`` (then the entries it holds are imported, a cut-off last line is
    skipped as invalid, one warning says so and :attr:`ImportReport.complete` is
    ``False``); and when its lines do not match the marker's sha256 (edited or damaged
    since the export), unless ``verify=False`` (then one warning says so). A marker
    without a checksum (an older neocorrag's export) is accepted with one warning."""
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ConfigError(f"batch_size must be an integer of at least 1, got {batch_size!r}")
    options = _Options(allow_truncated, verify)
    if not isinstance(src, (str, os.PathLike)):
        name = str(getattr(src, "name", "<stream>"))
        with _replayable(src, name) as (fh, rewind):
            return _import_file(store, fh, rewind, name, batch_size, show_progress, options)
    name, fh = _open_export(src)
    with fh:
        return _import_file(store, fh, lambda: fh.seek(0), name, batch_size, show_progress, options)


@dataclass(frozen=True)
class _Options:
    """What an import lets pass: a file cut short (``allow_truncated``), lines that do not
    match the checksum (``not verify``)."""

    allow_truncated: bool = False
    verify: bool = True

    def __post_init__(self) -> None:
        for name in ("allow_truncated", "verify"):
            value = getattr(self, name)
            if not isinstance(value, bool):
                raise ConfigError(f"{name} must be True or False, got {value!r}")


def _open_export(path: str | os.PathLike[str]) -> tuple[str, TextIO]:
    """``(name, open text file)`` of an export file; InputError naming it when it cannot
    be opened."""
    name = str(Path(path).expanduser())
    try:
        return name, open(name, encoding="utf-8")  # the caller closes it
    except FileNotFoundError:
        raise InputError(f"there is no export file {name}; check the path") from None
    except OSError as exc:
        raise InputError(
            f"cannot read the export file {name}: {describe_os_error(exc, name)}"
        ) from None


@contextmanager
def _replayable(src: TextIO, name: str) -> Iterator[tuple[TextIO, Callable[[], object]]]:
    """``(stream, rewind)`` for a stream read twice: ``src`` itself when it can seek, else
    (stdin, a pipe) a temporary copy of it, deleted at the end."""
    start: int | None = None
    with suppress(AttributeError, OSError, ValueError):  # io.UnsupportedOperation included
        start = src.tell() if src.seekable() else None
    if start is not None:
        yield src, lambda: src.seek(start)
        return
    with tempfile.TemporaryFile("w+", encoding="utf-8", newline="") as copy:
        try:
            shutil.copyfileobj(src, copy)
        except UnicodeDecodeError:
            raise InputError(
                f"{name} is not UTF-8 text: it is not a triple store export; nothing was imported"
            ) from None
        copy.seek(0)
        yield copy, lambda: copy.seek(0)


@dataclass(frozen=True)
class _Marker:
    """An end marker: the entry count it gives, and its checksum (``None``: it has none,
    as an older neocorrag wrote it)."""

    count: int
    sha256: str | None


@dataclass(frozen=True)
class _Scan:
    """What the first pass over an export found."""

    entries: int
    """Non-blank lines after the header, the end marker not counted."""
    marker: _Marker | None
    """The end marker (the last non-blank line); ``None`` without one."""
    sha256: str
    """The checksum of the lines before the last one (:func:`_line_bytes`)."""

    def problem(self, name: str) -> str | None:
        """What is wrong with the file's end, or ``None`` when the marker matches."""
        if self.marker is None:
            return (
                f'{name} has no end marker (a last line {{"{_EXPORT_END}": N, ...}}): it may '
                "be truncated, or written by an older neocorrag that wrote none"
            )
        if self.marker.count != self.entries:
            return (
                f"{name} holds {self.entries} entry line(s) but its end marker says "
                f"{self.marker.count}: lines were lost or added after it was exported"
            )
        return None

    @property
    def edited(self) -> bool:
        """Whether the lines do not match the end marker's checksum."""
        return self.marker is not None and self.marker.sha256 not in (None, self.sha256)

    @property
    def unverified(self) -> bool:
        """Whether the end marker has no checksum (an older neocorrag's export)."""
        return self.marker is not None and self.marker.sha256 is None

    def check(self, name: str, options: _Options) -> bool:
        """Raise :class:`InputError` unless the file may be imported under ``options``;
        whether it is complete (its end marker matches its entry count)."""
        problem = self.problem(name)
        if problem is not None:
            if not options.allow_truncated:
                raise _incomplete_error(problem)
            return False  # cut short: its checksum cannot match, and is not checked
        if self.edited and options.verify:
            raise InputError(
                f"{name} does not match the sha256 checksum in its end marker: its lines were "
                "edited or damaged after it was exported; nothing was imported. Export the "
                "store again, or, if you edited the file on purpose, import it with "
                "`neocorrag store import --no-verify` (import_jsonl(..., verify=False))"
            )
        return True

    def warn(self, name: str) -> None:
        """Log, once, what :meth:`check` let pass: a file cut short or lines that do not
        match the checksum (warnings), or a file without one (info; the report's
        ``verified`` says it too)."""
        problem = self.problem(name)
        if problem is not None:
            logger.warning("%s; importing the entries it holds (allow_truncated)", problem)
        elif self.edited:
            logger.warning(
                "%s does not match the sha256 checksum in its end marker (its lines were "
                "edited or damaged after it was exported); importing it as it is (verify=False)",
                name,
            )
        elif self.unverified:  # info, not a warning: nothing is wrong with such a file
            logger.info(
                "%s has no checksum in its end marker (an export of an older neocorrag): its "
                "lines cannot be verified; importing them",
                name,
            )


def _entry_lines(fh: TextIO, name: str) -> Iterator[tuple[int, str]]:
    """``(line number, line)`` of each non-blank line after the header, which is checked
    first (an :class:`InputError` naming the file when it is missing or wrong)."""
    lines = _nonblank_lines(fh)
    first = next(lines, None)
    if first is None:
        raise _empty_export(name)
    _check_header(first[1], name)
    yield from lines


def _nonblank_lines(fh: TextIO) -> Iterator[tuple[int, str]]:
    """``(line number, line)`` of each line of ``fh`` that is not blank."""
    return ((number, line) for number, line in enumerate(fh, start=1) if line.strip())


def _scan(fh: TextIO, name: str) -> _Scan:
    """First pass: the header checked, entry lines counted, the lines before the last one
    checksummed, the end marker read. Streams; only the header and the last line are
    parsed."""
    checksum = hashlib.sha256()
    entries = 0
    last: str | None = None  # checksummed once a later line shows it is not the marker
    try:
        lines = _nonblank_lines(fh)
        first = next(lines, None)
        if first is None:
            raise _empty_export(name)
        _check_header(first[1], name)
        checksum.update(_line_bytes(first[1]))
        for _, line in lines:
            if last is not None:
                checksum.update(_line_bytes(last))
            entries += 1
            last = line
    except UnicodeDecodeError:
        raise InputError(
            f"{name} is not UTF-8 text; nothing was imported: it is not a triple store "
            "export, or it is damaged"
        ) from None
    marker = None if last is None else _end_marker(last)
    return _Scan(entries - (marker is not None), marker, checksum.hexdigest())


def _end_marker(line: str) -> _Marker | None:
    """The end marker ``line`` holds, or ``None`` when it is not one.

    A marker is an object with the entry count and, since the checksum was added, the
    checksum (any value: one that is not the lines' sha256 fails the check as edited)."""
    if _EXPORT_END not in line:
        return None
    try:
        item = json.loads(line)
    except ValueError:
        return None
    if not isinstance(item, dict) or not set(item) <= {_EXPORT_END, _CHECKSUM}:
        return None
    count = item.get(_EXPORT_END)
    if isinstance(count, bool) or not isinstance(count, int) or count < 0:
        return None
    checksum = item.get(_CHECKSUM)
    return _Marker(count, None if checksum is None else str(checksum))


def _incomplete_error(problem: str) -> InputError:
    return InputError(
        f"{problem}; nothing was imported. Export the store again, or import the entries "
        "the file holds with `neocorrag store import --allow-truncated` "
        "(import_jsonl(..., allow_truncated=True))"
    )


def _import_file(
    store: TripleStore,
    fh: TextIO,
    rewind: Callable[[], object],
    name: str,
    batch_size: int,
    show_progress: bool,
    options: _Options,
) -> ImportReport:
    scan = _scan(fh, name)
    complete = scan.check(name, options)
    scan.warn(name)
    rewind()
    report = _import_lines(store, fh, name, batch_size, show_progress)
    verified = complete and not scan.edited and not scan.unverified
    mismatch = complete and scan.edited
    return replace(report, complete=complete, verified=verified, checksum_mismatch=mismatch)


def _import_lines(
    store: TripleStore, fh: TextIO, name: str, batch_size: int, show_progress: bool
) -> ImportReport:
    from tqdm.auto import tqdm

    tally = _ImportTally()
    batch: list[_Entry] = []
    number = 0
    with tqdm(unit="line", desc="import", disable=not show_progress) as bar:
        try:
            for number, line in _entry_lines(fh, name):
                if _end_marker(line) is not None:
                    continue  # the end marker: checked by the first pass, not an entry
                entry = _parse_entry(line)
                if entry is None:
                    tally.invalid(number)
                else:
                    batch.append(entry)
                if len(batch) >= batch_size:
                    _import_batch(store, batch, tally)
                    bar.update(len(batch))
                    batch.clear()
        except UnicodeDecodeError:  # only when the file changed after the first pass
            raise InputError(
                f"{name} is not UTF-8 text (after line {number}); the "
                f"{tally.imported + tally.skipped} entries before were imported: fix the "
                "file and import it again (stored entries are skipped)"
            ) from None
        if batch:
            _import_batch(store, batch, tally)
            bar.update(len(batch))
    if tally.bad:
        shown = ", ".join(map(str, tally.lines))
        more = f" and {tally.bad - len(tally.lines)} more" if tally.bad > len(tally.lines) else ""
        logger.warning(
            "%s: %d invalid line(s) skipped (line %s%s): each line after the header must "
            "be an object with text_sha256 (64 hex digits), extractor, version, triples "
            "([[subject, relation, object], ...]) and document_ids (strings)",
            name,
            tally.bad,
            shown,
            more,
        )
    return tally.report()


def _import_batch(store: TripleStore, batch: Sequence[_Entry], tally: _ImportTally) -> None:
    now = time.time()
    with store._transaction(action="import into") as conn:
        for digest, extractor, version, raw, doc_ids in batch:
            cleaned = clean_triples(raw, "import")
            if insert_entry(conn, digest, extractor, version, cleaned, now):
                tally.imported += 1
                tally.triples += len(cleaned)
            else:
                tally.skipped += 1
            if doc_ids:
                tally.links += conn.executemany(
                    "INSERT OR IGNORE INTO documents VALUES (?, ?)",
                    [(doc_id, digest) for doc_id in doc_ids],
                ).rowcount


_Entry = tuple[str, str, str, list[Triple], list[str]]
"""One parsed export line: hash, extractor, version, triples, document ids."""


@dataclass
class _ImportTally:
    imported: int = 0
    skipped: int = 0
    triples: int = 0
    links: int = 0
    bad: int = 0
    lines: list[int] = field(default_factory=list)

    def invalid(self, number: int) -> None:
        self.bad += 1
        if len(self.lines) < 100:
            self.lines.append(number)

    def report(self) -> ImportReport:
        return ImportReport(
            self.imported, self.skipped, self.triples, self.links, self.bad, tuple(self.lines)
        )


def check_export_file(
    path: str | os.PathLike[str], *, allow_truncated: bool = False, verify: bool = True
) -> bool:
    """Raise :class:`~neocorrag_core.errors.InputError` unless ``path`` is a readable UTF-8
    file that starts with the export header of a format and store schema this version
    reads and ends with an end marker whose count matches its entry lines and whose
    checksum (where it has one) matches its lines; returns whether it ends so.

    Checked before a store is opened for an import, so that a wrong, cut-off or edited
    file never leaves an empty store behind. Streams the file once, parsing only its first
    and last lines; logs nothing (the import that follows warns). ``allow_truncated`` lets
    a file without a (matching) end marker pass, returning ``False``; ``verify=False`` lets
    lines that do not match the checksum pass."""
    options = _Options(allow_truncated, verify)
    name, fh = _open_export(path)
    try:
        with fh:
            scan = _scan(fh, name)
    except OSError as exc:
        raise InputError(
            f"cannot read the export file {name}: {describe_os_error(exc, name)}"
        ) from None
    return scan.check(name, options)


def _empty_export(name: str) -> InputError:
    return InputError(
        f"{name} is not a neocorrag triple store export: it is empty (an export "
        f'starts with the line {{"{_EXPORT_HEADER}": {_EXPORT_FORMAT}, ...}}); '
        "write one with `neocorrag store export`"
    )


def _check_header(line: str, name: str) -> None:
    try:
        header = json.loads(line)
    except ValueError:
        header = None
    version = header.get(_EXPORT_HEADER) if isinstance(header, dict) else None
    if not isinstance(version, int) or isinstance(version, bool):
        raise InputError(
            f"{name} is not a neocorrag triple store export: its first line is not the header "
            f'{{"{_EXPORT_HEADER}": {_EXPORT_FORMAT}, ...}}; write one with '
            "`neocorrag store export`"
        )
    if version != _EXPORT_FORMAT:
        raise InputError(
            f"{name} is a neocorrag triple store export of format {version}; this version "
            f"reads format {_EXPORT_FORMAT}: upgrade neocorrag to import it"
        )
    _check_schema(header, name)


def _check_schema(header: dict[str, object], name: str) -> None:
    """Refuse a header that names a store schema this version does not know (a newer
    neocorrag's, or a value no neocorrag wrote); a header without one is read (the entry
    lines are the same in every schema)."""
    if "schema" not in header:
        return
    schema = header["schema"]
    if isinstance(schema, int) and not isinstance(schema, bool) and schema in _SCHEMAS:
        return
    newer = isinstance(schema, int) and not isinstance(schema, bool) and schema > _SCHEMAS[-1]
    fix = (
        "upgrade neocorrag to import it"
        if newer
        else "it was not written by `neocorrag store export`, or its header was edited: "
        "export the store again"
    )
    raise InputError(
        f"{name} is an export of triple store schema {json.dumps(schema)}, which this "
        f"version does not know (it reads schemas {_SCHEMAS[0]} to {_SCHEMAS[-1]}); "
        f"nothing was imported: {fix}"
    )


def _parse_entry(line: str) -> _Entry | None:
    """One export line, validated; ``None`` if it is not a valid entry."""
    try:
        item = json.loads(line)
    except ValueError:
        return None
    if not isinstance(item, dict):
        return None
    digest, extractor, version = item.get("text_sha256"), item.get("extractor"), item.get("version")
    raw, doc_ids = item.get("triples"), item.get("document_ids", [])
    if not (
        isinstance(digest, str)
        and len(digest) == 64
        and set(digest) <= _HEX
        and isinstance(extractor, str)
        and extractor
        and isinstance(version, str)
        and version
        and isinstance(raw, list)
        and isinstance(doc_ids, list)
        and all(isinstance(d, str) and d for d in doc_ids)
    ):
        return None
    triples = []
    for t in raw:
        if not (isinstance(t, list) and len(t) == 3 and all(isinstance(x, str) for x in t)):
            return None
        triples.append(Triple(t[0], t[1], t[2]))  # cleaned when imported (clean_triples)
    # A "\\ud800" escape gives a lone surrogate, which SQLite cannot store: U+FFFD instead.
    return (
        digest,
        clean_text(extractor),
        clean_text(version),
        triples,
        list(dict.fromkeys(clean_text(d) for d in doc_ids)),
    )
