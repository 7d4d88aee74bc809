"""benchmarks/pooled_comparison.py: one method against a baseline over several eval runs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from benchmark_scripts import load_benchmark

pooled = load_benchmark("pooled_comparison")


def write_run(folder: Path, rows: dict[str, list[tuple[str, float, float]]]) -> str:
    """A results.json whose per_question table has, per method, (qid, chain, aid) rows."""
    folder.mkdir()
    per_question = {
        method: [{"qid": qid, "chain": chain, "aid": aid} for qid, chain, aid in values]
        for method, values in rows.items()
    }
    (folder / "results.json").write_text(json.dumps({"per_question": per_question}))
    return str(folder)


@pytest.fixture
def runs(tmp_path):
    # Run a: 2 questions, chain 0 -> 1 on one of them. Run b: 2 questions, chain 0 -> 1 on
    # both. Pooled: 3 of 4 questions gain a full point, i.e. +75 points.
    a = write_run(
        tmp_path / "a",
        {
            "none": [("q1", 0.0, 3.0), ("q2", 1.0, 3.0)],
            "evireform": [("q2", 1.0, 2.0), ("q1", 1.0, 2.0)],  # order differs: paired by qid
        },
    )
    b = write_run(
        tmp_path / "b",
        {
            "none": [("q1", 0.0, 4.0), ("q3", 0.0, 4.0)],
            "evireform": [("q1", 1.0, 1.0), ("q3", 1.0, 1.0)],
        },
    )
    return a, b


def test_pooled_row_pairs_every_question_of_every_run(runs, capsys):
    assert (
        pooled.main([*runs, "--method", "evireform", "--baseline", "none", "--metric", "chain"])
        == 0
    )
    lines = capsys.readouterr().out.splitlines()
    a_row = next(line for line in lines if line.startswith(f"| {runs[0]} "))
    pooled_row = next(line for line in lines if line.startswith("| **pooled** "))
    assert a_row.split(" | ")[1:4] == ["2", "50.00", "100.00"]  # questions, none, evireform
    assert a_row.split(" | ")[4].startswith("+50.00")
    assert pooled_row.split(" | ")[1:4] == ["4", "25.00", "100.00"]
    assert pooled_row.split(" | ")[4].startswith("+75.00")


def test_a_count_metric_is_not_scaled_and_gets_the_ratio(runs, capsys):
    pooled.main([*runs, "--method", "evireform", "--baseline", "none", "--metric", "aid"])
    pooled_row = next(line for line in capsys.readouterr().out.splitlines() if "**pooled**" in line)
    # none: mean(3, 3, 4, 4) = 3.5; evireform: mean(2, 2, 1, 1) = 1.5; 1.5 / 3.5 = 0.43
    assert pooled_row.split(" | ")[1:4] == ["4", "3.50", "1.50"]
    assert pooled_row.rstrip(" |").endswith("0.43x")


def test_split_keeps_only_that_halfs_questions(runs, capsys):
    # q1 is in the tune half, q2 and q3 in the report half (splits.split_of).
    argv = [*runs, "--method", "evireform", "--baseline", "none", "--metric", "chain"]
    pooled.main([*argv, "--split", "report"])
    pooled_row = next(line for line in capsys.readouterr().out.splitlines() if "**pooled**" in line)
    # q2 (run a): 1 -> 1; q3 (run b): 0 -> 1. Pooled +50 points over 2 questions.
    assert pooled_row.split(" | ")[1:4] == ["2", "50.00", "100.00"]
    assert pooled_row.split(" | ")[4].startswith("+50.00")
    pooled.main([*argv, "--split", "tune"])
    pooled_row = next(line for line in capsys.readouterr().out.splitlines() if "**pooled**" in line)
    assert pooled_row.split(" | ")[1:4] == ["2", "0.00", "100.00"]  # q1 of both runs


def test_a_run_without_questions_in_the_split_is_refused(tmp_path, capsys):
    only_tune = write_run(
        tmp_path / "t", {"none": [("q1", 0.0, 1.0)], "evireform": [("q1", 1.0, 1.0)]}
    )
    argv = [only_tune, "--method", "evireform", "--baseline", "none", "--metric", "chain"]
    with pytest.raises(SystemExit):
        pooled.main([*argv, "--split", "report"])
    assert "no question answered by 'none' in the report half" in capsys.readouterr().err


def test_one_run_prints_no_pooled_row(runs, capsys):
    pooled.main([runs[0], "--method", "evireform", "--baseline", "none", "--metric", "chain"])
    assert "**pooled**" not in capsys.readouterr().out


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--method", "evireform-lm", "--baseline", "none", "--metric", "chain"],
            "no method 'evireform-lm'",
        ),
        (["--method", "evireform", "--baseline", "none", "--metric", "f1"], "no numeric 'f1'"),
    ],
)
def test_unusable_names_give_one_usage_line(runs, capsys, args, message):
    with pytest.raises(SystemExit) as exit_info:
        pooled.main([runs[0], *args])
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err


def test_runs_that_cannot_be_paired_are_refused(tmp_path, capsys):
    uneven = write_run(
        tmp_path / "uneven",
        {"none": [("q1", 0.0, 3.0)], "evireform": [("q1", 1.0, 2.0), ("q2", 1.0, 2.0)]},
    )
    missing = str(tmp_path / "never-run")
    for run, message in [(uneven, "answered different questions"), (missing, "no results.json")]:
        with pytest.raises(SystemExit):
            pooled.main([run, "--method", "evireform", "--baseline", "none", "--metric", "chain"])
        assert message in capsys.readouterr().err
    (tmp_path / "list").mkdir()
    (tmp_path / "list" / "results.json").write_text("[1, 2]")
    with pytest.raises(SystemExit):
        pooled.main([str(tmp_path / "list"), "--method", "a", "--baseline", "b", "--metric", "f1"])
    assert "has no per_question table" in capsys.readouterr().err
    (tmp_path / "latin1").mkdir()
    (tmp_path / "latin1" / "results.json").write_bytes(b'{"per_question": "\xe9"}')
    with pytest.raises(SystemExit):
        pooled.main(
            [str(tmp_path / "latin1"), "--method", "a", "--baseline", "b", "--metric", "f1"]
        )
    assert "not readable as JSON" in capsys.readouterr().err
    (tmp_path / "torn").mkdir()
    (tmp_path / "torn" / "results.json").write_text("{")
    with pytest.raises(SystemExit):
        pooled.main(
            [str(tmp_path / "torn"), "--method", "a", "--baseline", "b", "--metric", "chain"]
        )
    assert "not readable as JSON" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("records", "message"),
    [
        ({"none": [], "evireform": []}, "no question answered"),
        ({"none": [{"chain": 1.0}], "evireform": [{"chain": 1.0}]}, "not rows with a 'qid'"),
        ({"none": "rows", "evireform": []}, "not rows with a 'qid'"),
        (
            {"none": [{"qid": "q1", "chain": 0.0}] * 2, "evireform": [{"qid": "q1", "chain": 1.0}]},
            "holds a question twice",
        ),
    ],
)
def test_malformed_records_give_one_usage_line(tmp_path, capsys, records, message):
    (tmp_path / "results.json").write_text(json.dumps({"per_question": records}))
    with pytest.raises(SystemExit) as exit_info:
        pooled.main(
            [str(tmp_path), "--method", "evireform", "--baseline", "none", "--metric", "chain"]
        )
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err
