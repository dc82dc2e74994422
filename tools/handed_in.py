"""Notebooks as a learner hands them in: the released notebook with the instructor's answers, with helper
cells of the learner's own, and saved as Colab's *File → Download .ipynb* saves it.

Used by the learner's path (tools/learner_path.py), the committed submissions (tests/submissions) and the
grading tests; it imports nothing of either, so neither imports the other through it.
"""

from __future__ import annotations

import ast
import copy
import json
from pathlib import Path

import nbformat

from grading.assignment import Assignment

ROOT = Path(__file__).resolve().parents[1]


def solved_notebook(assignment: str, root: Path = ROOT) -> nbformat.NotebookNode:
    """The released exercise notebook with every answer cell replaced by the instructor's answer."""
    return Assignment.release(assignment, root).with_answers(Assignment.solution(assignment, root).answers())


def answer_names(nb: nbformat.NotebookNode) -> list[str]:
    return Assignment(nb).answer_ids()


def _uses_helper(source: str, name: str, helper: str) -> str:
    """``source`` with a first statement in function ``name`` that calls ``helper`` (after its docstring)."""
    tree = ast.parse(source)
    fn = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == name)
    first = fn.body[0]
    has_doc = isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant)
    at = (first.end_lineno or first.lineno) if has_doc else first.lineno - 1  # insert after this many lines
    lines = source.splitlines(keepends=True)
    indent = " " * first.col_offset
    lines.insert(at, f"{indent}assert {helper}() == 1  # defined in a cell of the learner's own\n")
    return "".join(lines)


#: Where a learner's helper cell can sit, relative to the answer that uses it.
PLACEMENTS = ("before", "between", "after")


def add_helper_cells(nb: nbformat.NotebookNode, placement: str) -> nbformat.NotebookNode:
    """Gives every answer a helper function in a cell of its own, which the answer calls.

    placement: ``'before'`` — the helper cell sits right above the answer cell; ``'between'`` — between
    two exercises, right after the previous exercise's last cell (for the first answer, after the
    imports cell); ``'after'`` — right after the answer cell, above its self-check.
    """
    if placement not in PLACEMENTS:
        raise ValueError(f"placement must be one of {PLACEMENTS}, got {placement!r}")
    nb = copy.deepcopy(nb)
    for name in answer_names(nb):
        helper = f"_helper_for_{name}"
        at = Assignment(nb).index(name)
        nb.cells[at].source = _uses_helper(nb.cells[at].source, name, helper)
        cell = nbformat.v4.new_code_cell(f"def {helper}():\n    return 1\n")
        if placement == "before":
            nb.cells.insert(at, cell)
        elif placement == "after":
            nb.cells.insert(at + 1, cell)
        else:  # above the markdown cells that introduce this exercise
            k = at
            while k > 0 and nb.cells[k - 1].cell_type == "markdown":
                k -= 1
            nb.cells.insert(k, cell)
    return nb


def colab_download(nb: nbformat.NotebookNode, with_outputs: bool = True) -> dict:
    """``nb`` as Colab's *File → Download .ipynb* saves it, as a JSON dict.

    No nbgrader (or any other) cell metadata, only Colab's ``id``; a top-level ``colab`` block;
    nbformat 4.0, so no cell ids. Code cells keep their outputs and execution counts; a cell that was
    never run gets a printed line and a count, as if it had been (``with_outputs``).
    """
    cells = []
    count = 0
    for k, cell in enumerate(nb.cells):
        out = {"cell_type": cell.cell_type, "metadata": {"id": f"c{k:04d}x"}, "source": cell.source}
        if cell.cell_type == "code":
            count += 1
            outputs = [dict(o) for o in cell.get("outputs", [])]
            if with_outputs and not outputs:
                outputs = [{"name": "stdout", "output_type": "stream", "text": "ok\n"}]
            out["metadata"]["colab"] = {"base_uri": "https://localhost:8080/"}
            out["execution_count"] = cell.get("execution_count") or count
            out["outputs"] = outputs
        cells.append(out)
    return {
        "cells": cells,
        "metadata": {
            "colab": {"provenance": []},
            "kernelspec": {"display_name": "Python 3", "name": "python3"},
            "language_info": {"name": "python"},
        },
        "nbformat": 4,
        "nbformat_minor": 0,
    }


def write_colab_download(nb: nbformat.NotebookNode, path: Path, with_outputs: bool = True) -> Path:
    path.write_text(json.dumps(colab_download(nb, with_outputs), indent=1, ensure_ascii=False))
    return path
