"""Hand-made eval results (the shape of results.json) for the report.html tests: two
questions, three methods (``none``, a refiner with keep/drop reasons, EviReform with its
queries), hostile text in passages, questions, answers, queries and chain blocks.

On q1 the refiner loses the answer (F1 below ``none``'s) and a gold passage; on q2 no
method loses anything."""

from __future__ import annotations

from typing import Any

from neocorrag_core.types import Passage

HOSTILE = "<script>alert(1)</script>"
PASSAGES = {
    "g1": Passage("g1", "Gold one says the answer is Stanley.", "Gold One"),
    "g2": Passage("g2", "Gold two links the county. " + "padding " * 100, "Gold Two"),
    "d1": Passage("d1", f"A distractor {HOSTILE} with https://evil.example/x.js", "Distractor"),
    "d2": Passage("d2", "Another distractor.", 'Title "quoted" <b>bold</b>'),
    "x9": Passage("x9", "Found by a second query.", "Second Hop"),
}


def record(
    qid: str,
    method: str,
    context: list[str],
    *,
    f1: float = 0.0,
    gold: list[str] | None = None,
    info: dict[str, Any] | None = None,
    question: str = "",
    prediction: str = "",
    chain_text: str = "",
) -> dict[str, Any]:
    """A per-question record with the keys the page reads (as scoring.score_record)."""
    gold = ["g1", "g2"] if gold is None else gold
    return {
        "qid": qid,
        "method": method,
        "question": question or f"Question {qid}?",
        "answers": ["Stanley", "Stanley, ND"],
        "prediction": prediction,
        "raw_prediction": prediction,
        "gold_ids": gold,
        "retrieved_ids": ["g1", "d1", "g2", "d2"],
        "context_ids": context,
        "context_texts": {},
        "chain_text": chain_text,
        "abstained": False,
        "em": float(f1 == 1.0),
        "f1": f1,
        "recall": len(set(context) & set(gold)) / len(gold) if gold else 0.0,
        "atd": len(context),
        "info": info or {},
    }


def results(*, read: bool = True, gold: bool = True) -> dict[str, Any]:
    """Two questions, three methods (see the module's docstring); ``read``: a reader ran
    (else ``--reader none``), ``gold``: the data has gold passage ids."""
    ids = None if gold else []
    refiner_info = {
        "keep_reasons": {"g1": "top_n", "d2": "query_entity"},
        "drop_stages": {"g2": "pruned", "d1": "no_triples"},
        "num_chains": 2,
        "fallback": None,
    }
    evireform_info = {
        "queries": [
            ["Question q1?", "original", 0, ""],
            [f"Mountrail {HOSTILE}", "template", 1, "Mountrail County"],
        ],
        "query_results": [["g1", "d1", "g2", "d2"], ["x9", "g2"]],
        "pool_ids": ["g1", "d1", "g2", "d2", "x9"],
        "found_by": [0, 1, 0],
        "evidence": [f"Mountrail County capital {HOSTILE}"],
        "provenance": {"x9": {"bridge": "Mountrail County", "evidence": True}},
    }
    hostile_q = f"Which {HOSTILE} county?"
    per_question = {
        "none": [
            record("q1", "none", ["g1", "d1", "g2", "d2"], f1=1.0, gold=ids, question=hostile_q),
            record("q2", "none", ["g1", "d1", "g2", "d2"], f1=0.5, gold=ids),
        ],
        "neocorrag-recall": [
            record(
                "q1",
                "neocorrag-recall",
                ["g1", "d2"],
                f1=0.0,
                gold=ids,
                info=refiner_info,
                question=hostile_q,
                prediction=f"Stanley {HOSTILE}",
                chain_text=f"Evidence chains:\n1. {HOSTILE}",
            ),
            record("q2", "neocorrag-recall", ["g1", "d1", "g2", "d2"], f1=0.5, gold=ids),
        ],
        "evireform": [
            record(
                "q1", "evireform", ["g1", "x9", "g2"], f1=1.0, gold=ids, info=evireform_info,
                question=hostile_q,
            ),
            record("q2", "evireform", ["g1", "d1", "g2", "d2"], f1=1.0, gold=ids),
        ],
    }  # fmt: skip
    return {
        "settings": {
            "data": "fixture.json",
            "reader": "default" if read else "none",
            "top_k": 4,
            "pool": "corpus",
            "retriever": "dense",
        },
        "data": {"path": "fixture.json"},
        "methods": {
            name: {"questions": 2, "em": 0.5, "f1": 0.5, "recall": 0.75, "atd": 3.0}
            for name in per_question
        },
        "per_question": per_question,
    }
