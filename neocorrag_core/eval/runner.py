"""``neocorrag eval``: retrieve once, refine with each method, read, score, cache, report.

Every (method, question) record is appended to ``<out>/cache/<method>.jsonl`` as soon
as it is done, so an interrupted run resumes where it stopped. ``<out>/run.json``
holds the settings that change results; resuming with different ones is refused
(use another ``--out``). Models are loaded only when something is left to compute.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import resource
import sys
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import MISSING, asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from neocorrag_core.chains.config import miner_settings
from neocorrag_core.chains.miner import EvidenceChainMiner
from neocorrag_core.eval import metrics as M
from neocorrag_core.eval.datasets import LoadReport, QAExample, load_corpus, load_qa
from neocorrag_core.eval.protocol import BuildContext, Method, MethodInput, MethodOutput
from neocorrag_core.eval.reader import NO_READER, NoReader, Reader, ReaderOutput
from neocorrag_core.eval.registry import (
    available_methods,
    build_methods,
    method_versions,
    unknown_methods_error,
)
from neocorrag_core.eval.retrieval import Retriever, pooled_corpus
from neocorrag_core.eval.splits import SPLITS, in_split
from neocorrag_core.formats import read_json_or_lines
from neocorrag_core.types import Passage

logger = logging.getLogger(__name__)

BASELINE = "none"
ITERATIVE = "iterative"
"""The evidence-state controller's main baseline (a lab method): when a run has it, every
other method is also compared to it."""
POOLS = ("per-question", "corpus")
RETRIEVERS = ("dense", "bm25")
DEFAULT_METHODS = (
    "none",
    "neocorrag-recall",
    "neocorrag-balanced",
    "neocorrag-precise",
    "neocorrag-paper",
    "evireform",
)
"""What ``neocorrag eval`` compares when no ``--methods`` are named: no refinement, the
keep dial (``neocorrag-recall`` is the default setting) and EviReform. ``belief`` (it
answers by itself) runs when named; the lab's methods when the lab is installed."""


