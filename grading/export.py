"""Scores in a file an LMS imports: ``make export ASSIGNMENT=01_meshes FORMAT=canvas|gradescope|csv``.

Reads the learners' records ``make grade`` kept (``grading/reports/<assignment>/learners/*.json``,
grading/record.py: each one's score, the score after the late penalty, the submission time) and writes
``grading/reports/<assignment>/export/<format>.csv``
plus ``<format>_ids.csv``, the mapping from each learner id (the file name handed in) to the LMS ids
written, and where each came from. The score exported is the ``adjusted`` total when a due date
applies (see grading/course.py), else the raw total.

Learner id -> LMS id. A *roster* (``ROSTER=path``, default ``grading/roster.csv`` if it exists) is a
CSV with a ``learner`` column and any of ``name``, ``canvas_id``, ``sis_user_id``, ``sis_login_id``,
``section``, ``email``, ``sid``. Without a roster entry, a file downloaded with Canvas's *Download
Submissions* (named ``<name>_<user id>_<submission id>_<file>``, ``<name>_LATE_<user id>_...`` when
late) gives the Canvas user id; otherwise the learner id itself is written as the Canvas *SIS Login
ID* and the Gradescope *SID* (name files after the learner's login and no roster is needed).

Formats:

* ``canvas`` — Canvas's gradebook CSV (Grades → Import): the columns ``Student, ID, SIS User ID,
  SIS Login ID, Section`` then one column per assignment, and a second row ``Points Possible`` with
  the assignment's points. Canvas matches a row by ``ID``, ``SIS User ID`` or ``SIS Login ID``; the
  assignment column is named ``ASSIGNMENT_NAME`` (default: the assignment id); an existing Canvas
  assignment's column is written ``Name (<canvas assignment id>)`` as Canvas exports it
  (``CANVAS_ASSIGNMENT=12345``), any other name makes Canvas create a new assignment.
* ``gradescope`` — for a tool that reads Gradescope's grade *download*, not for Gradescope itself:
  Gradescope imports no scores from a CSV (its CSV import is the roster), so this file is for
  whatever already reads its per-assignment download (*Review Grades → Download Grades*): a grade
  calculator, a Canvas-transfer script, a spreadsheet. It has that download's layout: ``First Name,
  Last Name, SID, Email, Sections, Total Score, Max Points, Status, Submission ID, Submission Time,
  Lateness (H:M:S), View Count, Submission Count``, written as the download writes them: scores as
  decimals (``12.0``, ``9.8``), the time as ``2026-10-01 12:00:00 +0000``, lateness as zero-padded
  hours, minutes and seconds (``00:00:00``, ``47:55:53``); ``Status`` is ``Graded``, ``Submission
  Count`` 1, and what only Gradescope can know (its submission id, the view count) is left empty.
  Students are matched by ``SID`` or ``Email``, as in Gradescope's roster. The header and the
  values' forms are those of downloads as the tools that parse them hold them (e.g. nemogb's
  ``read_gs`` sample data, test files of grade importers).
* ``csv`` — plain: ``learner, lms_id, name, total, max, raw_total, submitted``.
"""

from __future__ import annotations

import argparse
import csv
import re
import sys
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

from grading.course import DEFAULT_COURSE_FILE, parse_time, read_course
from grading.record import ReportFolder

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_ROSTER = Path("grading") / "roster.csv"
ROSTER_COLUMNS = ("name", "canvas_id", "sis_user_id", "sis_login_id", "section", "email", "sid")

#: Canvas's gradebook columns before the assignments, as its export writes them and its import reads them.
CANVAS_COLUMNS = ["Student", "ID", "SIS User ID", "SIS Login ID", "Section"]
CANVAS_POINTS_ROW = "Points Possible"
GRADESCOPE_COLUMNS = [
    "First Name",
    "Last Name",
    "SID",
    "Email",
    "Sections",
    "Total Score",
    "Max Points",
    "Status",
    "Submission ID",
    "Submission Time",
    "Lateness (H:M:S)",
    "View Count",
    "Submission Count",
]
CSV_COLUMNS = ["learner", "lms_id", "name", "total", "max", "raw_total", "submitted"]
FORMATS = ("canvas", "gradescope", "csv")

# Canvas's "Download Submissions": lastfirst_<user id>_<submission id>_<original name>, or with LATE.
_CANVAS_DOWNLOAD = re.compile(r"^[A-Za-z-]+_(?:LATE_)?(\d+)_(\d+)_", re.IGNORECASE)


@dataclass
class Row:
    """One learner's exported score and LMS identity."""

    learner: str
    score: float
    raw: float
    submitted: str
    ids: dict[str, str]  # roster column -> value
    found: str  # where the ids came from


