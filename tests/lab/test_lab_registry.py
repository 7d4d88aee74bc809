"""The lab's methods join ``neocorrag eval`` from outside the package: declared without
importing their modules, registered on import and by the lab's entry point, named by the
product's hint list, built with the product's signature, versioned as before the move."""

from __future__ import annotations

import subprocess
import sys
from importlib.metadata import PackageNotFoundError, distribution

import pytest
from conftest import bag_of_words_embedder
from neocorrag_lab import LAB_METHODS

from neocorrag_core import EvidenceChainMiner, Passage
from neocorrag_core.eval import BuildContext, MethodInput, available_methods, build_methods
from neocorrag_core.eval.registry import (
    BUILTIN_METHODS,
    ENTRY_POINT_GROUP,
    LAB_METHOD_NAMES,
    method_descriptions,
    method_versions,
)


def test_the_products_hint_list_names_exactly_the_labs_methods():
    assert {spec.name for spec in LAB_METHODS} == LAB_METHOD_NAMES
    assert len(LAB_METHODS) == len(LAB_METHOD_NAMES)  # no name declared twice


def test_lab_methods_follow_the_products_and_are_listed_without_importing_them():
    code = (
        "import sys, neocorrag_lab; from neocorrag_core.eval import available_methods; "
        "names = list(available_methods()); "
        "bad = sorted(m for m in sys.modules if m.startswith(('neocorrag_lab.', 'langchain')) "
        "and m != 'neocorrag_lab.methods'); print(bad, len(names)); sys.exit(1 if bad else 0)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd="/")
    if "No module named 'neocorrag_lab'" in done.stderr:
        pytest.skip("the lab is not installed (found from the checkout by tests/lab/conftest)")
    assert done.returncode == 0, done.stdout + done.stderr
    names = list(available_methods())
    assert names[: len(BUILTIN_METHODS)] == [s.name for s in BUILTIN_METHODS]
    after = [n for n in names[len(BUILTIN_METHODS) :] if n in LAB_METHOD_NAMES]
    assert after == [s.name for s in LAB_METHODS]  # in the lab's order (other plug-ins aside)
    assert all(method_descriptions()[n] for n in names)


def test_an_installed_lab_registers_its_methods_by_its_entry_point():
    try:
        lab = distribution("neocorrag-lab")
    except PackageNotFoundError:
        pytest.skip("the lab is not installed (pip install -e benchmarks); .ci/run installs it")
    points = [p for p in lab.entry_points if p.group == ENTRY_POINT_GROUP]
    assert [p.value for p in points] == ["neocorrag_lab.methods:LAB_METHODS"]
    assert points[0].load() is LAB_METHODS
    # The product's own distribution registers none.
    product = distribution("neocorrag")
    assert not [p for p in product.entry_points if p.group == ENTRY_POINT_GROUP]


def test_peer_operating_points_are_registered():
    names = set(available_methods())
    assert {"top-2", "top-3", "top-4"} <= names
    assert {f"neocorrag-{m}" for m in ("recall", "balanced", "precise", "paper")} <= names
    assert {f"lc-embeddings-filter-{t}" for t in ("0.3", "0.4", "0.6")} <= names


def test_lab_methods_are_built_with_the_products_signature_and_share_its_work():
    pytest.importorskip("langchain_classic")
    passages = [
        Passage("p1", "Van Hook Township is in Mountrail County.", "Van Hook",
                metadata={"triples": [["Van Hook Township", "in", "Mountrail County"]]}),
        Passage("p2", "Stanley is the seat of Mountrail County.", "Stanley",
                metadata={"triples": [["Mountrail County", "seat", "Stanley"]]}),
    ]  # fmt: skip
    miner = EvidenceChainMiner(embedder=bag_of_words_embedder())
    context = BuildContext(miner, evireform_overrides={"selection": "embedding",
                                                       "residual_queries": "entities"})  # fmt: skip
    names = ["none", "top-2", "neocorrag-none", "evireform", "evireform-rerank",
             "lc-embeddings-filter"]  # fmt: skip
    methods = build_methods(names, context)
    searched = []

    def search(query: str, k: int) -> list[Passage]:
        searched.append(query)
        return passages[:k]

    call = MethodInput("Where is the seat of the county of Van Hook Township?", passages, search, 2)
    for name, method in zip(names, methods, strict=True):
        assert method.name == name
        out = method.refine(call)
        assert out.passages and all(isinstance(p, Passage) for p in out.passages)
        assert out.lm_tokens == out.prompt_tokens + out.generated_tokens == 0  # no LM here
    assert searched  # the EviReform methods searched again through the call's search
    # The lab's variant reuses the product's reformulator and loop.
    assert context.shared["evireform"][0] is methods[3].reformulator is methods[4].reformulator
    assert methods[2].memo is context.shared["mining_memo"]  # the product's mining memo


def test_the_versions_are_those_of_the_records_made_before_the_lab_moved_out():
    # Written by the registry before the move (commit 1966112): a resumed run must not
    # rerun a cached record, nor a replay refuse one.
    from neocorrag_core.eval import refiners

    versions = method_versions(sorted(LAB_METHOD_NAMES))
    miner = refiners.MINER_OUTPUT_VERSION
    assert versions["neocorrag-beam"] == f'{miner} {{"decoding": "beam"}} {refiners.FOCUS_RULES}'
    assert versions["ablation-free-decoding"] == f"free-decoding-2 {miner}"
    assert versions["evireform-rerank"] == method_versions(["evireform"])["evireform"]
    assert "top-2" not in versions and "lc-llm-filter" not in versions  # none declared
    assert versions["closed-book"] == versions["single-shot"] == "answer-v2"
    assert versions["iterative"] == "answer-v2 verifier-v1 rewrite-v1"
    assert (
        versions["belief-always-verify"] + " verify-auto-1"
        == (method_versions(["belief"])["belief"])
    )