@dataclass
class EvalSettings:
    """Everything one ``neocorrag eval`` run needs; see ``neocorrag eval --help``."""

    data: str
    out: str
    methods: tuple[str, ...] = DEFAULT_METHODS
    limit: int | None = None
    split: str | None = None
    """``"tune"`` or ``"report"``: only that half of the questions (``eval.splits``)."""
    top_k: int = 5
    pool: str = "per-question"
    corpus: str | None = None
    retriever: str = "dense"
    vector_store: str | None = None
    """A folder for a persistent Chroma collection of the pooled corpus (``--pool corpus``,
    dense): retrieval then runs through the store (:mod:`neocorrag_core.eval.vector_store`)."""
    reader: str = "default"
    lm: str | None = None
    embedder: str | None = None
    triples: str | None = None
    max_new_tokens: int = 20
    embeddings_threshold: float = 0.5
    seed: int = 0
    bootstrap: int = 2000
    plots: bool = True
    miner_overrides: dict[str, Any] = field(default_factory=dict)
    evireform_overrides: dict[str, Any] = field(default_factory=dict)
    """ReformulationConfig fields changed for the EviReform methods."""
    belief_overrides: dict[str, Any] = field(default_factory=dict)
    """BeliefConfig fields changed for the evidence-state controller's methods."""
    contexts_from: str | None = None
    """Out folder of an earlier run whose method contexts are replayed: only the reader runs."""

    def __post_init__(self) -> None:
        known = available_methods()
        unknown = [m for m in self.methods if m not in known]
        if unknown:
            raise unknown_methods_error(unknown, known)
        if not self.methods:
            raise ValueError("give at least one method")
        if self.limit is not None and self.limit < 1:
            raise ValueError(f"--limit must be >= 1, got {self.limit}")
        if self.top_k < 1:
            raise ValueError(f"--top-k must be >= 1, got {self.top_k}")
        if self.split is not None and self.split not in SPLITS:
            raise ValueError(f"--split must be one of {', '.join(SPLITS)}, got {self.split!r}")
        if self.pool not in POOLS:
            raise ValueError(f"--pool must be one of {', '.join(POOLS)}, got {self.pool!r}")
        if self.corpus is not None and self.pool != "corpus":
            raise ValueError("--corpus is what --pool corpus retrieves from: add --pool corpus")
        if self.retriever not in RETRIEVERS:
            raise ValueError(
                f"--retriever must be one of {', '.join(RETRIEVERS)}, got {self.retriever!r}"
            )
        if self.vector_store is not None and (self.pool != "corpus" or self.retriever != "dense"):
            raise ValueError(
                "--vector-store holds the pooled corpus for dense retrieval: add --pool corpus "
                "(and keep --retriever dense)"
            )
        if self.max_new_tokens < 1:
            raise ValueError(f"--max-new-tokens must be >= 1, got {self.max_new_tokens}")
        if self.bootstrap < 1:
            raise ValueError(f"--bootstrap must be >= 1, got {self.bootstrap}")
        if self.seed < 0:
            raise ValueError(f"--seed must be >= 0, got {self.seed}")
        threshold = self.embeddings_threshold
        if not isinstance(threshold, (int, float)) or not -1.0 <= threshold <= 1.0:
            # A cosine bound; NaN fails this too (and would not round-trip through run.json).
            raise ValueError(f"--embeddings-threshold must be in [-1, 1], got {threshold!r}")
        # Methods that answer by themselves: the run's reader never reads their context.
        answering = [m for m in self.methods if known[m].answers]
        if answering:
            names = ", ".join(answering)
            verb = "answers by itself" if len(answering) == 1 else "answer by themselves"
            if self.reader == NO_READER:
                raise ValueError(
                    f"--reader none skips answering, but {names} {verb}; leave "
                    f"{'it' if len(answering) == 1 else 'them'} out of --methods or choose "
                    "a reader"
                )
            if self.contexts_from is not None:
                raise ValueError(
                    f"--contexts-from replays contexts for another reader, but {names} "
                    f"{verb} (no reader reads the context); leave "
                    f"{'it' if len(answering) == 1 else 'them'} out of --methods"
                )
        from neocorrag_core.belief.config import belief_settings
        from neocorrag_core.errors import ConfigError
        from neocorrag_core.evireform.config import reformulation_settings

        checks: tuple[tuple[str, Any], ...] = (
            ("miner", miner_settings),
            ("evireform", reformulation_settings),
            ("belief", belief_settings),
        )
        for name, settings in checks:
            try:
                settings(changes=getattr(self, f"{name}_overrides"))
            except (TypeError, ConfigError) as err:  # a usage error, said in one line
                raise ValueError(f"--{name}: {err}") from None

    def signature(self) -> dict[str, Any]:
        """The settings that change a cached record; a resumed run must match them."""
        keys = (
            "data",
            "top_k",
            "pool",
            "corpus",
            "retriever",
            "reader",
            "lm",
            "embedder",
            "triples",
            "max_new_tokens",
            "embeddings_threshold",
            "miner_overrides",
            "evireform_overrides",
            "belief_overrides",
            "contexts_from",
        )
        signature = {k: getattr(self, k) for k in keys}
        if self.vector_store is not None:  # the store's (approximate) search, not its folder
            signature["vector_store"] = "chroma"
        # Input files are known by name and content, not by path, so a run resumes (and a
        # replay matches) from another working directory or machine.
        for key in ("data", "corpus", "triples"):
            signature[key] = file_identity(signature[key])
        if self.triples == "spacy":
            signature["triples"] = spacy_identity()
        if self.contexts_from is not None:
            signature["contexts_from"] = Path(self.contexts_from).name
        return signature


def spacy_identity() -> str:
    """``--triples spacy`` in run.json: ``spacy`` for the extractor's rules version 1 (what
    every run.json before version 2 says), ``spacy rules v<N>`` after, so a run resumed
    after the rules change is refused rather than mixed with records of the old rules."""
    from neocorrag_core.triples.spacy_extractor import SpacyTripleExtractor

    version = SpacyTripleExtractor.version
    return "spacy" if version == "1" else f"spacy rules v{version}"


