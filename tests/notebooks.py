"""Helpers for tests that look inside notebooks: nbgrader cells, answers, the setup cell."""

from __future__ import annotations

import linecache
import re
from pathlib import Path
from types import SimpleNamespace

import nbformat

ROOT = Path(__file__).resolve().parents[1]
ASSIGNMENTS = sorted(p.name for p in (ROOT / "solutions").iterdir() if p.is_dir())


def nbgrader_meta(cell) -> dict:
    return cell.get("metadata", {}).get("nbgrader", {})


def run_cell(source: str, filename: str, namespace: dict) -> None:
    """Runs a cell's source in ``namespace`` as a notebook kernel does: its functions keep their source
    (``inspect.getsource`` reads it from linecache, as in IPython), which shardbook.hosts sends on."""
    linecache.cache[filename] = (len(source), None, source.splitlines(keepends=True), filename)
    exec(compile(source, filename, "exec"), namespace)


def answers(path: Path) -> SimpleNamespace:
    """Runs a notebook's import cell and answer cells (not its tests) and returns their namespace."""
    nb = nbformat.read(path, as_version=4)
    namespace: dict = {}
    for cell in nb.cells:
        meta = nbgrader_meta(cell)
        if cell.cell_type == "code" and (meta.get("solution") or meta.get("grade_id") == "imports"):
            source = re.sub(r"^\s*### (BEGIN|END) SOLUTION\s*$", "", cell.source, flags=re.M)
            run_cell(source, f"{path.name}:{meta.get('grade_id')}", namespace)
    return SimpleNamespace(**namespace)


def answer_sources(path: Path) -> dict[str, str]:
    """grade_id -> source of each answer cell, without nbgrader's solution markers."""
    nb = nbformat.read(path, as_version=4)
    return {
        nbgrader_meta(c)["grade_id"]: re.sub(
            r"^\s*### (BEGIN|END) SOLUTION\s*$\n?", "", c.source, flags=re.M
        ).strip()
        for c in nb.cells
        if nbgrader_meta(c).get("solution")
    }


def assignment_notebook(intro: str, exercises: list[tuple[str, list[int]]]) -> nbformat.NotebookNode:
    """A notebook with an intro, and per exercise a heading and test cells worth the given points."""
    cells = [nbformat.v4.new_markdown_cell(intro)]
    for heading, points in exercises:
        cells.append(nbformat.v4.new_markdown_cell(heading))
        for k, p in enumerate(points):
            cell = nbformat.v4.new_code_cell("pass")
            cell.metadata["nbgrader"] = {"grade": True, "grade_id": f"test_{k}", "points": p}
            cells.append(cell)
    return nbformat.v4.new_notebook(cells=cells)
