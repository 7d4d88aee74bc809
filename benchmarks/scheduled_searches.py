"""What the controller's scheduled searches (``BeliefConfig.min_searches``) retrieve, without
any LM: the evidence a generator would read before its first measurement.

For each question of a split: the top-``k`` for the question (the first search), then the
scheduled searches with the writer's no-LM next-hop query
(:func:`~neocorrag_core.belief.writer.entity_next_query`), each adding its new passages to
an evidence workspace of ``max_evidence``, as the controller does. Reported per variant:
the gold passages in the workspace (evidence recall), the questions whose gold passages
are all in it (complete), the passages read and the searches made. Variants:

* ``order``: ``relation-first`` (EviReform's evidence order) or ``passage`` (the facts
  in passage order, rules ``entity-query-1``);
* ``retry``: whether a scheduled search that added no passage is followed by the next
  query (up to ``max_rounds`` searches) instead of counting towards ``min_searches``. A
  what-if: the controller does not retry (every scheduled search counts); the variant
  measured what a retry would buy, and it bought nothing with the relation-first rules.

The first search is the question's top-``k`` (``--k``, default 5, the eval's ``top_k``),
as the eval's first round; keep the two equal when comparing with eval runs.

Retrieval and triples as ``neocorrag eval --pool corpus`` (the dense MiniLM over the pooled
corpus; ``--triples`` a HippoRAG OpenIE file, ``spacy``, or none: titles and sentences
only). This is how the scheduled-search rules were chosen on the tune halves without
running the generator::

    python benchmarks/scheduled_searches.py \\
        --data ../shared/data/musique/hipporag_musique_train_100.json \\
        --triples ../shared/data/musique/hipporag_musique_train_openie_gpt35.json --split tune

With ``--records`` (a ``belief`` cache file of ``neocorrag eval``, e.g.
``benchmarks/results/eval/belief-2wiki-report-1.5b-all/cache/belief.jsonl``, which is not
committed: benchmarks/results/README.md) it instead rewrites the query of every scheduled
search those episodes made, from the workspace the episode had then, with the current
rules, and lists the queries that would differ: whether records made under older writer
rules still stand for the current ones.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path

from neocorrag_core.belief import EvidenceWorkspace
from neocorrag_core.belief.verifier import PromptBudget
from neocorrag_core.belief.writer import entity_next_query
from neocorrag_core.errors import NeocorragError
from neocorrag_core.eval.datasets import QAExample, load_qa
from neocorrag_core.eval.retrieval import Retriever, pooled_corpus
from neocorrag_core.eval.runner import resolve_triple_source
from neocorrag_core.eval.splits import in_split
from neocorrag_core.models import resolve_embedder
from neocorrag_core.models.bundled import default_cache_dir
from neocorrag_core.triples.base import triples_per_passage
from neocorrag_core.types import Passage, Triple

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the lab and the sibling scripts
from neocorrag_lab.cli_args import at_least_one
from summarize_results import missing_records


@dataclass(frozen=True)
class Variant:
    name: str
    relation_first: bool
    retry: bool


VARIANTS = (
    Variant("passage order (entity-query-1)", relation_first=False, retry=False),
    Variant("passage order + retry", relation_first=False, retry=True),
    Variant("relation-first", relation_first=True, retry=False),
    Variant("relation-first + retry", relation_first=True, retry=True),
)


@dataclass
class Outcome:
    gold_found: int = 0
    gold_total: int = 0
    complete: int = 0
    passages: int = 0
    searches: int = 0
    questions: int = 0

    def add(self, ids: Sequence[str], gold: frozenset[str], searches: int) -> None:
        found = len(gold.intersection(ids))
        self.gold_found += found
        self.gold_total += len(gold)
        self.complete += int(found == len(gold))
        self.passages += len(ids)
        self.searches += searches
        self.questions += 1

    def row(self, name: str) -> str:
        n = max(self.questions, 1)
        return (
            f"| {name} | {100 * self.gold_found / max(self.gold_total, 1):.1f} "
            f"| {100 * self.complete / n:.1f} | {self.passages / n:.2f} | {self.searches / n:.2f} |"
        )


def schedule(
    example: QAExample,
    first: Sequence[Passage],
    search: Callable[[str, int], list[Passage]],
    triples_of: Callable[[Sequence[Passage]], Sequence[Sequence[Triple]]],
    variant: Variant,
    *,
    k: int,
    min_searches: int,
    max_rounds: int,
    max_evidence: int,
) -> tuple[tuple[str, ...], int]:
    """The workspace ids after the scheduled searches, and the searches made."""
    workspace = EvidenceWorkspace(max_evidence)
    workspace.add(first, step=0, reason="question")
    asked, rounds, counted = [example.question], 1, 1
    while counted < min_searches and rounds < max_rounds and workspace.has_room:
        shown = workspace.passages
        query = entity_next_query(
            example.question,
            shown,
            triples_of(shown),
            asked,
            relation_first=variant.relation_first,
        )
        added = workspace.add(search(query, k), step=rounds, reason=query)
        asked.append(query)
        rounds += 1
        counted += 1 if (added.new or not variant.retry) else 0
    return workspace.ids, rounds


def recorded_query_changes(
    records: Sequence[dict],
    passages: dict[str, Passage],
    triples_of: Callable[[Sequence[Passage]], Sequence[Sequence[Triple]]],
) -> tuple[int, list[tuple[str, str, str]]]:
    """The scheduled searches of recorded ``belief`` episodes (eval records, one per
    question) rewritten with the current rules: how many there were, and (question id,
    recorded query, query now) for each that differs. Each query is written from the
    workspace before its step (its first ``PromptBudget().max_passages``, the writer's
    default) and the queries asked before it, as the controller does."""
    shows = PromptBudget().max_passages
    checked, changed = 0, []
    for record in records:
        steps = record["info"]["trajectory"]
        asked = [record["question"]]
        for before, step in pairwise(steps):
            if step["action"] == "retrieve" and step["reason"].startswith("scheduled search"):
                shown = [passages[pid] for pid in before["evidence_ids"][:shows]]
                now = entity_next_query(record["question"], shown, triples_of(shown), asked)
                checked += 1
                if now != step["query"]:
                    changed.append((record["qid"], step["query"], now))
            if step.get("query") and step["action"] in ("retrieve", "rewrite"):
                asked.append(step["query"])
    return checked, changed


_STEP_KEYS = ("action", "reason", "evidence_ids")


def _read_records(path: str, known: Collection[str]) -> list[dict]:
    """The last record per question of an eval cache file, checked against the data
    (``known``: the ids of its passages)."""
    if not Path(path).is_file():
        raise NeocorragError(f"{path}: no such file; {missing_records(path)}")
    latest: dict[str, dict] = {}
    with open(path, encoding="utf-8") as lines:
        for number, line in enumerate(lines, 1):
            try:
                record = json.loads(line)
                steps = record["info"]["trajectory"]
                complete = "qid" in record and "question" in record
                complete = complete and all(key in step for step in steps for key in _STEP_KEYS)
            except (ValueError, KeyError, TypeError):
                complete = False
            if not complete:
                raise NeocorragError(
                    f"{path}, line {number}: not a belief episode record of neocorrag eval; "
                    "pass a cache/belief*.jsonl file of an eval folder"
                )
            if not all(pid in known for step in steps for pid in step["evidence_ids"]):
                raise NeocorragError(
                    f"{path}: question {record['qid']} read passages that --data does not "
                    "hold; pass the data file the records were made from"
                )
            latest[record["qid"]] = record  # a cache file appends; the last one counts
    return list(latest.values())


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", required=True)
    parser.add_argument("--triples", default=None)
    parser.add_argument("--split", choices=("tune", "report"), default="tune")
    parser.add_argument("--limit", type=at_least_one, default=None)
    parser.add_argument("--k", type=at_least_one, default=5)
    parser.add_argument("--min-searches", type=int, default=2)
    parser.add_argument("--max-rounds", type=int, default=4)
    parser.add_argument("--max-evidence", type=int, default=8)
    parser.add_argument(
        "--records",
        default=None,
        help="a belief cache file (.jsonl) of neocorrag eval: check its scheduled queries",
    )
    args = parser.parse_args(argv)

    try:
        examples = load_qa(args.data)[0]
        by_id = {p.id: p for example in examples for p in example.passages}
        records = _read_records(args.records, by_id) if args.records else None
    except (OSError, NeocorragError) as exc:  # the message names the file and the fix
        parser.error(str(exc))
    source = resolve_triple_source(args.triples, "runs/scheduled-searches")

    def triples_of(passages: Sequence[Passage]) -> Sequence[Sequence[Triple]]:
        return triples_per_passage(source, list(passages))

    if records is not None:
        checked, changed = recorded_query_changes(records, by_id, triples_of)
        print(f"{args.records}: {checked} scheduled searches, {len(changed)} queries differ now")
        for qid, recorded, now in changed:
            print(f"- {qid}: {recorded!r} -> {now!r}")
        return 0
    corpus = pooled_corpus(examples)
    chosen = in_split(examples, args.split)[: args.limit]
    retriever = Retriever(
        "dense",
        embedder=resolve_embedder(None),
        pool="corpus",
        corpus=corpus,
        vector_cache=default_cache_dir() / "eval-vectors",
    )

    outcomes = {v.name: Outcome() for v in VARIANTS}
    first_only = Outcome()
    for example in chosen:
        first = retriever.retrieve(example, args.k)
        first_only.add(tuple(p.id for p in first), example.gold_ids, 1)
        search = retriever.search_fn(example)
        for variant in VARIANTS:
            ids, rounds = schedule(
                example,
                first,
                search,
                triples_of,
                variant,
                k=args.k,
                min_searches=args.min_searches,
                max_rounds=args.max_rounds,
                max_evidence=args.max_evidence,
            )
            outcomes[variant.name].add(ids, example.gold_ids, rounds)
    print(f"{args.data} ({args.split}, {len(chosen)} questions, min_searches={args.min_searches})")
    print("| variant | evidence recall | complete | passages read | searches |")
    print("|---|---:|---:|---:|---:|")
    print(first_only.row("first search only"))
    for name, outcome in outcomes.items():
        print(outcome.row(name))
    return 0


if __name__ == "__main__":
    sys.exit(main())
