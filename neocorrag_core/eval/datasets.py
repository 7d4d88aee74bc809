"""Loaders for multi-hop QA files (HotpotQA, 2WikiMultihopQA, MuSiQue, HippoRAG corpora).

Every format becomes one :class:`QAExample`: the question, its answers (aliases
included), its candidate passages and the ids of the gold ones. Passage ids are
a hash of the normalized ``title`` and ``text``, so the same paragraph gets the same
id in every question and in a pooled corpus file, and gold ids stay comparable
when retrieval runs over the pooled corpus.

Rows that cannot be evaluated (no context, no answer, no gold passage among
the candidates) are skipped and counted in :class:`LoadReport`, never raised.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from neocorrag_core.formats import QUESTION_FORMATS, DataFormatError, read_json_or_lines
from neocorrag_core.formats import detect_format as detect_data_format
from neocorrag_core.types import Passage

FORMATS = QUESTION_FORMATS


@dataclass(frozen=True)
class QAExample:
    """One question with its candidate passages and what counts as correct."""

    id: str
    question: str
    answers: tuple[str, ...]
    """The reference answer first, then its aliases."""
    passages: tuple[Passage, ...]
    gold_ids: frozenset[str]
    gold_triples: tuple[tuple[str, str, str], ...] = ()
    """Gold evidence triples where the data set has them (2Wiki ``evidences``)."""
    gold_titles: frozenset[str] = frozenset()
    """Gold passages named by title (a user's own questions, when their store's ids are not
    at hand): passages are then matched to them by :func:`title_key` of their title."""


@dataclass
class LoadReport:
    """What a loader read: the detected format, and how many rows were skipped and why."""

    path: str
    format: str
    rows: int = 0
    loaded: int = 0
    skipped: Counter[str] = field(default_factory=Counter)

    def summary(self) -> str:
        """One line for logs and reports."""
        skipped = ", ".join(f"{n} {why}" for why, n in sorted(self.skipped.items())) or "none"
        return (
            f"{self.path}: {self.format}, {self.loaded} of {self.rows} rows loaded "
            f"(skipped: {skipped})"
        )


def normalize_text(text: str) -> str:
    """Collapse all whitespace to single spaces (passage identity ignores layout)."""
    return " ".join(str(text).split())


def passage_id(title: str, text: str) -> str:
    """Stable id of a paragraph: a short hash of its normalized title and text."""
    key = f"{normalize_text(title)}\n{normalize_text(text)}".encode()
    return "p" + hashlib.sha1(key).hexdigest()[:16]


def make_passage(title: str, text: str) -> Passage:
    """A :class:`Passage` with normalized text and its content-derived id."""
    title, text = normalize_text(title), normalize_text(text)
    return Passage(id=passage_id(title, text), text=text, title=title)


def join_sentences(sentences: Any) -> str:
    """HotpotQA/2Wiki paragraphs come as sentence lists; join them into one text."""
    if isinstance(sentences, str):
        return normalize_text(sentences)
    if not isinstance(sentences, list):
        return ""
    return normalize_text(" ".join(s for s in sentences if isinstance(s, str)))


LIST_COLUMNS = ("answers", "gold_ids", "gold_titles")
"""CSV columns that hold several values, separated by ``|``."""


def read_records(path: str | Path) -> Any:
    """Parse a JSON file, a JSON-lines file (one object per line) or a ``.csv`` file of
    your own questions (a header row; :data:`LIST_COLUMNS` split at ``|``) into a list."""
    if Path(path).suffix.lower() == ".csv":
        return _read_csv(Path(path).expanduser())
    return read_json_or_lines(path, what="data file")


def _read_csv(path: Path) -> list[dict[str, Any]]:
    import csv

    try:
        with path.open(encoding="utf-8-sig", newline="") as handle:
            rows = list(csv.DictReader(handle))
    except FileNotFoundError:
        raise FileNotFoundError(f"data file not found: {path}") from None
    except (UnicodeDecodeError, csv.Error) as err:
        raise DataFormatError(f"{path} is not a UTF-8 CSV file ({err})") from None
    if not rows or "question" not in rows[0]:
        raise DataFormatError(f"{path}: a CSV of questions needs a header with a 'question' column")
    out = []
    for row in rows:
        record: dict[str, Any] = {k: v for k, v in row.items() if isinstance(k, str)}
        for key in LIST_COLUMNS:
            value = record.get(key)
            if isinstance(value, str):
                record[key] = [v.strip() for v in value.split("|") if v.strip()]
        out.append(record)
    return out


def detect_format(records: Any, origin: str = "data") -> str:
    """Name the QA format of parsed records (see ``FORMATS``); ValueError for anything else,
    saying which option a passage corpus or a triples file belongs to."""
    return _detect(records, origin)[0]


def _detect(records: Any, origin: str) -> tuple[str, Any]:
    """``(format, question rows)``: the rows are the list the format was detected on (a
    wrapper object's list), so the loader reads exactly what the check looked at."""
    if isinstance(records, list) and not records:
        raise DataFormatError(f"{origin}: expected a non-empty list of questions")
    try:
        fmt, rows = detect_data_format(records, origin=origin)
    except DataFormatError:
        raise DataFormatError(
            f"{origin}: no row looks like MuSiQue (paragraphs), HotpotQA or 2Wiki (context), "
            "or your own questions (question, answers); "
            f"supported formats: {', '.join(FORMATS)}"
        ) from None
    if fmt == "openie":
        raise DataFormatError(
            f"{origin} is a HippoRAG OpenIE triples file, not questions: pass it as --triples"
        )
    if fmt in ("title_sentences", "passages"):
        kind = "(title -> sentences)" if fmt == "title_sentences" else "(title, text)"
        raise DataFormatError(
            f"{origin} is a passage corpus {kind}, not questions: pass it as --corpus"
        )
    return fmt, rows


def load_qa(path: str | Path, limit: int | None = None) -> tuple[list[QAExample], LoadReport]:
    """Load a QA file of any supported format (auto-detected); ``limit`` caps loaded examples.

    A question without an ``_id`` or ``id`` gets ``row<index>`` (its position in the file),
    so its cache key and its ``--split`` half change when the file's rows are reordered."""
    records = read_records(path)
    fmt, records = _detect(records, str(path))
    report = LoadReport(str(path), fmt)
    examples: list[QAExample] = []
    parse = _PARSERS[fmt]
    for index, row in enumerate(records):
        if limit is not None and len(examples) >= limit:
            break
        report.rows += 1
        if not isinstance(row, Mapping):
            report.skipped["not an object"] += 1
            continue
        example, problem = parse(row, index)
        if example is None:
            report.skipped[problem or "unreadable"] += 1
            continue
        examples.append(example)
        report.loaded += 1
    _check_unique_ids(examples, str(path))
    return examples, report


def _check_unique_ids(examples: list[QAExample], origin: str) -> None:
    counts = Counter(e.id for e in examples)
    repeated = [qid for qid, n in counts.items() if n > 1]
    if repeated:
        raise ValueError(
            f"{origin}: question ids repeat ({', '.join(repeated[:5])}); ids key the cache"
        )


def _answers(row: Mapping[str, Any]) -> tuple[str, ...]:
    found: list[str] = []
    values: list[Any] = [row.get("answer")]
    for key in ("answer_aliases", "answers", "aliases"):
        extra = row.get(key)
        values.extend(extra if isinstance(extra, list) else [extra])
    for value in values:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            value = str(value)
        if isinstance(value, str) and value.strip() and value.strip() not in found:
            found.append(value.strip())
    return tuple(found)


def _question_id(row: Mapping[str, Any], index: int) -> str:
    for key in ("_id", "id"):
        value = row.get(key)
        if isinstance(value, (str, int)) and str(value).strip():
            return str(value)
    return f"row{index}"


def _question_and_answers(row: Mapping[str, Any]) -> tuple[str, tuple[str, ...], str | None]:
    """The row's question and answers, or why it has none (``"no question"``, ``"no answer"``)."""
    question = row.get("question")
    if not isinstance(question, str) or not question.strip():
        return "", (), "no question"
    answers = _answers(row)
    return question, answers, None if answers else "no answer"


def _unique(passages: Iterable[Passage]) -> tuple[Passage, ...]:
    return tuple({p.id: p for p in passages if p.text}.values())


def _build(
    row: Mapping[str, Any],
    index: int,
    passages: tuple[Passage, ...],
    gold_ids: set[str],
    gold_triples: tuple[tuple[str, str, str], ...] = (),
) -> tuple[QAExample | None, str | None]:
    question, answers, problem = _question_and_answers(row)
    if problem:
        return None, problem
    if not passages:
        return None, "no context"
    if not gold_ids:
        return None, "no gold passage"
    example = QAExample(
        id=_question_id(row, index),
        question=normalize_text(question),
        answers=answers,
        passages=passages,
        gold_ids=frozenset(gold_ids),
        gold_triples=gold_triples,
    )
    return example, None


def _parse_musique(row: Mapping[str, Any], index: int) -> tuple[QAExample | None, str | None]:
    paragraphs = row.get("paragraphs")
    if not isinstance(paragraphs, list):
        return None, "no context"
    passages: list[Passage] = []
    gold: set[str] = set()
    for para in paragraphs:
        if not isinstance(para, Mapping):
            continue
        text = para.get("paragraph_text", para.get("text"))
        if not isinstance(text, str) or not text.strip():
            continue
        passage = make_passage(str(para.get("title") or ""), text)
        passages.append(passage)
        if para.get("is_supporting"):
            gold.add(passage.id)
    return _build(row, index, _unique(passages), gold)


def _supporting_titles(value: Any) -> set[str]:
    """Titles named in ``supporting_facts``: a list of [title, sent_id] or a columnar dict."""
    if isinstance(value, Mapping):
        titles = value.get("title")
        if not isinstance(titles, list):  # a malformed row: no supporting title read
            return set()
        return {normalize_text(t) for t in titles if isinstance(t, str)}
    if isinstance(value, list):
        return {
            normalize_text(item[0])
            for item in value
            if isinstance(item, (list, tuple)) and item and isinstance(item[0], str)
        }
    return set()


def _context_pairs(context: Any) -> list[tuple[str, str]]:
    """(title, text) pairs from a HotpotQA context: list of [title, sentences] or columnar."""
    pairs: list[tuple[str, str]] = []
    if isinstance(context, Mapping):
        titles, sentences = context.get("title"), context.get("sentences")
        if not isinstance(titles, list) or not isinstance(sentences, list):
            return pairs  # a malformed row: no passage, so it is skipped as unusable
        for title, sents in zip(titles, sentences, strict=False):
            if isinstance(title, str):
                pairs.append((title, join_sentences(sents)))
    elif isinstance(context, list):
        for item in context:
            if isinstance(item, (list, tuple)) and len(item) == 2 and isinstance(item[0], str):
                pairs.append((item[0], join_sentences(item[1])))
    return pairs


def _gold_triples(value: Any) -> tuple[tuple[str, str, str], ...]:
    if not isinstance(value, list):
        return ()
    return tuple(
        (str(t[0]), str(t[1]), str(t[2]))
        for t in value
        if isinstance(t, (list, tuple)) and len(t) == 3
    )


def _parse_hotpot(row: Mapping[str, Any], index: int) -> tuple[QAExample | None, str | None]:
    pairs = _context_pairs(row.get("context"))
    if not pairs:
        return None, "no context"
    passages = _unique(make_passage(title, text) for title, text in pairs)
    titles = _supporting_titles(row.get("supporting_facts"))
    gold = {p.id for p in passages if p.title in titles}
    return _build(row, index, passages, gold, _gold_triples(row.get("evidences")))


def title_key(title: str) -> str:
    """How a gold title and a passage's title are compared: whitespace collapsed, case-folded."""
    return normalize_text(title).casefold()


def _strings(value: Any) -> list[str] | None:
    """A list of non-empty strings (one string is a list of one); ``None`` when malformed."""
    if value is None:
        return []
    if isinstance(value, (str, int)) and not isinstance(value, bool):
        value = [value]
    if not isinstance(value, list):
        return None
    out = [str(v).strip() for v in value if isinstance(v, (str, int)) and not isinstance(v, bool)]
    return [v for v in out if v] if len(out) == len(value) else None


def _parse_questions(row: Mapping[str, Any], index: int) -> tuple[QAExample | None, str | None]:
    """A user's own question: ``question``, ``answers`` (or ``answer``), optional
    ``gold_ids`` (the store's document ids) or ``gold_titles``; no passages."""
    question, answers, problem = _question_and_answers(row)
    if problem:
        return None, problem
    gold_ids, gold_titles = _strings(row.get("gold_ids")), _strings(row.get("gold_titles"))
    if gold_ids is None or gold_titles is None:
        return None, "gold_ids / gold_titles not a list of strings"
    example = QAExample(
        id=_question_id(row, index),
        question=normalize_text(question),
        answers=answers,
        passages=(),
        gold_ids=frozenset(gold_ids),
        gold_titles=frozenset(title_key(t) for t in gold_titles) if not gold_ids else frozenset(),
    )
    return example, None


_PARSERS = {
    "musique": _parse_musique,
    "hotpotqa": _parse_hotpot,
    "hotpotqa-columnar": _parse_hotpot,
    "2wiki": _parse_hotpot,
    "questions": _parse_questions,
}


def load_corpus(path: str | Path) -> list[Passage]:
    """A corpus file (any format :mod:`neocorrag_core.indexing.corpus` reads) as passages.

    Parsing is the corpus loader's; the ids are re-derived here with :func:`passage_id`, so
    they match :func:`load_qa`'s and gold passages are found in the pooled corpus.
    """
    from neocorrag_core.indexing.corpus import load_corpus as read_corpus

    corpus = read_corpus(path)
    return list(_unique(make_passage(p.title, p.text) for p in corpus.passages))


__all__ = [
    "FORMATS",
    "LoadReport",
    "QAExample",
    "detect_format",
    "load_corpus",
    "load_qa",
    "make_passage",
    "passage_id",
    "title_key",
]
