"""Reading data files and telling their format: one place for the corpus and QA loaders.

Both :mod:`neocorrag_core.indexing.corpus` (passages to index) and
:mod:`neocorrag_core.eval.datasets` (questions to benchmark) read the same multi-hop QA files, so
reading JSON or JSON lines and recognising the format happen here once; each loader then decides
which formats it accepts and what it takes from them.

Formats (see ``../shared/data/README.md`` for the fields):

* ``passages``: a list of ``{"title", "text"}`` (HippoRAG corpus files, and our own);
* ``title_sentences``: a dict ``title -> [sentences]`` (HippoRAG's HotpotQA corpus);
* ``openie``: a HippoRAG OpenIE results file (``{"docs": [...]}``);
* ``musique``: questions with ``paragraphs[{title, paragraph_text}]``;
* ``hotpotqa``: questions with ``context [[title, [sentences]]]``;
* ``hotpotqa-columnar``: questions with ``context {"title": [...], "sentences": [[...]]}``;
* ``2wiki``: HotpotQA-shaped questions with gold triples (``evidences``), often JSON lines.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from neocorrag_core.errors import InputError
from neocorrag_core.validation import clean_text

QUESTION_FORMATS = ("musique", "hotpotqa", "hotpotqa-columnar", "2wiki", "questions")
"""Formats whose rows are questions: the benchmarks' (each with its own passages) and
``questions``, a user's own (``question``, ``answers``, optional gold ids or titles; the
passages come from the user's store)."""
PASSAGE_FORMATS = ("passages", "title_sentences", "openie")
"""Formats that hold passages only."""

_SCANNED_ROWS = 50  # rows looked at to recognise a list format (leading rows may be odd)


class DataFormatError(InputError):
    """A data file is unreadable, not JSON, or in none of the formats neocorrag reads.

    The message names the file (or the data's origin) and what was wrong with it.
    """


# A \uD800-\uDFFF escape that is not half of a pair: the only way a lone surrogate gets into
# what json.loads returns from valid UTF-8 text. (An escaped backslash before "ud800" also
# matches: a false alarm, which costs one walk over the parsed value.)
_LONE_SURROGATE_ESCAPE = re.compile(
    r"\\u[dD][89abAB][0-9a-fA-F]{2}(?!\\u[dD][c-fC-F][0-9a-fA-F]{2})"
    r"|(?<!\\u[dD][89abAB][0-9a-fA-F]{2})\\u[dD][c-fC-F][0-9a-fA-F]{2}"
)


def clean_json(value: Any) -> Any:
    """``value`` (parsed JSON) with lone surrogates in its strings, keys included, replaced
    by U+FFFD (:func:`~neocorrag_core.validation.clean_text`); new lists and dicts, the
    same scalars. For data that came from ``json.loads``: what reads a data file hands on
    only valid text."""
    if isinstance(value, str):
        return clean_text(value)
    if isinstance(value, list):
        return [clean_json(item) for item in value]
    if isinstance(value, dict):
        return {clean_json(key): clean_json(item) for key, item in value.items()}
    return value


def loads_text(text: str) -> Any:
    """``json.loads(text)``, with lone surrogates (a ``"\\ud800"`` escape) replaced by
    U+FFFD in every string of the result (:func:`clean_json`). Only text that holds such
    an escape is walked, so a clean file costs one regular-expression scan more."""
    value = json.loads(text)
    if _LONE_SURROGATE_ESCAPE.search(text):
        return clean_json(value)
    return value


def json_error_text(err: json.JSONDecodeError, *, line: bool = True) -> str:
    """Where and why ``err`` stopped parsing, as words: ``"Expecting value at line 3 column
    7"`` (``line=False``: ``"... at column 7"``, for one line of JSON lines).

    ``str(err)`` reads ``"msg: line 3 column 7 (char 20)"``, and some of ``json``'s messages
    end in "at" (``"Invalid control character at"``, ``"Unterminated string starting
    at"``), so gluing the parts together by hand gave "... at, column 42" and "starting at
    at line 61"."""
    where = f"line {err.lineno} column {err.colno}" if line else f"column {err.colno}"
    return f"{err.msg.removesuffix(' at')} at {where}"


