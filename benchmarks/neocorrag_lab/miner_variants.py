"""The miner's paper variants, chain-block and focus variants, Table 2 ablations, and the
top-k truncation peers.

* ``top-2`` / ``top-3`` / ``top-4``: plain truncation by retrieval rank (a peer baseline:
  what a smaller k gives).
* ``neocorrag-beam`` / ``-rank`` / ``-none``: the miner with that decoding mode; its
  kept passages plus the evidence chain block the run's ``chain_format`` writes (none by
  default since ``miner-8``; ``--miner chain_format=full max_chain_lines=None`` gives the
  paper's block, for its Table 2).
* ``neocorrag-recall-full-chains``: the default with the paper's full chain block
  (``chain_format="full"``) and ``neocorrag-recall-no-chains`` without a chain block
  (``"none"``), to measure what the compact block saves and what the block buys;
  ``neocorrag-recall-linking-chains``: only the chains that no kept passage states whole
  (``"linking"``, the default format of ``miner-4`` to ``miner-7``, named for runs that
  compare formats); ``neocorrag-recall-compact-chains``: every chain, each fact once
  (``"compact"``, the default before); these three show every line of their block
  (``max_chain_lines=None``, the default before ``miner-7``), so they compare formats
  alone; ``neocorrag-recall-one-chain`` / ``-two-chains``: the linking block cut to its
  first line / two lines (``max_chain_lines``; two lines of it were the default block of
  ``miner-7``; since ``miner-8`` the default has no block, so ``-two-chains`` is the
  miner-7 default and ``-no-chains`` the same context as ``neocorrag-recall``);
  ``neocorrag-recall-focused`` (``-no-chains``): the passages kept below the top-N cut to
  their evidence sentences (``passage_focus="linked"``, the default of ``miner-5``), with
  the default block (without a block; the compact block until ``miner-4``, none since
  ``miner-8``); ``neocorrag-recall-focused-all``: every kept passage cut
  (``passage_focus="all"``, the default since ``miner-6``); ``neocorrag-recall-whole``:
  every kept passage whole (``passage_focus="none"``, the default before ``miner-5``).
* Since ``miner-6`` every miner method above cuts its kept passages to their evidence
  sentences (the default ``passage_focus="all"``) except ``neocorrag-recall-whole``;
  ``ablation-free-decoding`` (:mod:`neocorrag_lab.free_decoding`) keeps whole passages
  (it refines without the miner), so compare it with ``--miner passage_focus=none`` runs,
  and ``neocorrag-paper`` (the product's) is Eq. 8's keep rule with the cut, not the
  published context.
* Ablations of the paper's Table 2, all with beam decoding:
  ``ablation-naive-search`` (``MinerTuning.search="naive"``) and ``ablation-no-filter``
  (``filter_passages=False``).

Every miner method is the product's :class:`~neocorrag_core.eval.refiners.NeocorragMethod`
with its overrides, sharing the run's mining memo with the product's keep-dial methods,
and versioned by the product's rule (:func:`~neocorrag_core.eval.refiners.miner_version`).
"""

from __future__ import annotations

from typing import Any

from neocorrag_core.eval.protocol import BuildContext, MethodInput, MethodOutput
from neocorrag_core.eval.refiners import NeocorragMethod, miner_version, shared_memo

MINER_VARIANTS: dict[str, dict[str, Any]] = {
    "neocorrag-beam": {"decoding": "beam"},
    "neocorrag-rank": {"decoding": "rank"},
    "neocorrag-none": {"decoding": "none"},
    "ablation-naive-search": {"decoding": "beam", "search": "naive"},
    "ablation-no-filter": {"decoding": "beam", "filter_passages": False},
    "neocorrag-recall-full-chains": {
        "keep": "recall",
        "chain_format": "full",
        "max_chain_lines": None,
    },
    "neocorrag-recall-no-chains": {"keep": "recall", "chain_format": "none"},
    "neocorrag-recall-linking-chains": {
        "keep": "recall",
        "chain_format": "linking",
        "max_chain_lines": None,
    },
    "neocorrag-recall-compact-chains": {
        "keep": "recall",
        "chain_format": "compact",
        "max_chain_lines": None,
    },
    "neocorrag-recall-one-chain": {
        "keep": "recall",
        "chain_format": "linking",
        "max_chain_lines": 1,
    },
    "neocorrag-recall-two-chains": {
        "keep": "recall",
        "chain_format": "linking",
        "max_chain_lines": 2,
    },
    "neocorrag-recall-whole": {"keep": "recall", "passage_focus": "none"},
    "neocorrag-recall-focused": {"keep": "recall", "passage_focus": "linked"},
    "neocorrag-recall-focused-all": {"keep": "recall", "passage_focus": "all"},
    "neocorrag-recall-focused-no-chains": {
        "keep": "recall",
        "passage_focus": "linked",
        "chain_format": "none",
    },
}
"""The lab's miner methods and their config overrides."""

TRUNCATIONS = (2, 3, 4)
"""The ``top-n`` peers."""


def method_version(name: str) -> str:
    """The version of the miner variant ``name``: the product's rule
    (:func:`~neocorrag_core.eval.refiners.miner_version`) over its overrides, so a record
    cached before the lab moved out of the package resumes."""
    return miner_version(MINER_VARIANTS[name])


class Truncation:
    """Peer baseline: the first ``n`` passages by retrieval rank (what a smaller k gives)."""

    def __init__(self, name: str, n: int) -> None:
        self.name, self.n = name, n

    def refine(self, call: MethodInput) -> MethodOutput:
        """Keep the best-ranked ``n``."""
        return MethodOutput(list(call.passages[: self.n]))


def build_truncation(name: str, context: BuildContext) -> Truncation:
    """Factory of ``top-2`` / ``top-3`` / ``top-4`` (the number is read from the name)."""
    return Truncation(name, int(name.removeprefix("top-")))


def build_variant(name: str, context: BuildContext) -> NeocorragMethod:
    """Factory of the :data:`MINER_VARIANTS`; they share the run's mining memo with the
    product's miner methods (one mining per question and config)."""
    return NeocorragMethod(name, context.miner, shared_memo(context), **MINER_VARIANTS[name])


__all__ = [
    "MINER_VARIANTS",
    "TRUNCATIONS",
    "Truncation",
    "build_truncation",
    "build_variant",
    "method_version",
]
