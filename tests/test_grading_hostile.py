"""Hostile hand-ins through `python -m grading.grade`, as a process (the session's hostile batch,
tests/conftest.py: hostile_batch, which holds the attacks of tests/test_grading_hostile_kernel.py and
tests/test_feedback.py too): file names that read as options (`--help.ipynb`, `-rf.ipynb`), a name in
another script, an upper-case ending, files that are not notebooks, a notebook that writes a large
file, one whose graded notebook is over the file cap, a file handed in over that cap, another
assignment's notebook, then a later empty file for a learner graded before.

Every correct notebook must score full marks, whatever its name; nothing may stop the batch; what is
not graded or not kept is said (a file over the cap is not even read); an earlier hand-in is kept
with its results (issue 46, items 2, 7, 8).
"""

import copy
import json
from pathlib import Path
from types import SimpleNamespace

import nbformat
import pytest

from tests.conftest import GRADED_ASSIGNMENT, HOSTILE_CAP_MB, HOSTILE_WRONG, REFERENCE, grade_process
from tools import handed_in

pytestmark = pytest.mark.xdist_group("grading")

#: Correct notebooks under hostile or unusual names -> the learner id each must be graded as.
CORRECT = {
    REFERENCE: "reference_solution",
    "--help.ipynb": "__help",
    "-rf.ipynb": "_rf",
    "José Núñez.ipynb": "José_Núñez",
    "UPPER_CASE.IPYNB": "UPPER_CASE",
}
WRONG = HOSTILE_WRONG
#: Megabytes the writer's cell writes beside its notebook; the file cap of the batch.
WRITTEN_MB, CAP_MB = 50, HOSTILE_CAP_MB
WRITER_CELL = (
    "import os\n"
    f"with open('big.bin', 'wb') as f:\n    f.write(b'0' * {WRITTEN_MB} * 2**20)\n"
    "os.makedirs('out', exist_ok=True)\n"
    "open('out/note.txt', 'w').write('hello')\n"
)
HUGE_CELL = "from IPython.display import HTML, display\ndisplay(HTML('<p>' + 'z' * 1_500_000 + '</p>'))\n"
SKIPPED = ["all.zip", "x.ipynb.txt"]


