"""``neocorrag eval`` end to end on tiny models: records, report, plots, resume, CLI.

The product's methods only (and a test plug-in, ``first-two``); the lab's methods run
through the same runner in ``tests/lab/test_lab_runner.py``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import bag_of_words_embedder
from eval_fixtures import run, run_without_reader, settings_for, write_fixture

from neocorrag_core.eval.report import comparison_table, render_report
from neocorrag_core.eval.runner import EvalSettings, run_evaluation
from neocorrag_core.models import resolve_embedder

# The product's methods that need no LM to refine, and a plug-in (eval_fixtures).
FAST_METHODS = ("none", "neocorrag-recall", "neocorrag-paper", "first-two")


def test_run_writes_records_report_and_plots(tmp_path, tiny_lm):
    pytest.importorskip("matplotlib")
    settings = settings_for(tmp_path, FAST_METHODS)
    results = run(settings, tiny_lm)
    out = Path(settings.out)
    assert results["questions_compared"] == 3
    assert set(results["methods"]) == set(FAST_METHODS)
    for name, agg in results["methods"].items():
        assert agg["questions"] == 3
        assert 0.0 <= agg["recall"] <= 1.0
        assert agg["atd"] <= 5 and agg["aid"] <= agg["atd"]
        assert agg["reader_tokens"] > 0, name
    none = results["methods"]["none"]
    assert none["atd"] == 5 and none["method_tokens"] == 0
    assert results["methods"]["first-two"]["atd"] == 2
    assert set(results["comparisons"]) == set(FAST_METHODS) - {"none"}
    for record in results["per_question"]["neocorrag-recall"]:
        assert set(record["context_ids"]) <= set(record["retrieved_ids"])
        assert record["chain_text"].startswith("Evidence chains:")
    saved = json.loads((out / "results.json").read_text())
    assert saved["methods"].keys() == results["methods"].keys()
    report = (out / "report.md").read_text()
    assert "| neocorrag-paper |" in report and "bootstrap" in report
    for png in ("tradeoff.png", "f1.png", "latency.png"):
        assert (out / png).read_bytes()[:4] == b"\x89PNG"
    # Questions that reached no chain are counted per method and reason.
    results["methods"]["neocorrag-recall"]["fallbacks"] = {"no_candidate_chains": 2}
    line = render_report(results).splitlines()[-1]
    assert line.startswith("Questions without a chain")
    assert line.endswith("`neocorrag-recall`: no_candidate_chains 2")


def test_the_default_methods_are_the_products_own():
    from neocorrag_core.eval.registry import BUILTIN_METHODS
    from neocorrag_core.eval.runner import DEFAULT_METHODS

    products = {spec.name for spec in BUILTIN_METHODS}
    assert set(DEFAULT_METHODS) <= products
    assert {"none", "neocorrag-recall", "neocorrag-paper", "evireform"} <= set(DEFAULT_METHODS)


def test_interrupted_run_resumes_without_recomputing(tmp_path, tiny_lm):
    settings = settings_for(tmp_path, ("none", "neocorrag-recall"), plots=False)
    done: list[tuple[str, str]] = []

    def stop_after_three(record):
        done.append((record["qid"], record["method"]))
        if len(done) == 3:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run(settings, tiny_lm, on_record=stop_after_three)
    first = list(done)
    done.clear()
    results = run(settings, tiny_lm, on_record=lambda r: done.append((r["qid"], r["method"])))
    assert len(first) == 3 and len(done) == 3  # 3 questions x 2 methods in all
    assert not set(first) & set(done)
    assert results["questions_compared"] == 3
    lines = (Path(settings.out) / "cache" / "none.jsonl").read_text().splitlines()
    assert len(lines) == 3
    # A third run computes nothing and needs no model at all.
    results = run_evaluation(settings, show_progress=False, embedder=object(), lm=object())
    assert results["questions_compared"] == 3


def test_torn_cache_line_is_ignored(tmp_path, tiny_lm):
    settings = settings_for(tmp_path, ("none",), plots=False)
    run(settings, tiny_lm)
    cache = Path(settings.out) / "cache" / "none.jsonl"
    lines = cache.read_text().splitlines()
    cache.write_text("\n".join(lines[:2]) + "\n" + lines[2][:20])  # crash mid-write
    done = []
    run(settings, tiny_lm, on_record=done.append)
    assert [r["qid"] for r in done] == ["q3"]


def test_report_says_why_there_is_no_comparison():
    only_none = {"comparisons": {}, "methods": {"none": {}}}
    assert "the only method run" in comparison_table(only_none)
    assert "was not run" in comparison_table({"comparisons": {}, "methods": {"first-two": {}}})


def test_cache_lines_that_are_not_records_are_skipped(tmp_path, tiny_lm):
    settings = settings_for(tmp_path, ("none",), plots=False)
    run(settings, tiny_lm)
    cache = Path(settings.out) / "cache" / "none.jsonl"
    lines = cache.read_text().splitlines()
    cache.write_text("\n".join([*lines[:2], '{"foo": 1}', "[1, 2]", ""]))
    done = []
    run(settings, tiny_lm, on_record=done.append)
    assert [r["qid"] for r in done] == ["q3"]


def test_an_out_that_is_a_file_or_a_damaged_run_json_is_refused_up_front(tmp_path):
    settings = settings_for(tmp_path, ("none",), reader="none", plots=False)
    (tmp_path / "out").write_text("not a folder")
    with pytest.raises(ValueError, match="is a file, not a folder"):
        run_without_reader(settings)
    (tmp_path / "out").unlink()
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "run.json").write_text("5")
    with pytest.raises(ValueError, match="not an eval settings file"):
        run_without_reader(settings)


def test_an_empty_split_is_named(tmp_path):
    settings = settings_for(tmp_path, ("none",), reader="none", plots=False)
    qa = Path(settings.data)
    rows = [row for row in json.loads(qa.read_text()) if row["id"] != "q1"]  # q1: the tune one
    qa.write_text(json.dumps(rows))
    with pytest.raises(ValueError, match="none of them in the tune half"):
        run_without_reader(EvalSettings(**{**settings.__dict__, "split": "tune"}))


def test_resume_with_other_settings_is_refused(tmp_path, tiny_lm):
    settings = settings_for(tmp_path, ("none",), plots=False)
    run(settings, tiny_lm)
    changed = EvalSettings(**{**settings.__dict__, "top_k": 3})
    with pytest.raises(ValueError, match="top_k"):
        run(changed, tiny_lm)


def test_unknown_method_and_bad_limit_are_clear(tmp_path):
    with pytest.raises(ValueError, match="unknown method"):
        EvalSettings(data="x", out=str(tmp_path), methods=("magic",))
    with pytest.raises(ValueError, match="--limit"):
        EvalSettings(data="x", out=str(tmp_path), limit=0)


def test_a_lab_method_without_the_lab_says_where_the_lab_is(tmp_path, monkeypatch, capsys):
    from neocorrag_core.cli.app import main
    from neocorrag_core.eval import registry

    # A user's install: no lab registered at run time, no lab entry point.
    monkeypatch.setattr(registry, "_REGISTERED", {})
    monkeypatch.setattr(registry, "_plugin_specs", lambda: [])
    lab = r"ablation-no-filter is a lab method: .*pip install -e benchmarks"
    with pytest.raises(ValueError, match=lab):
        EvalSettings(data="x", out=str(tmp_path), methods=("none", "ablation-no-filter"))
    both = r"top-2, lc-llm-filter are lab methods: .*unknown method\(s\): magic"
    with pytest.raises(ValueError, match=both):
        EvalSettings(data="x", out=str(tmp_path), methods=("top-2", "lc-llm-filter", "magic"))
    qa, _ = write_fixture(tmp_path)
    args = ["eval", "--data", str(qa), "--out", str(tmp_path / "o"), "--methods", "none"]
    assert main([*args, "ablation-no-filter"]) == 2
    err = capsys.readouterr().err.strip()
    assert "ablation-no-filter is a lab method" in err and len(err.splitlines()) == 1
    assert "the methods here are: none, neocorrag-recall" in err
    assert not (tmp_path / "o").exists()


def test_cli_eval_reports_bad_data_as_an_error(tmp_path, capsys):
    from neocorrag_core.cli.app import main

    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"docs": []}))
    code = main(["eval", "--data", str(bad), "--out", str(tmp_path / "o"), "--methods", "none"])
    assert code == 2
    assert "--triples" in capsys.readouterr().err


def test_contexts_replayed_for_another_reader(tmp_path, tiny_lm):
    from tiny_models import build_tiny_lm

    from neocorrag_core.models import resolve_lm

    # Ranking with the LM, so the method's own tokens are replayed too.
    methods = ("none", "neocorrag-recall")
    first = settings_for(tmp_path, methods, miner={"decoding": "rank"}, plots=False)
    original = run(first, tiny_lm)
    other_reader = resolve_lm(build_tiny_lm(seed=1))
    second = EvalSettings(
        **{**first.__dict__, "out": str(tmp_path / "out2"), "contexts_from": first.out}
    )
    replayed = run_evaluation(
        second,
        embedder=resolve_embedder(bag_of_words_embedder()),
        lm=object(),  # the methods are not run again, so their LM is never touched
        reader_lm=other_reader,
        show_progress=False,
    )
    assert any(r["method_prompt_tokens"] for r in original["per_question"]["neocorrag-recall"])
    for name in methods:
        for a, b in zip(
            original["per_question"][name], replayed["per_question"][name], strict=True
        ):
            assert (a["context_ids"], a["chain_text"]) == (b["context_ids"], b["chain_text"])
            assert a["method_prompt_tokens"] == b["method_prompt_tokens"]
    mismatched = EvalSettings(**{**second.__dict__, "out": str(tmp_path / "o3"), "top_k": 3})
    with pytest.raises(ValueError, match="top_k"):
        run(mismatched, tiny_lm)


def test_plugin_dial_and_loss_diagnosis_without_a_reader(tmp_path):
    methods = ("none", "first-two", "neocorrag-recall", "neocorrag-paper")
    settings = settings_for(tmp_path, methods, reader="none", plots=False)
    results = run_evaluation(
        settings, embedder=resolve_embedder(bag_of_words_embedder()), show_progress=False
    )
    aggs = results["methods"]
    assert aggs["first-two"]["atd"] == 2
    for name in methods:
        assert aggs[name]["reader_tokens"] == 0 and aggs[name]["f1"] == 0.0
    # Each retrieved gold passage of a miner method is either kept (by a named rule) or
    # charged to one loss stage.
    for name in ("neocorrag-recall", "neocorrag-paper"):
        for record in results["per_question"][name]:
            retrieved_gold = set(record["gold_ids"]) & set(record["retrieved_ids"])
            kept = sum(record["gold_kept_by"].values())
            lost = sum(record["gold_lost_at"].values())
            assert kept + lost == len(retrieved_gold)
            assert kept == len(retrieved_gold & set(record["context_ids"]))
        assert aggs[name]["gold_lost_at"] is not None
    assert aggs["first-two"]["gold_lost_at"] is None  # no per-passage reasons to diagnose
    report = (Path(settings.out) / "report.md").read_text()
    assert "## Where gold passages were lost" in report
    assert "| neocorrag-paper |" in report.split("## Where gold passages were lost")[1]
    assert "| none | " in report and " – | – | – |" in report  # EM/F1/RCR not measured


def test_torn_line_is_ended_before_the_next_record(tmp_path):
    settings = settings_for(tmp_path, ("first-two",), reader="none", plots=False)
    run_without_reader(settings)
    cache = Path(settings.out) / "cache" / "first-two.jsonl"
    lines = cache.read_text().splitlines(keepends=True)
    cache.write_text("".join(lines[:2]) + lines[2][:40])  # a crash mid-write, no newline
    done: list[str] = []
    run_without_reader(settings, on_record=lambda r: done.append(r["qid"]))
    assert done == ["q3"]
    # The recomputed record starts a line of its own, so it is kept: nothing is left to do.
    from neocorrag_core.eval.runner import ResultCache

    assert sorted(ResultCache(cache.parent).load("first-two")) == ["q1", "q2", "q3"]
    done.clear()
    run_without_reader(settings, on_record=lambda r: done.append(r["qid"]))
    assert done == []


def test_replay_finds_records_by_question_id(tmp_path):
    # Two questions with one text, but their own passages, gold and answer.
    def paragraph(title, text, gold):
        return {"title": title, "paragraph_text": text, "is_supporting": gold}

    rows = [
        {
            "id": "qa",
            "question": "Who founded the company?",
            "answer": "Alice",
            "paragraphs": [
                paragraph("Acme", "Acme was founded by Alice.", True),
                paragraph("Foo", "Foo is a dog.", False),
                paragraph("Bar", "Bar is a cat.", False),
            ],
        },
        {
            "id": "qb",
            "question": "Who founded the company?",
            "answer": "Bob",
            "paragraphs": [
                paragraph("Zeta", "Zeta was founded by Bob.", True),
                paragraph("Baz", "Baz is a fish.", False),
                paragraph("Qux", "Qux is a bird.", False),
            ],
        },
    ]
    qa = tmp_path / "qa.json"
    qa.write_text(json.dumps(rows))
    base = {"data": str(qa), "methods": ("none", "first-two"), "reader": "none", "plots": False}
    source = run_without_reader(EvalSettings(out=str(tmp_path / "src"), top_k=2, **base))
    replayed = run_without_reader(
        EvalSettings(
            out=str(tmp_path / "replay"), top_k=2, contexts_from=str(tmp_path / "src"), **base
        )
    )
    for name in ("none", "first-two"):
        before = {r["qid"]: r["context_ids"] for r in source["per_question"][name]}
        after = {r["qid"]: r["context_ids"] for r in replayed["per_question"][name]}
        assert after == before and before["qa"] != before["qb"]
    # A caller that gives no id finds a record by its text only where the text is unique.
    from neocorrag_core.eval.protocol import MethodInput
    from neocorrag_core.eval.runner import ReplayedMethod, ResultCache

    method = ReplayedMethod("first-two", ResultCache(tmp_path / "src" / "cache"))
    with pytest.raises(ValueError, match="not unique"):
        method.refine(MethodInput("Who founded the company?", [], lambda q, k: [], 2))


def test_replay_refuses_methods_that_answer_by_themselves(tmp_path):
    with pytest.raises(ValueError, match=r"--contexts-from .* belief answers by itself"):
        EvalSettings(data="x", out=str(tmp_path), methods=("none", "belief"), contexts_from="src")
    # A plug-in method that answered by itself without declaring it: its records say so.
    settings = settings_for(tmp_path, ("first-two",), reader="none", plots=False)
    run_without_reader(settings)
    cache = Path(settings.out) / "cache" / "first-two.jsonl"
    records = [json.loads(line) for line in cache.read_text().splitlines()]
    for record in records:
        record["prediction"] = "Stanley"  # an answer no reader read a prompt for
    cache.write_text("".join(json.dumps(r) + "\n" for r in records))
    replay = EvalSettings(
        **{**settings.__dict__, "out": str(tmp_path / "replay"), "contexts_from": settings.out}
    )
    with pytest.raises(ValueError, match="'first-two' answered by itself"):
        run_without_reader(replay)
    assert not (tmp_path / "replay").exists()


def test_replay_refuses_records_of_another_method_version(tmp_path):
    settings = settings_for(tmp_path, ("none", "neocorrag-recall"), reader="none")
    settings.plots = False
    run_without_reader(settings)
    cache = Path(settings.out) / "cache" / "neocorrag-recall.jsonl"
    records = [json.loads(line) for line in cache.read_text().splitlines()]
    current = records[0]["method_version"]
    replay = EvalSettings(
        **{**settings.__dict__, "out": str(tmp_path / "replay"), "contexts_from": settings.out}
    )
    # Current records are replayed with their version.
    replayed = run_without_reader(replay)
    assert {r["method_version"] for r in replayed["per_question"]["neocorrag-recall"]} == {current}
    for record in records:
        record["method_version"] = "miner-0"  # made before a version bump
    cache.write_text("".join(json.dumps(r) + "\n" for r in records))
    again = EvalSettings(**{**replay.__dict__, "out": str(tmp_path / "replay2")})
    stale = "'neocorrag-recall' records were made by version 'miner-0'"
    with pytest.raises(ValueError, match=stale):
        run_without_reader(again)
    assert not (tmp_path / "replay2").exists()


def test_settings_that_fail_to_build_leave_nothing_behind(tmp_path):
    settings = settings_for(tmp_path, ("none", "first-two"), reader="none", plots=False)
    out = Path(settings.out)
    typos = (
        {"triples": str(tmp_path / "typo_openie.json")},
        {"contexts_from": str(tmp_path / "no-such-run")},
        {"reader": "./no-such-reader"},
        {"pool": "corpus", "corpus": str(tmp_path / "typo_corpus.json")},
    )
    for typo in typos:
        with pytest.raises((OSError, ValueError, RuntimeError)):
            run_without_reader(EvalSettings(**{**settings.__dict__, **typo}))
        assert not out.exists(), typo
    # The corrected command runs in the same --out.
    assert run_without_reader(settings)["questions_compared"] == 3
    assert (out / "run.json").is_file()


def test_a_named_lm_loads_only_when_a_method_decodes(tmp_path):
    # Methods that never decode do not need --lm: an unloadable one is never touched.
    settings = settings_for(
        tmp_path, ("none", "first-two", "neocorrag-recall"), reader="none", plots=False
    )
    unused = EvalSettings(**{**settings.__dict__, "lm": "./no-such-lm"})
    assert run_without_reader(unused)["questions_compared"] == 3
    # A method that decodes fails on it.
    rank = {**settings.miner_overrides, "decoding": "rank"}
    decoding = EvalSettings(
        **{**settings.__dict__, "out": str(tmp_path / "d"), "miner_overrides": rank}
    )
    with pytest.raises((OSError, ValueError, RuntimeError)):
        run_without_reader(EvalSettings(**{**decoding.__dict__, "lm": "./no-such-lm"}))


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("max_new_tokens", 0),
        ("bootstrap", 0),
        ("seed", -1),
        ("pool", "everything"),
        ("retriever", "grep"),
        ("embeddings_threshold", float("nan")),
        ("embeddings_threshold", -3.0),
        ("embeddings_threshold", 1.5),
    ],
)
def test_bad_numbers_and_choices_are_refused_up_front(tmp_path, option, value):
    flag = "--" + option.replace("_", "-")
    with pytest.raises(ValueError, match=f"^{flag} must be"):
        EvalSettings(data="x", out=str(tmp_path), **{option: value})


def test_a_corpus_without_pool_corpus_is_refused(tmp_path):
    with pytest.raises(ValueError, match="add --pool corpus"):
        EvalSettings(data="x", out=str(tmp_path), corpus="c.json")
    EvalSettings(data="x", out=str(tmp_path), corpus="c.json", pool="corpus")


def test_cli_refuses_a_bad_bootstrap_in_one_line(tmp_path, capsys):
    from neocorrag_core.cli.app import main

    qa, _ = write_fixture(tmp_path)
    out = tmp_path / "o"
    args = ["eval", "--data", str(qa), "--out", str(out), "--methods", "none", "--bootstrap", "0"]
    code = main(args)
    assert code == 2
    err = capsys.readouterr().err.strip()
    assert "--bootstrap must be >= 1" in err and len(err.splitlines()) == 1
    assert not out.exists()


def test_reader_none_refuses_methods_that_answer_by_themselves(tmp_path):
    with pytest.raises(ValueError, match=r"--reader none .* belief answers by itself"):
        EvalSettings(data="x", out=str(tmp_path), methods=("none", "belief"), reader="none")


def test_spacy_triples_of_another_rules_version_are_not_resumed(tmp_path):
    from neocorrag_core.eval.runner import check_signature, write_signature
    from neocorrag_core.triples.spacy_extractor import SpacyTripleExtractor

    settings = EvalSettings(data="x", out=str(tmp_path), methods=("none",), triples="spacy")
    assert settings.signature()["triples"] == f"spacy rules v{SpacyTripleExtractor.version}"
    write_signature(tmp_path, settings)
    assert check_signature(tmp_path, settings) is False  # same rules: resumes
    # A run.json from before rules version 2 says plain "spacy": its records were made
    # with the old rules, so resuming it is refused rather than mixed.
    stored = json.loads((tmp_path / "run.json").read_text())
    (tmp_path / "run.json").write_text(json.dumps({**stored, "triples": "spacy"}))
    with pytest.raises(ValueError, match="triples: 'spacy' there, 'spacy rules v"):
        check_signature(tmp_path, settings)


def test_replay_gives_the_reader_the_cut_text_of_a_focused_passage(tmp_path):
    """A method that cuts a passage to its evidence sentences (passage_focus="linked") keeps
    the passage's id: the replay must hand on the cut text, not the whole passage."""
    from dataclasses import replace

    from neocorrag_core.eval.datasets import QAExample
    from neocorrag_core.eval.protocol import MethodInput, MethodOutput
    from neocorrag_core.eval.reader import ReaderOutput
    from neocorrag_core.eval.runner import ReplayedMethod, ResultCache, score_record
    from neocorrag_core.types import Passage

    whole = [
        Passage("p1", "Acme was founded by Alice. It sells anvils.", "Acme"),
        Passage("p2", "Alice was born in Paris. She likes tea. She moved to Rome.", "Alice"),
    ]
    shown = [whole[0], replace(whole[1], text="Alice was born in Paris.")]
    example = QAExample(
        "q1", "Where was Acme's founder born?", ("Paris",), tuple(whole), frozenset()
    )
    answer = ReaderOutput("Paris", "Paris", 0, 0, 0.0)
    record = score_record(example, "focused", whole, MethodOutput(shown), answer, {}, 2)
    assert record["context_texts"] == {"p2": "Alice was born in Paris."}
    cache = ResultCache(tmp_path)
    cache.add("focused", json.loads(json.dumps(record)))
    call = MethodInput(example.question, list(whole), lambda q, k: [], 2, qid="q1")
    replayed = ReplayedMethod("focused", cache).refine(call)
    assert [p.text for p in replayed.passages] == [p.text for p in shown]
    # A record written before the field existed replays its passages whole, as before.
    cache.add("old", {k: v for k, v in record.items() if k != "context_texts"})
    old = ReplayedMethod("old", cache).refine(call)
    assert [p.text for p in old.passages] == [p.text for p in whole]
