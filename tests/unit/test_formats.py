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
