"""Every assignment's graders, held to the same contract.

For each assignment in solutions/: a ``check_<function>`` for every answer and committed ``wrong_*``
submissions; a function not yet written, or one that crashes, gets one sentence instead of a
traceback. That the instructor's answers pass every grader and self-check, and that each committed
mistake fails exactly the test cells its EXPECTED names with a message holding what was expected,
what came back and a hint, is tests/test_submissions.py's (one in-process grading per assignment).
Assignment-specific properties (oracles agreeing with JAX, byte budgets, case coverage) live in
tests/test_graders_<module>.py.
"""

import importlib
from pathlib import Path

import nbformat
import pytest

from grading.assignment import grade_id, is_answer
from shardbook.checks import CheckFailed
from tests import submissions
from tests.notebooks import ASSIGNMENTS, ROOT, answer_sources, run_cell


def grader_module(assignment: str):
    return importlib.import_module(f"grading.graders.a{assignment}")


def functions(assignment: str) -> list[str]:
    notebook = next((ROOT / "solutions" / assignment).glob("*.ipynb"))
    cells = nbformat.read(notebook, as_version=4).cells
    return [grade_id(c) for c in cells if is_answer(c)]


def expected(assignment: str) -> dict:
    """name -> EXPECTED of each answer-only submission of an assignment."""
    return {name: sub.expected for name, sub in submissions.answer_only(assignment).items()}


def built(assignment: str, name: str, folder: Path) -> Path:
    """The notebook of a committed answer-only submission, written into ``folder``."""
    path = folder / f"{name}.ipynb"
    nbformat.write(submissions.notebook(submissions.answer_only(assignment)[name], assignment), path)
    return path


SOLUTION_CASES = [(a, f) for a in ASSIGNMENTS for f in functions(a)]
WRONG_CASES = [(a, name) for a in ASSIGNMENTS for name in expected(a) if name.startswith("wrong_")]


def test_every_assignment_has_graders_and_wrong_submissions():
    # An assignment without a grader for each answer, or without committed mistakes, is untested.
    for assignment in ASSIGNMENTS:
        module = grader_module(assignment)
        for fn in functions(assignment):
            assert callable(getattr(module, f"check_{fn}", None)), (assignment, fn)
        assert any(n.startswith("wrong_") for n in expected(assignment)), assignment
    assert len(WRONG_CASES) >= len(ASSIGNMENTS)  # cases were found at all


@pytest.mark.parametrize(("assignment", "fn"), SOLUTION_CASES)
def test_grader_says_not_attempted(assignment, fn):
    def stub(*args, **kwargs):
        raise NotImplementedError("Exercise not attempted yet")

    with pytest.raises(CheckFailed, match=f"{fn} is not written yet"):
        getattr(grader_module(assignment), f"check_{fn}")(stub)


@pytest.mark.parametrize(("assignment", "fn"), SOLUTION_CASES)
def test_grader_reports_a_crash_in_words(assignment, fn):
    def broken(*args, **kwargs):
        raise KeyError("Z")

    with pytest.raises(CheckFailed, match=r"expected a result, got KeyError: 'Z'\. Hint: "):
        getattr(grader_module(assignment), f"check_{fn}")(broken)


def run_self_check(assignment: str, notebook, function: str) -> None:
    """Runs the instructor's imports cell, ``notebook``'s answer cells and the instructor's visible
    self-check of ``function``, as grading does (it restores locked cells); raises what the check raises."""
    solution = next((ROOT / "solutions" / assignment).glob("*.ipynb"))
    theirs = answer_sources(notebook)
    namespace: dict = {}
    visible = None
    for cell in nbformat.read(solution, as_version=4).cells:
        gid = grade_id(cell)
        if gid == "imports":
            run_cell(cell.source, f"{assignment}:imports", namespace)
        elif is_answer(cell):
            run_cell(theirs[gid], f"{notebook.name}:{gid}", namespace)
        elif gid == f"test_{function}_visible":
            visible = cell.source
    run_cell(visible, f"{assignment}:test_{function}_visible", namespace)
