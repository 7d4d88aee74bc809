"""What a refinement step costs a LangChain user per call, side by side with the peers.

One pooled corpus (every passage of ../shared/data's three dev files), dense MiniLM
retrieval done once per question (not timed), then, per question and k, the methods run
one after another on the same documents, call by call, so machine noise hits them alike.
Times are reported as ratios to LangChain's ``EmbeddingsFilter`` over the same MiniLM in
the same process (its own uncached embeddings, as a user would have it).

Phases, each in a fresh process (the point of persisted vectors is the next process):

* ``index``: ``TripleExtractorTransformer`` (spaCy triples and their vectors) over every
  document any question retrieves; passages per second.
* ``warm``: ``NeocorRAGCompressor()`` over the indexed store, fresh process; then the
  same calls again (``hot``: in-memory caches); top-k truncation; the first call of the
  process against the steady median; peak RSS.
* ``metadata``: documents carrying ``metadata["triples"]``; the vectors from the store's
  cache (seen by an earlier process) and from an empty one (never seen).
* ``cold``: an empty store: spaCy extraction and embedding inside the call.
* ``evireform``: ``EvidenceReformulationRetriever`` against its base retriever (numpy
  search over the pooled corpus's MiniLM vectors, query embedded per call), warm store;
  again with no vector of the question in memory (a new question), and with a base that
  embeds its queries through EviReform's own ``NeocorRAGEmbeddings`` (each query text is
  then embedded once, by the search that needs it first: the count of texts EviReform
  embedded beyond its searches says so).
* ``decoding`` (``--decoding``): ``decoding="beam"`` / ``"rank"`` with the bundled LM.

    python benchmarks/bench_latency.py --out benchmarks/results/latency   # ~15 min here
    python benchmarks/bench_latency.py --questions 5 --ks 5 20 --out /tmp/lat  # smoke

Writes ``<out>/latency.json`` (every call's seconds) and ``<out>/latency.md`` (the tables).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data"
DEV_FILES = [
    DATA / "musique" / "kag_musique_dev_100.json",
    DATA / "hotpotqa" / "meve_hotpotqa_dev_first100.json",
    DATA / "2wikimultihopqa" / "migres_2wiki_dev_200.jsonl",
]


# ---------------------------------------------------------------------------- shared parts


def plain_embeddings() -> Any:
    """LangChain ``Embeddings`` over the bundled MiniLM with no cache of ours: what a user
    gives ``EmbeddingsFilter`` (e.g. ``HuggingFaceEmbeddings`` of the same model)."""
    import numpy as np
    from langchain_core.embeddings import Embeddings
    from sentence_transformers import SentenceTransformer

    from neocorrag_core.models import bundled_embedder_path

    model = SentenceTransformer(str(bundled_embedder_path()), device="cpu")

    class MiniLM(Embeddings):
        def embed_documents(self, texts: list[str]) -> list[list[float]]:
            vecs = model.encode(texts, batch_size=64, show_progress_bar=False)
            return np.asarray(vecs).tolist()

        def embed_query(self, text: str) -> list[float]:
            return self.embed_documents([text])[0]

    return MiniLM()


def load_cases(path: Path) -> list[dict[str, Any]]:
    return json.loads(path.read_text(encoding="utf-8"))


def documents(case: dict[str, Any], k: int, *, triples: dict[str, Any] | None = None) -> list[Any]:
    from langchain_core.documents import Document

    out = []
    for doc in case["docs"][:k]:
        metadata: dict[str, Any] = {"title": doc["title"]}
        if triples is not None:
            metadata["triples"] = triples.get(doc["id"], [])
        out.append(Document(id=doc["id"], page_content=doc["text"], metadata=metadata))
    return out


def timed(fn: Any) -> float:
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


# ---------------------------------------------------------------------------- phases


def phase_prepare(args: argparse.Namespace, work: Path) -> None:
    """Pool the corpus, retrieve the top max(k) per question once, write cases.json."""
    import numpy as np

    from neocorrag_core.eval.datasets import load_qa
    from neocorrag_core.eval.retrieval import pooled_corpus
    from neocorrag_core.eval.splits import in_split
    from neocorrag_core.models import resolve_embedder
    from neocorrag_core.rendering import render_passage

    examples = []
    for path in DEV_FILES:
        loaded, _ = load_qa(path)
        examples += loaded
    corpus = pooled_corpus(examples)
    chosen = in_split(examples, "report")
    step = max(1, len(chosen) // args.questions)
    chosen = chosen[::step][: args.questions]
    embedder = resolve_embedder(None)
    vecs = embedder.embed([render_passage(p) for p in corpus])
    np.save(work / "corpus_vectors.npy", vecs)
    (work / "corpus.json").write_text(
        json.dumps([{"id": p.id, "title": p.title, "text": p.text} for p in corpus]),
        encoding="utf-8",
    )
    top = max(args.ks)
    cases = []
    for ex in chosen:
        order = np.argsort(-(vecs @ embedder.embed([ex.question])[0]), kind="stable")[:top]
        docs = [
            {"id": corpus[i].id, "title": corpus[i].title, "text": corpus[i].text} for i in order
        ]
        cases.append({"id": ex.id, "question": ex.question, "docs": docs})
    (work / "cases.json").write_text(json.dumps(cases), encoding="utf-8")
    print(f"prepared {len(cases)} questions over {len(corpus)} pooled passages", file=sys.stderr)


def phase_index(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    from neocorrag_integrations.langchain import TripleExtractorTransformer

    cases = load_cases(work / "cases.json")
    unique: dict[str, Any] = {}
    for case in cases:
        for doc in documents(case, max(args.ks)):
            unique.setdefault(doc.id, doc)
    docs = list(unique.values())
    transformer = TripleExtractorTransformer(store=str(work / "store.sqlite"))
    started = time.perf_counter()
    out = transformer.transform_documents(docs)
    seconds = time.perf_counter() - started
    triples = {d.id: d.metadata["triples"] for d in out}
    (work / "triples.json").write_text(json.dumps(triples), encoding="utf-8")
    return {"passages": len(docs), "seconds": seconds, "passages_per_s": len(docs) / seconds}


def phase_calls(args: argparse.Namespace, work: Path, kind: str) -> dict[str, Any]:
    """One fresh process: the compressor (on the given store and documents) alternated with
    EmbeddingsFilter and top-k truncation, call by call, per k."""
    from langchain_classic.retrievers.document_compressors import EmbeddingsFilter

    from neocorrag_integrations.langchain import NeocorRAGCompressor, NeocorRAGEmbeddings

    cases = load_cases(work / "cases.json")
    triples = None
    store = work / "store.sqlite"
    if kind in ("metadata", "metadata-cold"):
        triples = json.loads((work / "triples.json").read_text(encoding="utf-8"))
    if kind in ("cold", "metadata-cold"):
        store = Path(tempfile.mkdtemp()) / "empty.sqlite"
    os.environ["NEOCORRAG_TRIPLE_STORE"] = str(store)
    ks = args.ks if kind in ("warm",) else [k for k in args.ks if k <= 50]
    questions = cases if kind == "warm" else cases[: max(3, len(cases) // 3)]
    emb_filter = EmbeddingsFilter(embeddings=plain_embeddings(), similarity_threshold=0.5)
    compressor = NeocorRAGCompressor()
    emb_filter.compress_documents(documents(cases[0], 5), "warm-up")  # load MiniLM for EF
    rows: list[dict[str, Any]] = []
    # The process's first call (models load, the store opens), kept apart from the medians;
    # then the first call of a compressor whose warm_up() ran at start-up.
    first = timed(lambda: compressor.compress_documents(documents(cases[-1], ks[0]), "warm-up"))
    started_up = NeocorRAGCompressor()
    warm_up_s = timed(started_up.warm_up)
    first_after_warm_up = timed(
        lambda: started_up.compress_documents(documents(cases[-2], ks[0]), cases[-2]["question"])
    )
    # The pipeline case: the user's retriever and the compressor share one embeddings
    # object, so the question's vector is the one the retriever computed (not timed here).
    shared_embeddings = NeocorRAGEmbeddings()
    shared = NeocorRAGCompressor(embedder=shared_embeddings)
    shared.warm_up()
    passes = ["first", "hot"] if kind == "warm" else ["first"]
    for pass_name in passes:
        for k in ks:
            for case in questions:
                docs = documents(case, k, triples=triples)
                q = case["question"]
                row: dict[str, Any] = {"pass": pass_name, "k": k, "qid": case["id"]}
                row["ef"] = timed(lambda: emb_filter.compress_documents(docs, q))  # noqa: B023
                row["ours"] = timed(lambda: compressor.compress_documents(docs, q))  # noqa: B023
                row["top"] = timed(lambda: docs[: min(k, 3)])  # noqa: B023
                if kind == "warm" and pass_name == "first":
                    shared_embeddings.embed_query(q)  # the retriever's work
                    row["shared"] = timed(lambda: shared.compress_documents(docs, q))  # noqa: B023
                rows.append(row)
    steady = [r["ours"] for r in rows if r["pass"] == "first" and r["k"] == ks[0]]
    return {
        "rows": rows,
        "warm_up_s": warm_up_s,
        "first_call_after_warm_up": first_after_warm_up,
        "first_call": first,
        "steady_median": statistics.median(steady) if steady else None,
        "peak_rss_mb": peak_rss_mb(),
        "calls": len(rows),
    }


def phase_rss(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    """Peak memory of a process that only serves queries: the compressor over the warm
    store, 50 calls at k=20 (as a service's worker would)."""
    from neocorrag_integrations.langchain import NeocorRAGCompressor

    os.environ["NEOCORRAG_TRIPLE_STORE"] = str(work / "store.sqlite")
    cases = load_cases(work / "cases.json")
    compressor = NeocorRAGCompressor()
    compressor.warm_up()
    loaded = peak_rss_mb()
    for i in range(50):
        case = cases[i % len(cases)]
        compressor.compress_documents(documents(case, 20), case["question"])
    return {"after_load_mb": loaded, "peak_mb": peak_rss_mb(), "calls": 50}


def phase_evireform(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    import numpy as np
    from langchain_core.callbacks import CallbackManagerForRetrieverRun
    from langchain_core.documents import Document
    from langchain_core.retrievers import BaseRetriever

    from neocorrag_integrations.langchain import EvidenceReformulationRetriever, NeocorRAGEmbeddings

    os.environ["NEOCORRAG_TRIPLE_STORE"] = str(work / "store.sqlite")
    corpus = json.loads((work / "corpus.json").read_text(encoding="utf-8"))
    vecs = np.load(work / "corpus_vectors.npy")
    embeddings = NeocorRAGEmbeddings()  # EviReform's own (the adapters' default MiniLM)
    plain = plain_embeddings()  # the user's vector store: embeds every query
    ours = embeddings.text_embedder()
    in_searches = [0]  # texts our embedder encoded inside the shared base's searches
    counting = threading.Lock()

    class Dense(BaseRetriever):
        k: int = 5
        query_embeddings: Any = None

        def _get_relevant_documents(
            self, query: str, *, run_manager: CallbackManagerForRetrieverRun
        ) -> list[Document]:
            if self.query_embeddings is embeddings:
                # Residual searches run in threads; our embedder encodes one call at a
                # time anyway, so the lock only keeps the count exact.
                with counting:
                    before = ours.cache_info().encoded
                    qv = np.asarray(self.query_embeddings.embed_query(query))
                    in_searches[0] += ours.cache_info().encoded - before
            else:
                qv = np.asarray(self.query_embeddings.embed_query(query))
            order = np.argsort(-(vecs @ qv), kind="stable")[: self.k]
            return [
                Document(
                    id=corpus[i]["id"],
                    page_content=corpus[i]["text"],
                    metadata={"title": corpus[i]["title"]},
                )
                for i in order
            ]

    base = Dense(k=5, query_embeddings=plain)
    evireform = EvidenceReformulationRetriever(retriever=base, k=5, embedder=embeddings)
    # The pipeline case: the vector store embeds its queries with the same embeddings
    # object, so each query text is embedded once, by the search that needs it first.
    shared_base = Dense(k=5, query_embeddings=embeddings)
    shared = EvidenceReformulationRetriever(retriever=shared_base, k=5, embedder=embeddings)
    cases = load_cases(work / "cases.json")
    for case in cases:  # first pass: residual hops the index never saw get extracted once
        evireform.invoke(case["question"])
        shared.invoke(case["question"])
    rows = []
    for case in cases:
        q = case["question"]
        b = timed(lambda: base.invoke(q))  # noqa: B023
        e = timed(lambda: evireform.invoke(q))  # noqa: B023
        # A new question: no vector of it in memory (the passages' come from the store).
        ours.clear_cache()
        e_new = timed(lambda: evireform.invoke(q))  # noqa: B023
        ours.clear_cache()
        b_shared = timed(lambda: shared_base.invoke(q))  # noqa: B023
        before, in_searches[0] = ours.cache_info().encoded, 0
        e_shared = timed(lambda: shared.invoke(q))  # noqa: B023
        own = ours.cache_info().encoded - before - in_searches[0]
        rows.append(
            {
                "qid": case["id"],
                "base": b,
                "evireform": e,
                "evireform_new_question": e_new,
                "base_shared": b_shared,
                "evireform_shared": e_shared,
                "embedded_beyond_searches": own,
            }
        )
    return {"rows": rows}


def phase_decoding(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    from langchain_classic.retrievers.document_compressors import EmbeddingsFilter

    from neocorrag_integrations.langchain import NeocorRAGCompressor

    os.environ["NEOCORRAG_TRIPLE_STORE"] = str(work / "store.sqlite")
    cases = load_cases(work / "cases.json")[: args.decoding_questions]
    emb_filter = EmbeddingsFilter(embeddings=plain_embeddings(), similarity_threshold=0.5)
    modes = {m: NeocorRAGCompressor(decoding=m) for m in ("none", "beam", "rank")}
    modes["beam"].compress_documents(documents(cases[0], 5), cases[0]["question"])  # load LM
    rows = []
    for case in cases:
        docs, q = documents(case, 5), case["question"]
        row = {"qid": case["id"], "ef": timed(lambda: emb_filter.compress_documents(docs, q))}  # noqa: B023
        for mode, comp in modes.items():
            row[mode] = timed(lambda: comp.compress_documents(docs, q))  # noqa: B023
        rows.append(row)
    return {"rows": rows}


PHASES = {
    "index": phase_index,
    "warm": lambda a, w: phase_calls(a, w, "warm"),
    "metadata": lambda a, w: phase_calls(a, w, "metadata"),
    "metadata-cold": lambda a, w: phase_calls(a, w, "metadata-cold"),
    "cold": lambda a, w: phase_calls(a, w, "cold"),
    "evireform": phase_evireform,
    "rss": phase_rss,
    "decoding": phase_decoding,
}


# ---------------------------------------------------------------------------- report


def ratio(rows: list[dict[str, Any]], num: str, den: str) -> float:
    """Median over questions of the per-call ratio num/den (paired, call by call)."""
    return statistics.median(r[num] / r[den] for r in rows)


def growth_exponent(rows: list[dict[str, Any]], key: str) -> float:
    """Least-squares slope of log(median seconds) on log(k)."""
    ks = sorted({r["k"] for r in rows})
    xs = [math.log(k) for k in ks]
    ys = [math.log(statistics.median(r[key] for r in rows if r["k"] == k)) for k in ks]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sum(
        (x - mx) ** 2 for x in xs
    )


def report(results: dict[str, Any]) -> str:
    lines = ["# Latency per call (ratios to EmbeddingsFilter, same run, calls alternated)", ""]
    index = results.get("index")
    if index:
        lines.append(
            f"Indexing (spaCy triples + their vectors): {index['passages']} passages in "
            f"{index['seconds']:.1f} s = {index['passages_per_s']:.1f} passages/s (2 cores)."
        )
        lines.append("")
    lines.append(
        "| k | EF s (median) | warm store, fresh process | same, query vector shared with "
        "the retriever | metadata triples, vectors cached | metadata triples, nothing cached "
        "| cold store | hot (same process) | top-k |"
    )
    lines.append("|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    warm = [r for r in results["warm"]["rows"] if r["pass"] == "first"]
    hot = [r for r in results["warm"]["rows"] if r["pass"] == "hot"]
    for k in sorted({r["k"] for r in warm}):

        def cell(phase: str, rows: list[dict[str, Any]] | None = None, k: int = k) -> str:
            got = rows if rows is not None else (results.get(phase) or {}).get("rows", [])
            sel = [r for r in got if r["k"] == k and r.get("pass", "first") == "first"]
            return f"{ratio(sel, 'ours', 'ef'):.3f}x" if sel else "-"

        ef = statistics.median(r["ef"] for r in warm if r["k"] == k)
        hot_rows = [dict(r, **{"pass": "first"}) for r in hot]
        top = [r for r in warm if r["k"] == k]
        shared = [r for r in warm if r["k"] == k and "shared" in r]
        shared_cell = f"{ratio(shared, 'shared', 'ef'):.3f}x" if shared else "-"
        lines.append(
            f"| {k} | {ef:.3f} | {cell('warm', warm)} | {shared_cell} | {cell('metadata')} | "
            f"{cell('metadata-cold')} | {cell('cold')} | {cell('hot', hot_rows)} | "
            f"{ratio(top, 'top', 'ef'):.4f}x |"
        )
    w = results["warm"]
    lines += [
        "",
        f"Growth exponent of the warm call's median time in k: {growth_exponent(warm, 'ours'):.2f} "
        f"(EmbeddingsFilter: {growth_exponent(warm, 'ef'):.2f}).",
        f"First call of the fresh process: {w['first_call']:.3f} s, steady median at the first k "
        f"{w['steady_median']:.3f} s: {w['first_call'] / w['steady_median']:.1f}x.",
        f"Peak RSS of the warm process after {w['calls']} calls (two MiniLM copies, the "
        f"filter's and ours, and EmbeddingsFilter's batches of up to 200 passages): "
        f"{w['peak_rss_mb']:.0f} MB.",
    ]
    if "first_call_after_warm_up" in w:
        lines.append(
            f"With warm_up() at start-up ({w['warm_up_s']:.2f} s): first call "
            f"{w['first_call_after_warm_up']:.3f} s = "
            f"{w['first_call_after_warm_up'] / w['steady_median']:.1f}x the steady median."
        )
    rss = results.get("rss")
    if rss:
        lines.append(
            f"A process that only serves queries (compressor, warm store, {rss['calls']} calls "
            f"at k=20): {rss['after_load_mb']:.0f} MB after loading, {rss['peak_mb']:.0f} MB peak."
        )
    evi = results.get("evireform")
    if evi:
        lines.append(
            f"EviReform retriever / its base retriever (warm store, k=5): "
            f"{ratio(evi['rows'], 'evireform', 'base'):.1f}x (median per question; base median "
            f"{statistics.median(r['base'] for r in evi['rows']) * 1000:.0f} ms)."
        )
        new = [r for r in evi["rows"] if "evireform_new_question" in r]
        if new:
            lines.append(
                f"Same, no vector of the question in memory (EviReform embeds it and its "
                f"residual queries itself; the passages' facts come from the store): "
                f"{ratio(new, 'evireform_new_question', 'base'):.1f}x. With the base retriever "
                f"embedding through the same NeocorRAGEmbeddings (its call embeds the question): "
                f"{ratio(new, 'evireform_shared', 'base_shared'):.1f}x (base median "
                f"{statistics.median(r['base_shared'] for r in new) * 1000:.0f} ms); texts "
                f"EviReform embedded beyond what its searches did: "
                f"{statistics.fmean(r['embedded_beyond_searches'] for r in new):.2f} per call."
            )
    dec = results.get("decoding")
    if dec:
        for mode in ("none", "beam", "rank"):
            lines.append(
                f"decoding={mode}: {ratio(dec['rows'], mode, 'ef'):.2f}x EmbeddingsFilter (k=5)."
            )
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--questions", type=int, default=30)
    parser.add_argument("--ks", type=int, nargs="+", default=[5, 10, 20, 50, 200])
    parser.add_argument("--decoding", action="store_true", help="also beam/rank (bundled LM)")
    parser.add_argument("--decoding-questions", type=int, default=3)
    parser.add_argument("--reuse", type=Path, help="a work folder of an earlier run")
    parser.add_argument("--phases", nargs="+", choices=[*PHASES], help="run only these")
    parser.add_argument("--phase", choices=[*PHASES, "prepare"], help=argparse.SUPPRESS)
    parser.add_argument("--work", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.phase:  # a child process: one phase, its result as JSON on stdout
        if args.phase == "prepare":
            phase_prepare(args, args.work)
            return 0
        print(json.dumps(PHASES[args.phase](args, args.work)))
        return 0
    args.out.mkdir(parents=True, exist_ok=True)
    work = args.reuse or Path(tempfile.mkdtemp(prefix="bench-latency-"))
    common = ["--questions", str(args.questions), "--ks", *map(str, args.ks), "--work", str(work)]
    if args.decoding:
        common += ["--decoding-questions", str(args.decoding_questions)]

    def child(phase: str) -> Any:
        cmd = [sys.executable, __file__, "--out", str(args.out), "--phase", phase, *common]
        done = subprocess.run(cmd, check=True, stdout=subprocess.PIPE, text=True)
        return json.loads(done.stdout) if phase != "prepare" else None

    results: dict[str, Any] = {}
    previous = args.out / "latency.json"
    if args.reuse and previous.is_file():  # rerun some phases, keep the others' results
        results = json.loads(previous.read_text(encoding="utf-8"))
        results.pop("machine", None)
    phases = ["prepare", "index", "warm", "metadata", "metadata-cold", "cold", "evireform", "rss"]
    if args.decoding:
        phases.append("decoding")
    for phase in args.phases or phases:
        if phase == "prepare" and args.reuse:
            continue
        print(f"phase {phase}...", file=sys.stderr, flush=True)
        results[phase] = child(phase)
    results.pop("prepare", None)
    results["machine"] = {"cpus": os.cpu_count(), "load_avg": os.getloadavg()}
    (args.out / "latency.json").write_text(json.dumps(results, indent=1), encoding="utf-8")
    text = report(results) + f"\nMachine: {os.cpu_count()} CPUs, load average {os.getloadavg()}.\n"
    (args.out / "latency.md").write_text(text, encoding="utf-8")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
