"""Can an LM tell the gold passages the refiner drops from the noise it drops?

For every question of a ``neocorrag eval`` run (optionally one hash half), the LM reads the
question and the run's whole top-5 once, and is then asked of each passage in turn "Is
passage [k] needed to answer the question? Answer yes or no." The shared part of the
prompt (question and passages) is encoded once and its cache reused for every passage, so a
question costs about one prefill of the unrefined top-5 (about one reader call), whatever
the number of passages. A passage's score is log P(yes) - log P(no) of the first answer
token (either case, with or without a leading space).

Writes one JSON line per question (``qid``, ``ids``, ``gold``, ``scores``, ``prompt_tokens``;
an existing output is resumed) and prints, for the passages that ``--kept-by`` (a method of
the run, by default ``neocorrag-recall``) does not keep, the ROC AUC of "gold" and how many
gold and noise passages each threshold would win back, for the raw score and for the score
minus the mean score of the passages the method keeps (the question's own baseline).
A measurement for issue 12 (docs/lab-log.md, "Rescuing the gold passages the links lose"),
not a product stage::

    python benchmarks/passage_judge_probe.py \\
        --data ../shared/data/musique/kag_musique_dev_100.json --run runs/t-musique-dev \\
        --split tune --lm qwen-1.5b --out runs/judge-musique-dev.jsonl
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tqdm import tqdm

# The decoder's own handling of the KV-cache keyword (renamed in transformers 5.x).
from neocorrag_core.chains.decoding import _cache_kwarg, _last_logits_only, _output_cache
from neocorrag_core.eval.datasets import load_qa
from neocorrag_core.eval.splits import SPLITS, split_of
from neocorrag_core.lm.generation import chat_ids, input_ids_tensor
from neocorrag_core.models import LanguageModel, resolve_lm
from neocorrag_core.types import Passage

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the sibling scripts
from summarize_results import missing_records

SYSTEM = "You are a careful research assistant."
INSTRUCTION = (
    "A passage is needed if it states a fact on the chain of facts that leads to the answer, "
    "including a fact about an intermediate (bridge) entity."
)
THRESHOLDS = (1.0, 1.25, 1.5, 1.75, 2.0, 2.5)
MARGINS = (0.2, 0.25, 0.3, 0.35, 0.4, 0.5, 0.6)


def _records(run: Path, method: str) -> dict[str, dict[str, Any]]:
    path = run / "cache" / f"{method}.jsonl"
    if not path.exists():
        sys.exit(
            f"{path} not found (`--methods none {method}` in that run); {missing_records(path)}"
        )
    return {r["qid"]: r for r in map(json.loads, path.read_text(encoding="utf-8").splitlines())}


def _answer_ids(tokenizer: Any, words: Sequence[str]) -> list[int]:
    return sorted({tokenizer.encode(w, add_special_tokens=False)[0] for w in words})


def prompt_ids(lm: LanguageModel, question: str, passages: Sequence[Passage], k: int) -> list[int]:
    """The chat prompt asking whether passage ``k`` (1-based) is needed; documents and the
    question are content, never control tokens (:func:`~neocorrag_core.lm.generation.chat_ids`)."""
    listing = "\n".join(f"[{i}] {p.title}: {p.text}" for i, p in enumerate(passages, 1))
    body = (
        f"Question: {question}\n\nPassages:\n{listing}\n\n{INSTRUCTION} "
        f"Is passage [{k}] needed to answer the question? Answer yes or no."
    )
    messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": body}]
    return chat_ids(lm.tokenizer, messages)


def judge(lm: LanguageModel, question: str, passages: Sequence[Passage]) -> tuple[list[float], int]:
    """Each passage's yes-no log-odds, and the length of the prefix the probes share."""
    import torch

    rows = [prompt_ids(lm, question, passages, k) for k in range(1, len(passages) + 1)]
    shared = 0
    while all(len(r) > shared + 1 and r[shared] == rows[0][shared] for r in rows):
        shared += 1
    yes = _answer_ids(lm.tokenizer, ["yes", "Yes", " yes", " Yes"])
    no = _answer_ids(lm.tokenizer, ["no", "No", " no", " No"])
    scores = []
    model = lm.model
    with torch.no_grad():
        prefix = input_ids_tensor(lm, [rows[0][:shared]])
        cache = _output_cache(model(input_ids=prefix, use_cache=True, **_last_logits_only(model)))
        for row in rows:
            out = model(
                input_ids=input_ids_tensor(lm, [row[shared:]]),
                use_cache=True,
                **{_cache_kwarg(model): copy.deepcopy(cache)},
                **_last_logits_only(model),
            )
            logp = torch.log_softmax(out.logits[0, -1].float(), dim=-1)
            scores.append(float(torch.logsumexp(logp[yes], 0) - torch.logsumexp(logp[no], 0)))
    return scores, shared