def read_roster(path: Path | None) -> dict[str, dict[str, str]]:
    """learner -> {roster column: value} (empty without a roster).

    Raises:
      ValueError: the roster has no ``learner`` column or names a learner twice.
    """
    if path is None or not path.exists():
        return {}
    with open(path, newline="", encoding="utf-8-sig") as f:
        reader = csv.DictReader(f)
        if "learner" not in (reader.fieldnames or []):
            raise ValueError(f"{path}: expected a 'learner' column, got {reader.fieldnames}")
        roster: dict[str, dict[str, str]] = {}
        for row in reader:
            learner = row["learner"].strip()
            if learner in roster:
                raise ValueError(f"{path}: learner {learner!r} is listed twice")
            roster[learner] = {k: (row.get(k) or "").strip() for k in ROSTER_COLUMNS}
        return roster


def lms_ids(learner: str, roster: dict[str, dict[str, str]]) -> tuple[dict[str, str], str]:
    """The LMS ids of one learner and where they came from: the roster, a Canvas download's file name,
    or the learner id itself."""
    if learner in roster:
        return roster[learner], "roster"
    ids = dict.fromkeys(ROSTER_COLUMNS, "")
    ids["name"] = learner
    match = _CANVAS_DOWNLOAD.match(learner)
    if match:
        ids["canvas_id"] = match.group(1)
        return ids, "Canvas download file name"
    ids["sis_login_id"] = ids["sid"] = learner
    return ids, "learner id"


def read_rows(folder: ReportFolder, roster: dict[str, dict[str, str]]) -> tuple[list[Row], float]:
    """Every graded learner with the score to export, and the assignment's points: a view of the records
    (each one's ``result``, as write_reports last computed it)."""
    rows = []
    max_score = 0.0
    for record in folder.records():
        result = record.result
        if result is None:
            raise ValueError(f"{record.learner}: its record has no result (run make regrade)")
        ids, found = lms_ids(record.learner, roster)
        max_score = result.max_score
        rows.append(Row(record.learner, result.exported, result.total, record.submitted or "", ids, found))
    return rows, max_score


def ensure_results(folder: ReportFolder, course_file: Path | None = None) -> bool:
    """Writes the reports again from the records when one lacks its result (kept by an older grader) or
    scores.csv is gone; returns whether it did."""
    if folder.scores_csv.exists() and all(r.result for r in folder.records()):
        return False
    from grading import reports

    course = read_course(course_file or folder.root / DEFAULT_COURSE_FILE)
    reports.write_reports(folder.assignment, [], folder.root, course=course)
    return True


def _fmt(x: float) -> str:
    return f"{x:g}"


def _decimal(x: float) -> str:
    """A score as Gradescope's download writes it: always with a decimal point (12.0, 9.8, 0.25)."""
    return repr(float(round(x, 4)))


def _gradescope_time(submitted: str) -> str:
    """A submission time as Gradescope's download writes it: 2026-10-01 12:00:00 +0000."""
    return parse_time(submitted).strftime("%Y-%m-%d %H:%M:%S %z") if submitted else ""


def _lateness(submitted: str, due) -> str:
    if not submitted or due is None:
        return "00:00:00"
    late = max(timedelta(0), parse_time(submitted) - due)
    seconds = int(late.total_seconds())
    return f"{seconds // 3600:02d}:{seconds % 3600 // 60:02d}:{seconds % 60:02d}"


