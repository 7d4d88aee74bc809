"""Every eval metric against values computed by hand, and bootstrap determinism."""

from __future__ import annotations

import math

import pytest

from neocorrag_core.eval import metrics as M
from neocorrag_core.eval.retrieval import BM25
from neocorrag_core.eval.runner import aggregate


def test_normalize_answer_follows_squad():
    assert M.normalize_answer("The  Eiffel Tower!") == "eiffel tower"
    assert M.normalize_answer("An apple, a pear") == "apple pear"


def test_exact_match_takes_the_best_alias():
    assert M.exact_match("Stanley Hall.", ["G. Stanley Hall", "Stanley Hall"]) == 1.0
    assert M.exact_match("Hall", ["G. Stanley Hall", "Stanley Hall"]) == 0.0


def test_f1_by_hand():
    # pred tokens [big, red, dog] ("the" dropped), gold [red, dog]: P 2/3, R 1 -> F1 0.8
    assert M.f1_score("the big red dog", ["red dog"]) == pytest.approx(0.8)
    # max over aliases: "dog" vs ["cat", "red dog"] -> P 1, R 1/2 -> 2/3
    assert M.f1_score("dog", ["cat", "red dog"]) == pytest.approx(2 / 3)
    assert M.f1_score("", ["red dog"]) == 0.0
    assert M.f1_score("anything", []) == 0.0


def test_recall_hit_chain_by_hand():
    ids = ["a", "b", "c"]
    assert M.recall_at_k(ids, {"a", "d"}, 2) == 0.5
    assert M.recall_at_k(ids, {"c"}, 2) == 0.0
    assert M.hit_at_k(ids, {"a", "d"}, 2) == 1.0
    assert M.hit_at_k(ids, {"c"}, 2) == 0.0
    assert M.chain_at_k(ids, {"a", "d"}, 3) == 0.0
    assert M.chain_at_k(ids, {"a", "c"}, 3) == 1.0
    assert M.chain_at_k(ids, set(), 3) == 0.0
    assert M.recall_at_k(ids, set(), 3) == 0.0


def test_aid_and_rcr_by_hand():
    assert M.irrelevant_count(["a", "b", "c"], {"a"}) == 2
    assert M.irrelevant_count([], {"a"}) == 0
    assert M.rcr(0.4, 0.8) == pytest.approx(0.5)
    assert M.rcr(0.3, 0.0) == 0.0
    # per question: 0.5/1 + 1/0.5 + (recall 0 -> 0) = 2.5 over 3
    assert M.rcr_per_question([0.5, 1.0, 0.2], [1.0, 0.5, 0.0]) == pytest.approx(2.5 / 3)


def _record(f1, recall, ids, gold, prompt=10, generated=2):
    return {
        "f1": f1,
        "em": float(f1 == 1.0),
        "recall": recall,
        "hit": float(recall > 0),
        "chain": float(recall == 1.0),
        "atd": len(ids),
        "aid": M.irrelevant_count(ids, gold),
        "empty": float(not ids),
        "reader_prompt_tokens": prompt,
        "reader_generated_tokens": generated,
        "method_prompt_tokens": 0,
        "method_generated_tokens": 0,
        "timings": {"read": 1.0},
        "peak_rss_mb": 5.0,
        "info": {},
    }


def test_aggregate_by_hand():
    rows = [
        _record(1.0, 1.0, ["a", "b", "x"], {"a", "b"}),
        _record(0.0, 0.5, ["c", "y"], {"c", "d"}),
        _record(0.5, 0.0, [], {"e"}),
    ]
    agg = aggregate(rows)
    assert agg["atd"] == pytest.approx(5 / 3)
    assert agg["aid"] == pytest.approx(2 / 3)
    assert agg["empty"] == pytest.approx(1 / 3)
    assert agg["f1"] == pytest.approx(0.5)
    assert agg["recall"] == pytest.approx(0.5)
    assert agg["rcr"] == pytest.approx(1.0)  # 0.5 / 0.5
    assert agg["rcr_per_question"] == pytest.approx((1.0 + 0.0 + 0.0) / 3)
    assert agg["reader_tokens"] == pytest.approx(12)
    assert agg["seconds"]["read"] == pytest.approx(1.0)


