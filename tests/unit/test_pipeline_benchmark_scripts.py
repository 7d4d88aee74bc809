"""benchmarks/make_open_corpus.py (the pipeline benchmark's pooled corpus) and
benchmarks/summarize_pipeline.py (its table)."""

from __future__ import annotations

import json
from pathlib import Path

from benchmark_scripts import load_benchmark

make_open_corpus = load_benchmark("make_open_corpus")
summarize = load_benchmark("summarize_pipeline")


def _hotpot(path: Path, rows: list[tuple[str, list[tuple[str, str]]]]) -> Path:
    path.write_text(
        json.dumps(
            [
                {
                    "_id": qid,
                    "question": f"Question {qid}?",
                    "answer": "x",
                    "context": [[title, [text]] for title, text in context],
                    "supporting_facts": [[context[0][0], 0]],
                }
                for qid, context in rows
            ]
        )
    )
    return path


def test_the_open_corpus_pools_passages_first_seen_first_and_skips_other_files(tmp_path, capsys):
    a = _hotpot(tmp_path / "a.json", [("q1", [("A", "Alpha."), ("B", "Bravo.")])])
    b = _hotpot(tmp_path / "b.json", [("q2", [("B", "Bravo."), ("C", "Charlie.")])])
    (tmp_path / "triples.json").write_text(json.dumps({"not": "questions"}))
    out = tmp_path / "corpus.json"
    assert make_open_corpus.main([str(out), str(b), str(a), str(tmp_path / "triples.json")]) == 0
    pooled = json.loads(out.read_text())
    assert [p["title"] for p in pooled] == ["B", "C", "A"]  # files in the order given
    assert "skipped" in capsys.readouterr().out
    # A folder reads its files in sorted order: a.json before b.json.
    assert make_open_corpus.main([str(out), str(tmp_path)]) == 0
    assert [p["title"] for p in json.loads(out.read_text())] == ["A", "B", "C"]


def _record(qid: str, recall: float, aid: float, tokens: int) -> dict:
    return {
        "qid": qid,
        "recall": recall,
        "chain": recall,
        "aid": aid,
        "reader_prompt_tokens": tokens,
        "timings": {"retrieve": 0.01, "method": 0.1},
    }


def test_the_summary_pairs_with_top5_and_shows_reader_tokens_only_when_a_reader_ran(
    tmp_path, capsys
):
    for name, tokens in (("read", (100, 60)), ("unread", (0, 0))):
        folder = tmp_path / name
        folder.mkdir()
        per_question = {
            "none": [_record("q1", 0.5, 3.0, tokens[0]), _record("q2", 0.5, 3.0, tokens[0])],
            "evireform-refined": [
                _record("q2", 1.0, 1.0, tokens[1]),
                _record("q1", 1.0, 2.0, tokens[1]),
            ],
        }
        (folder / "results.json").write_text(json.dumps({"per_question": per_question}))
    assert summarize.main([str(tmp_path / "read")]) == 0
    out = capsys.readouterr().out
    assert "| read (2) | evireform-refined | 100.0 (+50.0" in out
    assert "| 60 |" in out and "60 (60%)" in out  # pooled: 60 of none's 100 tokens
    assert summarize.main([str(tmp_path / "unread")]) == 0
    out = capsys.readouterr().out
    assert "| - |" in out and "(0%)" not in out
