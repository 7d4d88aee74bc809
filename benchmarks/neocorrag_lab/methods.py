"""Every method of the lab, declared as the product's :class:`MethodSpec`: name, one line,
and a ``"module:function"`` factory (and version) imported only when the method is built.

Registered two ways: when :mod:`neocorrag_lab` is imported (scripts, tests, ``python -m
neocorrag_lab eval``), and, once the lab is installed (``pip install -e benchmarks``),
through the ``neocorrag.eval_methods`` entry point of its own distribution, so the
installed ``neocorrag eval`` knows them. Listing them imports no model code and no
framework.
"""

from __future__ import annotations

from neocorrag_core.eval.registry import MethodSpec

_MINER = "neocorrag_lab.miner_variants"
_FREE = "neocorrag_lab.free_decoding"
_EVIREFORM = "neocorrag_lab.evireform_variants"
_BELIEF = "neocorrag_lab.belief_variants"
_PEERS = "neocorrag_lab.peers:build"
_PEERS_REQUIRE = 'the lab\'s peers extra: pip install -e "benchmarks[peers]"'


def _miner(name: str, description: str) -> MethodSpec:
    """A miner variant (``miner_variants.MINER_VARIANTS``), versioned by its config."""
    return MethodSpec(
        name, description, f"{_MINER}:build_variant", version=f"{_MINER}:method_version"
    )


def _evireform(name: str, description: str) -> MethodSpec:
    return MethodSpec(
        name, description, f"{_EVIREFORM}:build", version=f"{_EVIREFORM}:method_version"
    )


def _belief(name: str, description: str) -> MethodSpec:
    return MethodSpec(
        name,
        description,
        f"{_BELIEF}:build",
        version=f"{_BELIEF}:method_version",
        answers=True,
    )


def _peer(name: str, description: str) -> MethodSpec:
    return MethodSpec(name, description, _PEERS, _PEERS_REQUIRE)


LAB_METHODS: tuple[MethodSpec, ...] = (
    *(
        MethodSpec(
            f"top-{n}", f"the first {n} passages by retrieval rank", f"{_MINER}:build_truncation"
        )
        for n in (2, 3, 4)
    ),
    _miner("neocorrag-beam", "neocorrag, trie-constrained beam decoding"),
    _miner("neocorrag-rank", "neocorrag, exact candidate ranking"),
    _miner("neocorrag-none", "neocorrag, search scores only (no LM)"),
    _miner(
        "neocorrag-recall-full-chains",
        "neocorrag, keep='recall' with the paper's full chain block (chain_format='full')",
    ),
    _miner(
        "neocorrag-recall-no-chains",
        "neocorrag, keep='recall' without a chain block (chain_format='none', the default "
        "since miner-8)",
    ),
    _miner(
        "neocorrag-recall-linking-chains",
        "neocorrag, keep='recall' with every chain no kept passage states whole "
        "(chain_format='linking', max_chain_lines=None: the miner-6 block)",
    ),
    _miner(
        "neocorrag-recall-compact-chains",
        "neocorrag, keep='recall' with every chain, each fact once (chain_format='compact', "
        "the default before miner-4)",
    ),
    _miner(
        "neocorrag-recall-one-chain",
        "neocorrag, keep='recall' with only the first line of the linking chain block "
        "(max_chain_lines=1)",
    ),
    _miner(
        "neocorrag-recall-two-chains",
        "neocorrag, keep='recall' with the first two lines of the linking chain block "
        "(the miner-7 default; no block by default since miner-8)",
    ),
    _miner(
        "neocorrag-recall-whole",
        "neocorrag, keep='recall' with every kept passage whole (passage_focus='none', "
        "the default before miner-5)",
    ),
    _miner(
        "neocorrag-recall-focused",
        "neocorrag, keep='recall' with linked passages cut to their evidence sentences "
        "(passage_focus='linked')",
    ),
    _miner(
        "neocorrag-recall-focused-all",
        "neocorrag-recall-focused with the top-N passages cut too (passage_focus='all', "
        "the default)",
    ),
    _miner(
        "neocorrag-recall-focused-no-chains",
        "neocorrag-recall-focused without a chain block",
    ),
    _miner("ablation-naive-search", "neocorrag-beam with naive chain search (Table 2)"),
    MethodSpec(
        "ablation-free-decoding",
        "neocorrag-beam without constrained decoding (Table 2)",
        f"{_FREE}:build_free_decoding",
        version=f"{_FREE}:free_decoding_version",
    ),
    _miner("ablation-no-filter", "neocorrag-beam without document filtering (Table 2)"),
    _evireform(
        "evireform-lm",
        "EviReform with the LM: beam-selected evidence, LM-written residual queries",
    ),
    _evireform(
        "evireform-rounds2",
        "EviReform with a second round while the question's relation words stay open",
    ),
    _evireform("evireform-repeat", "EviReform control: the original question asked again"),
    _evireform(
        "evireform-rerank", "EviReform control: residual queries re-score the first pool only"
    ),
    _evireform("evireform-neocorrag", "EviReform top-k, then neocorrag-beam refinement"),
    MethodSpec(
        "evireform-refined-plain",
        "evireform-refined's control: the refiner not told what EviReform found on purpose",
        "neocorrag_core.eval.pipeline_methods:build",
        version="neocorrag_core.eval.pipeline_methods:method_version",
    ),
    _belief("closed-book", "the answer generator without documents"),
    _belief("single-shot", "the retrieved top-k, answered once"),
    _belief(
        "iterative",
        "fixed rounds of evidence-aware query writing and retrieval, then one answer",
    ),
    _belief(
        "belief-no-correction",
        "belief ablation: no VERIFY (problematic evidence is never dropped)",
    ),
    _belief(
        "belief-prune-only", "belief ablation: VERIFY drops passages but fetches no replacement"
    ),
    _belief(
        "belief-frozen-answerability",
        "belief ablation: the first step's answerability is reused for the episode",
    ),
    _belief("belief-chains", "belief whose verifier also sees the NeocorRAG evidence chains"),
    _belief("belief-refined", "belief whose answer generator reads the NeocorRAG-refined evidence"),
    _belief(
        "belief-refined-first",
        "belief whose answer generator reads the refined first search and later passages whole",
    ),
    _belief(
        "belief-unrefined", "belief whose answer generator reads every passage of the evidence"
    ),
    _belief(
        "belief-always-verify",
        "belief with a verifier call at every measured step (the paper's loop)",
    ),
    _peer("lc-embeddings-filter", "LangChain EmbeddingsFilter (same embedder)"),
    # The same filter at fixed thresholds, for the recall/noise plot (named by threshold).
    *(
        _peer(f"lc-embeddings-filter-{t}", f"LangChain EmbeddingsFilter at threshold {t}")
        for t in ("0.3", "0.4", "0.6")
    ),
    _peer("lc-llm-filter", "LangChain LLMChainFilter (same LM, generated YES/NO)"),
    _peer("lc-llm-filter-logits", "LLMChainFilter prompt, YES/NO read from next-token logits"),
    _peer("lc-multiquery-ef", "LangChain MultiQueryRetriever (same LM), then EmbeddingsFilter"),
)
"""The lab's methods, in the order ``neocorrag eval --help`` lists them after the
product's."""

__all__ = ["LAB_METHODS"]
