"""The ``neocorrag`` command line.

* ``neocorrag demo``: mine evidence chains on five bundled MuSiQue questions and show what
  is kept, dropped and why;
* ``neocorrag eval``: the benchmark harness (:mod:`neocorrag_core.eval`);
* ``neocorrag index``: extract the triples of a corpus into a triple store, resumably;
* ``neocorrag doctor``: the CPU, the LM float format chosen for it and why, the threads;
* ``neocorrag --version``.

Errors the user can fix (bad input, a missing extra, a missing file, an unusable store:
every :class:`~neocorrag_core.errors.NeocorragError`, and OS errors such as a full disk,
said with the file and the fix: :mod:`neocorrag_core.cli.failures`) print one line and exit
with status 2. Output whose reader closed it early (``neocorrag store stats | head -1``)
ends the command quietly, with status 0.
"""

from __future__ import annotations

import argparse
import json
import logging
import sqlite3
import sys
import textwrap
import time
from collections.abc import Sequence
from dataclasses import replace
from importlib import resources
from pathlib import Path
from typing import Any

from neocorrag_core import __version__
from neocorrag_core.chains.config import KEEP_MODES, MinerConfig
from neocorrag_core.chains.miner import EvidenceChainMiner
from neocorrag_core.cli.failures import error_line, quiet_stdout, watch_stdout
from neocorrag_core.cli.index import add_index_parser, at_least_one
from neocorrag_core.errors import NeocorragError
from neocorrag_core.formats import DataFormatError, read_json_or_lines
from neocorrag_core.rendering import chain_text, render_passages, result_context
from neocorrag_core.types import KeepReason, MiningResult, Passage

RULE = "=" * 78

DEMO_SHAPE = (
    'a non-empty list of questions (or {"questions": [...]}), each {"question": "...", '
    '"paragraphs": [{"id": ..., "text": "...", "title"?: "...", "is_supporting"?: bool, '
    '"triples"?: [[subject, relation, object], ...]}, ...]}, as in the bundled sample'
)
"""What ``neocorrag demo --data`` reads (the MuSiQue shape); quoted by its errors."""


def load_demo_questions(path: str | Path | None = None) -> list[dict[str, Any]]:
    """The bundled MuSiQue sample, or a file in the same format (see data/README.md).

    The shape is checked up front (:data:`DEMO_SHAPE`), so a wrong file fails here with a
    :class:`~neocorrag_core.formats.DataFormatError` naming it, not later with a KeyError.
    """
    if path is None:
        bundled = resources.files("neocorrag_core").joinpath("data/demo_questions.json")
        data = json.loads(bundled.read_text(encoding="utf-8"))
        origin = "the bundled demo data"
    else:
        data = read_json_or_lines(path, what="demo data file")
        origin = str(Path(path).expanduser())
    questions = data.get("questions") if isinstance(data, dict) else data
    if not isinstance(questions, list) or not questions:
        if questions == []:
            found = "an empty list of questions"
        elif isinstance(data, dict) and "questions" in data:
            found = f'a "questions" entry that is {_json_kind(questions)}'
        else:
            found = _json_kind(data)
        raise DataFormatError(f"{origin} holds {found}; the demo reads {DEMO_SHAPE}")
    for number, item in enumerate(questions, start=1):
        problem = _demo_question_problem(item)
        if problem is not None:
            raise DataFormatError(
                f"{origin}: question {number} {problem}; the demo reads {DEMO_SHAPE}"
            )
    return questions


def _json_kind(value: Any) -> str:
    if isinstance(value, dict):
        return f"a JSON object with keys {sorted(value)[:6]}"
    kinds = {list: "array", str: "string", bool: "boolean", int: "number", float: "number"}
    return f"a JSON {kinds.get(type(value), 'null' if value is None else type(value).__name__)}"


