"""Helpers for tests that look inside notebooks; what a cell is comes from grading/assignment.py."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import nbformat

from grading.assignment import IMPORTS, Assignment, new_cell, run_cell

ROOT = Path(__file__).resolve().parents[1]
ASSIGNMENTS = sorted(p.name for p in (ROOT / "solutions").iterdir() if p.is_dir())

__all__ = ["ASSIGNMENTS", "ROOT", "answer_sources", "answers", "assignment_notebook", "run_cell"]


def answers(path: Path) -> SimpleNamespace:
    """Runs a notebook's import cell and answer cells (not its tests) and returns their namespace."""
    notebook = Assignment.read(path)
    namespace: dict = {}
    run_cell(notebook.source(IMPORTS), f"{path.name}:{IMPORTS}", namespace)
    for gid, source in notebook.answers().items():
        run_cell(source, f"{path.name}:{gid}", namespace)
    return SimpleNamespace(**namespace)


def answer_sources(path: Path) -> dict[str, str]:
    """grade_id -> source of each answer cell, without nbgrader's solution markers."""
    return {gid: source.strip() for gid, source in Assignment.read(path).answers().items()}


def assignment_notebook(intro: str, exercises: list[tuple[str, list[int]]]) -> nbformat.NotebookNode:
    """A notebook with an intro, and per exercise a heading and test cells worth the given points."""
    cells = [nbformat.v4.new_markdown_cell(intro)]
    for heading, points in exercises:
        cells.append(nbformat.v4.new_markdown_cell(heading))
        for k, p in enumerate(points):
            cells.append(new_cell("code", "pass", f"test_{k}", p))
    return nbformat.v4.new_notebook(cells=cells)


def sphinx_page(folder: Path, cells: list, extension: str, config: str = "") -> tuple[str, str]:
    """A tiny Sphinx build with myst-nb and one of the book's extensions, no execution: the notebook
    ``page.ipynb`` of ``cells`` in ``folder``. Returns (the page's HTML, the build's warnings)."""
    import io

    from sphinx.application import Sphinx

    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.cells = cells
    nbformat.write(nb, folder / "page.ipynb")
    (folder / "conf.py").write_text(
        f"import sys\nsys.path.insert(0, {str(ROOT)!r})\n"
        f"extensions = ['myst_nb', {extension!r}]\nroot_doc = 'page'\nnb_execution_mode = 'off'\n"
        f"exclude_patterns = ['_build']\n{config}"
    )
    warnings = io.StringIO()
    app = Sphinx(
        folder, folder, folder / "_build", folder / "_doctrees", "html", status=None, warning=warnings
    )
    app.build()
    return (folder / "_build" / "page.html").read_text(), warnings.getvalue()
