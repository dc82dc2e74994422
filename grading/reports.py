"""What the driver writes: one learner's outcome into the course, and the class's reports.

``record`` puts a worker's files into nbgrader's folders and its scores into the gradebook (the driver
alone writes them, one learner at a time); ``write_reports`` keeps each learner as a
``grading.record.LearnerRecord`` in ``grading/reports/<assignment>/learners/<learner>.json`` (the
folder is a ``grading.record.ReportFolder``) and writes the views of those records:
``feedback/<learner>.html`` (nbgrader's page, copied, its box filled by grading/feedback.py),
``scores.csv``, ``report.txt`` and the class report (grading/classreport.py). ``score_changes`` is what
``--regrade`` prints.
"""

from __future__ import annotations

import csv
import shutil
import warnings
from collections.abc import Iterable
from pathlib import Path

import nbformat

from grading import classreport, feedback
from grading.assignment import Assignment
from grading.course import Course, late, parse_time
from grading.record import LearnerRecord, ReportFolder, Result
from grading.worker import NBGRADER_FOLDERS, Outcome, graded_cells, release_notebook


def record(outcome: Outcome, assignment: str, root: Path) -> None:
    """Writes one worker's result into the course (the driver alone does this, one learner at a time).

    nbgrader's folders grading/{submitted,autograded,feedback}/<learner>/<assignment>/ get the files the
    worker produced (an earlier grading's are removed), and the gradebook gets this learner's scores:
    every learner graded, an unreadable notebook included (0 for each test), has one submission.
    """
    for folder in NBGRADER_FOLDERS:
        target = root / "grading" / folder / outcome.learner / assignment
        if target.exists():
            shutil.rmtree(target)
        files = outcome.files.get(folder)
        if files:
            target.mkdir(parents=True)
            for name, data in files.items():
                (target / Path(name).name).write_bytes(data)
    from nbgrader.api import Gradebook, MissingEntry

    stamp = outcome.files.get("submitted", {}).get("timestamp.txt")
    with Gradebook(f"sqlite:///{root / 'grading' / 'gradebook.db'}") as gb:
        gb.update_or_create_student(outcome.learner)
        try:
            gb.remove_submission(assignment, outcome.learner)
        except MissingEntry:
            pass
        with warnings.catch_warnings():  # nbgrader's add_submission trips SQLAlchemy's autoflush notes
            warnings.simplefilter("ignore")
            submission = gb.add_submission(
                assignment, outcome.learner, **({"timestamp": stamp.decode().strip()} if stamp else {})
            )
        for notebook in submission.notebooks:
            for grade in notebook.grades:
                grade.auto_score = outcome.scores.get(grade.name, 0.0)
                grade.needs_manual_grade = False
        gb.db.commit()


def store_submission(assignment: str, learner: str, data: bytes, root: Path) -> None:
    """Keeps the file as handed in, for --regrade: reports/<assignment>/submissions/<learner>.ipynb."""
    folder = ReportFolder(root, assignment)
    folder.submissions.mkdir(parents=True, exist_ok=True)
    folder.submission(learner).write_bytes(data)


def scores_before(folder: ReportFolder) -> dict[str, dict[str, float]]:
    """learner -> {grade_id: points, "total": raw total} of every learner graded so far (what a regrade
    compares with)."""
    out = {}
    for r in folder.records():
        total = r.result.total if r.result else sum(r.scores.values())
        out[r.learner] = {**r.scores, "total": total}
    return out


def score_changes(
    before: dict[str, dict[str, float]], outcomes: Iterable[Outcome], cells: list[tuple[str, float]]
) -> list[str]:
    """One line per learner whose score changed: total before -> after, then each test that changed."""
    lines = []
    for o in sorted(outcomes, key=lambda o: o.learner):
        after = {gid: o.scores.get(gid, 0.0) for gid, _ in cells}
        if o.learner not in before:
            lines.append(f"{o.learner}: new, {_fmt(sum(after.values()))} points")
            continue
        old = before[o.learner]
        tests = [
            f"{gid} {_fmt(old.get(gid, 0.0))} -> {_fmt(after[gid])}"
            for gid, _ in cells
            if old.get(gid, 0.0) != after[gid]
        ]
        if tests:
            old_total, new_total = old.get("total", 0.0), sum(after.values())
            verb = "gained" if new_total > old_total else "lost" if new_total < old_total else "kept"
            change = _fmt(abs(new_total - old_total))
            lines.append(
                f"{o.learner}: {verb} {change}, {_fmt(old_total)} -> {_fmt(new_total)} ({'; '.join(tests)})"
            )
    return lines


