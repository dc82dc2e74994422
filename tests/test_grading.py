"""End to end: `make grade` on the committed submissions, in a scratch copy of the course.

One batch holds the solution, every typical wrong answer, and notebooks that break in each way a
class produces (syntax error, infinite loop, a kernel that dies, a truncated file). Every learner must
get exactly the intended score, a feedback page without hidden-test source, and a note for anything
unusual; no learner may stop the batch.
"""

import csv
import html as htmllib
import json
import re
import shutil

import nbformat
import pytest

from grading import grade
from tests.notebooks import ASSIGNMENTS, ROOT
from tools import learner_path

CELL_TIMEOUT = 30  # generous: two notebooks are graded at once on a 2-core machine

# The solution as a Colab learner hands it in (no cell metadata, a `colab` block, nbformat 4.0,
# outputs), with a helper cell of their own for each answer, placed as said: full marks, one note.
# Two assignments only: each graded notebook costs about 8 s (tests/test_repair.py covers all).
# Every other assignment's reference solution is itself handed in as a Colab download (no helper
# cells), so each assignment's solution is graded end to end in Colab's shape at no extra cost.
COLAB_LEARNERS = {"01_meshes": "after", "04_shard_map": "before"}


@pytest.fixture(
    scope="module", params=[a for a in ASSIGNMENTS if (ROOT / "tests" / "submissions" / a).is_dir()]
)
def graded(request, tmp_path_factory):
    assignment = request.param
    tmp = tmp_path_factory.mktemp(assignment)
    course = grade.copy_course(tmp)
    submissions = tmp / "downloads"
    shutil.copytree(
        ROOT / "tests" / "submissions" / assignment, submissions, ignore=shutil.ignore_patterns("*.json")
    )
    solution = next((ROOT / "solutions" / assignment).glob("*.ipynb"))
    if assignment in COLAB_LEARNERS:
        shutil.copy(solution, submissions / "reference_solution.ipynb")
    else:
        learner_path.write_colab_download(
            learner_path.solved_notebook(assignment), submissions / "reference_solution.ipynb"
        )
    if assignment in COLAB_LEARNERS:
        solved = learner_path.solved_notebook(assignment)
        helped = learner_path.add_helper_cells(solved, COLAB_LEARNERS[assignment])
        learner_path.write_colab_download(helped, submissions / "colab_learner.ipynb")
    code = grade.main(
        [
            assignment,
            str(submissions),
            "--root",
            str(course),
            "--cell-timeout",
            str(CELL_TIMEOUT),
            "--jobs",
            "2",
        ]
    )
    assert code == 0
    reports = course / "grading" / "reports" / assignment
    with open(reports / "scores.csv") as f:
        rows = {row["learner"]: row for row in csv.DictReader(f)}
    expected = json.loads((ROOT / "tests" / "submissions" / assignment / "expected.json").read_text())
    expected.pop("_about")
    return assignment, course, reports, rows, expected


def test_scores_csv_has_one_row_per_learner_and_a_column_per_test_cell(graded):
    assignment, course, _, rows, expected = graded
    cells = grade.graded_cells(assignment, course)
    assert set(rows) == set(expected) | {"reference_solution"} | colab_learner(assignment)
    for row in rows.values():
        assert list(row)[:3] == ["learner", "total", "max"]
        assert list(row)[3:] == [gid for gid, _ in cells]


def colab_learner(assignment):
    return {"colab_learner"} if assignment in COLAB_LEARNERS else set()


def test_solution_scores_full_marks(graded):
    assignment, _, _, rows, _ = graded
    for learner in {"reference_solution"} | colab_learner(assignment):
        row = rows[learner]
        assert float(row["total"]) == float(row["max"]) > 0, learner


def test_each_submission_loses_exactly_the_intended_points(graded):
    assignment, course, _, rows, expected = graded
    cells = dict(grade.graded_cells(assignment, course))
    for learner, spec in expected.items():
        lost = set(cells) if spec["lost"] == "all" else set(spec["lost"])
        for gid, points in cells.items():
            want = 0.0 if gid in lost else points
            assert float(rows[learner][gid]) == want, (learner, gid, rows[learner][gid])
        assert float(rows[learner]["total"]) == sum(p for g, p in cells.items() if g not in lost), learner