def read_json_or_lines(path: str | Path, *, what: str = "data file") -> Any:
    """Parse ``path`` as one JSON document, or as JSON lines (one value per line).

    A ``.jsonl`` file is read as lines directly; a leading UTF-8 byte-order mark is
    skipped. Errors name the file: missing (``FileNotFoundError``), unreadable (the
    ``OSError``, e.g. a folder or no permission), not UTF-8, empty, or neither JSON nor
    JSON lines (:class:`DataFormatError`, with where it stops parsing). Lone surrogates
    that ``\\ud800``-style escapes put in strings are replaced by U+FFFD (:func:`loads_text`).
    """
    path = Path(path).expanduser()
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise FileNotFoundError(f"{what} not found: {path}") from None
    except OSError as err:  # a folder, no permission...: keep the type, name the file
        raise type(err)(
            err.errno, f"cannot read the {what} {path}: {err.strerror or err}"
        ) from None
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise DataFormatError(f"{path} is UTF-16 text, not UTF-8: save it as UTF-8")
    try:
        # utf-8-sig: editors on Windows start UTF-8 files with a byte-order mark.
        raw = data.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        raise DataFormatError(f"{path} is not UTF-8 text (byte {err.start})") from None
    if not raw.strip():
        raise DataFormatError(f"{path} is empty")
    whole_error: json.JSONDecodeError | None = None
    if path.suffix != ".jsonl":
        try:
            return loads_text(raw)
        except json.JSONDecodeError as err:
            whole_error = err  # maybe JSON lines without the .jsonl suffix
        except RecursionError:
            raise DataFormatError(f"{path} nests JSON too deeply to read") from None
    rows = []
    # Split on newlines only: str.splitlines would also cut at U+2028 etc., which JSON
    # strings may hold unescaped.
    for number, line in enumerate(raw.split("\n"), start=1):
        if not line.strip():
            continue
        try:
            rows.append(loads_text(line))
        except json.JSONDecodeError as err:
            if whole_error is None:  # a .jsonl file: only JSON lines were tried
                raise DataFormatError(
                    f"{path}: line {number} does not parse as JSON "
                    f"({json_error_text(err, line=False)})"
                ) from None
            raise DataFormatError(
                f"{path} is neither JSON ({json_error_text(whole_error)}) nor JSON lines "
                f"(line {number} does not parse: {json_error_text(err, line=False)})"
            ) from None
        except RecursionError:
            raise DataFormatError(f"{path}: line {number} nests JSON too deeply") from None
    return rows


def json_type_name(value: Any) -> str:
    """What a parsed JSON value is called in JSON (``null``, ``number``, ...), for messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"


def detect_format(data: Any, *, origin: str = "data") -> tuple[str, Any]:
    """``(format, content)`` of parsed data: the format's name and its rows (or mapping).

    Wrappers are unwrapped: ``{"data": [...]}``, ``{"questions": [...]}``,
    ``{"passages": [...]}`` and ``{"corpus": [...]}`` are read as their list. Raises
    :class:`DataFormatError` naming ``origin`` when nothing fits.
    """
    if isinstance(data, Mapping):
        if isinstance(data.get("docs"), list):
            return "openie", data["docs"]
        for key in ("passages", "corpus", "data", "questions"):
            if isinstance(data.get(key), list):
                return detect_format(data[key], origin=origin)
        if data and all(isinstance(v, list) for v in data.values()):
            return "title_sentences", data
        raise DataFormatError(_unknown(origin, f"a JSON object with keys {sorted(data)[:6]}"))
    if not isinstance(data, list):
        raise DataFormatError(_unknown(origin, f"a JSON {json_type_name(data)}"))
    rows = [row for row in data[:_SCANNED_ROWS] if isinstance(row, Mapping)]
    if not rows:
        what = "an empty list" if not data else "a list without JSON objects"
        raise DataFormatError(_unknown(origin, what))
    for row in rows:
        if "paragraphs" in row:
            return "musique", data
        context = row.get("context")
        if isinstance(context, Mapping):
            return "hotpotqa-columnar", data
        if isinstance(context, list):
            # HotpotQA rows have a "type" too; only 2Wiki ships gold triples ("evidences").
            return ("2wiki" if "evidences" in row else "hotpotqa"), data
        if "question" not in row and _has_text(row):
            return "passages", data
    if any("question" in row for row in rows):
        if not any("context" in row or "supporting_facts" in row for row in rows):
            return "questions", data  # a user's own questions: passages from their store
        return "hotpotqa", data  # questions whose rows lack a context (2Wiki rows may)
    raise DataFormatError(_unknown(origin, f"a list of objects with keys {sorted(rows[0])[:6]}"))


def _has_text(row: Mapping[str, Any]) -> bool:
    return any(key in row for key in ("text", "paragraph_text", "contents"))


def _unknown(origin: str, what: str) -> str:
    return (
        f"{origin}: cannot tell the format of {what}. Expected a list of "
        '{"title", "text"}, a dict title -> [sentences], MuSiQue questions with "paragraphs", '
        'HotpotQA/2Wiki questions with "context", or a HippoRAG OpenIE file with "docs".'
    )


__all__ = [
    "PASSAGE_FORMATS",
    "QUESTION_FORMATS",
    "DataFormatError",
    "clean_json",
    "detect_format",
    "json_error_text",
    "json_type_name",
    "loads_text",
    "read_json_or_lines",
]
