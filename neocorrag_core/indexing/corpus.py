"""Load a corpus file into ``Passage`` objects, whatever multi-hop QA format it is in.

Every format :mod:`neocorrag_core.formats` recognises is read (passage lists, title ->
sentences dicts, HippoRAG OpenIE files, and the passages of MuSiQue, HotpotQA and 2Wiki
questions), as JSON or JSON lines. Identical passages (same title and text, as
whitespace-normalized) are kept once, in first-seen order.

:func:`load_corpus` returns every passage at once; :func:`open_corpus` yields them one by
one for ``neocorrag index``: a JSON-lines file is read line by line (memory stays bounded
whatever its size), while a single JSON document has to be parsed whole first (JSON gives
no way to read part of a document), so corpora too big for memory belong in JSON lines.
Both give the same passages, with the same ids, in the same order.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from itertools import chain, islice
from pathlib import Path
from typing import Any

from neocorrag_core.formats import (
    _SCANNED_ROWS,
    DataFormatError,
    json_error_text,
    loads_text,
    read_json_or_lines,
)
from neocorrag_core.formats import detect_format as detect_data_format
from neocorrag_core.triples.extractor import passage_document
from neocorrag_core.types import Passage
from neocorrag_core.validation import check_int

CorpusFormatError = DataFormatError
"""The file is not JSON, or not one of the formats neocorrag reads (kept name)."""


@dataclass
class Corpus:
    """Passages of a corpus file, the detected format, how many duplicates were dropped and
    how many rows were skipped for holding no text (empty, missing, or not a string)."""

    passages: list[Passage]
    format: str
    duplicates: int = 0
    skipped: int = 0


def load_corpus(path: str | Path, *, limit: int | None = None) -> Corpus:
    """Read ``path``, detect its format and return its unique passages (at most ``limit``)."""
    _check_limit(limit, "load_corpus")
    data = read_json_or_lines(path, what="corpus file")
    origin = str(Path(path).expanduser())
    fmt, records = detect_format(data, origin=origin)
    return _dedupe(records, fmt, limit, origin)


def passages_from_data(data: Any, *, limit: int | None = None, origin: str = "data") -> Corpus:
    """The same as :func:`load_corpus`, for data already parsed from JSON."""
    _check_limit(limit, "passages_from_data")
    fmt, records = detect_format(data, origin=origin)
    return _dedupe(records, fmt, limit, origin)


def _check_limit(limit: object, owner: str) -> None:
    """``limit`` is ``None`` (everything) or a count of at least 1 (``0`` read one passage)."""
    check_int(owner, "limit", limit, minimum=1, optional=True)


def detect_format(data: Any, *, origin: str = "data") -> tuple[str, Iterator[tuple[str, str]]]:
    """(format name, iterator of (title, text)) for parsed corpus data."""
    fmt, content = detect_data_format(data, origin=origin)
    return fmt, _records(fmt, content, origin)


def _records(fmt: str, content: Any, origin: str) -> Iterator[tuple[str, str]]:
    """(title, text) of every passage of ``content`` read as ``fmt``."""
    if fmt == "openie":
        return _from_passages(content, origin)
    if fmt == "title_sentences":
        return _from_title_sentences(content)
    if fmt == "musique":
        return _from_musique(content, origin)
    if fmt == "passages":
        return _from_passages(content, origin)
    if fmt == "questions":
        raise DataFormatError(
            f"{origin} holds questions without passages (question, answers): there is "
            "nothing to index; index the passages of your store instead"
        )
    return _from_hotpotqa(content, origin)  # hotpotqa, hotpotqa-columnar, 2wiki


def _text(value: Any) -> str:
    if isinstance(value, list):
        return " ".join(str(v).strip() for v in value if isinstance(v, (str, int, float)))
    return value if isinstance(value, str) else ""


# Rows that hold no readable text come through as ("", "") so that they are counted as
# skipped (``Corpus.skipped``), never dropped without a word.
_UNREADABLE = ("", "")


def _from_passages(rows: list[Any], origin: str) -> Iterator[tuple[str, str]]:
    for row in rows:
        if isinstance(row, str):
            yield "", row
        elif isinstance(row, dict):
            text = _text(row.get("text", row.get("paragraph_text", row.get("contents"))))
            yield _text(row.get("title", "")), text
        else:
            yield _UNREADABLE


def _from_title_sentences(data: dict[str, Any]) -> Iterator[tuple[str, str]]:
    for title, sentences in data.items():
        yield str(title), _text(sentences)


def _from_musique(rows: list[Any], origin: str) -> Iterator[tuple[str, str]]:
    for row in rows:
        paragraphs = row.get("paragraphs") if isinstance(row, dict) else None
        if not isinstance(paragraphs, list):
            if not isinstance(row, dict) or paragraphs is not None:
                yield _UNREADABLE  # a row that is no object, or paragraphs of another shape
            continue
        for para in paragraphs:
            if isinstance(para, dict):
                yield (
                    _text(para.get("title", "")),
                    _text(para.get("paragraph_text", para.get("text"))),
                )
            else:
                yield _UNREADABLE


def _from_hotpotqa(rows: list[Any], origin: str) -> Iterator[tuple[str, str]]:
    for row in rows:
        context = row.get("context") if isinstance(row, dict) else None
        if not isinstance(row, dict) or not isinstance(context, (dict, list, type(None))):
            yield _UNREADABLE  # a row that is no object, or a context of another shape
        elif isinstance(context, dict):  # columnar: {"title": [...], "sentences": [[...]]}
            titles, sentences = context.get("title") or [], context.get("sentences") or []
            if not isinstance(titles, list) or not isinstance(sentences, list):
                yield _UNREADABLE
                continue
            yield from ((str(t), _text(s)) for t, s in zip(titles, sentences, strict=False))
            yield from [_UNREADABLE] * abs(len(titles) - len(sentences))  # unpaired
        elif isinstance(context, list):  # [[title, [sentences]], ...]; 2Wiki rows may lack it
            for pair in context:
                if isinstance(pair, (list, tuple)) and len(pair) == 2:
                    yield str(pair[0]), _text(pair[1])
                else:
                    yield _UNREADABLE


def _dedupe(records: Iterable[tuple[str, str]], fmt: str, limit: int | None, origin: str) -> Corpus:
    counts = _Counts()
    passages = list(_unique_passages(records, limit, counts))
    if not passages:
        raise CorpusFormatError(_no_text(origin, fmt))
    return Corpus(passages, fmt, counts.duplicates, counts.skipped)


@dataclass
class _Counts:
    passages: int = 0
    duplicates: int = 0
    skipped: int = 0


def _no_text(origin: str, fmt: str) -> str:
    return f"{origin}: no passage with text found in the {fmt} data"


def _unique_passages(
    records: Iterable[tuple[str, str]], limit: int | None, counts: _Counts
) -> Iterator[Passage]:
    """Passages with text, each content once (first seen wins), at most ``limit``.

    The seen-set holds 16-byte digest prefixes (128 bits: collisions are not a practical
    concern) rather than hex strings, so de-duplicating millions of passages stays small.
    """
    seen: set[bytes] = set()
    for title, text in records:
        if not text.strip():
            counts.skipped += 1
            continue
        probe = Passage(id="probe", title=title, text=text)
        digest = hashlib.sha256(passage_document(probe).encode("utf-8")).digest()
        if digest[:16] in seen:
            counts.duplicates += 1
            continue
        seen.add(digest[:16])
        counts.passages += 1
        # The content hash is a stable id: the same passage gets the same id in every run.
        yield Passage(id=digest.hex()[:16], title=title, text=text)
        if limit is not None and counts.passages >= limit:
            return


class CorpusStream:
    """The unique passages of a corpus file, read lazily and only once (see :func:`open_corpus`).

    ``passages``, ``duplicates`` and ``skipped`` (rows without text) count what iteration
    has yielded and dropped so far, so they are final once the stream is exhausted.
    """

    def __init__(
        self,
        path: Path,
        format: str,
        records: Iterator[tuple[str, str]],
        *,
        streamed: bool,
        limit: int | None = None,
    ) -> None:
        self.path = path
        self.format = format
        self.streamed = streamed
        """``True``: JSON lines, read line by line; ``False``: one JSON document, parsed whole."""
        self.limit = limit
        self.passages = 0
        self.duplicates = 0
        self.skipped = 0
        self._records: Iterator[tuple[str, str]] | None = records

    def __repr__(self) -> str:
        how = "streamed" if self.streamed else "whole"
        return f"CorpusStream({str(self.path)!r}, {self.format!r}, {how})"

    def __iter__(self) -> Iterator[Passage]:
        records, self._records = self._records, None
        if records is None:
            raise RuntimeError(f"the corpus stream of {self.path} was read already; open it again")
        counts = _Counts()
        for passage in _unique_passages(records, self.limit, counts):
            self.passages, self.duplicates = counts.passages, counts.duplicates
            self.skipped = counts.skipped
            yield passage
        self.passages, self.duplicates = counts.passages, counts.duplicates
        self.skipped = counts.skipped
        if not counts.passages:
            raise CorpusFormatError(_no_text(str(self.path), self.format))


def open_corpus(path: str | Path, *, limit: int | None = None) -> CorpusStream:
    """The passages of ``path`` as a stream: the same passages and ids as :func:`load_corpus`.

    A JSON-lines file (``.jsonl``, or any file whose first line is a complete JSON value
    followed by more lines) is read line by line; its format is detected from its first
    records, exactly as :func:`load_corpus` detects it, and applied to every record. Any
    other file is one JSON document, parsed whole. Format errors are raised here, before
    any passage is read; a line that does not parse is reported, with its number, when
    iteration reaches it.
    """
    _check_limit(limit, "open_corpus")
    file = Path(path).expanduser()
    origin = str(file)
    lines, data = _peek(file)
    if not lines:
        if data is _UNREAD:
            data = read_json_or_lines(file, what="corpus file")
        fmt, records = detect_format(data, origin=origin)
        return CorpusStream(file, fmt, records, streamed=False, limit=limit)
    rows = _json_lines(file)
    # The rows formats.detect_format scans, so the format found is load_corpus's.
    head = list(islice(rows, _SCANNED_ROWS))
    fmt, _ = detect_data_format(head, origin=origin)
    records = _records(fmt, chain(head, rows), origin)
    return CorpusStream(file, fmt, records, streamed=True, limit=limit)


_UNREAD = object()


def _peek(file: Path) -> tuple[bool, Any]:
    """(whether ``file`` is JSON lines, the parsed document if reading told it already).

    Judged from the first lines only. A file that is one line of JSON is a document,
    returned parsed (so it is not parsed twice). ``(False, _UNREAD)`` when the file is a
    document spread over lines, or cannot be opened or decoded: then
    :func:`~neocorrag_core.formats.read_json_or_lines` reads it and raises its usual,
    precise errors (missing, a folder, UTF-16, not UTF-8, empty, not JSON).
    """
    try:
        with open(file, "rb") as fh:
            lines = (line for line in fh if line.strip())
            first = next(lines, None)
            if first is None or first.startswith((b"\xff\xfe", b"\xfe\xff")):
                return False, _UNREAD
            if file.suffix == ".jsonl":
                return True, _UNREAD
            try:
                data = loads_text(first.decode("utf-8-sig"))
            except (ValueError, RecursionError):  # a document spread over lines, or not JSON
                return False, _UNREAD
            if next(lines, None) is None:
                return False, data
            return True, _UNREAD
    except OSError:
        return False, _UNREAD


def _json_lines(file: Path) -> Iterator[Any]:
    """The parsed non-blank lines of ``file``, one at a time (split on newlines only:
    U+2028 and friends may stand unescaped inside JSON strings)."""
    with open(file, "rb") as fh:
        for number, raw in enumerate(fh, start=1):
            if number == 1:
                raw = raw.removeprefix(b"\xef\xbb\xbf")
            if not raw.strip():
                continue
            try:
                yield loads_text(raw.decode("utf-8"))
            except UnicodeDecodeError as err:
                raise DataFormatError(
                    f"{file}: line {number} is not UTF-8 text (byte {err.start})"
                ) from None
            except json.JSONDecodeError as err:
                raise DataFormatError(
                    f"{file}: line {number} does not parse as JSON "
                    f"({json_error_text(err, line=False)})"
                ) from None
            except RecursionError:
                raise DataFormatError(f"{file}: line {number} nests JSON too deeply") from None