def _demo_question_problem(item: Any) -> str | None:
    """What is wrong with one demo question (``None``: nothing); run_demo's every access."""
    if not isinstance(item, dict):
        return f"is {_json_kind(item)}, not an object"
    question = item.get("question")
    if not isinstance(question, str) or not question.strip():
        return 'has no "question" text'
    paragraphs = item.get("paragraphs")
    if not isinstance(paragraphs, list) or not paragraphs:
        return 'has no "paragraphs" list (MuSiQue shape)'
    for k, para in enumerate(paragraphs, start=1):
        if not isinstance(para, dict):
            return f"paragraph {k} is {_json_kind(para)}, not an object"
        if not isinstance(para.get("id"), (str, int)) or isinstance(para.get("id"), bool):
            return f'paragraph {k} has no "id" (a string or number)'
        if not isinstance(para.get("text"), str):
            return f'paragraph {k} has no "text" string'
        if not isinstance(para.get("title", ""), str):
            return f'paragraph {k} has a "title" that is not a string'
        if not isinstance(para.get("triples", []), list):
            return f'paragraph {k} has "triples" that are not a list'
    return None


def dense_top_k(embedder: Any, question: str, passages: Sequence[Passage], k: int) -> list[Passage]:
    """Plain dense retrieval (cosine of ``title: text``), standing in for the user's retriever."""
    query_vec = embedder.embed([question])[0]
    doc_vecs = embedder.embed(render_passages(passages))
    order = sorted(range(len(passages)), key=lambda i: -float(doc_vecs[i] @ query_vec))
    return [passages[i] for i in order[:k]]


def _short(text: str, width: int) -> str:
    return textwrap.shorten(" ".join(text.split()), width=width, placeholder=" ...")