def hidden_lines(assignment: str) -> set[str]:
    """The code lines of the hidden tests of an assignment's instructor notebook."""
    notebook = next((ROOT / "solutions" / assignment).glob("*.ipynb"))
    lines = set()
    for cell in nbformat.read(notebook, as_version=4).cells:
        for block in re.findall(r"### BEGIN HIDDEN TESTS\n(.*?)### END HIDDEN TESTS", cell.source, re.S):
            lines |= {line.strip() for line in block.splitlines() if line.strip()}
    return lines


def test_feedback_explains_and_hides_hidden_tests(graded):
    assignment, _, reports, rows, expected = graded
    for learner in rows:
        page = reports / "feedback" / f"{learner}.html"
        if expected.get(learner, {}).get("unreadable"):
            assert not page.exists()  # nothing could be run, so the report note is the feedback
            continue
        html = page.read_text()
        text = htmllib.unescape(re.sub(r"<[^>]+>", "", html))
        assert "BEGIN HIDDEN TESTS" not in text, learner
        for line in hidden_lines(assignment):
            assert line not in text, (learner, line)
        for text in expected.get(learner, {}).get("feedback", []):
            assert text in html, (learner, text)


def _report_block(text: str, learner: str) -> str:
    """The lines of report.txt about one learner: its header line and the indented notes below it."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"{learner}:"))
    block = [lines[start]]
    for line in lines[start + 1 :]:
        if not line.startswith("  "):
            break
        block.append(line)
    return "\n".join(block)


def test_report_notes_every_unusual_notebook(graded):
    _, _, reports, _, expected = graded
    text = (reports / "report.txt").read_text()
    for learner, spec in expected.items():
        block = _report_block(text, learner)
        for note in spec.get("notes", []):
            assert note in block, (learner, note, block)
    assert _report_block(text, "reference_solution").count("\n") == 0  # nothing unusual to say


def test_colab_download_with_helper_cells_gets_only_the_true_note(graded):
    assignment, _, reports, _, _ = graded
    if assignment not in COLAB_LEARNERS:
        pytest.skip("graded end to end for two assignments only")
    answers = len(learner_path.answer_names(learner_path.solved_notebook(assignment)))
    block = _report_block((reports / "report.txt").read_text(), "colab_learner")
    assert block.splitlines()[1:] == [
        f"  - repaired: {answers} extra code cell(s) were kept where they were; they run but are not graded."
    ]


def test_learner_id_comes_from_the_file_name(tmp_path):
    assert grade.learner_id(tmp_path / "ada_lovelace.ipynb") == "ada_lovelace"
    assert grade.learner_id(tmp_path / "Ada Lovelace (1).ipynb") == "Ada_Lovelace__1_"


def test_regrading_is_idempotent_and_touches_only_that_learner(graded, tmp_path):
    # Grading one learner again leaves every other row of the class files as it was, and the same
    # notebook gets the same scores.
    assignment, course, reports, rows, expected = graded
    before = (reports / "scores.csv").read_text()
    again = tmp_path / "again"
    again.mkdir()
    learner = sorted(n for n in expected if n.startswith("wrong_"))[0]
    shutil.copy(ROOT / "tests" / "submissions" / assignment / f"{learner}.ipynb", again)
    assert (
        grade.main([assignment, str(again), "--root", str(course), "--cell-timeout", str(CELL_TIMEOUT)]) == 0
    )
    assert (reports / "scores.csv").read_text() == before


def test_kernel_env_silences_xla_warnings_unless_set_and_drops_pytest_marker(tmp_path, monkeypatch):
    # ipykernel stops capturing C++ stderr when PYTEST_CURRENT_TEST is set: kernels must not see it.
    monkeypatch.setenv("PYTEST_CURRENT_TEST", "tests/test_grading.py::x (call)")
    monkeypatch.delenv("TF_CPP_MIN_LOG_LEVEL", raising=False)
    env = grade._env(tmp_path)
    assert env["TF_CPP_MIN_LOG_LEVEL"] == "2" and "PYTEST_CURRENT_TEST" not in env
    monkeypatch.setenv("TF_CPP_MIN_LOG_LEVEL", "0")  # an instructor who wants XLA's log keeps it
    assert grade._env(tmp_path)["TF_CPP_MIN_LOG_LEVEL"] == "0"
