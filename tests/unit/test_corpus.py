"""Corpus loading: every supported format, de-duplication, and clear errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from neocorrag_core.indexing.corpus import CorpusFormatError, load_corpus

A = ("Alpha", ["Alpha is a town.", "It lies on a river."])
B = ("Beta", ["Beta is a river."])


def write(tmp_path: Path, data, name: str = "c.json", lines: bool = False) -> Path:
    path = tmp_path / name
    if lines:
        path.write_text("\n".join(json.dumps(row) for row in data) + "\n", encoding="utf-8")
    else:
        path.write_text(json.dumps(data), encoding="utf-8")
    return path


def titles_texts(corpus) -> list[tuple[str, str]]:
    return [(p.title, p.text) for p in corpus.passages]


EXPECTED = [("Alpha", "Alpha is a town. It lies on a river."), ("Beta", "Beta is a river.")]


def test_list_of_title_text(tmp_path: Path) -> None:
    data = [{"title": t, "text": " ".join(s)} for t, s in (A, B)]
    corpus = load_corpus(write(tmp_path, data))
    assert corpus.format == "passages"
    assert titles_texts(corpus) == EXPECTED


def test_hotpotqa_corpus_dict_title_to_sentences(tmp_path: Path) -> None:
    corpus = load_corpus(write(tmp_path, dict([A, B])))
    assert corpus.format == "title_sentences"
    assert titles_texts(corpus) == EXPECTED


def test_musique_questions_share_paragraphs_once(tmp_path: Path) -> None:
    def para(t, s, i):
        return {"idx": i, "title": t, "paragraph_text": " ".join(s), "is_supporting": False}

    data = [
        {"id": "q1", "question": "?", "paragraphs": [para(*A, 0), para(*B, 1)]},
        {"id": "q2", "question": "?", "paragraphs": [para(*B, 0)]},
    ]
    corpus = load_corpus(write(tmp_path, data))
    assert (corpus.format, corpus.duplicates) == ("musique", 1)
    assert titles_texts(corpus) == EXPECTED


def test_hotpotqa_list_context(tmp_path: Path) -> None:
    data = [{"_id": "1", "question": "?", "context": [list(A), list(B)]}]
    corpus = load_corpus(write(tmp_path, data))
    assert corpus.format == "hotpotqa"
    assert titles_texts(corpus) == EXPECTED


def test_hotpotqa_columnar_context(tmp_path: Path) -> None:
    data = [{"question": "?", "context": {"title": ["Alpha", "Beta"], "sentences": [A[1], B[1]]}}]
    assert titles_texts(load_corpus(write(tmp_path, data))) == EXPECTED


def test_2wiki_json_lines_skip_rows_without_context(tmp_path: Path) -> None:
    rows = [
        {"_id": "1", "question": "?", "context": [list(A)]},
        {"_id": "2", "question": "?"},  # 2Wiki rows may lack context
        {"_id": "3", "question": "?", "context": [list(B), list(A)]},
    ]
    corpus = load_corpus(write(tmp_path, rows, "c.jsonl", lines=True))
    assert titles_texts(corpus) == EXPECTED
    assert corpus.duplicates == 1


def test_hipporag_openie_file(tmp_path: Path) -> None:
    docs = [{"title": t, "text": " ".join(s), "extracted_triples": []} for t, s in (A, B)]
    corpus = load_corpus(write(tmp_path, {"docs": docs}))
    assert corpus.format == "openie"
    assert titles_texts(corpus) == EXPECTED


def test_ids_are_stable_content_hashes_and_limit_applies(tmp_path: Path) -> None:
    path = write(tmp_path, dict([A, B]))
    first, again = load_corpus(path), load_corpus(path)
    assert [p.id for p in first.passages] == [p.id for p in again.passages]
    assert len({p.id for p in first.passages}) == 2
    assert len(load_corpus(path, limit=1).passages) == 1


def test_whitespace_variants_are_duplicates_empty_texts_dropped(tmp_path: Path) -> None:
    data = [
        {"title": "Alpha", "text": "Alpha is  a town."},
        {"title": "Alpha", "text": " Alpha is a\ntown. "},
        {"title": "Gamma", "text": "   "},
    ]
    corpus = load_corpus(write(tmp_path, data))
    assert len(corpus.passages) == 1
    assert corpus.duplicates == 1


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("", "is empty"),
        ("{not json\nat all", "neither JSON"),
        ('{"foo": 1}', "cannot tell the format"),
        ('[{"foo": 1}]', "cannot tell the format"),
        ("42", "cannot tell the format"),
        ('[{"title": "A", "text": ""}]', "no passage with text"),
    ],
)
def test_bad_files_give_clear_errors(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "bad.json"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(CorpusFormatError, match=message):
        load_corpus(path)


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="corpus file not found"):
        load_corpus(tmp_path / "nope.json")


def test_rows_without_text_are_counted_not_dropped_silently(tmp_path: Path) -> None:
    from neocorrag_core.indexing.corpus import open_corpus

    rows = [
        {"title": "A", "text": "Alice founded Acme."},
        {"title": "B", "text": 42},
        {"title": "C", "body": "no text key"},
        "Bob joined Acme.",
        7,
        {"title": "A", "text": "Alice founded Acme."},
    ]
    path = tmp_path / "mixed.json"
    path.write_text(json.dumps(rows))
    corpus = load_corpus(path)
    assert [p.text for p in corpus.passages] == ["Alice founded Acme.", "Bob joined Acme."]
    assert (corpus.duplicates, corpus.skipped) == (1, 3)
    stream = open_corpus(path)
    assert len(list(stream)) == 2 and (stream.duplicates, stream.skipped) == (1, 3)
    columnar = tmp_path / "columnar.json"
    columnar.write_text(
        json.dumps(
            [
                {
                    "question": "q?",
                    "answer": "a",
                    "context": {"title": ["a", "b", "c"], "sentences": [["A."], ["B."]]},
                }
            ]
        )
    )
    assert load_corpus(columnar).skipped == 1  # title "c" has no sentences
    columnar.write_text(
        json.dumps(
            [
                {"question": "q?", "context": {"title": 5, "sentences": [["A."]]}},
                {"question": "q?", "context": {"title": ["a"], "sentences": [["A."]]}},
            ]
        )
    )
    assert load_corpus(columnar).skipped == 1  # a context whose columns are not lists


def test_a_limit_below_one_is_refused(tmp_path: Path) -> None:
    from neocorrag_core.errors import ConfigError
    from neocorrag_core.indexing.corpus import open_corpus, passages_from_data

    path = tmp_path / "c.json"
    path.write_text(json.dumps([{"title": "A", "text": "a"}, {"title": "B", "text": "b"}]))
    for limit in (0, -5):
        with pytest.raises(ConfigError, match="limit must be >= 1"):
            load_corpus(path, limit=limit)
        with pytest.raises(ConfigError, match="limit must be >= 1"):
            open_corpus(path, limit=limit)
        with pytest.raises(ConfigError, match="limit must be >= 1"):
            passages_from_data([{"title": "A", "text": "a"}], limit=limit)
    assert len(load_corpus(path, limit=1).passages) == 1


def test_question_rows_that_are_no_object_are_counted_as_skipped() -> None:
    from neocorrag_core.indexing.corpus import passages_from_data

    para = {"title": "T", "paragraph_text": "Some text."}
    musique = [{"id": "q1", "paragraphs": [para]}, "garbage row", 42, {"id": "q2"}]
    corpus = passages_from_data(musique)
    assert (len(corpus.passages), corpus.skipped) == (1, 2)  # q2 has no paragraphs: no loss
    bad_shape = [{"id": "q1", "paragraphs": [para]}, {"id": "q3", "paragraphs": "text"}]
    assert passages_from_data(bad_shape).skipped == 1
    hotpot = [
        {"_id": "h1", "question": "?", "context": [["T", ["A sentence."]]]},
        {"_id": "h2", "question": "?", "context": "a string"},
        "garbage row",
    ]
    corpus = passages_from_data(hotpot)
    assert (len(corpus.passages), corpus.skipped) == (1, 2)
