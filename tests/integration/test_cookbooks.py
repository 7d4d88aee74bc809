"""The cookbooks and the README's and docs' snippets run top to bottom on the default models.

Cookbook 05 (the BeliefRAG controller) runs on tiny models: the test sets its ``lm`` and
``embedder`` parameters to a tiny random Llama and a bag-of-words embedder, so its
trajectories and the controller's mechanics are checked in seconds; one question of it runs
on the bundled models (``test_cookbook_05_question_on_the_bundled_models``).
"""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path
from typing import Any

import nbformat
import pytest
from nbclient import NotebookClient
from tiny_models import save_tiny_lm

ROOT = Path(__file__).resolve().parents[2]
COOKBOOKS = sorted((ROOT / "cookbooks").glob("*.ipynb"))
CONTROLLER = ROOT / "cookbooks" / "05_evidence_state_controller.ipynb"
"""The cookbook with parameters (``lm``, ``embedder``): the suite runs it on tiny models."""
ON_DEFAULT_MODELS = [path for path in COOKBOOKS if path != CONTROLLER]


def run_notebook(path: Path, parameters: str = "") -> tuple[Any, str]:
    """Execute ``path`` top to bottom, with ``parameters`` (code) run right after its cell
    tagged ``parameters``; return the executed notebook and its printed text."""
    notebook = nbformat.read(path, as_version=4)
    if parameters:
        tagged = [
            i for i, c in enumerate(notebook.cells) if "parameters" in c.metadata.get("tags", [])
        ]
        assert len(tagged) == 1, f"{path.name}: one cell tagged 'parameters' expected"
        notebook.cells.insert(tagged[0] + 1, nbformat.v4.new_code_cell(parameters))
    client = NotebookClient(
        notebook,
        timeout=1800,
        kernel_name="python3",
        resources={"metadata": {"path": str(path.parent)}},
    )
    client.execute()  # raises CellExecutionError, naming the cell, if any cell fails
    outputs = [o for cell in notebook.cells if cell.cell_type == "code" for o in cell.outputs]
    return notebook, "".join(o.get("text", "") for o in outputs if o.output_type == "stream")


def test_the_six_cookbooks_exist_and_are_valid_notebooks():
    names = [p.name for p in COOKBOOKS]
    assert names == [
        "01_langchain_compressor.ipynb",
        "02_llama_index_postprocessor.ipynb",
        "03_evidence_visualization.ipynb",
        "04_evidence_reformulation.ipynb",
        "05_evidence_state_controller.ipynb",
        "06_composed_pipeline.ipynb",
    ]
    for path in COOKBOOKS:
        nbformat.validate(nbformat.read(path, as_version=4))


@pytest.mark.real_models
@pytest.mark.parametrize("path", ON_DEFAULT_MODELS, ids=lambda p: p.stem)
def test_cookbook_runs_top_to_bottom(path):
    notebook, text = run_notebook(path)
    outputs = [o for cell in notebook.cells if cell.cell_type == "code" for o in cell.outputs]
    if path.stem == "03_evidence_visualization":  # the default: no chain document
        assert "chain document: False" in text  # yet the chains are kept in the metadata
        assert "5. Tekezé River - joins -> Atbarah River  (from document [1, 3])" in text
    elif path.stem not in ("04_evidence_reformulation", "06_composed_pipeline"):  # 01, 02
        assert "Evidence chains:" in text
        assert "Chains found (metadata; the LLM reads only the kept" in text  # the default
    if path.stem == "04_evidence_reformulation":  # the wrapper finds the hop the plain one missed
        assert "gold documents found: 2 of 3" in text and "gold documents found: 3 of 3" in text
    if path.stem == "03_evidence_visualization":
        assert any("image/png" in o.get("data", {}) for o in outputs), "no picture drawn"
    if path.stem == "06_composed_pipeline":  # the pipeline completes more chains, less noise
        found = dict(re.findall(r"(plain|composed): .*all gold (\d+)/", text))
        noise = dict(re.findall(r"(plain|composed): .*per question ([\d.]+)", text))
        assert int(found["composed"]) > int(found["plain"]), text[-400:]
        assert float(noise["composed"]) < float(noise["plain"]), text[-400:]
        assert "+ EviReform found ★" in text  # a missed gold passage found by a residual query


