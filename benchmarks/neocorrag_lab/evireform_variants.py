"""EviReform's variants and the paper's controls, beside the product's ``evireform``.

* ``evireform-lm``: the LM selects the evidence (trie-constrained beams) and writes the
  residual queries (bridge entities fill the free slots), beside the LM-free default.
* ``evireform-rounds2``: up to two rounds, the second only while the question's relation
  words stay open (``adaptive_rounds``).
* ``evireform-repeat``: the paper's matched-query control: a second round that asks the
  original question again (no LM).
* ``evireform-rerank``: the paper's rerank control: the residual queries ``evireform``
  wrote re-score the *first* pool; nothing new is retrieved.
* ``evireform-neocorrag``: ``evireform``'s top-k refined by the miner (beam decoding).

They see the same ``search`` the shared retrieval step uses (per-question or corpus
pool) and share the product's loop memo
(:func:`~neocorrag_core.eval.evireform_methods.shared_loop`), so the default loop runs
once per question; a method that reuses it reports the loop's
tokens and seconds as its cost. Their records are versioned by the product's rule
(:func:`~neocorrag_core.eval.evireform_methods.config_version`).
"""

from __future__ import annotations

from typing import Any

from neocorrag_core.eval.evireform_methods import (
    EviReformMethod,
    config_version,
    loop_info,
    loop_output,
    mined_output,
    shared_loop,
)
from neocorrag_core.eval.protocol import BuildContext, MethodInput, MethodOutput

EVIREFORM_VARIANTS = (
    "evireform-lm",
    "evireform-rounds2",
    "evireform-repeat",
    "evireform-rerank",
    "evireform-neocorrag",
)
VARIANTS: dict[str, dict[str, Any]] = {
    "evireform-lm": {"selection": "beam", "residual_queries": "lm"},
    "evireform-rounds2": {"rounds": 2, "adaptive_rounds": True},
    "evireform-repeat": {"residual_queries": "repeat"},
}
"""Variants that run their own loop: the default configuration with these fields changed."""


class EviReformVariant(EviReformMethod):
    """One of :data:`EVIREFORM_VARIANTS`; searches again with the call's ``search``."""

    def refine(self, call: MethodInput) -> MethodOutput:
        """This variant's top-``k`` context for ``call.question``."""
        question, passages, search = call.question, call.passages, call.search
        k = call.k or len(passages) or 5
        if self.name in VARIANTS:
            result = self.reformulator.retrieve(question, search, k, **VARIANTS[self.name])
            return loop_output(
                [r.passage for r in result.passages], result, loop_info(result, False)
            )
        result, reused = self.loop(question, passages, search, k)
        info = loop_info(result, reused)
        if self.name == "evireform-rerank":
            ranked = self.reformulator.rerank(question, result.queries, result.first_pool, k)
            info["pool_ids"] = info["first_pool_ids"]
            # its residual queries only re-score: they retrieved nothing
            info["query_results"] = info["query_results"][:1] + [[] for _ in result.queries[1:]]
            info["found_by"] = [r.found_by for r in ranked]
            return loop_output([r.passage for r in ranked], result, info)
        if self.name != "evireform-neocorrag":
            raise ValueError(f"unknown EviReform variant {self.name!r}")
        if self.miner is None:
            raise ValueError("evireform-neocorrag needs a miner")
        mined = self.miner.mine(question, [r.passage for r in result.passages], decoding="beam")
        return mined_output(result, mined, info)


def method_version(name: str) -> str:
    """The version of variant ``name``'s records: the product's rule over the variant's
    own configuration changes (``evireform-rerank`` reuses the default loop: the same as
    ``evireform``); ``evireform-neocorrag``, which mines its result, also follows the
    miner's output version and the sentence rules."""
    if name == "evireform-neocorrag":
        return config_version(mined=True)
    return config_version(VARIANTS.get(name, {}))


def build(name: str, context: BuildContext) -> EviReformVariant:
    """Factory of the :data:`EVIREFORM_VARIANTS`: they share the run's reformulator and
    loop memo with ``evireform``."""
    if name not in EVIREFORM_VARIANTS:
        raise ValueError(f"unknown EviReform variant {name!r}")
    reformulator, memo = shared_loop(context)
    return EviReformVariant(name, reformulator, memo, context.miner)


__all__ = ["EVIREFORM_VARIANTS", "VARIANTS", "EviReformVariant", "build", "method_version"]
