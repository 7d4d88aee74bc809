"""EviReform inside ``neocorrag eval``: corpus pool, pool completeness, query sources,
replay, versions. Its variants and the paper's controls are the lab's
(``tests/lab/test_lab_evireform.py``)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from eval_fixtures import run, settings_for

from neocorrag_core.eval.evireform_methods import EVIREFORM_METHODS

METHODS = ("none", *EVIREFORM_METHODS)


def test_evireform_on_the_corpus_pool(tmp_path, tiny_lm):
    settings = settings_for(tmp_path, METHODS, pool="corpus", top_k=2, plots=False)
    results = run(settings, tiny_lm)
    assert results["questions_compared"] == 3
    per_q = results["per_question"]
    for qi in range(3):
        none = per_q["none"][qi]
        full = per_q["evireform"][qi]
        # the first pool is the shared single-shot top-k
        assert full["info"]["first_pool_ids"] == none["retrieved_ids"]
        assert set(full["info"]["pool_ids"]) >= set(none["retrieved_ids"])
        assert len(full["context_ids"]) == 2
        # completeness before/after is recorded from the gold ids
        gold = set(full["gold_ids"])
        assert full["first_pool_complete"] == float(gold <= set(full["info"]["first_pool_ids"]))
        assert full["pool_complete"] == float(gold <= set(full["info"]["pool_ids"]))
        assert none["pool_complete"] is None
        # per query source: queries sent and gold passages they found that the first missed
        sources = full["query_sources"]
        sent = [q[1] for q in full["info"]["queries"][1:]]
        assert {k: v["queries"] for k, v in sources.items()} == {k: sent.count(k) for k in sources}
        missed = gold - set(full["info"]["first_pool_ids"])
        found = set().union(*full["info"]["query_results"][1:]) & missed
        assert sum(v["gold_first"] for v in sources.values()) == len(found)
        assert all(v["found_missed_gold"] <= v["queries"] for v in sources.values())
        assert full["info"]["rounds"] <= 1
    agg = results["methods"]
    # the default needs no LM
    assert agg["evireform"]["method_tokens"] == 0
    assert agg["none"]["pool_complete"] is None and agg["none"]["query_sources"] is None
    assert agg["evireform"]["residual_rounds"] is not None
    report = (Path(settings.out) / "report.md").read_text()
    assert "## Candidate pools" in report and "| evireform |" in report
    assert "## Residual queries by source" in report
    assert "ΔChain (pt)" in report and "chain" in results["comparisons"]["evireform"]


def test_replaying_evireform_contexts_finds_passages_outside_the_top_k(tmp_path, tiny_lm):
    first = settings_for(
        tmp_path,
        ("none", "evireform"),
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
    one = settings_for(tmp_path / "a", ("none",), pool="corpus", limit=1, plots=False)
    all_three = settings_for(tmp_path / "b", ("none",), pool="corpus", plots=False)
    first = run(one, tiny_lm)["per_question"]["none"][0]
    again = run(all_three, tiny_lm)["per_question"]["none"][0]
    assert first["retrieved_ids"] == again["retrieved_ids"]


def test_evireform_records_carry_a_version_that_follows_rules_and_defaults(monkeypatch):
    from neocorrag_core.eval import evireform_methods as em
    from neocorrag_core.eval.registry import method_versions

    base = em.method_version("evireform")
    assert method_versions(["evireform"]) == {"evireform": base}
    assert em.config_version({"residual_queries": "lm"}) != base
    # Only a method that mines its result follows the miner's output version.
    with_miner = em.config_version(mined=True)
    monkeypatch.setattr(em, "MINER_OUTPUT_VERSION", "miner-x")
    assert em.method_version("evireform") == base
    assert em.config_version(mined=True) != with_miner
    monkeypatch.setattr(em, "RULES_VERSION", "another")
    assert em.method_version("evireform") != base
