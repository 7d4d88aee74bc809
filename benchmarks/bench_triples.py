"""Triple extraction quality and throughput (docs/triples.md has the numbers and commands).

Quality on 2WikiMultihopQA: for each question, extract triples from its gold passages and
count the gold ``evidences`` triples recovered. Agreement on MuSiQue: the same match
against the GPT-3.5 OpenIE triples HippoRAG shipped. Throughput: passages per second of
extraction (models loaded and warmed up first).

Matching (documented in docs/triples.md):
* lenient: relation ignored; head and tail of the reference triple each match an entity of
  one extracted triple, in either direction. Entities match when, after
  ``normalize_entity`` and dropping "the/a/an", the word set of one contains the other's.
* strict: same direction, both entities equal after ``normalize_entity``.

The first ``--dev-questions`` 2Wiki questions with context were read while the spaCy rules
were written; they are excluded, and the rest are the held-out set reported here.

Extractors: ``spacy`` (the default, run through ``FastPipeline``), ``spacy-plain`` (the same
rules over spaCy's own ``nlp.pipe``, as before ``FastPipeline``), ``llm``. With
``--identity``, every spaCy extractor named also extracts all 2Wiki context passages
(gold or not), and the table says whether their triples are identical.

    python benchmarks/bench_triples.py --out docs/triples_bench.md
    python benchmarks/bench_triples.py --extractors spacy-plain,spacy --identity
"""

from __future__ import annotations

import argparse
import json
import logging
import re
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from neocorrag_core.text.entities import normalize_entity
from neocorrag_core.types import Passage, Triple

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the lab, when not installed
from neocorrag_lab.cli_args import at_least_one, at_least_zero

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "data"
ARTICLES = {"the", "a", "an"}


def words(entity: str) -> frozenset[str]:
    """Word set of an entity after normalization, without articles."""
    return frozenset(re.findall(r"\w+", normalize_entity(entity))) - ARTICLES


def entity_match(a: str, b: str) -> bool:
    """Lenient entity match: one word set contains the other (both non-empty)."""
    wa, wb = words(a), words(b)
    return bool(wa) and bool(wb) and (wa <= wb or wb <= wa)


def lenient_match(ref: Sequence[str], triple: Triple) -> bool:
    """Head and tail of ``ref`` match the two entities of ``triple``, in either direction."""
    h, t = ref[0], ref[2]
    s, o = triple.subject, triple.object
    return (entity_match(h, s) and entity_match(t, o)) or (
        entity_match(h, o) and entity_match(t, s)
    )


def strict_match(ref: Sequence[str], triple: Triple) -> bool:
    """Same direction, both entities equal after ``normalize_entity``."""
    return normalize_entity(ref[0]) == normalize_entity(triple.subject) and normalize_entity(
        ref[2]
    ) == normalize_entity(triple.object)


def load_2wiki(path: Path, dev: int) -> list[dict[str, Any]]:
    """Held-out 2Wiki questions with context, each with its gold passages."""
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]
    rows = [r for r in rows if r.get("context") and r.get("evidences")][dev:]
    out = []
    for r in rows:
        gold = {t for t, _ in r["supporting_facts"]}
        passages = [
            Passage(id=title, title=title, text=" ".join(sents))
            for title, sents in r["context"]
            if title in gold
        ]
        out.append({"question": r["question"], "evidences": r["evidences"], "passages": passages})
    return out


def timed_extract(extractor: Any, passages: list[Passage], batch: int) -> tuple[dict, float, float]:
    """Triples per passage title+text, and the extraction seconds, wall and CPU (of this
    process), after a warm-up."""
    # Load models and build indexes outside the clock, on a passage not in the test set.
    extractor.extract([Passage("warm-up", title="Oslo", text="Oslo is the capital of Norway.")])
    unique: dict[tuple[str, str], Passage] = {}
    for p in passages:
        unique.setdefault((p.title, p.text), p)
    todo = list(unique.values())
    started, cpu = time.perf_counter(), time.process_time()
    found: dict[tuple[str, str], list[Triple]] = {}
    for i in range(0, len(todo), batch):
        chunk = todo[i : i + batch]
        for p, triples in zip(chunk, extractor.extract(chunk), strict=True):
            found[(p.title, p.text)] = triples
        print(f"  {min(i + batch, len(todo))}/{len(todo)} passages", file=sys.stderr, flush=True)
    return found, time.perf_counter() - started, time.process_time() - cpu


