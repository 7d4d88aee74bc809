"""QA loaders on small fixtures of every supported layout; bad rows are skipped and counted."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import SHARED_DATA

from neocorrag_core.eval.datasets import (
    detect_format,
    load_corpus,
    load_qa,
    make_passage,
    passage_id,
)

MUSIQUE = [
    {
        "id": "q1",
        "question": "Who founded the university where X studied?",
        "answer": "G. Stanley Hall",
        "answer_aliases": ["Stanley Hall"],
        "paragraphs": [
            {
                "idx": 0,
                "title": "X",
                "paragraph_text": "X studied at  Clark.",
                "is_supporting": True,
            },
            {
                "idx": 1,
                "title": "Clark",
                "paragraph_text": "Founded by Hall.",
                "is_supporting": True,
            },
            {"idx": 2, "title": "Noise", "paragraph_text": "Unrelated.", "is_supporting": False},
        ],
    },
    {
        "id": "q2",
        "question": "No gold here?",
        "answer": "a",
        "paragraphs": [{"title": "T", "paragraph_text": "text", "is_supporting": False}],
    },
    {
        "id": "q3",
        "question": "No answer?",
        "answer": "",
        "paragraphs": [{"title": "T", "paragraph_text": "text", "is_supporting": True}],
    },
]

HOTPOT_ROW = {
    "_id": "h1",
    "question": "Which is older?",
    "answer": "A",
    "type": "comparison",
    "supporting_facts": [["A", 0], ["B", 1]],
    "context": [["A", ["A is old.", " Very old."]], ["B", ["B is new."]], ["C", ["C."]]],
}


def write(path: Path, data) -> Path:
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def test_musique_layout_with_aliases_gold_and_skips(tmp_path):
    examples, report = load_qa(write(tmp_path / "m.json", MUSIQUE))
    assert report.format == "musique"
    assert (report.rows, report.loaded) == (3, 1)
    assert dict(report.skipped) == {"no gold passage": 1, "no answer": 1}
    (ex,) = examples
    assert ex.id == "q1"
    assert ex.answers == ("G. Stanley Hall", "Stanley Hall")
    assert [p.title for p in ex.passages] == ["X", "Clark", "Noise"]
    assert ex.passages[0].text == "X studied at Clark."  # whitespace normalized
    assert ex.gold_ids == {ex.passages[0].id, ex.passages[1].id}
    assert "1 of 3" in report.summary()


def test_hotpot_list_layout(tmp_path):
    examples, report = load_qa(write(tmp_path / "h.json", [HOTPOT_ROW]))
    assert report.format == "hotpotqa"
    (ex,) = examples
    assert ex.passages[0].text == "A is old. Very old."
    assert ex.gold_ids == {passage_id("A", "A is old. Very old."), passage_id("B", "B is new.")}
    assert ex.gold_triples == ()


def test_hotpot_columnar_layout_without_ids(tmp_path):
    row = {
        "question": "Which is older?",
        "answer": "A",
        "supporting_facts": {"title": ["A", "B"], "sent_id": [0, 0]},
        "context": {"title": ["A", "B", "C"], "sentences": [["A is old."], ["B."], ["C."]]},
    }
    examples, report = load_qa(write(tmp_path / "c.json", [row, row | {"answer": None}]))
    assert report.format == "hotpotqa-columnar"
    assert [e.id for e in examples] == ["row0"]
    assert len(examples[0].gold_ids) == 2 and dict(report.skipped) == {"no answer": 1}


def test_hotpot_columnar_rows_with_fields_that_are_not_lists_are_skipped(tmp_path):
    good = {
        "question": "Which is older?",
        "answer": "A",
        "supporting_facts": {"title": ["A"], "sent_id": [0]},
        "context": {"title": ["A", "B"], "sentences": [["A is old."], ["B."]]},
    }
    bad_context = good | {"context": {"title": 5, "sentences": [["a"]]}}
    bad_facts = good | {"supporting_facts": {"title": 7}}
    examples, report = load_qa(write(tmp_path / "c.json", [good, bad_context, bad_facts]))
    assert [e.id for e in examples] == ["row0"] and len(examples[0].gold_ids) == 1
    assert dict(report.skipped) == {"no context": 1, "no gold passage": 1}


def test_2wiki_jsonl_with_gold_triples_and_rows_without_context(tmp_path):
    row = HOTPOT_ROW | {"_id": "w1", "evidences": [["A", "founded", "1900"]]}
    no_context = {"_id": "w2", "question": "q?", "answer": "a", "evidences": []}
    path = tmp_path / "w.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in (row, no_context)) + "\n\n")
    examples, report = load_qa(path)
    assert report.format == "2wiki"
    assert dict(report.skipped) == {"no context": 1}
    assert examples[0].gold_triples == (("A", "founded", "1900"),)


def test_limit_counts_loaded_examples(tmp_path):
    rows = [HOTPOT_ROW | {"_id": f"h{i}"} for i in range(5)]
    examples, _ = load_qa(write(tmp_path / "h.json", rows), limit=2)
    assert [e.id for e in examples] == ["h0", "h1"]


def test_wrapped_questions_are_read_from_the_list_the_format_check_chose(tmp_path):
    # "data" is not a list here, so the check detects the format on "questions": the
    # loader must read those rows, not the "data" object.
    wrapped = {"questions": MUSIQUE[:1], "data": {"source": "x"}}
    examples, report = load_qa(write(tmp_path / "both.json", wrapped))
    assert [e.id for e in examples] == ["q1"] and report.format == "musique"
    assert report.rows == 1 and not report.skipped
    # Any wrapper key the check reads ("passages" too) is the one loaded.
    examples, _ = load_qa(write(tmp_path / "passages.json", {"passages": MUSIQUE[:1]}))
    assert [e.id for e in examples] == ["q1"]


def test_detection_names_corpus_and_triples_files():
    with pytest.raises(ValueError, match="--triples"):
        detect_format({"docs": []})
    with pytest.raises(ValueError, match="--corpus"):
        detect_format({"A": ["s1"], "B": ["s2"]})
    with pytest.raises(ValueError, match="--corpus"):
        detect_format([{"title": "A", "text": "t"}])
    with pytest.raises(ValueError, match="no row looks like"):
        detect_format([{"foo": 1}])
    with pytest.raises(ValueError, match="non-empty list"):
        detect_format([])


def test_repeated_question_ids_are_an_error(tmp_path):
    with pytest.raises(ValueError, match="repeat"):
        load_qa(write(tmp_path / "h.json", [HOTPOT_ROW, HOTPOT_ROW]))


def test_corpus_ids_match_question_ids(tmp_path):
    corpus = load_corpus(write(tmp_path / "corpus.json", {"A": ["A is old.", " Very old."]}))
    assert corpus == [make_passage("A", "A is old. Very old.")]
    listed = load_corpus(write(tmp_path / "c2.json", [{"title": "B", "text": "B is new."}]))
    assert listed[0].id == passage_id("B", "B is new.")
    with pytest.raises(ValueError, match="format"):
        load_corpus(write(tmp_path / "c3.json", [{"foo": 1}]))


@pytest.mark.skipif(not SHARED_DATA.is_dir(), reason="shared data not present")
def test_shared_data_files_load():
    examples, report = load_qa(SHARED_DATA / "2wikimultihopqa" / "migres_2wiki_dev_200.jsonl")
    assert (report.format, report.loaded, report.skipped["no context"]) == ("2wiki", 164, 36)
    assert all(e.gold_ids <= {p.id for p in e.passages} for e in examples)
    _, report = load_qa(SHARED_DATA / "hotpotqa" / "hipporag_hotpotqa_train_100.json")
    assert (report.format, report.loaded) == ("hotpotqa", 100)
