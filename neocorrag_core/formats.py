"""Reading data files and telling their format: one place for the corpus and QA loaders.

Both :mod:`neocorrag_core.corpus` (passages to index) and :mod:`neocorrag_core.eval.datasets`
(questions to benchmark) read the same multi-hop QA files, so reading JSON or JSON lines
and recognising the format happen here once; each loader then decides which formats it
accepts and what it takes from them.

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
from collections.abc import Mapping
from pathlib import Path
from typing import Any

QUESTION_FORMATS = ("musique", "hotpotqa", "hotpotqa-columnar", "2wiki")
"""Formats whose rows are questions (each with its own passages)."""
PASSAGE_FORMATS = ("passages", "title_sentences", "openie")
"""Formats that hold passages only."""

_SCANNED_ROWS = 50  # rows looked at to recognise a list format (leading rows may be odd)


class DataFormatError(ValueError):
    """A data file is unreadable, not JSON, or in none of the formats neocorrag reads.

    The message names the file (or the data's origin) and what was wrong with it.
    """


def read_json_or_lines(path: str | Path, *, what: str = "data file") -> Any:
    """Parse ``path`` as one JSON document, or as JSON lines (one value per line).

    A ``.jsonl`` file is read as lines directly. Errors name the file: missing
    (``FileNotFoundError``), not UTF-8, empty, or neither JSON nor JSON lines
    (:class:`DataFormatError`, with the first line that does not parse).
    """
    path = Path(path).expanduser()
    try:
        raw = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise FileNotFoundError(f"{what} not found: {path}") from None
    except UnicodeDecodeError as err:
        raise DataFormatError(f"{path} is not UTF-8 text (byte {err.start})") from None
    if not raw.strip():
        raise DataFormatError(f"{path} is empty")
    whole_error: json.JSONDecodeError | None = None
    if path.suffix != ".jsonl":
        try:
            return json.loads(raw)
        except json.JSONDecodeError as err:
            whole_error = err  # maybe JSON lines without the .jsonl suffix
    rows = []
    for number, line in enumerate(raw.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError as err:
            as_json = f"JSON ({whole_error.msg}) nor " if whole_error is not None else ""
            raise DataFormatError(
                f"{path} is neither {as_json}JSON lines (line {number} does not parse: {err.msg})"
            ) from None
    return rows


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
        raise DataFormatError(_unknown(origin, f"a JSON {type(data).__name__}"))
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
    "detect_format",
    "read_json_or_lines",
]
