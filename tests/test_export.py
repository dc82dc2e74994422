"""grading/export.py: files whose header is the LMS's documented layout, ids mapped and said where from.

Canvas: the gradebook CSV that Canvas exports and imports (Grades → Import): ``Student, ID, SIS User
ID, SIS Login ID, Section``, one column per assignment, then a ``Points Possible`` row — as described
by Instructure's guide "How do I import grades in the Gradebook?" and, e.g., Ohio State's
"Import a CSV file to Carmen grades" (Student name or ID or SIS User ID; SIS Login ID; Section;
the assignment). Gradescope: the header its per-assignment grade download writes (as the tools that
read those downloads spell it, e.g. nemogb's sample data), with its roster's ids (SID, Email).
"""

import csv

import pytest

from grading import export, reports, worker
from grading.course import read_course

ASSIGNMENT = "01_meshes"

# The exact header lines, as the systems' own files spell them.
CANVAS_HEADER = "Student,ID,SIS User ID,SIS Login ID,Section,{name}"
CANVAS_POINTS = "    Points Possible,,,,,{points}"
GRADESCOPE_HEADER = (
    "First Name,Last Name,SID,Email,Sections,Total Score,Max Points,Status,Submission ID,"
    "Submission Time,Lateness (H:M:S),View Count,Submission Count"
)


@pytest.fixture
def graded(tmp_path):
    """A report folder as make grade leaves it: three learners, one late with a due date."""
    root = worker.copy_course(tmp_path, assignment=ASSIGNMENT)
    (root / "grading" / "course.toml").write_text(
        "[late]\nper_day = 10\n[assignments.01_meshes]\ndue = 2026-10-01T23:59:00Z\n"
    )
    cells = worker.graded_cells(ASSIGNMENT, root)
    outcomes = []
    for learner in ("ada_lovelace", "smithjohn_LATE_4242_99_01_meshes", "jdoe42"):
        o = worker.Outcome(learner=learner, source=tmp_path / f"{learner}.ipynb")
        o.scores = {gid: points for gid, points in cells}
        outcomes.append(o)
    submitted = dict.fromkeys((o.learner for o in outcomes), "2026-10-01T12:00:00+00:00")
    submitted["smithjohn_LATE_4242_99_01_meshes"] = "2026-10-02T01:00:00+00:00"  # 1 h 1 min late
    course = read_course(root / "grading" / "course.toml")
    folder = reports.write_reports(ASSIGNMENT, outcomes, root, submitted, "the test's times", course)
    roster = root / "grading" / "roster.csv"
    roster.write_text(
        "learner,name,canvas_id,sis_user_id,sis_login_id,section,email,sid\n"
        "ada_lovelace,Ada Lovelace,1815,U1815,ada,Analytical,ada@example.org,S1815\n"
    )
    return root, folder, sum(p for _, p in cells)