def _format_seconds(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms" if seconds < 1 else f"{seconds:.2f} s"


def _gold_ids(item: dict[str, Any]) -> set[str]:
    """The ids of a demo question's supporting paragraphs, as the ``Passage`` ids they get
    (strings: a data file may give numbers)."""
    return {str(p["id"]) for p in item["paragraphs"] if p.get("is_supporting")}


_CHOSEN_BY = {
    "none": "best search scores, no LM decoding",
    "beam": "chosen by the LM's constrained beam search",
    "rank": "chosen by the LM, which scored every candidate",
}
"""How the demo says which ``MinerConfig.decoding`` picked the chains."""

_SEEDS_BY = {
    "per_entity": "none matched the question's entities as a whole: each one's closest nodes",
    "query": "none matched the question's entities: the nodes closest to the whole question",
}
"""What each seed fallback (``MiningResult.seed_fallback``) did, in words."""

_NO_CHAIN_BECAUSE = {
    "no_triples": "the passages hold no extracted facts (triples)",
    "no_seed_nodes": "no fact names what the question names",
    "no_candidate_chains": "the search found no chain of facts that fits the question",
    "decoding_returned_no_chain": "the LM chose no chain",
}
"""Why no chain was found (``MiningResult.fallback``), in words."""


def print_result(
    index: int,
    total: int,
    item: dict[str, Any],
    retrieved: list[Passage],
    result: MiningResult,
    decoding: str,
    out: Any = None,
    *,
    keep: str = "recall",
) -> None:
    """Show one question's run: retrieval, chains, what was kept or dropped and why, timings
    (``keep``: the keep mode, which says why a passage was dropped)."""
    gold = _gold_ids(item)

    def mark(passage: Passage) -> str:
        return " [gold]" if passage.id in gold else ""

    stream = out if out is not None else sys.stdout

    def w(line: str = "") -> None:
        print(line, file=stream)

    w(RULE)
    w(f"Question {index}/{total}: {item['question']}")
    w(f"Reference answer: {item.get('answer', '?')}")
    w(RULE)
    w(f"Retrieved passages (dense top-{len(retrieved)} of {len(item['paragraphs'])}):")
    for rank, p in enumerate(retrieved, start=1):
        n = len(p.metadata.get("triples") or [])
        w(f"  [{rank}] {p.title}{mark(p)} ({n} triples): {_short(p.text, 70)}")
    named = ", ".join(result.query_entities) or "none named in the question"
    w(f"Query entities: {named}")
    w(f"Seed nodes (where the chain search starts): {', '.join(result.seed_nodes) or '-'}")
    if result.seed_fallback:
        w(f"  ({_SEEDS_BY.get(result.seed_fallback, result.seed_fallback)})")
    w(f"Candidate chains found: {result.num_candidates}")
    top = f"the top {result.top_n}" if result.top_n is not None else "the best-ranked"
    if result.fallback:
        because = _NO_CHAIN_BECAUSE.get(result.fallback, result.fallback)
        if all(k.reason is KeepReason.PASSTHROUGH for k in result.kept):
            w(f"No filtering ({because}): the retrieved passages pass through unchanged")
        else:
            w(f"No evidence chain ({because}): kept {top} by rank and the linked passages")
    for note in result.notes:
        w(f"Note: {note}")
    if result.chains:
        w(f"Evidence chains found ({_CHOSEN_BY.get(decoding, decoding)}):")
    for i, chain in enumerate(result.chains, start=1):
        lm = f", LM log-prob/token {chain.lm_logprob:.2f}" if chain.lm_logprob is not None else ""
        w(f"  {i}. {chain.text}")
        w(f"     (search score {chain.search_score:.3f}{lm})")
    w("Kept:")
    for kept in result.kept:
        cut = ""
        if kept.full_text is not None:
            cut = f"; cut to its evidence sentences ({len(kept.passage.text)} of "
            cut += f"{len(kept.full_text)} chars)"
        why = kept.explain(result.top_n)
        w(f"  [{kept.rank}] {kept.passage.title}{mark(kept.passage)}: {why}{cut}")
    w("Dropped:")
    unlinked = "no chain cites it" if keep == "paper" else "nothing links it to the question"
    for dropped in result.dropped or []:
        title = f"{dropped.passage.title}{mark(dropped.passage)}"
        w(f"  [{dropped.rank}] {title}: below {top} by rank, and {unlinked}")
    if not result.dropped:
        w("  (none)")
    if result.chains and result.chain_format == "none":
        w("Chain block: none (chain_format='none'): the reader gets the kept passages alone;")
        w("  the chains stay in the result and the adapters' metadata")
    elif result.chains and not chain_text(result) and result.chain_format == "linking":
        w("Chain block: none (each chosen chain is a fact one kept passage states whole)")
    every_line = chain_text(replace(result, max_chain_lines=None))
    if every_line != chain_text(result):
        total = len(every_line.splitlines()) - 1
        w(f"Chain block: its first {result.max_chain_lines} of {total} lines (max_chain_lines)")
    context = result_context(result)
    before = _passage_chars(retrieved)
    w(f"Answer-ready context ({len(context)} chars; the retrieved passages were {before}):")
    for line in context.splitlines():
        w("  | " + _short(line, 110) if line else "  |")
    timings = " | ".join(f"{k} {_format_seconds(v)}" for k, v in result.timings.items())
    w(f"Timings: {timings}")
    if result.prompt_tokens or result.generated_tokens:
        w(f"LM tokens: {result.prompt_tokens} prompt, {result.generated_tokens} generated")
    w()


def _passage_chars(passages: Sequence[Passage]) -> int:
    """Characters of ``passages`` as a context would hold them ("title: text", one each)."""
    return sum(len(p.text) + len(p.title) + 2 for p in passages)


def run_demo(args: argparse.Namespace) -> int:
    """Run the miner on the bundled sample with the default (or given) models."""
    questions = load_demo_questions(args.data)[: args.questions]
    config = MinerConfig(decoding=args.decoding, keep=args.keep)
    miner = EvidenceChainMiner(config, embedder=args.embedder, lm=args.lm, show_progress=True)
    print("Preparing the embedder ...", file=sys.stderr, flush=True)
    started = time.perf_counter()
    miner.embedder.embed(["warm-up"])
    print(f"  ready in {time.perf_counter() - started:.1f} s", file=sys.stderr)
    if config.decoding != "none":
        print(
            "Preparing the LM (the bundled one is converted once on its first run, saying "
            "what that costs before it starts; later runs load it in seconds) ...",
            file=sys.stderr,
            flush=True,
        )
        started = time.perf_counter()
        lm = miner.lm
        seconds = time.perf_counter() - started
        dtype = str(getattr(lm.model, "dtype", "")).removeprefix("torch.")
        print(f"  {lm.name} ready in {seconds:.1f} s, {dtype}", file=sys.stderr)
        print(f"  float format: {lm.dtype_reason}", file=sys.stderr)
    kept_gold = retrieved_gold = kept_total = retrieved_total = 0
    chars_before = chars_after = 0
    for i, item in enumerate(questions, start=1):
        passages = [
            Passage(
                id=str(p["id"]),
                text=p["text"],
                title=p.get("title", ""),
                metadata={"triples": p.get("triples", [])},
            )
            for p in item["paragraphs"]
        ]
        retrieved = dense_top_k(miner.embedder, item["question"], passages, args.top_k)
        result = miner.mine(item["question"], retrieved)
        print_result(i, len(questions), item, retrieved, result, config.decoding, keep=config.keep)
        gold = _gold_ids(item)
        retrieved_gold += len(gold & {p.id for p in retrieved})
        kept_gold += len(gold & {p.id for p in result.passages})
        retrieved_total += len(retrieved)
        kept_total += len(result.passages)
        chars_before += _passage_chars(retrieved)
        chars_after += len(result_context(result))
    n = len(questions)
    print(RULE)
    print(
        f"Summary over {n} question(s): passages to the reader {retrieved_total / n:.1f} -> "
        f"{kept_total / n:.1f} per question; gold passages kept {kept_gold}/{retrieved_gold} "
        f"of those retrieved; context {chars_before:,} -> {chars_after:,} characters."
    )
    return 0


def _assignments(items: Sequence[str] | None, flag: str) -> dict[str, Any]:
    """``["tau_edge=0.3", "decoding=rank"]`` -> ``{"tau_edge": 0.3, "decoding": "rank"}``
    (values are read as JSON where they parse, else kept as text)."""
    out: dict[str, Any] = {}
    for item in items or ():
        key, sep, raw = item.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"{flag} takes KEY=VALUE, got {item!r}")
        try:
            out[key.strip()] = json.loads(raw)
        except json.JSONDecodeError:
            out[key.strip()] = raw
    return out


