"""One reader and one format detector for every data file (corpus and QA loaders)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from neocorrag_core.formats import DataFormatError, detect_format, read_json_or_lines


def test_json_and_json_lines_are_read(tmp_path: Path):
    whole = tmp_path / "a.json"
    whole.write_text(json.dumps([{"title": "A", "text": "x"}]), encoding="utf-8")
    lines = tmp_path / "b.json"  # JSON lines without the .jsonl suffix
    lines.write_text('{"title": "A", "text": "x"}\n\n{"title": "B", "text": "y"}\n')
    assert read_json_or_lines(whole) == [{"title": "A", "text": "x"}]
    assert [r["title"] for r in read_json_or_lines(lines)] == ["A", "B"]


@pytest.mark.parametrize(
    ("content", "message"),
    [(b"", "is empty"), (b"\xff\xfe[1]", "not UTF-8"), (b"{x\n[", "line 1 does not parse")],
)
def test_errors_name_the_file(tmp_path: Path, content: bytes, message: str):
    path = tmp_path / "bad.json"
    path.write_bytes(content)
    with pytest.raises(DataFormatError, match=message) as caught:
        read_json_or_lines(path)
    assert str(path) in str(caught.value)
    with pytest.raises(FileNotFoundError, match="corpus file not found"):
        read_json_or_lines(tmp_path / "missing.json", what="corpus file")


@pytest.mark.parametrize(
    ("data", "name"),
    [
        ([{"title": "A", "text": "x"}], "passages"),
        ({"A": ["s1"]}, "title_sentences"),
        ({"docs": []}, "openie"),
        ([{"question": "q", "paragraphs": []}], "musique"),
        ([{"question": "q", "context": [["A", ["s"]]]}], "hotpotqa"),
        ([{"question": "q", "context": {"title": [], "sentences": []}}], "hotpotqa-columnar"),
        ([{"question": "q", "context": [], "evidences": []}], "2wiki"),
        ({"data": [{"question": "q", "paragraphs": []}]}, "musique"),
        ([{"question": "q"}, {"question": "r", "context": [["A", ["s"]]]}], "hotpotqa"),
    ],
)
def test_formats_are_recognised(data, name):
    assert detect_format(data)[0] == name


def test_unknown_shapes_say_what_was_seen():
    with pytest.raises(DataFormatError, match=r"origin.*keys \['foo'\]"):
        detect_format([{"foo": 1}], origin="origin")
    with pytest.raises(DataFormatError, match="a JSON number"):
        detect_format(42)
    with pytest.raises(DataFormatError, match="a JSON null"):
        detect_format(None)
    with pytest.raises(DataFormatError, match="a JSON string"):
        detect_format("passages.json")


# ---- where JSON stops parsing, in words (json's messages end in "at")


def test_a_control_character_in_a_json_line_is_reported_with_its_column(tmp_path: Path):
    """Was "(Invalid control character at, column 12)": ``json`` ends that message in "at"."""
    path = tmp_path / "rows.jsonl"
    path.write_text('{"title": "A"}\n{"text": "a\x01b"}\n', encoding="utf-8")
    with pytest.raises(DataFormatError) as caught:
        read_json_or_lines(path)
    message = str(caught.value)
    assert message == (
        f"{path}: line 2 does not parse as JSON (Invalid control character at column 12)"
    )


def test_a_file_that_is_neither_json_nor_json_lines_says_where_each_stopped(tmp_path: Path):
    """Was "(Unterminated string starting at at line 61 column 1)"."""
    path = tmp_path / "data.json"
    path.write_text("[\n" + "1,\n" * 59 + '"abc', encoding="utf-8")
    with pytest.raises(DataFormatError) as caught:
        read_json_or_lines(path)
    message = str(caught.value)
    assert "at at" not in message and "at," not in message
    assert message == (
        f"{path} is neither JSON (Unterminated string starting at line 61 column 1) nor JSON "
        "lines (line 1 does not parse: Expecting value at column 2)"
    )


def test_streamed_corpus_lines_report_the_column_the_same_way(tmp_path: Path):
    from neocorrag_core.indexing.corpus import open_corpus

    path = tmp_path / "corpus.jsonl"
    path.write_text('{"title": "A", "text": "x"}\n{"title": "B", "text": "a\x01"}\n', "utf-8")
    with pytest.raises(DataFormatError) as caught:
        list(open_corpus(path))
    assert str(caught.value) == (
        f"{path}: line 2 does not parse as JSON (Invalid control character at column 26)"
    )
