"""``neocorrag index``: extract the triples of a corpus file into a triple store, resumably.

The command wires the command line to :mod:`neocorrag_core.indexing`: the corpus is
streamed (:func:`~neocorrag_core.indexing.corpus.open_corpus`), extraction runs on the engine
asked for (``local``: this process, the default; ``process``: a local process pool;
``ray``: Ray Data, locally or on a cluster), and this process alone writes the store,
batch by batch, so a run stopped in any way resumes when run again.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Any

from neocorrag_core.cli.failures import OnOSError
from neocorrag_core.errors import ConfigError
from neocorrag_core.indexing import (
    DEFAULT_CHUNK_SIZE,
    DEFAULT_RAY_CHUNK_SIZE,
    ENGINES,
    Engine,
    LocalEngine,
    default_chunk_size,
    extractor_for,
    index_corpus,
    make_engine,
    resolve_spec,
)
from neocorrag_core.triples.extractor import TripleExtractor


def _extractor_spec(args: argparse.Namespace) -> str:
    """The extractor spec the flags name: ``--extractor``, ``--spacy-model``, ``--lm``."""
    if args.extractor == "spacy":
        return f"spacy:{args.spacy_model}" if args.spacy_model else "spacy"
    return f"llm:{args.lm}" if args.lm else "llm"


def _make_extractor(args: argparse.Namespace) -> TripleExtractor:
    """The extractor the ``local`` engine runs (nothing is loaded yet)."""
    return extractor_for(resolve_spec(_extractor_spec(args)), args.batch_size)


def _make_engine(args: argparse.Namespace) -> Engine:
    if args.engine == "local":
        if args.workers is not None or args.address is not None:
            raise ConfigError(
                "--workers and --address apply to --engine process or ray; the local engine "
                "extracts in this process"
            )
        return LocalEngine(_make_extractor(args))
    if args.engine == "process" and args.address is not None:
        raise ConfigError("--address names a Ray cluster: use it with --engine ray")
    return make_engine(
        args.engine,
        _extractor_spec(args),
        workers=args.workers,
        batch_size=args.batch_size,
        address=args.address,
    )


def run_index(args: argparse.Namespace) -> int:
    """Extract the triples of a corpus file into the store; stored passages are skipped.

    Runs on one store take turns (:meth:`~neocorrag_core.triples.store.TripleStore.indexer_lock`):
    a second run waits for the first, then extracts only what the first left undone.
    """
    from neocorrag_core.indexing.corpus import open_corpus
    from neocorrag_core.models.lm_loading import check_lm_path
    from neocorrag_core.triples.spacy_extractor import check_spacy_pipeline
    from neocorrag_core.triples.store import TripleStore

    started = time.perf_counter()
    if getattr(args, "embed_dtype", None):  # read where the embedder loads; workers inherit it
        os.environ["NEOCORRAG_EMBED_DTYPE"] = args.embed_dtype
    if getattr(args, "embed_backend", None):
        os.environ["NEOCORRAG_EMBED_BACKEND"] = args.embed_backend
    corpus = open_corpus(args.corpus, limit=args.limit)  # format errors before anything runs
    if args.extractor == "spacy" and args.spacy_model:
        check_spacy_pipeline(args.spacy_model)  # a typo must not leave an empty store
    if args.extractor == "llm" and args.lm:
        check_lm_path(args.lm)  # the same for a model folder that is not there
    engine = _make_engine(args)
    embedder = _vector_embedder(args)
    store = TripleStore(args.store)
    if not store.read_only:  # a read-only store is only checked: success, or one error line
        reading = "streamed line by line" if corpus.streamed else "one JSON document, read whole"
        print(
            f"{args.corpus}: {corpus.format} format, {reading}; indexing into {store.path} for "
            f"{engine.key.extractor_id}@{engine.key.version} with the {engine.describe()}",
            file=sys.stderr,
            flush=True,
        )

    def waiting(pid: int | None) -> None:
        print(
            f"waiting for another indexer (pid {pid or '?'}) of {store.path}; then this run "
            "extracts only what that one left undone (Ctrl-C to stop)",
            file=sys.stderr,
            flush=True,
        )

    evicted_before = store.evicted_vectors() if embedder is not None else 0
    try:
        report = index_corpus(
            corpus,
            store,
            engine,
            batch_size=args.batch_size,
            chunk_size=args.chunk_size or default_chunk_size(args.engine),
            show_progress=not args.quiet,
            on_wait=waiting,
            embedder=embedder,
        )
    except KeyboardInterrupt:  # while waiting for the other indexer: nothing was done
        print("interrupted: run the same command again to index", file=sys.stderr)
        return 130
    print(
        f"passages total {report.passages} | already stored {report.already_stored} | "
        f"extracted now {report.extracted} | triples written {report.triples_written} | "
        f"vectors computed {report.vectors_computed} | {time.perf_counter() - started:.1f} s"
    )
    if embedder is not None and not store.read_only:
        _warn_evictions(store, store.evicted_vectors() - evicted_before)
    skipped = f", {corpus.skipped} rows without text skipped" if corpus.skipped else ""
    print(
        f"{args.corpus}: {corpus.passages} unique passages read, {corpus.duplicates} "
        f"duplicates dropped{skipped}",
        file=sys.stderr,
    )
    if report.interrupted:
        print("interrupted: run the same command again to resume", file=sys.stderr)
        return 130
    return 0


def _warn_evictions(store: Any, evicted: int) -> None:
    """Say so when the store's byte bound evicted vectors while this run indexed: the store
    cannot hold the corpus's vectors, and queries over those passages embed them again."""
    if evicted <= 0:
        return
    from neocorrag_core.triples.store_vectors import VECTOR_ROW_OVERHEAD

    kept = store.vector_summary()
    count = sum(v["vectors"] for v in kept.values())
    per_row = (sum(v["bytes"] for v in kept.values()) // max(count, 1)) + VECTOR_ROW_OVERHEAD
    needed = store.max_vector_bytes + evicted * per_row
    print(
        f"warning: the store's vectors reached its bound ({_gib(store.max_vector_bytes)}): "
        f"{evicted} vectors, the least recently used, were evicted while indexing, so queries "
        "over their passages embed those texts again. To keep every vector, raise the bound "
        f"and run the same command again (it fills the missing vectors): "
        f"NEOCORRAG_MAX_VECTOR_BYTES={needed} ({_gib(needed)}; docs/indexing.md)",
        file=sys.stderr,
    )


def _gib(value: int) -> str:
    return f"{value / 2**30:.1f} GiB"


def _vector_embedder(args: argparse.Namespace) -> Any:
    """The embedder whose vectors ``index`` stores beside the triples, or ``None``
    (``--no-vectors``). The default, the bundled MiniLM, is what the adapters use; without
    its package the triples are still indexed, and the run says so."""
    if args.no_vectors:
        return None
    from neocorrag_core.errors import MissingDependencyError
    from neocorrag_core.models import resolve_embedder

    try:
        embedder = resolve_embedder(args.embedder)
    except MissingDependencyError as err:
        if args.embedder is not None:
            raise
        print(f"no vectors are stored: {err}", file=sys.stderr)
        return None
    if embedder.identity is None:
        raise ConfigError(
            f"--embedder {args.embedder!r} has no identity to store vectors under; pass a "
            "sentence-transformers name or folder, or --no-vectors"
        )
    return embedder


def at_least_one(text: str) -> int:
    """argparse type of a count option: a whole number of at least 1."""
    return whole_number(text, minimum=1)


def at_least_zero(text: str) -> int:
    """argparse type of a count option where 0 means none: a whole number of at least 0."""
    return whole_number(text, minimum=0)


def whole_number(text: str, *, minimum: int) -> int:
    """``text`` as an int of at least ``minimum``, or ``argparse.ArgumentTypeError``."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a whole number, got {text!r}") from None
    if value < minimum:
        raise argparse.ArgumentTypeError(f"must be at least {minimum}, got {value}")
    return value


def add_index_parser(sub: Any) -> None:
    """The ``neocorrag index`` subcommand."""
    from neocorrag_core.triples.store import default_store_path

    ix = sub.add_parser(
        "index",
        help="extract the triples of a corpus file into the triple store (resumable)",
        description="Read a corpus (JSON list of {title, text}, a HippoRAG corpus, or MuSiQue / "
        "HotpotQA / 2Wiki questions; detected), extract the triples of every passage not yet "
        "stored, and write them to the SQLite triple store the miner reads. JSON-lines files "
        "are streamed (any size); a single JSON document is read whole. Only this process "
        "writes the store, batch by batch: stopped in any way, the same command resumes.",
    )
    ix.add_argument("corpus", help="corpus file (JSON or JSON lines)")
    ix.add_argument(
        "--extractor",
        choices=["spacy", "llm"],
        default="spacy",
        help="spacy: fast dependency rules (default); llm: two-step LLM extraction",
    )
    ix.add_argument(
        "--engine",
        choices=list(ENGINES),
        default="local",
        help="where extraction runs: local (this process, default), process (a pool of "
        "local worker processes), ray (Ray Data actors; the ray extra)",
    )
    ix.add_argument(
        "--workers",
        type=at_least_one,
        default=None,
        help="process / ray: workers, each with its own model (default: one per CPU)",
    )
    ix.add_argument(
        "--address",
        default=None,
        help="ray: the Ray cluster to use (default: $RAY_ADDRESS, else a local Ray)",
    )
    ix.add_argument(
        "--store", default=str(default_store_path()), help="SQLite file (default: %(default)s)"
    )
    ix.add_argument("--lm", default=None, help="LLM extractor: HF id or local path of the LM")
    ix.add_argument("--spacy-model", default=None, help="spaCy pipeline (default: small English)")
    ix.add_argument(
        "--batch-size", type=at_least_one, default=16, help="passages per batch (default 16)"
    )
    ix.add_argument(
        "--chunk-size",
        type=at_least_one,
        default=None,
        help="passages read, checked against the store and dispatched at a time (default "
        f"{DEFAULT_CHUNK_SIZE}; ray: {DEFAULT_RAY_CHUNK_SIZE}, since Ray starts its actors "
        "once per chunk)",
    )
    ix.add_argument(
        "--embedder",
        default=None,
        help="sentence-transformers name or folder whose vectors of the node and triple texts "
        "are stored with the triples (default: the bundled MiniLM, what the adapters use); "
        "queries over stored passages then embed only the question",
    )
    ix.add_argument(
        "--no-vectors",
        action="store_true",
        help="store triples only (queries then embed each text once, at first sight)",
    )
    ix.add_argument(
        "--embed-dtype",
        choices=["float32", "bfloat16", "auto"],
        default=None,
        help="float format the vectors are computed in (NEOCORRAG_EMBED_DTYPE; default "
        "float32): bfloat16 embeds ~1.8x faster on a CPU with AMX, vectors within a cosine "
        "of 0.9999; auto: bfloat16 where the CPU computes it natively (docs/indexing.md)",
    )
    ix.add_argument(
        "--embed-backend",
        choices=["auto", "onnx", "torch"],
        default=None,
        help="what runs the embedder (NEOCORRAG_EMBED_BACKEND; default auto: ONNX Runtime "
        "where the onnx extra is installed, the same vectors as PyTorch's, faster; else "
        "PyTorch) (docs/indexing.md)",
    )
    ix.add_argument("--limit", type=at_least_one, default=None, help="first N unique passages only")
    ix.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    ix.add_argument("-v", "--verbose", action="store_true", help="log what the extractor does")
    ix.set_defaults(
        func=run_index,
        on_os_error=OnOSError(
            "index {corpus} into the triple store {store}",
            "what was indexed before the error is stored: run the same command again to resume",
        ),
    )
