"""The boundaries the README claims, checked on the imports themselves (AST, nothing run).

* ``neocorrag_core`` imports neither LangChain nor LlamaIndex, anywhere in its tree, not
  even lazily inside a function;
* the engine's stages a/b/c (``search``, ``decoding``, ``refine``) talk through plain data
  only: none imports another;
* no import cycle between the package's modules (function-level imports count too; only
  imports under ``if TYPE_CHECKING:`` are left out, since they never run);
* every module the README's "How it works" table names exists.
"""

from __future__ import annotations

import ast
import importlib.util
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

import neocorrag_core
import neocorrag_integrations

ROOT = Path(__file__).resolve().parents[2]
FRAMEWORKS = ("langchain", "langchain_core", "langchain_classic", "langchain_community",
              "llama_index")  # fmt: skip
STAGES = (
    "neocorrag_core.chains.path_search",
    "neocorrag_core.chains.decoding",
    "neocorrag_core.chains.keep",
)


def package_dir(package: object) -> Path:
    return Path(package.__file__).parent  # type: ignore[attr-defined]


def modules() -> dict[str, Path]:
    """Every module of both packages (of the copy being tested: installed or checkout)."""
    found: dict[str, Path] = {}
    for package in (neocorrag_core, neocorrag_integrations):
        base = package_dir(package)
        for path in sorted(base.rglob("*.py")):
            parts = [package.__name__, *path.relative_to(base).with_suffix("").parts]
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found[".".join(parts)] = path
    return found


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _walk_runtime(node: ast.AST) -> Iterator[ast.AST]:
    """Every node except the bodies of ``if TYPE_CHECKING:`` blocks."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.If) and _is_type_checking(child):
            for other in child.orelse:
                yield other
                yield from _walk_runtime(other)
            continue
        yield child
        yield from _walk_runtime(child)


def imported_names(module: str, path: Path) -> set[str]:
    """Absolute names of everything ``module`` imports at run time (relative ones resolved)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    names: set[str] = set()
    for node in _walk_runtime(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = importlib.util.resolve_name("." * node.level + (node.module or ""), package)
            else:
                base = node.module or ""
            names.add(base)
            # "from pkg import sub" may import a submodule: record pkg.sub as well
            names.update(f"{base}.{alias.name}" for alias in node.names)
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "import_module"
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            names.add(node.args[0].value)
    return names


def internal_graph() -> dict[str, set[str]]:
    """module -> the package modules it imports."""
    mods = modules()
    graph: dict[str, set[str]] = {}
    for name, path in mods.items():
        targets = set()
        for imported in imported_names(name, path):
            # "a.b.c" imports a.b.c if it is a module, else the module a.b (c is a name in it)
            while imported and imported not in mods:
                imported = imported.rpartition(".")[0]
            if imported and imported != name:
                targets.add(imported)
        graph[name] = targets
    return graph


def test_the_modules_are_found():
    mods = modules()
    assert "neocorrag_core.chains.miner" in mods
    assert "neocorrag_core.evireform.reformulator" in mods
    assert "neocorrag_integrations.langchain" in mods


def test_core_never_imports_a_framework():
    offenders = []
    for name, path in modules().items():
        if not name.startswith("neocorrag_core"):
            continue
        for imported in imported_names(name, path):
            if imported.split(".")[0] in FRAMEWORKS:
                offenders.append(f"{name} imports {imported}")
    assert offenders == []


def test_core_never_imports_the_integrations():
    graph = internal_graph()
    offenders = [
        f"{name} imports {target}"
        for name, targets in graph.items()
        if name.startswith("neocorrag_core")
        for target in targets
        if target.startswith("neocorrag_integrations")
    ]
    assert offenders == []


def test_stages_a_b_c_do_not_import_each_other():
    graph = internal_graph()
    offenders = [
        f"{stage} imports {other}"
        for stage in STAGES
        for other in STAGES
        if other != stage and other in graph[stage]
    ]
    assert offenders == []


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle as a path ``[a, b, ..., a]``, or None."""
    state: dict[str, int] = {}  # 1 = on the stack, 2 = done
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for target in sorted(graph.get(node, ())):
            # A package's __init__ re-exporting its submodules is not a cycle with them.
            if target.startswith(node + "."):
                continue
            if state.get(target) == 1:
                return [*stack[stack.index(target) :], target]
            if target not in state:
                found = visit(target)
                if found:
                    return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state:
            found = visit(node)
            if found:
                return found
    return None


def test_no_import_cycles():
    cycle = find_cycle(internal_graph())
    assert cycle is None, " -> ".join(cycle or [])


def test_the_cycle_check_finds_a_cycle():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None
    assert find_cycle({"p": {"p.x"}, "p.x": set()}) is None


def test_the_readme_layout_table_names_real_modules():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    table = readme.split("## How it works", 1)[1].split("\n## ", 1)[0]
    cited = set(
        re.findall(
            r"`((?:neocorrag_core|neocorrag_integrations)/[\w/]*\.py|"
            r"(?:neocorrag_core|neocorrag_integrations)/[\w/]+/)`",
            table,
        )
    )
    cited |= {f"neocorrag_core/{name}" for name in re.findall(r"`(\w+\.py)`", table)}
    assert cited, "the README's 'How it works' table cites no module"
    for entry in cited:
        assert (ROOT / entry).exists(), f"README cites {entry}, which does not exist"


@pytest.mark.parametrize("module", ["neocorrag_core", "neocorrag_core.eval"])
def test_importing_core_pulls_in_no_framework(module):
    import subprocess
    import sys

    code = (
        f"import sys, {module}; "
        f"bad = sorted(m for m in sys.modules if m.split('.')[0] in {FRAMEWORKS!r}); "
        "print(bad); sys.exit(1 if bad else 0)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd="/")
    assert done.returncode == 0, done.stdout + done.stderr