def all_2wiki_passages(path: Path) -> list[Passage]:
    """Every context passage of the 2Wiki rows that have one, gold or not (unique)."""
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]
    unique: dict[tuple[str, str], Passage] = {}
    for r in rows:
        for title, sents in r.get("context") or []:
            p = Passage(id=title, title=title, text=" ".join(sents))
            unique.setdefault((p.title, p.text), p)
    return list(unique.values())


def score_2wiki(questions: list[dict], found: dict) -> dict[str, float]:
    """Recall of gold evidences (lenient, strict) and triples per passage."""
    total = lenient = strict = 0
    for q in questions:
        triples = [t for p in q["passages"] for t in found[(p.title, p.text)]]
        for ev in q["evidences"]:
            total += 1
            lenient += any(lenient_match(ev, t) for t in triples)
            strict += any(strict_match(ev, t) for t in triples)
    n_passages = len(found)
    return {
        "questions": len(questions),
        "evidences": total,
        "lenient": lenient / total,
        "strict": strict / total,
        "passages": n_passages,
        "triples_per_passage": sum(len(v) for v in found.values()) / n_passages,
    }


def load_musique_openie(path: Path, n: int) -> list[tuple[Passage, list[list[str]]]]:
    """The first ``n`` OpenIE docs with their reference (GPT-3.5) triples."""
    docs = json.loads(path.read_text(encoding="utf-8"))["docs"][:n]
    return [
        (Passage(id=str(i), title=d["title"], text=d["text"]), d["extracted_triples"])
        for i, d in enumerate(docs)
    ]


def score_agreement(items: list[tuple[Passage, list]], found: dict) -> dict[str, float]:
    """Share of reference triples we recover, and of our triples the reference has (lenient)."""
    ref_total = ref_hit = ours_total = ours_hit = 0
    for passage, refs in items:
        refs = [r for r in refs if isinstance(r, list) and len(r) == 3]
        ours = found[(passage.title, passage.text)]
        ref_total += len(refs)
        ref_hit += sum(any(lenient_match(r, t) for t in ours) for r in refs)
        ours_total += len(ours)
        ours_hit += sum(any(lenient_match(r, t) for r in refs) for t in ours)
    return {
        "passages": len(items),
        "recall": ref_hit / max(ref_total, 1),
        "precision": ours_hit / max(ours_total, 1),
    }