def run_eval(args: argparse.Namespace) -> int:
    """Run (or resume) the benchmark and print where the report is."""
    from neocorrag_core.eval.runner import EvalSettings, run_evaluation

    methods = tuple(m for item in args.methods for m in item.split(",") if m)
    settings = EvalSettings(
        data=args.data,
        out=args.out,
        methods=methods,
        limit=args.limit,
        split=args.split,
        top_k=args.top_k,
        pool=args.pool,
        corpus=args.corpus,
        retriever=args.retriever,
        vector_store=args.vector_store,
        collection=args.collection,
        reader=args.reader,
        lm=args.lm,
        embedder=args.embedder,
        triples=args.triples,
        max_new_tokens=args.max_new_tokens,
        embeddings_threshold=args.embeddings_threshold,
        seed=args.seed,
        bootstrap=args.bootstrap,
        plots=not args.no_plots,
        contexts_from=args.contexts_from,
        miner_overrides=_assignments(args.miner, "--miner"),
        evireform_overrides=_assignments(args.evireform, "--evireform"),
        belief_overrides=_assignments(args.belief, "--belief"),
    )
    results = run_evaluation(settings)
    out = Path(args.out)
    print(
        f"{results['questions_compared']} question(s) compared; report: {out / 'report.md'} "
        f"(browse it question by question: {out / 'report.html'})"
    )
    print((out / "report.md").read_text(encoding="utf-8"))
    return 0


