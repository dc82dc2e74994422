"""Every assignment's graders, held to the same contract.

For each assignment in solutions/: the instructor's answers pass every ``check_<function>``; each
committed ``wrong_*`` submission (tests/submissions) fails exactly the graders its EXPECTED names,
with a message holding what was expected, what came back and a hint; a function not yet written, or one that
crashes, gets one sentence instead of a traceback. Assignment-specific properties (oracles agreeing
with JAX, byte budgets, case coverage) live in tests/test_graders_<module>.py.
"""

import importlib
from pathlib import Path

import nbformat
import pytest

from grading.assignment import grade_id, is_answer
from shardbook.checks import CheckFailed
from tests import submissions
from tests.notebooks import ASSIGNMENTS, ROOT, answer_sources, answers, run_cell


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


@pytest.fixture(scope="module")
def solutions():
    return {a: answers(next((ROOT / "solutions" / a).glob("*.ipynb"))) for a in ASSIGNMENTS}


def test_every_assignment_has_graders_and_wrong_submissions():
    # An assignment without a grader for each answer, or without committed mistakes, is untested.
    for assignment in ASSIGNMENTS:
        module = grader_module(assignment)
        for fn in functions(assignment):
            assert callable(getattr(module, f"check_{fn}", None)), (assignment, fn)
        assert any(n.startswith("wrong_") for n in expected(assignment)), assignment
    assert len(WRONG_CASES) >= len(ASSIGNMENTS) and VISIBLE_CASES  # cases were found at all


@pytest.mark.parametrize(("assignment", "fn"), SOLUTION_CASES)
def test_solution_passes_every_grader(solutions, assignment, fn):
    getattr(grader_module(assignment), f"check_{fn}")(getattr(solutions[assignment], fn))


@pytest.mark.parametrize(("assignment", "name"), WRONG_CASES)
def test_wrong_submission_fails_exactly_the_intended_graders(assignment, name, tmp_path):
    # Each committed mistake fails the hidden grader of the function it gets wrong, and only that.
    path = built(assignment, name, tmp_path)
    learner = answers(path)
    theirs, ours = (
        answer_sources(path),
        answer_sources(next((ROOT / "solutions" / assignment).glob("*.ipynb"))),
    )
    lost = {
        gid.removeprefix("test_").removesuffix("_hidden")
        for gid in expected(assignment)[name]["lost"]
        if gid.endswith("_hidden")
    }
    assert lost, f"{name} must lose at least one hidden test"
    module = grader_module(assignment)
    for fn in functions(assignment):
        check = getattr(module, f"check_{fn}")
        if fn in lost:
            with pytest.raises(CheckFailed) as failure:
                check(getattr(learner, fn))
            message = str(failure.value)
            assert "expected" in message and "got" in message and "Hint:" in message, message
        elif theirs[fn] != ours[fn]:  # an answer identical to the solution's passed above already
            check(getattr(learner, fn))


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


VISIBLE_CASES = [
    (a, name, gid.removeprefix("test_").removesuffix("_visible"))
    for a in ASSIGNMENTS
    for name, spec in expected(a).items()
    if name.startswith("wrong_")
    for gid in spec["lost"]
    if gid.endswith("_visible")
]


@pytest.mark.parametrize(("assignment", "name", "fn"), VISIBLE_CASES)
def test_wrong_submission_fails_the_self_check_grading_says_it_fails(assignment, name, fn, tmp_path):
    # Self-checks test what grading tests: where expected.json says a mistake loses the visible
    # test, the self-check itself catches it, in words (expected, got, hint) — not a traceback.
    with pytest.raises(CheckFailed) as failure:
        run_self_check(assignment, built(assignment, name, tmp_path), fn)
    message = str(failure.value)
    assert "expected" in message and "got" in message and "Hint:" in message, message
