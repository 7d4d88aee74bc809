"""EviReform's variants and the paper's controls (the lab) inside ``neocorrag eval``: corpus
pool, the rerank and repeat controls, the LM variant, EviReform then the miner."""

from __future__ import annotations

from pathlib import Path

from eval_fixtures import run, settings_for
from neocorrag_lab.evireform_variants import EVIREFORM_VARIANTS

METHODS = ("none", "evireform", *EVIREFORM_VARIANTS)


def test_evireform_methods_on_the_corpus_pool(tmp_path, tiny_lm):
    settings = settings_for(tmp_path, METHODS, pool="corpus", top_k=2, plots=False)
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
        assert all(v["found_missed_gold"] == 0 for v in rerank["query_sources"].values())
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
        # per query source: queries sent and gold passages they found that the first missed
        sources = full["query_sources"]
        sent = [q[1] for q in full["info"]["queries"][1:]]
        assert {k: v["queries"] for k, v in sources.items()} == {k: sent.count(k) for k in sources}
        missed = gold - set(full["info"]["first_pool_ids"])
        found = set().union(*full["info"]["query_results"][1:]) & missed
        assert sum(v["gold_first"] for v in sources.values()) == len(found)
        assert all(v["found_missed_gold"] <= v["queries"] for v in sources.values())
        assert per_q["evireform-rounds2"][qi]["info"]["rounds"] <= 2
        assert full["info"]["rounds"] <= 1
    agg = results["methods"]
    # the default needs no LM; the LM variant spends tokens
    assert agg["evireform"]["method_tokens"] == 0
    assert agg["evireform-lm"]["method_tokens"] > 0
    assert agg["none"]["pool_complete"] is None and agg["none"]["query_sources"] is None
    assert agg["evireform"]["residual_rounds"] is not None
    report = (Path(settings.out) / "report.md").read_text()
    assert "## Candidate pools" in report and "| evireform |" in report
    assert "## Residual queries by source" in report
    assert "ΔChain (pt)" in report and "chain" in results["comparisons"]["evireform"]


def test_variant_records_carry_a_version_that_follows_rules_and_defaults(monkeypatch):
    from neocorrag_lab import evireform_variants as lab

    from neocorrag_core.eval import evireform_methods as em
    from neocorrag_core.eval.registry import method_versions

    base = em.method_version("evireform")
    assert method_versions(["evireform-rerank"]) == {"evireform-rerank": base}
    assert lab.method_version("evireform-rerank") == base  # it reuses evireform's loop
    assert lab.method_version("evireform-lm") != base
    # Only the method that mines its result follows the miner's output version.
    with_miner = lab.method_version("evireform-neocorrag")
    monkeypatch.setattr(em, "MINER_OUTPUT_VERSION", "miner-x")
    assert lab.method_version("evireform-lm") == em.config_version(lab.VARIANTS["evireform-lm"])
    assert lab.method_version("evireform-neocorrag") != with_miner
    monkeypatch.setattr(em, "RULES_VERSION", "another")
    assert lab.method_version("evireform-rerank") != base