def add_eval_parser(sub: Any) -> None:
    """The ``neocorrag eval`` subcommand."""
    from neocorrag_core.eval.registry import BUILTIN_METHODS, available_methods
    from neocorrag_core.eval.runner import DEFAULT_METHODS

    known = available_methods()
    extra = len(known) - len(BUILTIN_METHODS)
    plugins = f", and {extra} from installed plug-ins (--methods NAME)" if extra > 0 else ""
    ev = sub.add_parser(
        "eval",
        help="benchmark the methods on a QA file: quality, noise, tokens, latency",
        description="Retrieve the top-k passages per question, refine them with each method, "
        "answer with the same reader, and write results.json, report.md, report.html and "
        "plots to --out. "
        "Finished (method, question) pairs are cached there, so a rerun resumes. "
        f"Methods: {', '.join(spec.name for spec in BUILTIN_METHODS)}{plugins}.",
    )
    ev.add_argument(
        "--data",
        required=True,
        help="QA file: HotpotQA, 2Wiki, MuSiQue (detected), or your own questions (JSON lines, "
        "JSON or CSV with question, answers, optional gold_ids / gold_titles: docs/eval.md)",
    )
    ev.add_argument("--out", required=True, help="output folder (cache, results, report, plots)")
    ev.add_argument("--limit", type=int, default=None, help="first N usable questions only")
    ev.add_argument(
        "--split",
        choices=["tune", "report"],
        default=None,
        help="only that half of the questions (fixed by a hash of the question id; tune "
        "settings on 'tune', report numbers on 'report')",
    )
    ev.add_argument(
        "--miner",
        action="append",
        metavar="KEY=VALUE",
        help="a MinerConfig field for the neocorrag methods, e.g. --miner prompt_context=sentences",
    )
    ev.add_argument(
        "--evireform",
        action="append",
        metavar="KEY=VALUE",
        help="a ReformulationConfig field for the EviReform methods",
    )
    ev.add_argument(
        "--belief",
        action="append",
        metavar="KEY=VALUE",
        help="a BeliefConfig field for the evidence-state controller's methods (belief, and "
        "the lab's baselines and ablations), e.g. --belief max_rounds=3",
    )
    ev.add_argument(
        "--methods",
        nargs="+",
        default=list(DEFAULT_METHODS),
        help="methods to compare (space or comma separated; default: "
        + " ".join(DEFAULT_METHODS)
        + "; every method is listed above: belief runs when named, evireform is best with "
        "--pool corpus; the ablations, paper variants and peer baselines are the "
        "development lab's: pip install -e benchmarks in a checkout, docs/development.md)",
    )
    ev.add_argument(
        "--top-k", type=at_least_one, default=5, help="passages retrieved per question (default: 5)"
    )
    ev.add_argument(
        "--pool",
        choices=["per-question", "corpus"],
        default="per-question",
        help="retrieve from each question's own passages or from one corpus (default: "
        "per-question)",
    )
    ev.add_argument(
        "--corpus",
        default=None,
        help="corpus file for --pool corpus (default: the union of every question's passages)",
    )
    ev.add_argument(
        "--retriever", choices=["dense", "bm25"], default="dense", help="(default: dense)"
    )
    ev.add_argument(
        "--vector-store",
        metavar="DIR",
        help="with --pool corpus: keep the pooled corpus in a persistent Chroma collection "
        "under DIR (built on first use, reopened after) and retrieve through it; with "
        "--collection: your own Chroma store's folder (needs the chroma extra)",
    )
    ev.add_argument(
        "--collection",
        metavar="NAME",
        default=None,
        help="retrieve from your own collection NAME in --vector-store DIR, as it is (queries "
        "embedded with --embedder: the one the collection was built with; default the "
        "bundled MiniLM, i.e. NeocorRAGEmbeddings)",
    )
    ev.add_argument(
        "--reader",
        default="default",
        help="reader LM: 'default' (0.5B), 'qwen-1.5b' (the reader-1-5b extra), "
        "a local model folder, or 'none' (measure the contexts only: no EM/F1, fast)",
    )
    ev.add_argument("--lm", default=None, help="decoding/filter LM (default: the bundled 0.5B)")
    ev.add_argument("--embedder", default=None, help="sentence-transformers name or path")
    ev.add_argument(
        "--triples",
        default=None,
        help="a HippoRAG OpenIE file, or 'spacy' (extract, cached in --out)",
    )
    ev.add_argument("--max-new-tokens", type=int, default=20, help="reader answer length cap")
    ev.add_argument(
        "--embeddings-threshold",
        type=float,
        default=0.5,
        help="similarity threshold of the EmbeddingsFilter peer (a plug-in method)"
        if "lc-embeddings-filter" in known
        else argparse.SUPPRESS,
    )
    ev.add_argument("--seed", type=int, default=0, help="bootstrap seed")
    ev.add_argument("--bootstrap", type=int, default=2000, help="bootstrap resamples")
    ev.add_argument(
        "--contexts-from",
        default=None,
        help="out folder of an earlier run with the same settings: replay its methods' "
        "contexts and run only the reader (e.g. to compare readers)",
    )
    ev.add_argument("--no-plots", action="store_true", help="skip the PNG plots")
    ev.add_argument("-v", "--verbose", action="store_true", help="log what the engine does")
    ev.set_defaults(func=run_eval)


