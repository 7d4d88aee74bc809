"""Benchmark scripts refuse unreadable inputs in one line, not with a traceback."""

from __future__ import annotations

import json

import pytest
from benchmark_scripts import load_benchmark

script = load_benchmark


def test_bench_triples_names_a_missing_data_file_and_a_bad_count(tmp_path, capsys) -> None:
    bench = script("bench_triples")
    wrong_shape = tmp_path / "list.jsonl"
    wrong_shape.write_text("[1, 2]\n")  # JSON, but rows that are not objects
    cases = (
        (["--wiki", str(tmp_path / "no.jsonl")], "cannot read the data (FileNotFoundError"),
        (["--max-questions", "0"], "argument --max-questions: must be at least 1"),
        (["--dev-questions", "-1"], "argument --dev-questions: must be at least 0"),
        (["--wiki", str(wrong_shape)], "cannot read the data (AttributeError"),
    )
    for argv, message in cases:
        with pytest.raises(SystemExit) as exit_info:
            bench.main([*argv, "--out", str(tmp_path / "t.md")])
        assert exit_info.value.code == 2
        assert message in capsys.readouterr().err
    assert not (tmp_path / "t.md").exists()


def test_replay_decisions_names_a_file_it_cannot_replay(tmp_path, capsys) -> None:
    replay = script("replay_decisions")
    not_json = tmp_path / "bad.json"
    not_json.write_text("{")
    no_method = tmp_path / "other.json"
    no_method.write_text(json.dumps({"per_question": {"none": []}}))
    no_tokens = tmp_path / "old.json"
    step = {"action": "stop", "draft_answer": "x"}  # a trajectory without token counts
    record = {"qid": "q1", "answers": ["x"], "info": {"trajectory": [step]}}
    no_tokens.write_text(json.dumps({"per_question": {"belief": [record]}}))
    cases = (
        (tmp_path / "missing.json", "missing.json"),
        (not_json, "not JSON"),
        (no_method, "no 'belief' records"),
        (no_tokens, "record of 'q1' has no trajectory with token counts"),
    )
    for path, message in cases:
        assert replay.main(["--results", str(path)]) == 2
        assert message in capsys.readouterr().err