def test_cookbook_05_runs_on_tiny_models(tmp_path):
    """The controller cookbook top to bottom on a tiny random Llama and a bag-of-words
    embedder: every cell runs, and its own asserts check the rules' mechanics (the source
    policy's VERIFY drops the misleading passage, a replacement search follows, a dropped
    passage never comes back; the plain question ends after one round with the shipped
    answerability models). What the random LM writes is noise, the same on every run
    (seed 0, greedy decoding)."""
    pytest.importorskip("outlines")  # the local LM's verifier is schema-constrained
    lm = save_tiny_lm(tmp_path / "tiny_lm")
    parameters = "\n".join(
        [
            "import sys",
            f"sys.path.insert(0, {str(ROOT / 'tests')!r})",
            "from conftest import HashedBagOfWords",
            f"lm = {str(lm)!r}  # a tiny random Llama",
            "embedder = HashedBagOfWords()  # word overlap: the search ranks as the prose says",
        ]
    )
    _, text = run_notebook(CONTROLLER, parameters)
    first_search = text.split("searched ", 1)[1].split("\n", 1)[0]
    assert "van-hook-mirror" in first_search  # example 1 starts from the misleading passage
    assert "dropped: van-hook-mirror" in text  # example 1, with the source policy
    example_3 = text.split("final action:")[-1]  # the last episode printed
    assert re.match(r" (answer|stop), after 1 retrieval round;", example_3), example_3


@pytest.mark.real_models
def test_cookbook_05_question_on_the_bundled_models():
    """The controller cookbook's plain question on the bundled 0.5B and MiniLM, as its
    example 3 runs it (``verify="auto"``, k=2): one search, one draft answer, and the
    episode ends as the notebook says, with STOP (or ANSWER) after one retrieval round and
    no verifier call. One episode: the cookbook's setup cells, then one ``run``."""
    from neocorrag_core.belief import BeliefConfig, BeliefController

    setup = notebook_setup(CONTROLLER)
    assert setup["lm"] is None and setup["embedder"] is None  # the defaults, as users run it
    controller = BeliefController.from_models(
        setup["lm"], models=setup["models"], config=BeliefConfig(k=2)
    )
    result = controller.run(
        "What is the county seat of McLean County, North Dakota?", setup["search"]
    )
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        setup["show"](result)  # the notebook's table of the trajectory
    shown = out.getvalue()
    assert re.search(r"final action: (answer|stop), after 1 retrieval round;", shown), shown
    assert result.answer and "mclean" in {p.id for p in result.evidence}, shown
    assert not any(step["verified"] for step in result.trajectory), shown  # as example 3 says


def notebook_setup(path: Path) -> dict[str, Any]:
    """The names the code cells before ``## Example 1`` define (data, parameters, models,
    search, helpers: nothing loads or runs an episode there), run in this process."""
    notebook = nbformat.read(path, as_version=4)
    namespace: dict[str, Any] = {}
    with contextlib.redirect_stdout(io.StringIO()):
        for cell in notebook.cells:
            if cell.cell_type == "markdown" and cell.source.startswith("## Example 1"):
                return namespace
            if cell.cell_type == "code":
                exec(compile(cell.source, f"{path.name}: setup", "exec"), namespace)
    raise AssertionError(f"{path.name} has no '## Example 1' heading")


def readme_snippet(heading: str, number: int = 0, doc: str = "README.md") -> str:
    """The ``number``-th (0-based) python code block under ``## heading`` in ``doc``."""
    text = (ROOT / doc).read_text(encoding="utf-8")
    section = text.split(f"\n## {heading}\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```python\n(.*?)```", section, re.S)[number]


