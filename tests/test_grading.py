"""End to end: `make grade` on assignment 1's committed submissions, in a scratch copy of the course.

One batch (tests/conftest.py: graded_batch) holds the reference solution and two Colab learners with
helper cells of their own, all as Colab downloads; every typical wrong answer (built from its
answer-only file); and notebooks that break in each way a class produces (syntax error, infinite loop,
a kernel that dies, a memory hog, a truncated file, mangled cells, tampering); and, for the class
report (tests/test_classreport.py), two learners of whom one copied the other's answer, a course file
with a due date and the LMS's submission times. Every learner must get exactly the intended score, a
feedback page without hidden-test source, and a note for anything unusual; no learner may stop the
batch; and nbgrader's scores must equal the in-process grading that tests/test_submissions.py uses for
every wrong answer of every assignment.

Each assignment's own wrong answers and reference solution are graded in-process there; one batch
covers the pipeline's paths, which are the same for every assignment.
"""

import contextlib
import csv
import html as htmllib
import io
import json
import re
import shutil
import warnings

import pytest

from grading import grade, reports, worker
from grading.preprocessors import MAX_TEXT_CHARS
from tests import submissions
from tests.conftest import CELL_TIMEOUT, CLASS_LEARNERS, COLAB_LEARNERS, GRADED_ASSIGNMENT, LOUD_LEARNER
from tools import handed_in

# Runs `make grade`: never at the same time as another module that does (see CONTRIBUTING.md).
pytestmark = pytest.mark.xdist_group("grading")


def test_scores_csv_has_one_row_per_learner_and_a_column_per_test_cell(graded_batch):
    b = graded_batch
    cells = worker.graded_cells(b.assignment, b.course)
    everyone = set(b.submissions) | {"reference_solution", LOUD_LEARNER} | set(COLAB_LEARNERS)
    assert set(b.rows) == everyone | set(CLASS_LEARNERS)
    for row in b.rows.values():
        assert list(row)[:3] == ["learner", "total", "max"]
        # the batch's course file gives a due date: the late penalty's columns end the row
        assert list(row)[3:] == [gid for gid, _ in cells] + reports.LATE_COLUMNS


def test_solution_scores_full_marks(graded_batch):
    for learner in {"reference_solution", LOUD_LEARNER, *COLAB_LEARNERS}:
        row = graded_batch.rows[learner]
        assert float(row["total"]) == float(row["max"]) > 0, learner


def test_each_submission_loses_exactly_the_intended_points(graded_batch):
    b = graded_batch
    cells = dict(worker.graded_cells(b.assignment, b.course))
    for learner, sub in b.submissions.items():
        lost = sub.lost(list(cells))
        for gid, points in cells.items():
            want = 0.0 if gid in lost else points
            assert float(b.rows[learner][gid]) == want, (learner, gid, b.rows[learner][gid])
        assert float(b.rows[learner]["total"]) == sum(p for g, p in cells.items() if g not in lost), learner


def test_in_process_grading_gives_nbgraders_scores_and_feedback(graded_batch, graded_in_process):
    # The harness that grades every assignment's wrong answers in tests/test_submissions.py, checked
    # against the real pipeline on the notebooks both graded: the same score on every test cell, and
    # each expected feedback text both in its output and on the feedback page.
    b = graded_batch
    inprocess = graded_in_process(b.assignment)
    assert set(inprocess) == {"reference_solution"} | {n for n, s in b.submissions.items() if s.answer_only}
    assert len(inprocess) >= 4
    for learner, result in inprocess.items():
        e2e = {gid: float(b.rows[learner][gid]) for gid in result["scores"]}
        assert result["scores"] == e2e, learner
        page = (b.reports / "feedback" / f"{learner}.html").read_text()
        for text in b.submissions[learner].expected.get("feedback", []) if learner in b.submissions else []:
            assert text in "\n".join(result["output"].values()) and text in page, (learner, text)