def run_doctor(args: argparse.Namespace) -> int:
    """Print what this machine runs the LMs with: CPU, float format and why, threads, and
    whether the bundled LM is converted (converting it, with its cost said first and progress
    on stderr, when its parts are installed and it is not yet)."""
    from neocorrag_core.models import MissingDependencyError, bundled_lm_path, default_cache_dir
    from neocorrag_core.models.cpu import choose_cpu_dtype, cpu_info, describe

    if args.probe:  # forget the cached probe so the formats are timed again
        (default_cache_dir() / "cpu-dtype-probe.json").unlink(missing_ok=True)
    info = cpu_info()
    report = describe(choose_cpu_dtype(info), info)
    try:
        converted = bundled_lm_path(show_progress=True)
        report["bundled LM"] = f"converted at {converted}"
    except MissingDependencyError as exc:
        report["bundled LM"] = (
            f"not installed (the default, decoding='none', loads no LM; only the LM features "
            f"need it): {exc}"
        )
    except (ImportError, OSError, RuntimeError) as exc:
        report["bundled LM"] = f"not available ({exc})"
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        width = max(len(k) for k in report)
        for key, value in report.items():
            print(f"{key:<{width}}  {value}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    """The ``neocorrag`` argument parser."""
    parser = argparse.ArgumentParser(
        prog="neocorrag",
        description="Evidence-chain refinement of retrieved context (NeocorRAG).",
    )
    parser.add_argument("--version", action="version", version=f"neocorrag {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser(
        "demo",
        help="mine evidence chains on bundled multi-hop questions with the default models",
        description="Retrieve the top-k paragraphs of a few bundled MuSiQue questions, mine "
        "evidence chains, and show which passages are kept or dropped and why.",
    )
    demo.add_argument(
        "--decoding",
        choices=["beam", "rank", "none"],
        default="none",
        help="stage b: search scores only (default, no LM), or the LM's constrained beam "
        "search or exact ranking",
    )
    demo.add_argument(
        "--keep",
        choices=list(KEEP_MODES),
        default="recall",
        help="the recall/noise dial of stage c (default: recall)",
    )
    demo.add_argument(
        "--questions", type=at_least_one, default=5, help="how many questions (default 5)"
    )
    demo.add_argument(
        "--top-k", type=at_least_one, default=5, help="passages retrieved per question"
    )
    demo.add_argument("--lm", default=None, help="HF id or local path of the decoding LM")
    demo.add_argument("--embedder", default=None, help="sentence-transformers name or path")
    demo.add_argument("--data", default=None, help="a JSON file in the demo sample's format")
    demo.add_argument("-v", "--verbose", action="store_true", help="log what the engine does")
    demo.set_defaults(func=run_demo)
    add_eval_parser(sub)
    add_index_parser(sub)
    from neocorrag_core.cli.store import add_store_parser

    add_store_parser(sub)
    doctor = sub.add_parser(
        "doctor",
        help="show the CPU, the LM float format chosen for it and why, and the threads",
        description="Print the CPU's model and bf16 flags, the float format LMs load in "
        "(with the reason: capability, timed probe or NEOCORRAG_DTYPE), torch threads, and "
        "whether the bundled LM is converted (converting it once if its parts, the "
        "bundled-lm extra, are installed: about 1-3 minutes and ~3 GB RAM, said before it "
        "starts, with progress on stderr).",
    )
    doctor.add_argument("--probe", action="store_true", help="time both formats again")
    doctor.add_argument("--json", action="store_true", help="print the report as JSON")
    doctor.set_defaults(func=run_doctor)
    return parser


_REPORTED = (NeocorragError, ImportError, OSError, ValueError, RuntimeError, sqlite3.Error)
"""What ``main`` prints as one line and exit 2: neocorrag's errors, the built-in ones they
also are, and OS and SQLite errors nothing below explained (a full disk)."""


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``neocorrag`` console script."""
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.INFO if getattr(args, "verbose", False) else logging.WARNING,
        format="%(levelname)s %(name)s: %(message)s",
    )
    with watch_stdout() as stdout:
        try:
            code = int(args.func(args))
            sys.stdout.flush()  # a closed pipe or a full disk fails here, not at the exit
            return code
        except _REPORTED as exc:
            out = stdout is not None and stdout.raised(exc)
            if out:
                quiet_stdout()  # what stdout still holds cannot be written: drop it
                if isinstance(exc, BrokenPipeError):
                    return 0  # its reader closed it (`| head -1`): it has what it wanted
            # One line, whatever the message holds: the error is the fix to apply, not a trace.
            line = error_line(args, exc, out=out)
            print(f"neocorrag {args.command}: error: {line}", file=sys.stderr)
            return 2


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
