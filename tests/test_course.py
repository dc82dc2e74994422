"""grading/course.py: due dates, grace, extensions and the late penalty, down to scores.csv's columns."""

import csv
import doctest
import html
import os
from datetime import UTC, datetime

import pytest

from grading import course, reports, worker

COURSE_TOML = """
[late]
per_day = 10
cap = 30
grace_minutes = 30

[assignments.01_meshes]
due = 2026-10-01T23:59:00Z

[extensions.01_meshes]
ada = 2026-10-04T23:59:00+00:00
alan = 1
"""


def _course(tmp_path):
    path = tmp_path / "course.toml"
    path.write_text(COURSE_TOML)
    return course.read_course(path)


def test_read_course_gives_due_dates_extensions_and_policy(tmp_path):
    c = _course(tmp_path)
    due = datetime(2026, 10, 1, 23, 59, tzinfo=UTC)
    assert c.due_for("01_meshes", "grace") == due
    assert c.due_for("01_meshes", "ada") == datetime(2026, 10, 4, 23, 59, tzinfo=UTC)
    assert c.due_for("01_meshes", "alan") == datetime(2026, 10, 2, 23, 59, tzinfo=UTC)  # 1 day added
    assert c.late_policy("01_meshes") == course.LatePolicy(per_day=10, cap=30, grace_minutes=30)
    assert not c.has_due_date("02_auto_sharding") and course.read_course(None) == course.Course()


def test_read_course_quotes_a_bad_value(tmp_path):
    path = tmp_path / "course.toml"
    path.write_text('[assignments.01_meshes]\ndue = "next friday"\n')
    with pytest.raises(ValueError, match="assignments.01_meshes.due.*'next friday'"):
        course.read_course(path)


@pytest.mark.parametrize(
    ("learner", "submitted", "days", "adjusted"),
    [
        ("grace", "2026-10-02T00:20:00Z", 0, 16.0),  # 21 minutes late: inside the 30-minute grace
        ("grace", "2026-10-02T00:30:01Z", 1, 14.0),  # just past the grace: one started day, 10% of 20
        ("grace", "2026-10-03T12:00:00+02:00", 2, 12.0),  # 1 day 10 h late (a time with an offset)
        ("grace", "2026-10-09T00:00:00Z", 8, 10.0),  # 8 days: the 30% cap
        ("ada", "2026-10-04T20:00:00Z", 0, 16.0),  # her extension: on time
        ("alan", "2026-10-03T01:00:00Z", 1, 14.0),  # a day added, then an hour late
        ("grace", None, 0, 16.0),  # no submission time: nothing taken
    ],
)
def test_late_takes_per_started_day_after_grace_up_to_the_cap(tmp_path, learner, submitted, days, adjusted):
    cost = course.late(_course(tmp_path), "01_meshes", learner, submitted, total=16.0, max_score=20.0)
    assert (cost.days, cost.adjusted) == (days, adjusted)
    assert cost.penalty == 16.0 - adjusted


def test_late_never_takes_more_than_the_total(tmp_path):
    cost = course.late(_course(tmp_path), "01_meshes", "grace", "2026-11-01T00:00:00Z", 2.0, 20.0)
    assert cost.adjusted == 0.0 and cost.penalty == 2.0


def test_submission_times_come_from_the_lms_csv_or_the_files(tmp_path):
    files = {}
    for name in ("ada", "grace"):
        files[name] = tmp_path / f"{name}.ipynb"
        files[name].write_text("{}")
    os.utime(files["ada"], (0, 1_790_000_000))
    times, said = course.submission_times(files, None)
    assert times["ada"] == datetime.fromtimestamp(1_790_000_000, UTC) and said == course.FROM_FILE_TIMES
    lms = tmp_path / "times.csv"
    lms.write_text("learner,submitted\nada,2026-10-02T10:00:00Z\ngrace.ipynb,2026-10-01T10:00:00Z\n")
    times, said = course.submission_times(files, lms)  # by learner id or by the file name handed in
    assert times == {
        "ada": datetime(2026, 10, 2, 10, tzinfo=UTC),
        "grace": datetime(2026, 10, 1, 10, tzinfo=UTC),
    }
    assert "times.csv" in said


def test_scores_csv_has_raw_and_adjusted_totals(tmp_path):
    # A due date, a grace period, an extension and three submission times, through write_reports:
    # on time within the grace, late by two started days, and late but within an extension.
    root = worker.copy_course(tmp_path, assignment="01_meshes")
    (root / "grading" / "course.toml").write_text(COURSE_TOML)
    cells = worker.graded_cells("01_meshes", root)
    max_score = sum(p for _, p in cells)
    submitted = {
        "grace": "2026-10-02T00:10:00+00:00",  # 11 minutes late: within the grace period
        "alan": "2026-10-04T12:00:00+00:00",  # a day added (2 Oct 23:59), then 1 day 12 h late: 2 days
        "ada": "2026-10-04T12:00:00+00:00",  # the same time, within her extension (4 Oct 23:59)
    }
    outcomes = [worker.Outcome(learner=name, source=tmp_path / f"{name}.ipynb") for name in submitted]
    for o in outcomes:
        o.scores = {gid: points for gid, points in cells}
    folder = reports.write_reports(
        "01_meshes",
        outcomes,
        root,
        submitted,
        course.FROM_FILE_TIMES,
        course.read_course(root / "grading" / "course.toml"),
    )
    with open(folder / "scores.csv") as f:
        rows = {r["learner"]: r for r in csv.DictReader(f)}
    assert list(rows["ada"])[-3:] == reports.LATE_COLUMNS
    assert {k: (r["total"], r["days_late"], r["adjusted"]) for k, r in rows.items()} == {
        "grace": (f"{max_score:g}", "0", f"{max_score:g}"),
        "alan": (f"{max_score:g}", "2", f"{max_score * 0.8:g}"),
        "ada": (f"{max_score:g}", "0", f"{max_score:g}"),
    }
    page = html.unescape((folder / "class.html").read_text())
    assert course.FROM_FILE_TIMES in page and "alan" in page


def test_docstring_examples_print_what_they_show():
    # grading/ is not in pytest's doctest paths: its examples are run here.
    assert doctest.testmod(course).failed == 0