def test_paired_bootstrap_is_deterministic_with_a_seed():
    a = [0.9, 0.1, 0.75, 1.0, 0.3, 0.6, 0.45, 0.2]
    b = [0.5, 0.0, 0.7, 0.25, 0.35, 0.6, 0.1, 0.0]
    first = M.paired_bootstrap(a, b, resamples=500, seed=7)
    again = M.paired_bootstrap(a, b, resamples=500, seed=7)
    other = M.paired_bootstrap(a, b, resamples=500, seed=8)
    assert first == again
    assert first.mean == pytest.approx((sum(a) - sum(b)) / 8)
    assert first.low <= first.mean <= first.high
    assert (other.low, other.high) != (first.low, first.high)


def test_paired_bootstrap_of_a_constant_difference_is_that_constant():
    ci = M.paired_bootstrap([2.0, 3.0, 4.0], [1.0, 2.0, 3.0], resamples=100, seed=0)
    assert (ci.mean, ci.low, ci.high) == pytest.approx((1.0, 1.0, 1.0))
    assert ci.excludes_zero
    zero = M.paired_bootstrap([1.0, 0.0], [1.0, 0.0], resamples=100, seed=0)
    assert not zero.excludes_zero


def test_paired_bootstrap_rejects_misaligned_input():
    with pytest.raises(ValueError, match="aligned"):
        M.paired_bootstrap([1.0], [1.0, 2.0])
    with pytest.raises(ValueError, match="at least one"):
        M.paired_bootstrap([], [])


def test_bm25_by_hand():
    index = BM25(["a b", "a c"])
    scores = index.scores("b")
    # idf(b) = ln(1 + (2 - 1 + 0.5) / (1 + 0.5)) = ln 2; tf 1, |d| = avgdl: tf*(k1+1)/(tf+k1) = 1
    assert scores[0] == pytest.approx(math.log(2))
    assert scores[1] == 0.0
    assert list(index.scores("zzz")) == [0.0, 0.0]


def test_retriever_pools_and_ranks():
    from neocorrag_core.eval.datasets import QAExample, make_passage
    from neocorrag_core.eval.retrieval import Retriever, pooled_corpus

    a, b, c = (make_passage(t, x) for t, x in [("A", "red apples"), ("B", "blue sky"), ("C", "x")])
    q1 = QAExample("1", "which sky is blue", ("B",), (a, b), frozenset({b.id}))
    q2 = QAExample("2", "apples", ("A",), (c,), frozenset({c.id}))
    per_question = Retriever("bm25")
    assert [p.id for p in per_question.retrieve(q1, 1)] == [b.id]
    assert [p.id for p in per_question.retrieve(q2, 5)] == [c.id]  # only its own passages
    pooled = Retriever("bm25", pool="corpus", corpus=pooled_corpus([q1, q2]))
    top = pooled.retrieve(q2, 2)
    assert top[0].id == a.id and top[0].score > top[1].score  # found in q1's passages
    with pytest.raises(ValueError, match="embedder"):
        Retriever("dense")
    with pytest.raises(ValueError, match="corpus"):
        Retriever("bm25", pool="corpus")


def test_pooled_corpus_vectors_are_kept_between_runs_and_a_torn_file_is_ignored(tmp_path):
    from conftest import bag_of_words_embedder

    from neocorrag_core.eval.datasets import QAExample, make_passage
    from neocorrag_core.eval.retrieval import Retriever, pooled_corpus
    from neocorrag_core.models import resolve_embedder

    calls: list[int] = []
    inner = resolve_embedder(bag_of_words_embedder())

    class Counting:
        name = "counting"

        def embed(self, texts):
            calls.append(len(texts))
            return inner.embed(texts)

    a, b = make_passage("A", "red apples"), make_passage("B", "blue sky")
    q = QAExample("1", "which sky is blue", ("B",), (a, b), frozenset({b.id}))
    corpus = pooled_corpus([q])
    first = Retriever(
        "dense", embedder=Counting(), pool="corpus", corpus=corpus, vector_cache=tmp_path
    )
    top = first.retrieve(q, 1)
    assert calls == [2, 1] and len(list(tmp_path.glob("*.npy"))) == 1
    second = Retriever(
        "dense", embedder=Counting(), pool="corpus", corpus=corpus, vector_cache=tmp_path
    )
    assert second.retrieve(q, 1) == top and calls == [2, 1, 1]  # only the question embedded
    next(tmp_path.glob("*.npy")).write_bytes(b"torn")
    third = Retriever(
        "dense", embedder=Counting(), pool="corpus", corpus=corpus, vector_cache=tmp_path
    )
    assert third.retrieve(q, 1) == top and calls[-2:] == [2, 1]  # embedded again