def test_feedback_explains_and_hides_hidden_tests(graded_batch):
    b = graded_batch
    assert submissions.hidden_test_lines(b.assignment)
    for learner in b.rows:
        page = b.reports / "feedback" / f"{learner}.html"
        expected = b.submissions[learner].expected if learner in b.submissions else {}
        if expected.get("unreadable"):
            assert not page.exists()  # nothing could be run, so the report note is the feedback
            continue
        html = page.read_text()
        text = htmllib.unescape(re.sub(r"<[^>]+>", "", html))
        assert "BEGIN HIDDEN TESTS" not in text, learner
        for line in submissions.hidden_test_lines(b.assignment):
            assert line not in text, (learner, line)
        for text in expected.get("feedback", []):
            assert text in html, (learner, text)
        # make grade puts the score exported and every note of report.txt on the page
        # (grading/feedback.py), and says why a cell was cut off instead of a bare KeyboardInterrupt
        assert 'id="standing"' in html, learner
        for note in expected.get("notes", []):
            assert htmllib.escape(note, quote=False) in html, (learner, note)
        assert not re.search(r"KeyboardInterrupt:?\s*</", html), learner


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


def test_report_notes_every_unusual_notebook(graded_batch):
    b = graded_batch
    text = (b.reports / "report.txt").read_text()
    for learner, sub in b.submissions.items():
        block = _report_block(text, learner)
        for note in sub.expected.get("notes", []):
            assert note in block, (learner, note, block)
    assert _report_block(text, "reference_solution").count("\n") == 0  # nothing unusual to say


def test_a_cell_that_prints_megabytes_is_cut_with_a_note_and_costs_no_points(graded_batch):
    b = graded_batch
    block = _report_block((b.reports / "report.txt").read_text(), LOUD_LEARNER)
    note = block.splitlines()[-1]
    assert "output cut when graded" in note, block
    assert "1 displayed result past 2 MiB" in note  # the 3 MB of HTML
    found = re.search(r"([0-9,]+) characters of printed output", note)
    assert found, note
    cut_chars = int(found[1].replace(",", ""))
    printed = 600_001 + sum(len(f"{i} one line of a loop that prints too much\n") for i in range(3_000))
    assert cut_chars == printed - MAX_TEXT_CHARS  # every character printed is either kept or counted as cut
    html = (b.reports / "feedback" / f"{LOUD_LEARNER}.html").read_text()
    text = htmllib.unescape(re.sub(r"<[^>]+>", "", html))
    assert "output cut when graded" in text
    assert "x" * MAX_TEXT_CHARS in text and "x" * (MAX_TEXT_CHARS + 1) not in text
    assert "y" * 10_000 not in text and "2999 one line" not in text


@pytest.mark.parametrize("learner", sorted(COLAB_LEARNERS))
def test_colab_download_with_helper_cells_gets_only_the_true_note(graded_batch, learner):
    answers = len(handed_in.answer_names(handed_in.solved_notebook(GRADED_ASSIGNMENT)))
    block = _report_block((graded_batch.reports / "report.txt").read_text(), learner)
    assert block.splitlines()[1:] == [
        f"  - repaired: {answers} extra code cell(s) were kept where they were; they run but are not graded."
    ]


def test_regrading_is_idempotent_and_touches_only_that_learner(graded_batch, tmp_path):
    # Grading one learner again leaves every other row of the class files as it was, and the same
    # notebook gets the same scores (handed in at the same time: the LMS's times again).
    b = graded_batch
    before = (b.reports / "scores.csv").read_text()
    again = tmp_path / "again"
    again.mkdir()
    learner = sorted(n for n in b.submissions if n.startswith("wrong_"))[0]
    shutil.copy(b.downloads / f"{learner}.ipynb", again)
    args = [b.assignment, str(again), "--root", str(b.course), "--cell-timeout", str(CELL_TIMEOUT)]
    assert grade.main([*args, "--times", str(b.times)]) == 0
    assert (b.reports / "scores.csv").read_text() == before