def write_export(
    assignment: str,
    fmt: str,
    folder: ReportFolder,
    roster: dict[str, dict[str, str]],
    name: str | None = None,
    canvas_assignment: str | None = None,
    course_file: Path | None = None,
) -> tuple[Path, Path, list[Row]]:
    """Writes ``export/<fmt>.csv`` and ``export/<fmt>_ids.csv`` from the report folder; returns both and
    the rows written."""
    if fmt not in FORMATS:
        raise ValueError(f"expected a format in {FORMATS}, got {fmt!r}")
    rows, max_score = read_rows(folder, roster)
    folder.exports.mkdir(exist_ok=True)
    target, mapping = folder.export_file(fmt), folder.exports / f"{fmt}_ids.csv"
    column = name or assignment
    course = read_course(course_file)
    with open(target, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        if fmt == "canvas":
            w.writerow([*CANVAS_COLUMNS, f"{column} ({canvas_assignment})" if canvas_assignment else column])
            w.writerow([f"    {CANVAS_POINTS_ROW}", "", "", "", "", _fmt(max_score)])
            for r in rows:
                i = r.ids
                w.writerow(
                    [
                        i["name"],
                        i["canvas_id"],
                        i["sis_user_id"],
                        i["sis_login_id"],
                        i["section"],
                        _fmt(r.score),
                    ]
                )
        elif fmt == "gradescope":
            w.writerow(GRADESCOPE_COLUMNS)
            for r in rows:
                first, _, last = r.ids["name"].partition(" ")
                due = course.due_for(assignment, r.learner)
                w.writerow(
                    [
                        first,
                        last,
                        r.ids["sid"],
                        r.ids["email"],
                        r.ids["section"],
                        _decimal(r.score),
                        _decimal(max_score),
                        "Graded",
                        "",
                        _gradescope_time(r.submitted),
                        _lateness(r.submitted, due),
                        "",
                        "1",
                    ]
                )
        else:
            w.writerow(CSV_COLUMNS)
            for r in rows:
                lms = r.ids["canvas_id"] or r.ids["sis_user_id"] or r.ids["sis_login_id"] or r.ids["sid"]
                w.writerow(
                    [r.learner, lms, r.ids["name"], _fmt(r.score), _fmt(max_score), _fmt(r.raw), r.submitted]
                )
    with open(mapping, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["learner", *ROSTER_COLUMNS, "found_in"])
        for r in rows:
            w.writerow([r.learner, *(r.ids[k] for k in ROSTER_COLUMNS), r.found])
    return target, mapping, rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("assignment", help="assignment id, e.g. 01_meshes (graded by make grade)")
    parser.add_argument("--format", choices=FORMATS, default="csv", help="the file's layout (see above)")
    parser.add_argument("--root", type=Path, default=ROOT, help="course root (the repository)")
    parser.add_argument("--roster", type=Path, help=f"learner -> LMS ids (default: {DEFAULT_ROSTER})")
    parser.add_argument("--name", help="the assignment's name in the LMS (default: the assignment id)")
    parser.add_argument("--canvas-assignment", help="the Canvas assignment id, to update that assignment")
    parser.add_argument("--course", type=Path, help=f"course file (default: {DEFAULT_COURSE_FILE})")
    args = parser.parse_args(argv)
    root = args.root.resolve()
    folder = ReportFolder(root, args.assignment)
    if not folder.graded():
        print(nothing_graded(root, args.assignment), file=sys.stderr)
        return 2
    # Learners kept, their summary lost (an interrupted run, a deleted file): written again from them.
    if ensure_results(folder, args.course):
        print(f"scores.csv written again from {folder.learners}")
    try:
        roster = read_roster(args.roster or root / DEFAULT_ROSTER)
        target, mapping, rows = write_export(
            args.assignment,
            args.format,
            folder,
            roster,
            args.name,
            args.canvas_assignment,
            args.course or root / DEFAULT_COURSE_FILE,
        )
    except (ValueError, OSError) as e:
        print(f"cannot export: {e}", file=sys.stderr)
        return 2
    found = [r.found for r in rows]
    print(f"{args.format}: {target}\nlearner id -> LMS ids: {mapping}")
    for source in sorted(set(found)):
        print(f"  {found.count(source)} learner(s) identified by {source}")
    needed = MATCHED_BY[args.format]
    lost = [r.learner for r in rows if not any(r.ids[k] for k in needed)]
    if lost:
        said = "an LMS id" if args.format == "csv" else "a " + " or ".join(NAMES[k] for k in needed)
        print(f"  {len(lost)} learner(s) without {said}: {', '.join(lost)} (add them to the roster)")
    guessed = [r.learner for r in rows if r.found == "learner id"]
    if guessed and args.format in GUESSED_WARNING:
        print(f"  {GUESSED_WARNING[args.format].format(n=len(guessed))}")
    if args.format == "gradescope":
        print(f"  {GRADESCOPE_NOTE}")
    return 0


#: Said when learners were given their learner id as the LMS id (no roster row, no Canvas file name).
GUESSED_WARNING = {
    "canvas": (
        "WARNING: {n} learner(s) have no roster row: their learner id (the file name) is written as the "
        "SIS Login ID, which Canvas matches only if it is their login; Canvas skips the rest. Add a "
        "roster (ROSTER=path, columns learner,canvas_id or sis_login_id) to be sure."
    ),
    "gradescope": (
        "{n} learner(s) have no roster row: their learner id is written as the SID, which matches only "
        "if it is their Gradescope SID."
    ),
}
GRADESCOPE_NOTE = (
    "gradescope.csv has the layout of Gradescope's grade download, for tools that read such a download; "
    "Gradescope itself imports no scores from a CSV."
)


def nothing_graded(root: Path, assignment: str) -> str:
    """The one line said when ``assignment`` has no graded learner under ``root``: what to run first."""
    others = [f.assignment for f in ReportFolder.all_under(root)]
    also = f"; graded so far: {', '.join(others)}" if others else ""
    return (
        f"nothing to export: {assignment} has not been graded here "
        f"(no {ReportFolder(root, assignment).learners}); "
        f"run make grade ASSIGNMENT={assignment} SUBMISSIONS=<folder of .ipynb> first "
        f"(make test grades temporary copies and leaves no reports){also}"
    )


#: The roster columns an LMS matches a row by, and their names in its file.
MATCHED_BY = {
    "canvas": ("canvas_id", "sis_user_id", "sis_login_id"),
    "gradescope": ("sid", "email"),
    "csv": ("canvas_id", "sis_user_id", "sis_login_id", "sid"),  # its lms_id column, the first found
}
NAMES = {
    "canvas_id": "ID",
    "sis_user_id": "SIS User ID",
    "sis_login_id": "SIS Login ID",
    "sid": "SID",
    "email": "Email",
}


if __name__ == "__main__":
    sys.exit(main())