@pytest.mark.real_models
@pytest.mark.parametrize("heading", ["Use with LangChain", "Use with LlamaIndex"])
def test_readme_snippet_runs_and_drops_the_unsupported_documents(heading):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(readme_snippet(heading), f"README: {heading}", "exec"), {})
    printed = out.getvalue()
    assert "chain: " in printed and "founded by -> Steve Jobs" in printed  # from the metadata
    assert "Evidence chains:" not in printed  # no chain block by default
    assert "founded in 1976 by Steve Jobs" in printed  # the second hop, kept for its chain
    assert "Galaxy S" not in printed and "Lee Byung-chul" not in printed  # dropped noise


@pytest.mark.real_models
def test_readme_raw_documents_snippet_mines_chains_from_spacy_triples(tmp_path, monkeypatch):
    pytest.importorskip("spacy")
    monkeypatch.setenv("NEOCORRAG_TRIPLE_STORE", str(tmp_path / "triples.sqlite"))
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = readme_snippet("Documents without triples")
        exec(compile(code, "README: Documents without triples", "exec"), {})
    printed = out.getvalue()
    assert "chain: " in printed and "Steve Jobs" in printed  # the second hop, kept
    assert "Samsung" not in printed  # noise no chain supports, dropped


@pytest.mark.real_models
def test_readme_engine_snippet_keeps_the_second_hop_and_drops_noise():
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(readme_snippet("Use the engine directly"), "README: engine", "exec"), {})
    printed = out.getvalue()
    assert "founded by -> Steve Jobs" in printed  # the chain, printed by the snippet
    assert "Evidence chains:" not in printed  # result_context(result): no block by default
    assert "d3 linked to a passage about the question" in printed  # the second hop, a bridge
    assert "Galaxy S" not in printed


@pytest.mark.real_models
@pytest.mark.parametrize("heading", ["LangChain", "LlamaIndex"])
def test_docs_evireform_snippets_find_the_missing_hop(heading):
    snippet = readme_snippet(heading, doc="docs/evireform.md")
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(snippet, f"docs/evireform.md: {heading}", "exec"), {})
    printed = out.getvalue()
    found = [line for line in printed.splitlines() if not line.startswith("plain:")]
    assert any("Steve Jobs was born in San Francisco" in line for line in found)
    if heading == "LangChain":  # the plain retriever alone misses it
        plain = next(line for line in printed.splitlines() if line.startswith("plain:"))
        assert "San Francisco" not in plain


@pytest.mark.real_models
@pytest.mark.parametrize("number", [0, 1], ids=["langchain", "llamaindex"])
def test_readme_belief_snippets_end_with_a_typed_action_on_retrieved_evidence(number):
    pytest.importorskip("outlines")  # the bundled LM's verifier is schema-constrained
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = readme_snippet("Deciding when to search again (BeliefRAG)", number)
        exec(compile(code, "README: BeliefRAG", "exec"), {})
    words = out.getvalue().split()
    assert words[0] in ("answer", "stop", "abstain")
    # The final evidence is documents the retriever returned (ids d1..d3).
    assert re.findall(r"'(d\d)'", out.getvalue()), out.getvalue()


@pytest.mark.real_models
def test_readme_pipeline_snippet_finds_the_hop_the_plain_search_missed(tmp_path, monkeypatch):
    monkeypatch.setenv("NEOCORRAG_TRIPLE_STORE", str(tmp_path / "triples.sqlite"))
    monkeypatch.chdir(tmp_path)  # the snippet writes its store folder where it runs
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        code = readme_snippet("The full pipeline on a store you keep")
        exec(compile(code, "README: pipeline", "exec"), {})
    text = printed.getvalue()
    plain = text.split("plain top-3:", 1)[1].split("\n", 1)[0]
    assert "Jane Roe" not in plain
    assert "Jane Roe |" in text  # found by the residual query and kept
    assert "Film X (soundtrack) |" not in text  # the noise dropped
