"""The EviReform methods inside ``neocorrag eval``: corpus pool, controls, pool completeness."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from test_eval_runner import run, settings_for

METHODS = ("none", "evireform", "evireform-repeat", "evireform-rerank", "evireform-neocorrag")


def test_evireform_methods_on_the_corpus_pool(tmp_path, tiny_lm):
    settings = settings_for(tmp_path, methods=METHODS, pool="corpus", top_k=2, plots=False)
    results = run(settings, tiny_lm)
    assert results["questions_compared"] == 3
    per_q = results["per_question"]
    for qi in range(3):
        none = per_q["none"][qi]
        full = per_q["evireform"][qi]
        rerank = per_q["evireform-rerank"][qi]
        # the first pool is the shared single-shot top-k
        assert full["info"]["first_pool_ids"] == none["retrieved_ids"]
        assert set(full["info"]["pool_ids"]) >= set(none["retrieved_ids"])
        assert len(full["context_ids"]) == 2
        # the rerank control reorders the first pool and retrieves nothing new
        assert set(rerank["context_ids"]) <= set(none["retrieved_ids"])
        assert rerank["info"]["queries"] == full["info"]["queries"]
        # the repeat control asks the question twice, and no LM
        repeat = per_q["evireform-repeat"][qi]
        assert [q[1] for q in repeat["info"]["queries"]] == ["original", "repeat"]
        assert repeat["method_prompt_tokens"] == 0
        # completeness before/after is recorded from the gold ids
        gold = set(full["gold_ids"])
        assert full["first_pool_complete"] == float(gold <= set(full["info"]["first_pool_ids"]))
        assert full["pool_complete"] == float(gold <= set(full["info"]["pool_ids"]))
        assert none["pool_complete"] is None
        # evireform + neocorrag refines exactly evireform's passages
        combined = per_q["evireform-neocorrag"][qi]
        assert set(combined["context_ids"]) <= set(full["context_ids"])
        assert combined["method_prompt_tokens"] >= full["method_prompt_tokens"]
    agg = results["methods"]
    assert agg["evireform"]["method_tokens"] > 0
    assert agg["none"]["pool_complete"] is None
    report = (Path(settings.out) / "report.md").read_text()
    assert "## Candidate pools" in report and "| evireform |" in report


def test_replaying_evireform_contexts_finds_passages_outside_the_top_k(tmp_path, tiny_lm):
    first = settings_for(
        tmp_path,
        methods=("none", "evireform"),
        pool="corpus",
        top_k=2,
        plots=False,
        evireform_overrides={"max_evidence": 1, "selection": "embedding"},
    )
    results = run(first, tiny_lm)
    outside = [
        set(r["context_ids"]) - set(r["retrieved_ids"])
        for r in results["per_question"]["evireform"]
    ]
    assert any(outside)  # the point of the test: the reader saw passages beyond the top-k
    replay = replace(first, out=str(tmp_path / "replayed"), contexts_from=first.out)
    again = run(replay, tiny_lm)
    for before, after in zip(
        results["per_question"]["evireform"], again["per_question"]["evireform"], strict=True
    ):
        assert after["context_ids"] == before["context_ids"]
        assert after["method_prompt_tokens"] == before["method_prompt_tokens"]


def test_the_corpus_pool_does_not_depend_on_limit(tmp_path, tiny_lm):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    one = settings_for(tmp_path / "a", methods=("none",), pool="corpus", limit=1, plots=False)
    all_three = settings_for(tmp_path / "b", methods=("none",), pool="corpus", plots=False)
    first = run(one, tiny_lm)["per_question"]["none"][0]
    again = run(all_three, tiny_lm)["per_question"]["none"][0]
    assert first["retrieved_ids"] == again["retrieved_ids"]