def _lines(path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines()


def test_canvas_file_has_canvas_header_points_row_and_ids(graded):
    root, folder, points = graded
    assert export.main([ASSIGNMENT, "--format", "canvas", "--root", str(root), "--name", "Assignment 1"]) == 0
    lines = _lines(folder / "export" / "canvas.csv")
    assert lines[0] == CANVAS_HEADER.format(name="Assignment 1")
    assert lines[1] == CANVAS_POINTS.format(points=f"{points:g}")
    rows = {r["Student"]: r for r in csv.DictReader(lines[:1] + lines[2:])}
    ada = rows["Ada Lovelace"]  # from the roster
    assert (ada["ID"], ada["SIS User ID"], ada["SIS Login ID"], ada["Section"]) == (
        "1815",
        "U1815",
        "ada",
        "Analytical",
    )
    late = rows["smithjohn_LATE_4242_99_01_meshes"]  # a Canvas download's name gives the user id
    assert late["ID"] == "4242" and float(late["Assignment 1"]) == pytest.approx(points * 0.9)
    assert rows["jdoe42"]["SIS Login ID"] == "jdoe42"  # else the learner id is the login
    ids = {r["learner"]: r["found_in"] for r in csv.DictReader(_lines(folder / "export" / "canvas_ids.csv"))}
    assert ids == {
        "ada_lovelace": "roster",
        "smithjohn_LATE_4242_99_01_meshes": "Canvas download file name",
        "jdoe42": "learner id",
    }


def test_canvas_column_names_an_existing_assignment_by_its_id(graded):
    root, folder, _ = graded
    args = [
        ASSIGNMENT,
        "--format",
        "canvas",
        "--root",
        str(root),
        "--name",
        "A1",
        "--canvas-assignment",
        "777",
    ]
    assert export.main(args) == 0
    assert _lines(folder / "export" / "canvas.csv")[0] == CANVAS_HEADER.format(name="A1 (777)")


def test_gradescope_file_has_gradescope_header_and_lateness(graded):
    root, folder, points = graded
    assert export.main([ASSIGNMENT, "--format", "gradescope", "--root", str(root)]) == 0
    lines = _lines(folder / "export" / "gradescope.csv")
    assert lines[0] == GRADESCOPE_HEADER
    rows = {r["SID"] or r["First Name"]: r for r in csv.DictReader(lines)}
    ada = rows["S1815"]
    assert (ada["First Name"], ada["Last Name"], ada["Email"]) == ("Ada", "Lovelace", "ada@example.org")
    assert float(ada["Total Score"]) == float(ada["Max Points"]) == points
    late = rows["smithjohn_LATE_4242_99_01_meshes"]
    assert late["Lateness (H:M:S)"] == "01:01:00"
    assert float(late["Total Score"]) == pytest.approx(points * 0.9)
    assert rows["jdoe42"]["Lateness (H:M:S)"] == "00:00:00"
    assert {r["Status"] for r in rows.values()} == {"Graded"}
    # written as Gradescope's downloads write them: decimal scores, "YYYY-MM-DD HH:MM:SS +ZZZZ" times
    assert (ada["Total Score"], ada["Max Points"]) == (f"{float(points)!r}",) * 2 and "." in ada[
        "Total Score"
    ]
    assert late["Submission Time"] == "2026-10-02 01:00:00 +0000" and late["Total Score"] == repr(
        points * 0.9
    )
    assert ada["Submission Count"] == "1" and ada["Submission ID"] == ada["View Count"] == ""


def test_gradescope_export_says_it_is_a_download_s_layout_not_an_import(graded, capsys):
    root, _, _ = graded
    assert export.main([ASSIGNMENT, "--format", "gradescope", "--root", str(root)]) == 0
    assert "Gradescope itself imports no scores from a CSV" in capsys.readouterr().out


def test_a_canvas_export_without_a_roster_row_warns_that_canvas_may_not_match(graded, capsys):
    # Without a roster, a plain file name becomes the SIS Login ID: Canvas skips a row it cannot match.
    root, _, _ = graded
    (root / "grading" / "roster.csv").unlink()
    assert export.main([ASSIGNMENT, "--format", "canvas", "--root", str(root)]) == 0
    out = capsys.readouterr().out
    assert "WARNING: 2 learner(s) have no roster row" in out and "Canvas skips the rest" in out


def test_plain_csv_names_learners_without_an_lms_id(graded, capsys):
    # The issue printed "22 learner(s) without a : …" (no LMS column for the plain format).
    root, _, _ = graded
    (root / "grading" / "roster.csv").write_text(
        "learner,name,email\nada_lovelace,Ada Lovelace,ada@example.org\n"
    )
    assert export.main([ASSIGNMENT, "--format", "csv", "--root", str(root)]) == 0
    out = capsys.readouterr().out
    assert "1 learner(s) without an LMS id: ada_lovelace" in out and "without a :" not in out


def test_learners_the_lms_cannot_match_are_named(graded, capsys):
    # A Canvas download's name holds no Gradescope SID or email: the export says who needs a roster row.
    root, _, _ = graded
    assert export.main([ASSIGNMENT, "--format", "gradescope", "--root", str(root)]) == 0
    assert "1 learner(s) without a SID or Email: smithjohn_LATE_4242_99_01_meshes" in capsys.readouterr().out


def test_plain_csv_keeps_raw_and_exported_totals(graded):
    root, folder, points = graded
    assert export.main([ASSIGNMENT, "--format", "csv", "--root", str(root)]) == 0
    rows = {r["learner"]: r for r in csv.DictReader(_lines(folder / "export" / "csv.csv"))}
    assert list(rows["jdoe42"]) == export.CSV_COLUMNS
    late = rows["smithjohn_LATE_4242_99_01_meshes"]
    assert float(late["raw_total"]) == points and float(late["total"]) == pytest.approx(points * 0.9)


def test_export_without_grading_says_so(tmp_path, capsys):
    # A fresh clone (make test grades temporary copies): exit 2 and one line naming the command to run.
    root = worker.copy_course(tmp_path, assignment=ASSIGNMENT)
    assert export.main([ASSIGNMENT, "--format", "canvas", "--root", str(root)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"run make grade ASSIGNMENT={ASSIGNMENT} SUBMISSIONS=" in err
    assert not (root / "grading" / "reports" / ASSIGNMENT / "export").exists()


def test_export_works_on_the_kept_learners_when_scores_csv_is_gone(graded, capsys):
    # What a normal run leaves is enough: learners/*.json alone gives scores.csv back, then the file.
    root, folder, points = graded
    (folder / "scores.csv").unlink()
    assert export.main([ASSIGNMENT, "--format", "canvas", "--root", str(root)]) == 0
    lines = _lines(folder / "export" / "canvas.csv")
    assert len(lines) == 2 + 3 and "scores.csv written again" in capsys.readouterr().out
    assert lines[2].startswith("Ada Lovelace,1815,U1815,ada,Analytical,")


def test_roster_without_learner_column_is_refused(tmp_path):
    path = tmp_path / "roster.csv"
    path.write_text("name,email\nAda,ada@example.org\n")
    with pytest.raises(ValueError, match="expected a 'learner' column"):
        export.read_roster(path)
