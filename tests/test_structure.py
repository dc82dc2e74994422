"""The shape of the code: no import circle among the project's modules, and no source file too long to read.

The import graph is read from the source (ast), not from a running interpreter, so it sees every import a
module can make: at module level and inside a function alike. A function-level import is still a
dependency (the module cannot work without the other), and it is the usual way a circle is hidden when a
file is split to get it under the size rule; so both count. An import of a package's own submodule by its
``__init__`` is an edge like any other; the implicit import of a parent package that Python makes before
loading a submodule is not (every package would be a circle with its own modules). Lazy loads by a name in
a string (``shardbook/__init__.py``'s table of exports, ``importlib.import_module``) are not imports here.
An import under ``if TYPE_CHECKING:`` is: it never runs, but two modules that need each other's types
are still one design split in two (the class report's page and its numbers were, until the numbers
got a module of their own, grading/classsummary.py).
"""

from __future__ import annotations

import ast
import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: The project's own packages: the graph is drawn among their modules; jax, nbgrader and the rest are outside.
PACKAGES = ("shardbook", "grading", "tools", "benchmarks", "tests")
#: The size rule: a file a maintainer reads in one sitting. It holds for code (.py); a chapter's or an
#: assignment's Markdown is prose and long by nature, and generated or vendored files are not written here.
MAX_LINES = 800


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def project_modules() -> dict[str, Path]:
    """Every module of the project's packages: dotted name -> file."""
    return {
        _module_name(path): path
        for package in PACKAGES
        for path in sorted((ROOT / package).rglob("*.py"))
        if "__pycache__" not in path.parts
    }


def _resolve(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    """The absolute name of what ``from <node.module> import ...`` in ``module`` names."""
    if not node.level:
        return node.module or ""
    base = module.split(".") if is_package else module.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def imports_of(module: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The project modules that ``module`` imports anywhere in its file (module level and in functions)."""
    found: set[str] = set()
    tree = ast.parse(path.read_text(), filename=str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            source = _resolve(module, path.name == "__init__.py", node)
            # `from pkg import sub` imports the submodule pkg.sub when there is one, else a name of pkg.
            names = [f"{source}.{a.name}" if f"{source}.{a.name}" in modules else source for a in node.names]
        else:
            continue
        for name in names:
            while name and name not in modules:  # import a.b.c of a module a.b: its nearest project module
                name = name.rpartition(".")[0]
            if name and name != module:
                found.add(name)
    return found


def import_graph() -> dict[str, set[str]]:
    modules = project_modules()
    return {name: imports_of(name, path, modules) for name, path in modules.items()}


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Each strongly connected group of two or more modules (Tarjan), as a sorted list of names."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []

    def visit(node: str) -> None:  # the graph is a few hundred modules deep at most: recursion is fine
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for other in graph.get(node, ()):
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in on_stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(groups)


def test_the_circle_finder_finds_a_circle_and_only_one():
    # a -> b -> c -> a is one circle of three; d -> a hangs off it and is in none.
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert circles(graph) == [["a", "b", "c"]]
    assert circles({"a": {"b"}, "b": set()}) == []


def test_imports_are_read_at_module_and_function_level(tmp_path):
    # the graph sees a function-level import and a relative one, and resolves `from pkg import sub`.
    modules = {name: tmp_path / f"{name.replace('.', '/')}.py" for name in ("pkg.a", "pkg.b")}
    modules["pkg"] = tmp_path / "pkg/__init__.py"
    modules["pkg.a"].parent.mkdir()
    modules["pkg.a"].write_text("def f():\n    from . import b\n    return b\n")
    assert imports_of("pkg.a", modules["pkg.a"], modules) == {"pkg.b"}
    modules["pkg.b"].write_text("from pkg.a import f\nimport os\n")
    assert imports_of("pkg.b", modules["pkg.b"], modules) == {"pkg.a"}
    # an import for annotations only is an edge too: the two modules are still one design
    modules["pkg.b"].write_text("import typing\nif typing.TYPE_CHECKING:\n    from pkg import a\n")
    assert imports_of("pkg.b", modules["pkg.b"], modules) == {"pkg.a"}


def test_the_project_has_no_import_circle():
    graph = import_graph()
    assert len(graph) > 100 and graph["tools.leaks"], "the graph must hold the project's modules and imports"
    found = circles(graph)
    listed = "\n".join("  " + " <-> ".join(group) for group in found)
    assert not found, f"import circles (modules that import each other, directly or round):\n{listed}"


def test_no_source_file_is_over_the_size_rule():
    too_long, checked = [], 0
    for folder, subfolders, files in os.walk(ROOT):
        subfolders[:] = [d for d in subfolders if not d.startswith((".", "_build", "__pycache__"))]  # .venv
        for name in (f for f in files if f.endswith(".py")):
            path = Path(folder, name)
            lines, checked = len(path.read_text().splitlines()), checked + 1
            if lines > MAX_LINES:
                too_long.append(f"{path.relative_to(ROOT)}: {lines} lines")
    assert checked > 100, "the walk must reach the project's files"
    assert not too_long, f"over {MAX_LINES} lines; split along responsibilities:\n  " + "\n  ".join(too_long)