def make_extractor(kind: str, args: argparse.Namespace) -> Any:
    """A spaCy (fast or plain) or (constrained / unconstrained) LLM extractor."""
    if kind in ("spacy", "spacy-plain"):
        from neocorrag_core.triples.spacy_extractor import SpacyTripleExtractor

        return SpacyTripleExtractor(fast=kind == "spacy")
    from neocorrag_core.triples.llm_extractor import LLMTripleExtractor

    return LLMTripleExtractor(args.lm, batch_size=args.llm_batch_size)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark and write the markdown table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--wiki", default=str(SHARED / "2wikimultihopqa/migres_2wiki_dev_200.jsonl")
    )
    parser.add_argument(
        "--openie", default=str(SHARED / "musique/hipporag_musique_train_openie_gpt35.json")
    )
    parser.add_argument("--dev-questions", type=at_least_zero, default=20)
    parser.add_argument(
        "--max-questions", type=at_least_one, default=None, help="for every extractor"
    )
    parser.add_argument("--llm-questions", type=at_least_one, default=30)
    parser.add_argument("--musique-passages", type=at_least_one, default=300, help="for spaCy")
    parser.add_argument("--llm-musique-passages", type=at_least_one, default=30)
    parser.add_argument("--lm", default=None, help="LLM extractor model (default: bundled 0.5B)")
    parser.add_argument("--llm-batch-size", type=at_least_one, default=4)
    parser.add_argument("--extractors", default="spacy,llm", help="spacy, spacy-plain, llm")
    parser.add_argument(
        "--identity", action="store_true", help="spaCy extractors: same triples on all of 2Wiki?"
    )
    parser.add_argument("--out", default=str(ROOT / "docs" / "triples_bench.md"))
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.ERROR)

    try:
        questions = load_2wiki(Path(args.wiki), args.dev_questions)[: args.max_questions]
        musique = load_musique_openie(Path(args.openie), args.musique_passages)
    # ValueError covers bad JSON; KeyError, TypeError and AttributeError JSON of another shape.
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        parser.error(f"cannot read the data ({type(exc).__name__}: {exc})")
    rows = []
    spacy_outputs: dict[str, list[list[tuple[str, str, str]]]] = {}
    for kind in args.extractors.split(","):
        extractor = make_extractor(kind, args)
        spacy = kind.startswith("spacy")
        qs = questions if spacy else questions[: args.llm_questions]
        mq = musique if spacy else musique[: args.llm_musique_passages]
        print(f"{kind}: 2Wiki {len(qs)} questions", file=sys.stderr)
        found, seconds, cpu = timed_extract(
            extractor, [p for q in qs for p in q["passages"]], 64 if spacy else 4
        )
        wiki = score_2wiki(qs, found)
        print(f"{kind}: 2Wiki {wiki}, {wiki['passages'] / seconds:.3f} passages/s", file=sys.stderr)
        print(f"{kind}: MuSiQue {len(mq)} passages", file=sys.stderr)
        found_m, _, _ = timed_extract(extractor, [p for p, _ in mq], 64 if spacy else 4)
        agree = score_agreement(mq, found_m)
        if spacy and args.identity:
            every = all_2wiki_passages(Path(args.wiki))
            found_all, _, _ = timed_extract(extractor, every, 64)
            spacy_outputs[kind] = [
                [t.key() for t in found_all[(p.title, p.text)]] for p in every
            ] + [[t.key() for t in ts] for ts in found.values()]
        stats = getattr(extractor, "stats", None)
        rows.append(
            {
                "extractor": f"{kind} ({extractor.extractor_id}@{extractor.version})",
                **{f"wiki_{k}": v for k, v in wiki.items()},
                "passages_per_s": wiki["passages"] / seconds,
                "passages_per_cpu_s": wiki["passages"] / cpu,
                **{f"musique_{k}": v for k, v in agree.items()},
                "stats": vars(stats) if stats is not None else None,
            }
        )
        print(json.dumps(rows[-1], indent=1), file=sys.stderr)

    lines = [
        "| extractor | 2Wiki questions (passages) | gold evidences | recall, lenient | "
        "recall, strict | triples/passage | passages/s | MuSiQue passages | "
        "GPT-3.5 triples recovered | ours found in GPT-3.5 |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['extractor']} | {r['wiki_questions']} ({r['wiki_passages']}) | "
            f"{r['wiki_evidences']} | {r['wiki_lenient']:.1%} | {r['wiki_strict']:.1%} | "
            f"{r['wiki_triples_per_passage']:.1f} | {r['passages_per_s']:.2f} | "
            f"{r['musique_passages']} | {r['musique_recall']:.1%} | {r['musique_precision']:.1%} |"
        )
    for r in rows:
        if r["stats"]:
            lines.append(f"\n{r['extractor']} counters: {r['stats']}")
    for r in rows:
        lines.append(f"\n{r['extractor']}: {r['passages_per_cpu_s']:.2f} passages per CPU-second")
    if len(spacy_outputs) > 1:
        outputs = list(spacy_outputs.values())
        same = all(out == outputs[0] for out in outputs)
        lines.append(
            f"\nIdentical triples from {', '.join(spacy_outputs)} on all "
            f"{len(all_2wiki_passages(Path(args.wiki)))} 2Wiki context passages: "
            f"{'yes' if same else 'NO'}"
        )
    table = "\n".join(lines) + "\n"
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(table, encoding="utf-8")
    print(table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
