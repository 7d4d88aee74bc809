"""Load a corpus file into ``Passage`` objects, whatever multi-hop QA format it is in.

Every format :mod:`neocorrag_core.formats` recognises is read (passage lists, title ->
sentences dicts, HippoRAG OpenIE files, and the passages of MuSiQue, HotpotQA and 2Wiki
questions), as JSON or JSON lines. Identical passages (same title and text, as
whitespace-normalized) are kept once, in first-seen order.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from neocorrag_core.formats import DataFormatError, read_json_or_lines
from neocorrag_core.formats import detect_format as detect_data_format
from neocorrag_core.triples.extractor import passage_document
from neocorrag_core.types import Passage

CorpusFormatError = DataFormatError
"""The file is not JSON, or not one of the formats neocorrag reads (kept name)."""


@dataclass
class Corpus:
    """Passages of a corpus file, the detected format, and how many duplicates were dropped."""

    passages: list[Passage]
    format: str
    duplicates: int = 0


def load_corpus(path: str | Path, *, limit: int | None = None) -> Corpus:
    """Read ``path``, detect its format and return its unique passages (at most ``limit``)."""
    data = read_json_or_lines(path, what="corpus file")
    origin = str(Path(path).expanduser())
    fmt, records = detect_format(data, origin=origin)
    return _dedupe(records, fmt, limit, origin)


def passages_from_data(data: Any, *, limit: int | None = None, origin: str = "data") -> Corpus:
    """The same as :func:`load_corpus`, for data already parsed from JSON."""
    fmt, records = detect_format(data, origin=origin)
    return _dedupe(records, fmt, limit, origin)


def detect_format(data: Any, *, origin: str = "data") -> tuple[str, Iterator[tuple[str, str]]]:
    """(format name, iterator of (title, text)) for parsed corpus data."""
    fmt, content = detect_data_format(data, origin=origin)
    if fmt == "openie":
        return fmt, _from_passages(content, origin)
    if fmt == "title_sentences":
        return fmt, _from_title_sentences(content)
    if fmt == "musique":
        return fmt, _from_musique(content, origin)
    if fmt == "passages":
        return fmt, _from_passages(content, origin)
    return fmt, _from_hotpotqa(content, origin)  # hotpotqa, hotpotqa-columnar, 2wiki


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


def _dedupe(records: Iterable[tuple[str, str]], fmt: str, limit: int | None, origin: str) -> Corpus:
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
        raise CorpusFormatError(f"{origin}: no passage with text found in the {fmt} data")
    return Corpus(passages, fmt, duplicates)
