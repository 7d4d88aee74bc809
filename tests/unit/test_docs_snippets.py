"""The README's and the user docs' Python snippets run as shown.

* Every Python block of the README and of the user docs below imports or defines every
  name it uses (checked on the source: ``symtable``, nothing run), so a reader can paste
  any one block alone.
* The README's persistent-store example runs as a deployment runs it: its first block
  indexes into a folder and queries, its second ("later, in another process") reopens that
  folder in a fresh interpreter, adds nothing, extracts nothing (spaCy blocked), embeds
  no triple text again (its vector is in the store) and keeps the same documents.
"""

from __future__ import annotations

import builtins
import json
import os
import re
import subprocess
import symtable
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = [
    "README.md",
    "docs/adapters.md",
    "docs/belief.md",
    "docs/benchmarks.md",
    "docs/development.md",
    "docs/eval.md",
    "docs/evaluate-your-pipeline.md",
    "docs/evireform.md",
    "docs/indexing.md",
    "docs/performance.md",
    "docs/pipeline.md",
    "docs/robustness.md",
    "docs/triples.md",
]
"""The documents whose every Python block must run alone (the lab log and the pages that
quote fragments of a larger setup are not here)."""

STORE_SECTION = "The full pipeline on a store you keep"


def python_blocks(doc: str) -> list[tuple[int, str]]:
    """``(line, code)`` of each fenced ``python`` block of ``doc``."""
    text = (ROOT / doc).read_text(encoding="utf-8")
    return [
        (text[: m.start()].count("\n") + 1, m.group(1))
        for m in re.finditer(r"```python\n(.*?)```", text, re.S)
    ]


def section_blocks(heading: str, doc: str = "README.md") -> list[str]:
    """The ``python`` blocks under ``## heading`` in ``doc``, in order."""
    text = (ROOT / doc).read_text(encoding="utf-8")
    section = text.split(f"\n## {heading}\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```python\n(.*?)```", section, re.S)


def undefined_names(code: str) -> set[str]:
    """Names ``code`` reads at module level (or as a global from a nested scope) that it
    never binds (assignment, import, ``def``, ``class``, loop or ``with`` target) and that
    are not builtins."""
    top = symtable.symtable(code, "<snippet>", "exec")
    bound = {s.get_name() for s in top.get_symbols() if s.is_assigned() or s.is_imported()}
    bound |= {t.get_name() for t in top.get_children()}  # functions and classes defined
    known = bound | set(dir(builtins))
    missing: set[str] = set()

    def walk(table: symtable.SymbolTable, is_top: bool) -> None:
        for symbol in table.get_symbols():
            reads_global = symbol.is_global() or (is_top and not symbol.is_local())
            if symbol.is_referenced() and reads_global and symbol.get_name() not in known:
                missing.add(symbol.get_name())
        for child in table.get_children():
            walk(child, False)

    walk(top, True)
    return missing


def test_undefined_names_finds_a_name_never_imported():
    assert undefined_names("x = Missing()\n") == {"Missing"}
    assert undefined_names("def f():\n    return Missing\n") == {"Missing"}
    assert undefined_names("import os\nprint([os.sep for _ in range(2)])\n") == set()
    assert undefined_names("def f(a: int) -> int:\n    return a\nf(1)\n") == set()


BLOCKS = [(doc, line, code) for doc in DOCS for line, code in python_blocks(doc)]


@pytest.mark.parametrize(("doc", "line", "code"), BLOCKS, ids=[f"{d}:{n}" for d, n, _ in BLOCKS])
def test_every_block_imports_or_defines_the_names_it_uses(doc, line, code):
    compile(code, f"{doc}:{line}", "exec")  # valid Python as shown
    assert not undefined_names(code), f"{doc}, the block at line {line}"


def test_the_store_example_has_a_second_block_that_reopens_without_adding():
    index, reopen = section_blocks(STORE_SECTION)
    assert "add_documents" in index
    assert "add_documents" not in reopen and "Document(" not in reopen
    folder = re.compile(r'folder = "([^"]+)"')
    assert folder.search(index).group(1) == folder.search(reopen).group(1)  # the same store


BLOCK_SPACY = """
import sys
sys.modules["spacy"] = None  # a call that tried to extract triples would fail
"""

COUNT_ENCODED = """
import atexit, json
import sentence_transformers
_encode = sentence_transformers.SentenceTransformer.encode
_encoded = []
def _counted(self, sentences, *args, **kwargs):
    _encoded.extend([sentences] if isinstance(sentences, str) else list(sentences))
    return _encode(self, sentences, *args, **kwargs)
sentence_transformers.SentenceTransformer.encode = _counted
atexit.register(lambda: print("ENCODED " + json.dumps(_encoded)))
"""


def _on_tiny_embedder(code: str, embedder: Path) -> str:
    """``code`` with the bundled embedder replaced by the tiny one at ``embedder`` (unit
    tests load no real model; the MiniLM run of the first block is
    ``tests/integration/test_cookbooks.py``)."""
    assert code.count("NeocorRAGEmbeddings()") == 1
    return code.replace("NeocorRAGEmbeddings()", f"NeocorRAGEmbeddings({str(embedder)!r})")


def _run_fresh(code: str, folder: Path) -> str:
    """``code`` in a fresh interpreter, in ``folder`` (the snippets' relative store folder
    lands there); its stdout."""
    env = dict(os.environ, NEOCORRAG_TRIPLE_STORE=str(folder / "default-triples.sqlite"))
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def _kept(printed: str) -> list[tuple[str, str]]:
    """``(document id, kept reason)`` of each ``id | ... | reason`` line printed."""
    rows = [line.split(" | ") for line in printed.splitlines() if " | " in line]
    return [(row[0], row[-1]) for row in rows]


def _encoded(printed: str) -> list[str]:
    """The texts the embedder encoded, as ``COUNT_ENCODED`` printed them."""
    line = next(line for line in printed.splitlines() if line.startswith("ENCODED "))
    return json.loads(line.removeprefix("ENCODED "))


def test_the_store_example_reopens_the_folder_in_another_process(tmp_path):
    pytest.importorskip("chromadb")
    pytest.importorskip("langchain_chroma")
    from tiny_models import save_tiny_embedder

    embedder = save_tiny_embedder(tmp_path / "tiny_embedder")
    work = tmp_path / "work"
    work.mkdir()
    index, reopen = (_on_tiny_embedder(code, embedder) for code in section_blocks(STORE_SECTION))

    first = _run_fresh(BLOCK_SPACY + COUNT_ENCODED + index, work)  # triples from metadata
    assert "plain top-3:" in first
    kept = _kept(first)
    assert kept, first
    assert (work / "films-store" / "chroma").is_dir()
    assert (work / "films-store" / "triples.sqlite").is_file()

    second = _run_fresh(BLOCK_SPACY + COUNT_ENCODED + reopen, work)
    assert "documents in the store: 6" in second  # nothing added again
    assert _kept(second) == kept  # the same documents, for the same reasons
    texts = _encoded(second)
    assert "Where was the director of Film X born?" in texts
    # The first process embedded the triples' texts and stored their vectors: the second
    # embeds none of them again.
    triples = re.findall(r'\["([^"]+)", "([^"]+)", "([^"]+)"\]', index)
    triple_texts = {" ".join(triple) for triple in triples}
    assert len(triple_texts) == 7 and triple_texts & set(_encoded(first))
    assert not triple_texts & set(texts), texts