def write_reports(
    assignment: str,
    outcomes: list[Outcome],
    root: Path,
    submitted: dict[str, str] | None = None,
    times_from: str = "",
    course: Course | None = None,
) -> Path:
    """Records this batch's outcomes, then writes the class files from every learner graded so far.

    Each learner's outcome is kept as a ``LearnerRecord`` in ``learners/<learner>.json``, so re-grading
    one learner rewrites only that file and that learner's row: scores.csv, report.txt, the class report
    (grading/classreport.py) and the box of every feedback page (grading/feedback.py) are views of the
    records and always cover the whole class. Feedback pages are copied to ``feedback/<learner>.html``.
    ``submitted`` (learner -> ISO 8601 time, found as ``times_from`` says) is kept with each learner (a
    learner without one keeps the time kept before); each record's ``result`` is computed again under
    ``course``: when it gives the assignment a due date, scores.csv ends with days_late, penalty and
    adjusted (the total after the late penalty). Returns the report folder.
    """
    cells = graded_cells(assignment, root)
    notebook_name = release_notebook(assignment, root).name
    folder = ReportFolder(root, assignment)
    folder.feedback.mkdir(parents=True, exist_ok=True)
    folder.learners.mkdir(parents=True, exist_ok=True)
    for o in outcomes:
        before = folder.read(o.learner)
        when = (submitted or {}).get(o.learner)
        details = classreport.kept_details(o.files.get("autograded", {}), o.scores, cells, notebook_name)
        folder.write(
            LearnerRecord(
                learner=o.learner,
                source=o.source.name,
                scores=o.scores,
                notes=o.notes,
                seconds=round(o.seconds, 1),
                phases={name: round(seconds, 2) for name, seconds in o.phases.items()},
                messages=details["messages"],
                answers=details["answers"],
                submitted=when or (before.submitted if before else None),
                submitted_from=times_from if when else (before.submitted_from if before else None),
                extra=dict(before.extra) if before else {},  # what a newer grader kept stays
            )
        )
        page = folder.page(o.learner)
        page.unlink(missing_ok=True)
        for html in (root / "grading" / "feedback" / o.learner / assignment).glob("*.html"):
            shutil.copyfile(html, page)
    records = folder.records()
    max_score = sum(points for _, points in cells)
    course = course or Course()
    dated = course.has_due_date(assignment)
    for r in records:
        r.result = result_of(r, assignment, cells, course)
        folder.write(r)
    write_scores_csv(folder.scores_csv, records, cells, dated)
    with open(folder.report_txt, "w") as f:
        for r in records:
            f.write(
                f"{r.learner}: {_fmt(r.total(cells))}/{_fmt(max_score)} from {r.source} in {r.seconds} s\n"
            )
            for note in r.notes:
                f.write("  - " + note.replace("\n", "\n    ") + "\n")
    release = release_notebook(assignment, root)
    solution = nbformat.read(root / "solutions" / assignment / release.name, as_version=4)
    answers = Assignment(solution).answers()
    stubs = Assignment(nbformat.read(release, as_version=4)).answers()
    results = {r.learner: r.result for r in records if r.result}
    summary = classreport.summarise(
        assignment,
        records,
        cells,
        exercises=list(answers),
        excluded={e: [answers[e], *([stubs[e]] if e in stubs else [])] for e in answers},
        adjusted={k: v.exported for k, v in results.items()} if dated else None,
        late={k: (v.days_late, v.penalty) for k, v in results.items()},
        times_from=_times_from(records) if dated else "",
    )
    classreport.write_class_report(summary, folder.path)
    feedback.annotate_reports(folder)  # the score exported, the late penalty, the notes
    return folder.path


def result_of(
    record: LearnerRecord, assignment: str, cells: list[tuple[str, float]], course: Course
) -> Result:
    """The learner's totals under ``course``: raw, and after the late penalty when a due date applies."""
    total, max_score = record.total(cells), sum(points for _, points in cells)
    cost = late(course, assignment, record.learner, record.submitted, total, max_score)
    due = course.due_for(assignment, record.learner)
    hours = 0.0
    if cost.days and due is not None and record.submitted:
        hours = round((parse_time(record.submitted) - due).total_seconds() / 3600, 2)
    return Result(
        total=total,
        max_score=max_score,
        dated=course.has_due_date(assignment),
        days_late=cost.days,
        hours_late=hours,
        penalty=round(cost.penalty, 4),
    )


def write_scores_csv(
    path: Path, records: list[LearnerRecord], cells: list[tuple[str, float]], dated: bool
) -> None:
    """scores.csv: learner, total, max, a column per graded test cell, then (with a due date) the late
    penalty's columns; a view of the records' scores and results."""
    max_score = sum(points for _, points in cells)
    with open(path, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(
            ["learner", "total", "max", *[gid for gid, _ in cells], *(LATE_COLUMNS if dated else [])]
        )
        for r in records:
            row = [r.scores.get(gid, 0.0) for gid, _ in cells]
            extra = []
            if dated and r.result:
                cost = r.result
                extra = [str(cost.days_late), _fmt(round(cost.penalty, 4)), _fmt(round(cost.exported, 4))]
            writer.writerow([r.learner, _fmt(sum(row)), _fmt(max_score), *map(_fmt, row), *extra])


#: The columns scores.csv ends with when the course file gives the assignment a due date.
LATE_COLUMNS = ["days_late", "penalty", "adjusted"]


def _times_from(records: list[LearnerRecord]) -> str:
    """Where the class's submission times came from, as the class report says it."""
    sources = sorted({r.submitted_from for r in records if r.submitted_from})
    missing = [r.learner for r in records if not r.submitted]
    said = " and ".join(sources) or "not known"
    return said + (f" ({len(missing)} learner(s) without a time are not penalised)" if missing else "")


def _fmt(x: float) -> str:
    return f"{x:g}"