def _with_cell(nb, source: str, copies: int = 1):
    nb = copy.deepcopy(nb)
    for _ in range(copies):
        nb.cells.insert(len(nb.cells) // 2, nbformat.v4.new_code_cell(source))
    return nb


def hand_in(folder: Path) -> None:
    """This module's notebooks of the session's hostile batch (tests/conftest.py: hostile_batch), which
    also holds the reference solution under REFERENCE and the wrong answer WRONG."""
    solved = handed_in.solved_notebook(GRADED_ASSIGNMENT)
    for name in CORRECT:
        if name != REFERENCE:  # the batch's own
            handed_in.write_colab_download(solved, folder / name)
    handed_in.write_colab_download(_with_cell(solved, WRITER_CELL), folder / "big_writer.ipynb")
    handed_in.write_colab_download(_with_cell(solved, HUGE_CELL, copies=3), folder / "huge_pages.ipynb")
    other = handed_in.solved_notebook("02_auto_sharding")
    handed_in.write_colab_download(other, folder / "other_assignment.ipynb")
    (folder / "huge_file.ipynb").write_bytes(b" " * (CAP_MB + 1) * 2**20)  # over the cap: never read
    for name in SKIPPED:
        (folder / name).write_bytes(b"PK\x03\x04" if name.endswith(".zip") else b"{}")


@pytest.fixture(scope="module")
def hostile(hostile_batch):
    # The batch, then later: an empty file for the reference solution's learner, the same file again
    # for -rf, graded into the same course.
    batch = hostile_batch
    later = batch.tmp / "later"  # short paths: a kernel's sockets live under the temporary folder
    later.mkdir()
    (later / REFERENCE).write_bytes(b"")
    (later / "-rf.ipynb").write_bytes((batch.folder / "-rf.ipynb").read_bytes())
    second = grade_process(batch.course, later, batch.tmp)
    return SimpleNamespace(
        course=batch.course,
        folder=batch.folder,
        reports=batch.course / "grading" / "reports" / GRADED_ASSIGNMENT,
        first=batch.run,
        rows=batch.rows,
        kept=batch.kept,
        earlier_html=batch.first.page("reference_solution").read_text(),
        second=second,
    )


def test_every_correct_notebook_scores_full_marks_whatever_its_name(hostile):
    rows = hostile.rows
    for name, learner in CORRECT.items():
        assert learner in rows, (name, sorted(rows))
        assert float(rows[learner]["total"]) == float(rows[learner]["max"]) > 0, (name, rows[learner])
        page = hostile.reports / "feedback" / f"{learner}.html"
        assert page.exists() or learner == "reference_solution", name  # its page is in history/ now
        assert not hostile.kept[learner]["notes"], (name, hostile.kept[learner]["notes"])
    assert float(rows[WRONG]["total"]) < float(rows[WRONG]["max"])
    assert "usage: nbgrader" not in hostile.first.stdout + hostile.first.stderr


def test_entries_that_are_not_notebooks_are_named(hostile):
    line = next(x for x in hostile.first.stdout.splitlines() if x.startswith("not graded"))
    for name in SKIPPED:
        assert repr(name) in line, line
    assert "x.ipynb" not in hostile.rows


def test_files_a_notebook_writes_are_not_brought_back_but_named(hostile):
    # Property: the driver reads back only the graded notebook, its timestamp and its page: the 50 MB
    # the learner's code wrote is nowhere in the course, and a note names it; the score is untouched.
    row = hostile.rows["big_writer"]
    assert float(row["total"]) == float(row["max"])
    notes = hostile.kept["big_writer"]["notes"]
    assert notes[-1] == (
        f"files the notebook's code wrote beside it were not kept: big.bin ({WRITTEN_MB}.0 MiB), "
        "out/note.txt (5 bytes)."
    ), notes
    assert len(notes) == 2 and notes[0].startswith("repaired: 1 extra code cell(s) were kept"), notes
    for folder in ("submitted", "autograded", "feedback"):
        kept = hostile.course / "grading" / folder / "big_writer" / GRADED_ASSIGNMENT
        assert {p.name for p in kept.iterdir()} <= {
            f"{GRADED_ASSIGNMENT}.ipynb",
            "timestamp.txt",
            f"{GRADED_ASSIGNMENT}.html",
        }
    big = [p for p in hostile.course.rglob("*") if p.is_file() and p.stat().st_size > 20 * 2**20]
    assert not big, big


def test_a_graded_notebook_over_the_file_cap_is_dropped_with_a_note_and_keeps_its_score(hostile):
    row = hostile.rows["huge_pages"]
    assert float(row["total"]) == float(row["max"])
    notes = hostile.kept["huge_pages"]["notes"]
    said = [n for n in notes if f"is larger than the {CAP_MB:.1f} MiB a graded file may be: not kept" in n]
    assert [n.split(" (")[0] for n in said] == ["the graded notebook", "the feedback page"], notes
    assert not (hostile.reports / "feedback" / "huge_pages.html").exists()


def test_a_file_handed_in_over_the_cap_is_not_read_but_kept(hostile):
    notes = hostile.kept["huge_file"]["notes"]
    assert len(notes) == 1 and f"{CAP_MB + 1:.1f} MiB, over the {CAP_MB:.1f} MiB" in notes[0], notes
    assert "not a readable notebook" in notes[0]  # the class report's "unreadable"
    assert float(hostile.rows["huge_file"]["total"]) == 0
    stored = hostile.reports / "submissions" / "huge_file.ipynb"
    assert stored.stat().st_size == (CAP_MB + 1) * 2**20


def test_another_assignments_notebook_is_named_not_graded_and_counted_apart(hostile):
    notes = hostile.kept["other_assignment"]["notes"]
    assert len(notes) == 1 and "assignment 02_auto_sharding's notebook" in notes[0], notes
    assert float(hostile.rows["other_assignment"]["total"]) == 0
    page = (hostile.reports / "class.html").read_text()
    never_ran = page.split("<h3 id='not-run'>")[1].split("</p>")[0]
    assert "other_assignment" in never_ran, never_ran  # out of every pass rate
    assert "not this assignment: the notebook could not be matched" in page


def test_a_later_file_keeps_the_earlier_one_and_says_what_changed(hostile):
    # Property: an empty file handed in after a graded one is graded (0), but the earlier file, its
    # kept results and its page stay in history/<learner>/, and the change is printed as --regrade
    # prints it; the same file handed in again is said to be the same.
    out = hostile.second.stdout
    assert "graded again: 2 learner(s) handed in before" in out, out
    max_score = hostile.rows["_rf"]["max"]
    assert f"reference_solution: lost {max_score}, {max_score} -> 0 (" in out, out
    assert "earlier file kept as history/reference_solution/1.ipynb" in out, out
    assert f"_rf: {max_score} points, as before; the same file as before" in out, out
    history = hostile.reports / "history" / "reference_solution"
    assert (history / "1.ipynb").read_bytes() == (hostile.folder / REFERENCE).read_bytes()
    assert (
        json.loads((history / "1.json").read_text())["scores"] == hostile.kept["reference_solution"]["scores"]
    )
    assert (history / "1.html").read_text() == hostile.earlier_html
    assert not (hostile.reports / "history" / "_rf").exists()
    assert (hostile.reports / "submissions" / "reference_solution.ipynb").read_bytes() == b""
