"""The lab's methods through ``neocorrag eval``'s runner on tiny models: the paper's Table 2
methods, LangChain's filters, the peers beside the dial, replays, versions and the refusals
of the baselines that answer by themselves."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import bag_of_words_embedder
from eval_fixtures import run, run_without_reader, settings_for

from neocorrag_core.eval.report import render_report
from neocorrag_core.eval.runner import EvalSettings, run_evaluation
from neocorrag_core.models import resolve_embedder

FAST_METHODS = (
    "none",
    "neocorrag-none",
    "neocorrag-rank",
    "ablation-naive-search",
    "ablation-no-filter",
    "ablation-free-decoding",
)


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
    assert results["methods"]["neocorrag-rank"]["method_tokens"] > 0
    assert results["methods"]["ablation-no-filter"]["atd"] == 5
    assert set(results["comparisons"]) == set(FAST_METHODS) - {"none"}
    for record in results["per_question"]["neocorrag-none"]:
        assert set(record["context_ids"]) <= set(record["retrieved_ids"])
        assert record["chain_text"].startswith("Evidence chains:")
    free = results["per_question"]["ablation-free-decoding"][0]["info"]
    assert "faithful" in free or free["fallback"]
    saved = json.loads((out / "results.json").read_text())
    assert saved["methods"].keys() == results["methods"].keys()
    report = (out / "report.md").read_text()
    assert "| neocorrag-rank |" in report and "bootstrap" in report
    for png in ("tradeoff.png", "f1.png", "latency.png"):
        assert (out / png).read_bytes()[:4] == b"\x89PNG"
    # Questions that reached no chain are counted per method and reason.
    results["methods"]["neocorrag-none"]["fallbacks"] = {"no_candidate_chains": 2}
    line = render_report(results).splitlines()[-1]
    assert line.startswith("Questions without a chain")
    assert line.endswith("`neocorrag-none`: no_candidate_chains 2")


def test_langchain_baselines_run_on_tiny_models(tmp_path, tiny_lm):
    pytest.importorskip("langchain_classic")
    pytest.importorskip("langchain_community")
    methods = ("none", "lc-embeddings-filter", "lc-llm-filter", "lc-llm-filter-logits")
    settings = settings_for(tmp_path, methods, plots=False, embeddings_threshold=0.99)
    results = run(settings, tiny_lm)
    # A threshold no bag-of-words cosine reaches empties every context; the reader still answers.
    assert results["methods"]["lc-embeddings-filter"]["empty"] == 1.0
    llm_filter = results["methods"]["lc-llm-filter"]
    assert llm_filter["method_tokens"] > 0
    for record in results["per_question"]["lc-llm-filter"]:
        assert record["info"]["parse_errors"] <= 5
    assert results["methods"]["lc-llm-filter-logits"]["method_prompt_tokens"] > 0


def test_contexts_replayed_for_another_reader(tmp_path, tiny_lm):
    from tiny_models import build_tiny_lm

    from neocorrag_core.models import resolve_lm

    first = settings_for(tmp_path, ("none", "neocorrag-rank"), plots=False)
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
    for name in ("none", "neocorrag-rank"):
        for a, b in zip(
            original["per_question"][name], replayed["per_question"][name], strict=True
        ):
            assert (a["context_ids"], a["chain_text"]) == (b["context_ids"], b["chain_text"])
            assert a["method_prompt_tokens"] == b["method_prompt_tokens"]
    mismatched = EvalSettings(**{**second.__dict__, "out": str(tmp_path / "o3"), "top_k": 3})
    with pytest.raises(ValueError, match="top_k"):
        run(mismatched, tiny_lm)


def test_peers_dial_and_loss_diagnosis_without_a_reader(tmp_path):
    methods = ("none", "top-2", "neocorrag-recall", "neocorrag-paper")
    settings = settings_for(tmp_path, methods, reader="none", plots=False)
    results = run_evaluation(
        settings, embedder=resolve_embedder(bag_of_words_embedder()), show_progress=False
    )
    aggs = results["methods"]
    assert aggs["top-2"]["atd"] == 2
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
    assert aggs["top-2"]["gold_lost_at"] is None  # no per-passage reasons to diagnose
    report = (Path(settings.out) / "report.md").read_text()
    assert "## Where gold passages were lost" in report
    assert "| neocorrag-paper |" in report.split("## Where gold passages were lost")[1]
    assert "| none | " in report and " – | – | – |" in report  # EM/F1/RCR not measured


def test_replay_refuses_methods_that_answer_by_themselves(tmp_path):
    with pytest.raises(ValueError, match=r"--contexts-from .* single-shot answers by itself"):
        EvalSettings(
            data="x", out=str(tmp_path), methods=("none", "single-shot"), contexts_from="src"
        )
    # A plug-in method that answered by itself without declaring it: its records say so.
    settings = settings_for(tmp_path, ("top-2",), reader="none", plots=False)
    run_without_reader(settings)
    cache = Path(settings.out) / "cache" / "top-2.jsonl"
    records = [json.loads(line) for line in cache.read_text().splitlines()]
    for record in records:
        record["prediction"] = "Stanley"  # an answer no reader read a prompt for
    cache.write_text("".join(json.dumps(r) + "\n" for r in records))
    replay = EvalSettings(
        **{**settings.__dict__, "out": str(tmp_path / "replay"), "contexts_from": settings.out}
    )
    with pytest.raises(ValueError, match="'top-2' answered by itself"):
        run_without_reader(replay)
    assert not (tmp_path / "replay").exists()


def test_replay_refuses_records_of_another_method_version(tmp_path):
    settings = settings_for(tmp_path, ("none", "neocorrag-none"), reader="none")
    settings.plots = False
    run_without_reader(settings)
    cache = Path(settings.out) / "cache" / "neocorrag-none.jsonl"
    records = [json.loads(line) for line in cache.read_text().splitlines()]
    current = records[0]["method_version"]
    replay = EvalSettings(
        **{**settings.__dict__, "out": str(tmp_path / "replay"), "contexts_from": settings.out}
    )
    # Current records are replayed with their version.
    replayed = run_without_reader(replay)
    assert {r["method_version"] for r in replayed["per_question"]["neocorrag-none"]} == {current}
    for record in records:
        record["method_version"] = "miner-0"  # made before a version bump
    cache.write_text("".join(json.dumps(r) + "\n" for r in records))
    again = EvalSettings(**{**replay.__dict__, "out": str(tmp_path / "replay2")})
    with pytest.raises(ValueError, match="'neocorrag-none' records were made by version 'miner-0'"):
        run_without_reader(again)
    assert not (tmp_path / "replay2").exists()


def test_a_named_lm_loads_only_when_a_method_decodes(tmp_path):
    # Methods that never decode do not need --lm: an unloadable one is never touched.
    settings = settings_for(
        tmp_path, ("none", "top-2", "neocorrag-none"), reader="none", plots=False
    )
    unused = EvalSettings(**{**settings.__dict__, "lm": "./no-such-lm"})
    assert run_without_reader(unused)["questions_compared"] == 3
    # A method that decodes fails on it.
    decoding = EvalSettings(
        **{**settings.__dict__, "out": str(tmp_path / "d"), "methods": ("none", "neocorrag-rank")}
    )
    with pytest.raises((OSError, ValueError, RuntimeError)):
        run_without_reader(EvalSettings(**{**decoding.__dict__, "lm": "./no-such-lm"}))


def test_reader_none_refuses_methods_that_answer_by_themselves(tmp_path):
    with pytest.raises(ValueError, match=r"--reader none .* closed-book, iterative answer by"):
        EvalSettings(
            data="x", out=str(tmp_path), methods=("none", "closed-book", "iterative"), reader="none"
        )