def file_identity(value: str | None) -> str | None:
    """``name sha256:<first 16 hex>`` for an existing file; other values unchanged."""
    if value is None or not Path(value).is_file():
        return value
    digest = hashlib.sha256()
    with open(value, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return f"{Path(value).name} sha256:{digest.hexdigest()[:16]}"


class ResultCache:
    """Per-method JSONL files of finished question records under ``<out>/cache``."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder  # made by the first add(): reading a cache creates nothing
        self.records: dict[str, dict[str, dict[str, Any]]] = {}
        # Methods whose file this cache has written to, so it ends with a whole line.
        self._line_start: set[str] = set()

    def _file(self, method: str) -> Path:
        return self.folder / f"{method}.jsonl"

    def load(self, method: str) -> dict[str, dict[str, Any]]:
        """Records of ``method`` by question id; a torn last line (a crash mid-write) is dropped."""
        if method not in self.records:
            found: dict[str, dict[str, Any]] = {}
            path = self._file(method)
            if path.is_file():
                # A cache line is written whole or torn by a crash; bytes that are not
                # UTF-8 are such a tear too, and dropped with the line.
                for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
                    try:
                        record = json.loads(line)
                    except json.JSONDecodeError:
                        logger.warning("ignoring a torn line in %s", path)
                        continue
                    if not isinstance(record, dict) or not isinstance(record.get("qid"), str):
                        logger.warning("ignoring a line that is not a cached record in %s", path)
                        continue
                    found[record["qid"]] = record
            self.records[method] = found
        return self.records[method]

    def add(self, method: str, record: dict[str, Any]) -> None:
        """Append one record and flush, so it survives an interruption right after.

        A line torn by a crash (no newline at the end of the file) is ended first, so the
        new record starts a line of its own instead of being glued to the torn one (and
        lost with it on the next load)."""
        self.load(method)[record["qid"]] = record
        self.folder.mkdir(parents=True, exist_ok=True)
        path = self._file(method)
        lead = "" if method in self._line_start else _line_break_needed(path)
        with open(path, "a", encoding="utf-8") as f:
            f.write(lead + json.dumps(record, ensure_ascii=False) + "\n")
            f.flush()
        self._line_start.add(method)


def _line_break_needed(path: Path) -> str:
    """``"\\n"`` when ``path`` is a non-empty file whose last byte is not a newline."""
    if not path.is_file() or path.stat().st_size == 0:
        return ""
    with open(path, "rb") as f:
        f.seek(-1, 2)
        return "" if f.read(1) == b"\n" else "\n"


def _stored(stored: dict[str, Any], key: str) -> Any:
    """A run.json setting; one an older run.json lacks had the field's default there."""
    if key in stored:
        return stored[key]
    spec = EvalSettings.__dataclass_fields__[key]
    if spec.default_factory is not MISSING:
        return spec.default_factory()
    return None if spec.default is MISSING else spec.default


def check_signature(out: Path, settings: EvalSettings) -> bool:
    """Refuse to mix caches of different settings: compare with ``out/run.json``. Returns
    whether there is none yet; :func:`write_signature` writes it once the run's models and
    methods are built, so a setting that fails to build (a typo) leaves nothing behind."""
    if out.exists() and not out.is_dir():
        raise ValueError(f"--out {out} is a file, not a folder; name a folder (new or a run's)")
    parent = next((p for p in (out, *out.parents) if p.exists()), None)
    if parent is not None and not os.access(parent, os.W_OK):
        raise ValueError(f"--out {out}: cannot write under {parent}; choose a writable folder")
    path = out / "run.json"
    wanted = settings.signature()
    if path.is_file():
        stored = read_json_or_lines(path, what="eval settings file")
        if not isinstance(stored, dict):
            raise ValueError(
                f"{path} is not an eval settings file (a JSON object); use another --out, or "
                "delete the folder to start over"
            )
        # A setting an older run.json lacks had its default there (see _stored).
        changed = sorted(
            (k, _stored(stored, k), v)
            for k, v in json.loads(json.dumps(wanted)).items()
            if _stored(stored, k) != v
        )
        if changed:
            said = ", ".join(f"{k}: {old!r} there, {new!r} now" for k, old, new in changed)
            raise ValueError(
                f"{out} holds results of a run with other settings ({said}); "
                "use another --out, or delete the folder to start over"
            )
        return False
    return True


def write_signature(out: Path, settings: EvalSettings) -> None:
    """Write ``out/run.json``: the settings the records cached in ``out`` were made with."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "run.json").write_text(json.dumps(settings.signature(), indent=2), encoding="utf-8")


def peak_rss_mb() -> float:
    """Peak resident memory of this process so far, in MiB (Linux reports KiB)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / 1024 if sys.platform != "darwin" else peak / (1024 * 1024)


def score_record(
    example: QAExample,
    method: str,
    retrieved: Sequence[Passage],
    output: MethodOutput,
    answer: Any,
    timings: dict[str, float],
    k: int,
) -> dict[str, Any]:
    """One question's record: what the reader saw and said, its scores and its costs."""
    ids = [p.id for p in output.passages]
    gold = sorted(example.gold_ids)
    return {
        "qid": example.id,
        "method": method,
        "question": example.question,
        "answers": list(example.answers),
        "prediction": answer.answer,
        "raw_prediction": answer.raw,
        "gold_ids": gold,
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
        "retrieved_recall": M.recall_at_k([p.id for p in retrieved], gold, k),
        # Candidate-pool completeness (methods that retrieve again): every gold passage in
        # the first retrieval's pool / in the pool after residual retrieval.
        "first_pool_complete": _complete(output.info.get("first_pool_ids"), gold),
        "pool_complete": _complete(output.info.get("pool_ids"), gold),
        **query_sources(output.info, gold),
        **gold_diagnosis(retrieved, ids, gold, output.info),
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
    return None if pool_ids is None else float(set(gold) <= set(pool_ids))


@dataclass
class Components:
    """The loaded models and objects a run needs (built only when work is left)."""

    retriever: Retriever
    methods: dict[str, Method]
    reader: Reader | NoReader


def build_components(
    settings: EvalSettings,
    examples: Sequence[QAExample],
    *,
    embedder: Any = None,
    lm: Any = None,
    reader_lm: Any = None,
    triple_source: Any = None,
    source: ResultCache | None = None,
) -> Components:
    """Resolve models (the given objects win over the settings' specs) and build methods.

    With ``contexts_from``, ``source`` is the replayed run's cache (read again when not
    given)."""
    from neocorrag_core.models import resolve_embedder, resolve_lm

    given_embedder = embedder
    embedder = resolve_embedder(embedder if embedder is not None else settings.embedder)
    config, tuning = miner_settings(changes=settings.miner_overrides)
    lm_spec = lm if lm is not None else settings.lm
    miner = EvidenceChainMiner(
        config,
        tuning=tuning,
        embedder=embedder,
        lm=lm_spec,
        triple_source=triple_source or resolve_triple_source(settings.triples, settings.out),
        show_progress=True,
    )
    no_reader = settings.reader == NO_READER and reader_lm is None
    if reader_lm is None and not no_reader:
        same = settings.reader == "default" and settings.lm is None and lm is None
        reader_lm = miner.lm if same else resolve_lm(settings.reader)
    corpus = None
    if settings.pool == "corpus":
        # The pool is every usable question of the file, whatever --limit says, so a run
        # resumed with a larger --limit (or replayed with a smaller one) searches the same pool.
        corpus = (
            load_corpus(settings.corpus)
            if settings.corpus
            else pooled_corpus(load_qa(settings.data)[0])
        )
    from neocorrag_core.models.bundled import default_cache_dir

    # A pooled corpus's vectors are kept between runs when the embedder is named by a
    # spec (the bundled default or a model name), which identifies its weights.
    named = given_embedder is None
    retriever = Retriever(
        settings.retriever,  # type: ignore[arg-type]
        embedder=embedder,
        pool=settings.pool,  # type: ignore[arg-type]
        corpus=corpus,
        vector_cache=default_cache_dir() / "eval-vectors" if named else None,
        vector_store=Path(settings.vector_store) if settings.vector_store else None,
    )
    if settings.contexts_from:
        source = source if source is not None else replay_source(settings)
        known = corpus if corpus is not None else pooled_corpus(examples)
        methods: list[Method] = [ReplayedMethod(name, source, known) for name in settings.methods]
    else:
        context = BuildContext(
            miner,
            embeddings_threshold=settings.embeddings_threshold,
            evireform_overrides=dict(settings.evireform_overrides),
            belief_overrides=dict(settings.belief_overrides),
            reader_lm=None if no_reader else reader_lm,
            reader=settings.reader,
        )
        methods = build_methods(settings.methods, context)
    reader: Reader | NoReader = (
        NoReader()
        if no_reader
        else Reader(resolve_lm(reader_lm), max_new_tokens=settings.max_new_tokens)
    )
    return Components(retriever, {m.name: m for m in methods}, reader)


# Settings that must match for another run's method contexts to be valid here.
_REPLAY_KEYS = (
    "data",
    "top_k",
    "pool",
    "corpus",
    "retriever",
    "lm",
    "embedder",
    "triples",
    "embeddings_threshold",
    "miner_overrides",
    "evireform_overrides",
    "belief_overrides",
)


def replay_source(settings: EvalSettings) -> ResultCache:
    """The cache of the run named by ``contexts_from``, checked to have matching settings."""
    folder = Path(settings.contexts_from or "")
    path = folder / "run.json"
    if not path.is_file():
        raise ValueError(f"--contexts-from {folder}: no run.json there (not an eval out folder)")
    stored = read_json_or_lines(path, what="eval settings file")
    wanted = json.loads(json.dumps(settings.signature()))
    changed = [k for k in _REPLAY_KEYS if _stored(stored, k) != wanted.get(k)]
    if changed:
        raise ValueError(
            f"--contexts-from {folder} ran with other settings ({', '.join(changed)}); "
            "only the reader may differ"
        )
    return ResultCache(folder / "cache")


def check_replay(
    source: ResultCache,
    todo: Sequence[tuple[QAExample, Sequence[str]]],
    versions: dict[str, str],
    folder: str,
) -> None:
    """Before anything runs: every (question, method) left to do has a record in the
    replayed run ``source``, made by the method's current version (``versions``, the
    versions a resumed run checks; a record of another version is stale there and would be
    run again) and read by that run's reader (a method that answered by itself left no
    context for another reader)."""
    for example, missing in todo:
        for name in missing:
            record = source.load(name).get(example.id)
            if record is None:
                raise ValueError(
                    f"--contexts-from {folder} has no {name!r} record for question "
                    f"{example.id!r}; finish that run first or lower --limit"
                )
            if name in versions and record.get("method_version") != versions[name]:
                raise ValueError(
                    f"--contexts-from {folder}: its {name!r} records were made by version "
                    f"{record.get('method_version')!r} of the method, the current one is "
                    f"{versions[name]!r}; resume that run first, which runs them again"
                )
            if _answered_itself(record):
                raise ValueError(
                    f"--contexts-from {folder}: method {name!r} answered by itself there "
                    "(no reader read its context); leave it out of --methods"
                )


def _answered_itself(record: dict[str, Any]) -> bool:
    """Whether a record's answer came from its method, not the reader (which always reads
    a prompt): an abstention, or a prediction with no reader tokens."""
    no_reader = not record.get("reader_prompt_tokens")
    return bool(record.get("abstained")) or (no_reader and bool(record.get("prediction")))


def _cut_texts(retrieved: Sequence[Passage], shown: Sequence[Passage]) -> dict[str, str]:
    """The texts of the shown passages that differ from the retrieved passage of that id."""
    whole = {p.id: p.text for p in retrieved}
    return {p.id: p.text for p in shown if p.id in whole and p.text != whole[p.id]}


class ReplayedMethod:
    """A method's context replayed from an earlier run's records, so a new reader sees
    exactly what that run's reader saw; its method cost is the recorded one."""

    def __init__(self, name: str, source: ResultCache, known: Sequence[Passage] = ()) -> None:
        self.name = name
        self.records = source.load(name)  # the replayed run's records, by question id
        texts = Counter(r["question"] for r in self.records.values())
        # Found by text only for a caller that gives no id, and only where the text is
        # unique: two questions may share a text but not their passages or answers.
        self.by_question = {
            r["question"]: r for r in self.records.values() if texts[r["question"]] == 1
        }
        # Methods that retrieve again (EviReform) hand the reader passages from outside
        # the shared top-k; they are found among every passage of the run.
        self.known = {p.id: p for p in known}

    def refine(self, call: MethodInput) -> MethodOutput:
        """The recorded context: the same passages (by id) and the same chain block."""
        question, passages = call.question, call.passages
        if call.qid is not None:
            record = self.records.get(call.qid)
            wanted = f"question {call.qid!r}"
        else:
            record = self.by_question.get(question)
            wanted = f"{question[:60]!r} (or its text is not unique there)"
        if record is None:
            raise ValueError(
                f"--contexts-from has no {self.name!r} record for {wanted}; "
                "finish that run first or lower --limit"
            )
        by_id = {**self.known, **{p.id: p for p in passages}}
        missing = [pid for pid in record["context_ids"] if pid not in by_id]
        if missing:
            raise ValueError(f"replayed context ids {missing} are not in this run's passages")
        timings = {
            k.removeprefix("method."): v
            for k, v in record["timings"].items()
            if k.startswith("method.")
        }
        cut = record.get("context_texts") or {}
        return MethodOutput(
            passages=[
                replace(by_id[pid], text=cut[pid]) if pid in cut else by_id[pid]
                for pid in record["context_ids"]
            ],
            chain_text=record["chain_text"],
            prompt_tokens=record["method_prompt_tokens"],
            generated_tokens=record["method_generated_tokens"],
            timings=timings,
            info={**record["info"], "replayed": True},
        )


def resolve_triple_source(spec: str | None, out: str) -> Any:
    """``None`` (passage metadata), a HippoRAG OpenIE file, or ``"spacy"`` (cached extractor)."""
    from neocorrag_core.triples import MetadataTripleSource, OpenIETripleSource

    if spec is None or spec == "none":
        return MetadataTripleSource()
    if spec == "spacy":
        try:
            from neocorrag_core.triples.spacy_extractor import SpacyTripleExtractor
            from neocorrag_core.triples.store import CachedTripleSource, TripleStore
        except ImportError as exc:
            raise ImportError(f"--triples spacy needs the spaCy extractor ({exc})") from exc
        store = TripleStore(Path(out) / "triples.sqlite")
        return CachedTripleSource(store, SpacyTripleExtractor())
    return OpenIETripleSource.from_file(spec)


def _pending(
    examples: Sequence[QAExample],
    methods: Sequence[str],
    cache: ResultCache,
    versions: dict[str, str],
) -> list[tuple[QAExample, list[str]]]:
    """Per question, the methods with no current record (none cached, or one cached by
    another version of the method: a changed prompt or coefficient file)."""

    def current(method: str, example: QAExample) -> bool:
        record = cache.load(method).get(example.id)
        if record is None:
            return False
        return method not in versions or record.get("method_version") == versions[method]

    todo = []
    for example in examples:
        missing = [m for m in methods if not current(m, example)]
        if missing:
            todo.append((example, missing))
    return todo


def run_evaluation(
    settings: EvalSettings,
    *,
    embedder: Any = None,
    lm: Any = None,
    reader_lm: Any = None,
    triple_source: Any = None,
    show_progress: bool = True,
    on_record: Callable[[dict[str, Any]], None] | None = None,
) -> dict[str, Any]:
    """Run (or resume) the benchmark and write results.json, report.md and the plots."""
    from tqdm.auto import tqdm

    out = Path(settings.out)
    if settings.split is None:
        examples, load_report = load_qa(settings.data, settings.limit)
    else:  # the split first, then the limit: the first N questions of that half
        examples, load_report = load_qa(settings.data)
        examples = in_split(examples, settings.split)[: settings.limit]  # type: ignore[arg-type]
    if not examples:
        half = f"; none of them in the {settings.split} half" if settings.split else ""
        raise ValueError(f"{settings.data}: no usable question ({load_report.summary()}{half})")
    unsigned = check_signature(out, settings)
    cache = ResultCache(out / "cache")
    versions = method_versions(
        settings.methods, reader=settings.reader, belief_overrides=settings.belief_overrides
    )
    todo = _pending(examples, settings.methods, cache, versions)
    if todo:
        source = None
        if settings.contexts_from:
            source = replay_source(settings)
            check_replay(source, todo, versions, settings.contexts_from)
        parts = build_components(
            settings,
            examples,
            embedder=embedder,
            lm=lm,
            reader_lm=reader_lm,
            triple_source=triple_source,
            source=source,
        )
        total = sum(len(missing) for _, missing in todo)
        with tqdm(total=total, desc="neocorrag eval", unit="run", disable=not show_progress) as bar:
            for example, missing in todo:
                started = time.perf_counter()
                retrieved = parts.retriever.retrieve(example, settings.top_k)
                retrieve_seconds = time.perf_counter() - started
                for name in missing:
                    bar.set_postfix_str(f"{example.id[:18]} {name}")
                    record = _run_one(parts, example, name, retrieved, retrieve_seconds, settings)
                    if name in versions:
                        # A replayed record's version is its source's (check_replay: the same).
                        record["method_version"] = versions[name]
                    if unsigned:  # run.json first: no record is ever cached without it
                        write_signature(out, settings)
                        unsigned = False
                    cache.add(name, record)
                    if on_record is not None:
                        on_record(record)
                    bar.update(1)
    if unsigned:
        write_signature(out, settings)
    results = summarize(examples, settings, cache, load_report)
    results["machine"] = machine_summary()
    write_outputs(results, out, plots=settings.plots)
    return results


def machine_summary() -> dict[str, Any]:
    """The CPU, its LM float format and threads, for the report (speed figures need it)."""
    from neocorrag_core.models.cpu import choose_cpu_dtype, cpu_info, describe

    info = cpu_info()
    return describe(choose_cpu_dtype(info), info)


def _run_one(
    parts: Components,
    example: QAExample,
    name: str,
    retrieved: list[Passage],
    retrieve_seconds: float,
    settings: EvalSettings,
) -> dict[str, Any]:
    started = time.perf_counter()
    method = parts.methods[name]
    call = MethodInput(
        example.question,
        retrieved,
        parts.retriever.search_fn(example),
        settings.top_k,
        qid=example.id,
    )
    output = method.refine(call)
    method_seconds = time.perf_counter() - started
    if any(output.info.get(flag) for flag in ("replayed", "reused_chains", "reused")):
        method_seconds = output.timings.get("total", sum(output.timings.values()))
    if output.answered:  # the method answered by itself (its answer's cost is in its own)
        answer = ReaderOutput(output.answer or "", output.answer or "", 0, 0, 0.0)
    else:
        answer = parts.reader.answer(example.question, output.passages, output.chain_text)
    timings = {"retrieve": retrieve_seconds}
    timings.update({f"method.{k}": v for k, v in output.timings.items()})
    timings["method"] = method_seconds
    timings["read"] = answer.seconds
    return score_record(example, name, retrieved, output, answer, timings, settings.top_k)


def aggregate(records: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Means over questions of every per-question metric, RCR@k and cost summaries."""
    n = len(records)

    def mean(key: str) -> float:
        return float(np.mean([r[key] for r in records])) if n else 0.0

    stages: dict[str, float] = {}
    for r in records:
        for stage, seconds in r["timings"].items():
            stages[stage] = stages.get(stage, 0.0) + seconds / n
    f1 = [r["f1"] for r in records]
    recall = [r["recall"] for r in records]
    return {
        "questions": n,
        "recall": mean("recall"),
        "hit": mean("hit"),
        "chain": mean("chain"),
        "atd": mean("atd"),
        "aid": mean("aid"),
        "empty": mean("empty"),
        "abstention": float(np.mean([bool(r.get("abstained")) for r in records])) if n else 0.0,
        "evidence_recall": _mean_known(r.get("evidence_recall") for r in records),
        "retrieval_rounds": _mean_known(r.get("retrieval_rounds") for r in records),
        "total_tokens": _mean_known(r.get("total_tokens") for r in records),
        "final_actions": _count(r["info"].get("final_action") for r in records),
        "em": mean("em"),
        "f1": mean("f1"),
        "rcr": M.rcr(mean("f1"), mean("recall")),
        "rcr_per_question": M.rcr_per_question(f1, recall) if n else 0.0,
        "reader_tokens": mean("reader_prompt_tokens") + mean("reader_generated_tokens"),
        "method_tokens": mean("method_prompt_tokens") + mean("method_generated_tokens"),
        "method_prompt_tokens": mean("method_prompt_tokens"),
        "method_generated_tokens": mean("method_generated_tokens"),
        "seconds": stages,
        "peak_rss_mb": max((r["peak_rss_mb"] for r in records), default=0.0),
        "fallbacks": _count(r["info"].get("fallback") for r in records),
        "first_pool_complete": _mean_known(r.get("first_pool_complete") for r in records),
        "pool_complete": _mean_known(r.get("pool_complete") for r in records),
        "query_sources": _sum_sources(r.get("query_sources") for r in records),
        "residual_rounds": _mean_known(r["info"].get("rounds") for r in records),
        "gold_lost_at": _sum_counts(r.get("gold_lost_at") for r in records),
        "gold_kept_by": _sum_counts(r.get("gold_kept_by") for r in records),
    }


def _sum_counts(values: Any) -> dict[str, int] | None:
    """Per-key sums of the count dicts that exist (None when no record had one)."""
    total: dict[str, int] | None = None
    for counts in values:
        if counts is None:
            continue
        total = total or {}
        for key, n in counts.items():
            total[key] = total.get(key, 0) + n
    return total


def _sum_sources(values: Any) -> dict[str, dict[str, int]] | None:
    """Per-source sums of :func:`query_sources` counts (None when no record had any)."""
    total: dict[str, dict[str, int]] | None = None
    for sources in values:
        if sources is None:
            continue
        total = total or {}
        for kind, counts in sources.items():
            row = total.setdefault(kind, {})
            for key, n in counts.items():
                row[key] = row.get(key, 0) + n
    return total


def _mean_known(values: Any) -> float | None:
    """Mean of the values that are not None (None when there are none)."""
    known = [v for v in values if v is not None]
    return float(np.mean(known)) if known else None


def _count(values: Any) -> dict[str, int]:
    counts: dict[str, int] = {}
    for value in values:
        if value:
            counts[value] = counts.get(value, 0) + 1
    return counts


def summarize(
    examples: Sequence[QAExample],
    settings: EvalSettings,
    cache: ResultCache,
    load_report: LoadReport,
) -> dict[str, Any]:
    """results.json content: settings, data report, per-method aggregates, bootstrap CIs."""
    ids = [e.id for e in examples]
    per_method = {
        m: [cache.load(m)[q] for q in ids if q in cache.load(m)] for m in settings.methods
    }
    # Compare only questions every method finished, so all rows describe the same questions.
    complete = [q for q in ids if all(q in cache.load(m) for m in settings.methods)]
    aggregates = {m: aggregate([cache.load(m)[q] for q in complete]) for m in settings.methods}
    comparisons = _compare(
        settings, cache, complete, BASELINE, ("f1", "aid", "em", "recall", "chain")
    )
    against_iterative = _compare(
        settings, cache, complete, ITERATIVE, ("f1", "em", "evidence_recall", "total_tokens")
    )
    return {
        "settings": asdict(settings),
        "data": {
            "path": load_report.path,
            "format": load_report.format,
            "rows_read": load_report.rows,
            "loaded": load_report.loaded,
            "skipped": dict(load_report.skipped),
        },
        "questions_compared": len(complete),
        "methods": aggregates,
        "comparisons": comparisons,
        "comparisons_iterative": against_iterative,
        "per_question": per_method,
    }


def _compare(
    settings: EvalSettings,
    cache: ResultCache,
    complete: Sequence[str],
    baseline: str,
    keys: Sequence[str],
) -> dict[str, Any]:
    """Paired bootstrap intervals of every other method's per-question ``keys`` minus the
    baseline's (empty when the baseline was not run)."""
    if baseline not in settings.methods or not complete:
        return {}
    base = cache.load(baseline)
    out: dict[str, Any] = {}
    for m in settings.methods:
        if m == baseline:
            continue
        rows = cache.load(m)
        out[m] = {
            key: M.paired_bootstrap(
                [float(rows[q].get(key) or 0.0) for q in complete],
                [float(base[q].get(key) or 0.0) for q in complete],
                resamples=settings.bootstrap,
                seed=settings.seed,
            ).to_dict()
            for key in keys
        }
    return out


def write_outputs(results: dict[str, Any], out: Path, *, plots: bool = True) -> None:
    """results.json, report.md and (with matplotlib) the PNG plots."""
    from neocorrag_core.eval.report import render_report

    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json.dumps(results, indent=2, ensure_ascii=False))
    (out / "report.md").write_text(render_report(results), encoding="utf-8")
    if plots:
        try:
            from neocorrag_core.eval.plots import write_plots
        except ImportError as exc:
            logger.warning("plots skipped (%s); pip install 'neocorrag[viz]'", exc)
            return
        write_plots(results, out)


__all__ = [
    "DEFAULT_METHODS",
    "EvalSettings",
    "ResultCache",
    "aggregate",
    "run_evaluation",
    "score_record",
    "summarize",
]