def test_kernel_env_silences_xla_warnings_unless_set_and_drops_pytest_marker(tmp_path, monkeypatch):
    # ipykernel stops capturing C++ stderr when PYTEST_CURRENT_TEST is set: kernels must not see it.
    monkeypatch.setenv("PYTEST_CURRENT_TEST", "tests/test_grading.py::x (call)")
    monkeypatch.delenv("TF_CPP_MIN_LOG_LEVEL", raising=False)
    env = worker._env(tmp_path)
    assert env["TF_CPP_MIN_LOG_LEVEL"] == "2" and "PYTEST_CURRENT_TEST" not in env
    monkeypatch.setenv("TF_CPP_MIN_LOG_LEVEL", "0")  # an instructor who wants XLA's log keeps it
    assert worker._env(tmp_path)["TF_CPP_MIN_LOG_LEVEL"] == "0"


def _colab_shows(shell, nb) -> dict[str, list[str]]:
    """What each failing test cell of ``nb`` shows when run cell by cell in the IPython ``shell``, as on
    Colab (the setup cell's shardbook.setup() installs the book's error handler): grade_id -> lines."""
    from grading.assignment import grade_id

    shown = {}
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        with contextlib.redirect_stdout(io.StringIO()) as out:
            result = shell.run_cell(cell.source, store_history=True)
        if not result.success and grade_id(cell):
            shown[grade_id(cell)] = out.getvalue().strip().splitlines()
    return shown


def test_a_colab_download_is_graded_quietly_and_its_feedback_says_what_colab_said(tmp_path, ipython_shell):
    # Property: Colab downloads, of format 4.5 whose cells lost their ids (Colab strips cell metadata) or
    # of format 4.0 with a cell of the learner's own, are graded without nbformat's
    # MissingIDFieldWarning on the instructor's terminal; a wrong answer's feedback page
    # heads each score row with the test's name (nbgrader writes "Test cell" on every row), and under a
    # failing self-check's name shows the very line that self-check showed when run as on Colab.
    sub = submissions.load(GRADED_ASSIGNMENT)["wrong_axis_order"]
    download = json.loads(submissions.colab_bytes(sub, GRADED_ASSIGNMENT))
    download["nbformat_minor"] = 5
    assert not any("id" in cell for cell in download["cells"])
    folder = tmp_path / "downloads"
    folder.mkdir()
    (folder / "ada.ipynb").write_text(json.dumps(download))
    # and the usual Colab download, format 4.0, with a cell of the learner's own (no id either)
    helped = json.loads(submissions.colab_bytes(None, GRADED_ASSIGNMENT))
    helper = {"cell_type": "code", "metadata": {}, "source": "x = 1", "outputs": [], "execution_count": 3}
    helped["cells"].insert(len(helped["cells"]) - 1, helper)
    (folder / "bob.ipynb").write_text(json.dumps(helped))
    course = worker.copy_course(tmp_path)
    args = [GRADED_ASSIGNMENT, str(folder), "--root", str(course), "--cell-timeout", str(CELL_TIMEOUT)]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert grade.main(args) == 0
    assert not [w for w in caught if "MissingIDField" in type(w.message).__name__], caught
    with open(course / "grading" / "reports" / GRADED_ASSIGNMENT / "scores.csv") as f:
        rows = {row["learner"]: row for row in csv.DictReader(f)}
    assert float(rows["bob"]["total"]) == float(rows["bob"]["max"]) > float(rows["ada"]["total"])
    html = (course / "grading" / "reports" / GRADED_ASSIGNMENT / "feedback" / "ada.html").read_text()
    assert "Test cell" not in html
    for gid, _ in worker.graded_cells(GRADED_ASSIGNMENT, course):
        assert f'<a href="#{gid}">{gid}</a> (Score: ' in html, gid
    colab = _colab_shows(ipython_shell, submissions.notebook(sub, GRADED_ASSIGNMENT))
    failing = "test_sharding_for_layout_visible"
    assert set(colab) == {failing} and colab[failing][0].startswith("CheckFailed: ")
    assert len(colab[failing]) <= 4 and colab[failing][1].startswith("  Cell In[")  # short, named by cell
    section = html.split(f'<a name="{failing}"></a>')[1].split('<a name="')[0]
    assert colab[failing][0] in htmllib.unescape(re.sub(r"<[^>]+>", "", section))