def _auc(labels: Sequence[bool], scores: Sequence[float]) -> float:
    pos = [s for y, s in zip(labels, scores, strict=True) if y]
    neg = [s for y, s in zip(labels, scores, strict=True) if not y]
    if not pos or not neg:
        return float("nan")
    wins = sum((p > n) + 0.5 * (p == n) for p in pos for n in neg)
    return wins / (len(pos) * len(neg))


def summarize(out: Path, kept: dict[str, dict[str, Any]]) -> None:
    """Print, over the dropped passages, the AUC and the gold / noise won back per threshold,
    for the raw score and for the score relative to the question (minus the mean score of
    the passages the method keeps)."""
    labels: list[bool] = []
    raw: list[float] = []
    relative: list[float] = []
    for record in map(json.loads, out.read_text(encoding="utf-8").splitlines()):
        if record["qid"] not in kept:
            continue
        keep = set(kept[record["qid"]]["context_ids"])
        pairs = list(zip(record["ids"], record["scores"], strict=True))
        kept_scores = [score for pid, score in pairs if pid in keep]
        base = sum(kept_scores) / len(kept_scores) if kept_scores else 0.0
        for pid, score in pairs:
            if pid not in keep:
                labels.append(pid in record["gold"])
                raw.append(score)
                relative.append(score - base)
    print(f"dropped passages: {len(labels)} ({sum(labels)} gold)")
    for name, scores, cuts in (("raw", raw, THRESHOLDS), ("relative", relative, MARGINS)):
        print(f"{name} score: AUC {_auc(labels, scores):.3f}")
        for t in cuts:
            pairs = list(zip(labels, scores, strict=True))
            gold = sum(1 for y, s in pairs if y and s >= t)
            noise = sum(1 for y, s in pairs if not y and s >= t)
            print(f"  >= {t}: +{gold} gold / +{noise} noise")


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", required=True, help="the QA file the run was made on")
    parser.add_argument("--run", required=True, type=Path, help="a neocorrag eval output folder")
    parser.add_argument("--out", required=True, type=Path, help="JSON lines written (resumed)")
    parser.add_argument("--split", choices=SPLITS, help="only this hash half")
    parser.add_argument("--lm", default="qwen-1.5b", help="resolve_lm spec (default: qwen-1.5b)")
    parser.add_argument("--kept-by", default="neocorrag-recall", help="the refining method")
    args = parser.parse_args(argv)

    top = _records(args.run, "none")
    kept = _records(args.run, args.kept_by)
    examples, _ = load_qa(args.data)
    by_id = {e.id: e for e in examples}
    done = set()
    if args.out.exists():
        lines = args.out.read_text(encoding="utf-8").splitlines()
        done = {json.loads(line)["qid"] for line in lines}
    todo = [q for q in top if q not in done and (args.split is None or split_of(q) == args.split)]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    lm = resolve_lm(args.lm) if todo else None
    with args.out.open("a", encoding="utf-8") as sink:
        for qid in tqdm(todo, desc="judging", unit="q"):
            record = top[qid]
            passages_by_id = {p.id: p for p in by_id[qid].passages}
            passages = [passages_by_id[i] for i in record["context_ids"]]
            assert lm is not None  # loaded whenever there is a question to judge
            scores, shared = judge(lm, record["question"], passages)
            row = {
                "qid": qid,
                "ids": record["context_ids"],
                "gold": record["gold_ids"],
                "scores": scores,
                "prompt_tokens": shared,
            }
            sink.write(json.dumps(row) + "\n")
            sink.flush()
    summarize(args.out, kept)


if __name__ == "__main__":
    main()
