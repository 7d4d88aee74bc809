"""Settings of one ``neocorrag eval`` run: :class:`EvalSettings` (checked when made), the
methods compared by default, and the signature of the settings that change a cached record
(what ``<out>/run.json`` holds; input files are known by name and content).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from neocorrag_core.chains.config import miner_settings
from neocorrag_core.eval.reader import NO_READER
from neocorrag_core.eval.registry import available_methods, unknown_methods_error
from neocorrag_core.eval.splits import SPLITS

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
    dense): retrieval then runs through the store (:mod:`neocorrag_core.eval.vector_store`).
    With :attr:`collection`, the folder of the user's own Chroma store."""
    collection: str | None = None
    """The user's own collection in :attr:`vector_store`: retrieval runs over it as it is
    (nothing is added), queries embedded with :attr:`embedder`."""
    search: str | None = None
    """A name for the user's own search passed to the Python API (``compare``): part of the
    run's signature, so a resumed run is refused when the search changed its name."""
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
        if self.collection is not None:
            if self.vector_store is None:
                raise ValueError(
                    "--collection names a collection of your Chroma store: add --vector-store "
                    "DIR (its persist_directory)"
                )
            if self.pool != "per-question" or self.retriever != "dense" or self.corpus:
                raise ValueError(
                    "--collection retrieves from your own collection: leave out --pool, "
                    "--corpus and --retriever"
                )
        elif self.vector_store is not None and (self.pool != "corpus" or self.retriever != "dense"):
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
        for key in ("collection", "search"):  # only when set: older runs resume as they were
            if getattr(self, key) is not None:
                signature[key] = getattr(self, key)
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
