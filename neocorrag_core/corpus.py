"""Load a corpus file into ``Passage`` objects, whatever multi-hop QA format it is in.

Detected formats (see ``../shared/data/README.md`` for the fields):

* ``passages``: a JSON list of ``{"title", "text"}`` (HippoRAG corpus files, and our own);
* ``title_sentences``: a JSON dict ``title -> [sentences]`` (HippoRAG's HotpotQA corpus);
* ``musique``: questions with ``paragraphs[{title, paragraph_text}]``;
* ``hotpotqa``: questions with ``context [[title, [sentences]]]`` (2Wiki uses the same,
  as JSON lines), or the columnar ``context {"title": [...], "sentences": [[...]]}``;
* ``openie``: a HippoRAG OpenIE results file (``{"docs": [{title, text, ...}]}``).

Any of them may be JSON or JSON lines. Identical passages (same title and text, as
whitespace-normalized) are kept once, in first-seen order.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from neocorrag_core.triples.extractor import passage_document
from neocorrag_core.types import Passage


class CorpusFormatError(ValueError):
    """The file is not JSON, or not one of the corpus formats neocorrag reads."""


@dataclass
class Corpus:
    """Passages of a corpus file, the detected format, and how many duplicates were dropped."""

    passages: list[Passage]
    format: str
    duplicates: int = 0


def load_corpus(path: str | Path, *, limit: int | None = None) -> Corpus:
    """Read ``path``, detect its format and return its unique passages (at most ``limit``)."""
    path = Path(path).expanduser()
    try:
        raw = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise FileNotFoundError(f"corpus file not found: {path}") from None
    except UnicodeDecodeError:
        raise CorpusFormatError(f"{path} is not UTF-8 text") from None
    data = _parse_json_or_lines(raw, path)
    fmt, records = detect_format(data, origin=str(path))
    return _dedupe(records, fmt, limit)


def passages_from_data(data: Any, *, limit: int | None = None, origin: str = "data") -> Corpus:
    """The same as :func:`load_corpus`, for data already parsed from JSON."""
    fmt, records = detect_format(data, origin=origin)
    return _dedupe(records, fmt, limit)


def _parse_json_or_lines(raw: str, path: Path) -> Any:
    if not raw.strip():
        raise CorpusFormatError(f"{path} is empty")
    try:
        return json.loads(raw)
    except json.JSONDecodeError as whole_error:
        rows = []
        for number, line in enumerate(raw.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError:
                raise CorpusFormatError(
                    f"{path} is neither JSON ({whole_error}) nor JSON lines (line {number} "
                    "does not parse)"
                ) from None
        return rows


def detect_format(data: Any, *, origin: str = "data") -> tuple[str, Iterator[tuple[str, str]]]:
    """(format name, iterator of (title, text)) for parsed corpus data."""
    if isinstance(data, dict):
        if isinstance(data.get("docs"), list):
            return "openie", _from_passages(data["docs"], origin)
        for key in ("passages", "corpus", "data", "questions"):
            if isinstance(data.get(key), list):
                return detect_format(data[key], origin=origin)
        if data and all(isinstance(v, list) for v in data.values()):
            return "title_sentences", _from_title_sentences(data)
        raise CorpusFormatError(_unknown(origin, f"a JSON object with keys {sorted(data)[:6]}"))
    if not isinstance(data, list):
        raise CorpusFormatError(_unknown(origin, f"a JSON {type(data).__name__}"))
    first = next((row for row in data if isinstance(row, dict)), None)
    if first is None:
        raise CorpusFormatError(_unknown(origin, "a list without JSON objects"))
    if "paragraphs" in first:
        return "musique", _from_musique(data, origin)
    if "context" in first or "question" in first:
        return "hotpotqa", _from_hotpotqa(data, origin)
    if "text" in first or "paragraph_text" in first or "contents" in first:
        return "passages", _from_passages(data, origin)
    raise CorpusFormatError(_unknown(origin, f"a list of objects with keys {sorted(first)[:6]}"))


def _unknown(origin: str, what: str) -> str:
    return (
        f"{origin}: cannot tell the corpus format of {what}. Expected a list of "
        '{"title", "text"}, a dict title -> [sentences], MuSiQue questions with "paragraphs", '
        'HotpotQA/2Wiki questions with "context", or a HippoRAG OpenIE file with "docs".'
    )


def _text(value: Any) -> str:
    if isinstance(value, list):
        return " ".join(str(v).strip() for v in value if isinstance(v, (str, int, float)))
    return value if isinstance(value, str) else ""


def _from_passages(rows: list[Any], origin: str) -> Iterator[tuple[str, str]]:
    for row in rows:
        if isinstance(row, str):
            yield "", row
        elif isinstance(row, dict):
            text = _text(row.get("text", row.get("paragraph_text", row.get("contents"))))
            yield _text(row.get("title", "")), text


def _from_title_sentences(data: dict[str, Any]) -> Iterator[tuple[str, str]]:
    for title, sentences in data.items():
        yield str(title), _text(sentences)


def _from_musique(rows: list[Any], origin: str) -> Iterator[tuple[str, str]]:
    for row in rows:
        for para in (row.get("paragraphs") or []) if isinstance(row, dict) else []:
            if isinstance(para, dict):
                yield (
                    _text(para.get("title", "")),
                    _text(para.get("paragraph_text", para.get("text"))),
                )


def _from_hotpotqa(rows: list[Any], origin: str) -> Iterator[tuple[str, str]]:
    for row in rows:
        context = row.get("context") if isinstance(row, dict) else None
        if isinstance(context, dict):  # columnar: {"title": [...], "sentences": [[...]]}
            titles, sentences = context.get("title") or [], context.get("sentences") or []
            yield from ((str(t), _text(s)) for t, s in zip(titles, sentences, strict=False))
        elif isinstance(context, list):  # [[title, [sentences]], ...]; 2Wiki rows may lack it
            for pair in context:
                if isinstance(pair, (list, tuple)) and len(pair) == 2:
                    yield str(pair[0]), _text(pair[1])


def _dedupe(records: Iterable[tuple[str, str]], fmt: str, limit: int | None) -> Corpus:
    passages: list[Passage] = []
    seen: set[str] = set()
    duplicates = 0
    for title, text in records:
        if not text.strip():
            continue
        probe = Passage(id="probe", title=title, text=text)
        digest = hashlib.sha256(passage_document(probe).encode("utf-8")).hexdigest()
        if digest in seen:
            duplicates += 1
            continue
        seen.add(digest)
        # The content hash is a stable id: the same passage gets the same id in every run.
        passages.append(Passage(id=digest[:16], title=title, text=text))
        if limit is not None and len(passages) >= limit:
            break
    if not passages:
        raise CorpusFormatError(f"no passage with text found in the {fmt} data")
    return Corpus(passages, fmt, duplicates)
