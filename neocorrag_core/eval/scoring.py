"""One question's record: what the reader saw and said, its scores (answer, retrieval,
chain), where gold passages were lost or kept, what residual queries found, and its costs.
"""

from __future__ import annotations

import resource
import sys
from collections.abc import Sequence
from typing import Any

from neocorrag_core.eval import metrics as M
from neocorrag_core.eval.datasets import QAExample, title_key
from neocorrag_core.eval.protocol import MethodOutput
from neocorrag_core.types import Passage


def peak_rss_mb() -> float:
    """Peak resident memory of this process so far, in MiB (Linux reports KiB)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / 1024 if sys.platform != "darwin" else peak / (1024 * 1024)


def _id_key(passage: Passage) -> str:
    return passage.id


def _title_key(passage: Passage) -> str:
    return f"title:{title_key(passage.title)}"


def score_record(
    example: QAExample,
    method: str,
    retrieved: Sequence[Passage],
    output: MethodOutput,
    answer: Any,
    timings: dict[str, float],
    k: int,
) -> dict[str, Any]:
    """One question's record: what the reader saw and said, its scores and its costs.

    Gold passages are matched by id, or, for a question whose gold passages are named by
    title (``example.gold_titles``), by :func:`~neocorrag_core.eval.datasets.title_key` of
    the passages' titles (then the per-passage diagnoses, which read ids, are left out).
    A question without gold passages gets ``has_gold: False``; the report shows its run's
    retrieval scores as not measured."""
    by_title = bool(example.gold_titles) and not example.gold_ids
    key = _title_key if by_title else _id_key
    ids = [key(p) for p in output.passages]
    gold = sorted({f"title:{t}" for t in example.gold_titles} if by_title else example.gold_ids)
    by_id = [] if by_title else gold
    return {
        "qid": example.id,
        "method": method,
        "question": example.question,
        "answers": list(example.answers),
        "prediction": answer.answer,
        "raw_prediction": answer.raw,
        "gold_ids": gold,
        "has_gold": bool(gold),
        "retrieved_ids": [p.id for p in retrieved],
        "context_ids": ids,
        # A passage the method cut (MinerConfig.passage_focus) is replayed from this text, not
        # from its id, which names the whole passage.
        "context_texts": _cut_texts(retrieved, output.passages),
        "chain_text": output.chain_text,
        # An abstention is scored as a wrong answer (no credit, whatever the gold is).
        "abstained": bool(output.abstained),
        "em": 0.0 if output.abstained else M.exact_match(answer.answer, example.answers),
        "f1": 0.0 if output.abstained else M.f1_score(answer.answer, example.answers),
        "recall": M.recall_at_k(ids, gold, k),
        "hit": M.hit_at_k(ids, gold, k),
        "chain": M.chain_at_k(ids, gold, k),
        "atd": len(ids),
        "aid": M.irrelevant_count(ids, gold),
        "empty": float(not ids),
        # Every gold passage in the whole final context, however long (the controller's
        # evidence may hold more than k passages).
        "evidence_recall": M.recall_at_k(ids, gold, max(len(ids), 1)),
        "retrieval_rounds": output.info.get("retrieval_rounds"),
        "retrieved_recall": M.recall_at_k([key(p) for p in retrieved], gold, k),
        # Candidate-pool completeness (methods that retrieve again): every gold passage in
        # the first retrieval's pool / in the pool after residual retrieval.
        "first_pool_complete": _complete(output.info.get("first_pool_ids"), by_id),
        "pool_complete": _complete(output.info.get("pool_ids"), by_id),
        **query_sources(output.info, by_id),
        **gold_diagnosis(retrieved, ids, by_id, output.info),
        "method_prompt_tokens": output.prompt_tokens,
        "method_generated_tokens": output.generated_tokens,
        "reader_prompt_tokens": answer.prompt_tokens,
        "reader_generated_tokens": answer.generated_tokens,
        "total_tokens": output.prompt_tokens
        + output.generated_tokens
        + answer.prompt_tokens
        + answer.generated_tokens,
        "timings": timings,
        "info": output.info,
        "peak_rss_mb": peak_rss_mb(),
    }


def gold_diagnosis(
    retrieved: Sequence[Passage], context_ids: Sequence[str], gold: Sequence[str], info: Any
) -> dict[str, Any]:
    """For methods that report per-passage reasons (the miner): where each retrieved gold
    passage the method dropped was lost, and why each kept one was kept."""
    stages, reasons = info.get("drop_stages"), info.get("keep_reasons")
    if stages is None or reasons is None:
        return {}
    wanted, shown = set(gold), set(context_ids)
    lost: dict[str, int] = {}
    kept: dict[str, int] = {}
    for passage in retrieved:
        if passage.id not in wanted:
            continue
        if passage.id in shown:
            why = reasons.get(passage.id, "other")
            kept[why] = kept.get(why, 0) + 1
        else:
            stage = stages.get(passage.id, "unknown")
            lost[stage] = lost.get(stage, 0) + 1
    return {"gold_lost_at": lost, "gold_kept_by": kept}


def query_sources(info: Any, gold: Sequence[str]) -> dict[str, Any]:
    """For methods that search again (EviReform): per query source (``"template"``,
    ``"entities"``, ``"lm"``, ...) how many residual queries were sent, how many returned a
    gold passage that the first search missed, and how many such gold passages that source
    found first."""
    queries, results = info.get("queries"), info.get("query_results")
    if not queries or results is None:
        return {}
    first = set(info.get("first_pool_ids") or ())
    missed = set(gold) - first
    sources: dict[str, dict[str, int]] = {}
    credited: set[str] = set()
    for query, ids in zip(queries[1:], results[1:], strict=False):
        kind = str(query[1])
        row = sources.setdefault(kind, {"queries": 0, "found_missed_gold": 0, "gold_first": 0})
        row["queries"] += 1
        new = missed.intersection(ids)
        if new:
            row["found_missed_gold"] += 1
        row["gold_first"] += len(new - credited)
        credited |= new
    return {"query_sources": sources}


def _complete(pool_ids: Sequence[str] | None, gold: Sequence[str]) -> float | None:
    return None if pool_ids is None or not gold else float(set(gold) <= set(pool_ids))


def _cut_texts(retrieved: Sequence[Passage], shown: Sequence[Passage]) -> dict[str, str]:
    """The texts of the shown passages that differ from the retrieved passage of that id."""
    whole = {p.id: p.text for p in retrieved}
    return {p.id: p.text for p in shown if p.id in whole and p.text != whole[p.id]}
