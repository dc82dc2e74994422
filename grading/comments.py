"""Feedback handed back in one command: ``make feedback-export ASSIGNMENT=01_meshes [ROSTER=path]``.

Reads what ``make grade`` kept in ``grading/reports/<assignment>/`` (the learners' records and their
feedback pages; grading/record.py) and writes ``export/comments/``:

* ``<learner>.txt`` — a submission comment to paste or post (the score sent to the LMS and why it
  differs from the raw one, each failed test with its message, the grading notes in the learner's
  words: a crash is one plain sentence, its log stays in report.txt); it points to the attached page
  only when the learner has one (a notebook that never ran has none);
* ``<learner>.html`` — the learner's feedback page, to attach;
* ``manifest.csv`` — ``learner, name, canvas_id, sis_user_id, sis_login_id, section, email, sid,
  found_in, exported, max, comment, page``: the LMS ids as ``make export`` resolves them (the roster, a
  Canvas download's file name, or the learner id) and the two files' names;
* ``comments.zip`` — all of the above in one file;
* ``canvas_reupload.zip`` — when learners' files came from Canvas's *Download Submissions*
  (``<name>_<user id>_<file id>_<file>``): each learner's page named
  ``<name>_<user id>_<file id>_feedback.html``, the layout Canvas's *Re-Upload Submissions* (the
  assignment's page, right-hand side) reads: Canvas takes the first two all-digit parts of each name as
  the user and the file handed in, and attaches the file to that learner's submission as a comment.
  Learners identified otherwise are listed (their pages are in comments.zip).

Gradescope and Otter hand feedback back inside their own service; nbgrader's formgrader releases the
same HTML pages through JupyterHub. Outside those, this is what an LMS takes.
"""

from __future__ import annotations

import argparse
import csv
import sys
import zipfile
from pathlib import Path

from grading import export
from grading.feedback import Standing, failure_message, score_sentence, standings
from grading.record import ReportFolder

ROOT = Path(__file__).resolve().parents[1]
MANIFEST_COLUMNS = ["learner", *export.ROSTER_COLUMNS, "found_in", "exported", "max", "comment", "page"]


def comment_text(assignment: str, s: Standing, page: bool = True) -> str:
    """The plain-text submission comment for one learner; ``page``: a feedback page goes with it."""
    lines = [f"{assignment}: {score_sentence(s)}"]
    if s.failed:
        lines.append("")
        lines.append("Tests without all their points:")
        lines += [f"- {gid}: {failure_message(s, gid)}" for gid in s.failed]
    if s.notes:
        lines.append("")
        lines.append("While your notebook was graded:")
        lines += [f"- {note}" for note in s.learner_notes]
    if page:
        lines.append("")
        lines.append("The attached page shows your code and each test's message in full.")
    return "\n".join(lines) + "\n"


def reupload_name(learner: str) -> str | None:
    """The name Canvas's Re-Upload Submissions matches to the learner's submission, or None when the learner
    id is not a Canvas download's file name."""
    match = export._CANVAS_DOWNLOAD.match(learner)
    return f"{match.group(0)}feedback.html" if match else None


def write_comments(
    assignment: str, folder: ReportFolder, roster: dict[str, dict[str, str]]
) -> tuple[Path, list[str]]:
    """Writes ``export/comments/`` of the report folder (see the module's docstring); returns it and the
    learners that Canvas's re-upload cannot match."""
    out = folder.comments
    out.mkdir(parents=True, exist_ok=True)
    rows, unmatched, reupload = [], [], {}
    for learner, s in standings(folder).items():
        ids, found = export.lms_ids(learner, roster)
        text = out / f"{learner}.txt"
        source = folder.page(learner)
        text.write_text(comment_text(assignment, s, page=source.exists()), encoding="utf-8")
        page = out / f"{learner}.html"
        page.unlink(missing_ok=True)  # a page from an earlier run that this one no longer has
        if source.exists():
            page.write_bytes(source.read_bytes())
            name = reupload_name(learner)
            if name:
                reupload[name] = page
            else:
                unmatched.append(learner)
        exported = export._fmt(s.exported)
        pagename = page.name if source.exists() else ""
        rows.append(
            [learner, *(ids[k] for k in export.ROSTER_COLUMNS), found, exported, export._fmt(s.max_score)]
            + [text.name, pagename]
        )
    with open(out / "manifest.csv", "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(MANIFEST_COLUMNS)
        w.writerows(rows)
    with zipfile.ZipFile(out / "comments.zip", "w", zipfile.ZIP_DEFLATED) as z:
        # what the manifest names, nothing an earlier run left (a learner graded then, not now)
        for name in ["manifest.csv", *(n for row in rows for n in row[-2:] if n)]:
            z.write(out / name, name)
    target = out / "canvas_reupload.zip"
    target.unlink(missing_ok=True)
    if reupload:
        with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as z:
            for name, path in sorted(reupload.items()):
                z.write(path, name)
    return out, unmatched


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("assignment", help="assignment id, e.g. 01_meshes (graded by make grade)")
    parser.add_argument("--root", type=Path, default=ROOT, help="course root (the repository)")
    parser.add_argument("--roster", type=Path, help=f"learner -> LMS ids (default: {export.DEFAULT_ROSTER})")
    parser.add_argument(
        "--course", type=Path, help="course file, should the reports be written again (default: as grade)"
    )
    args = parser.parse_args(argv)
    root = args.root.resolve()
    folder = ReportFolder(root, args.assignment)
    if not folder.graded():
        print(
            export.nothing_graded(root, args.assignment).replace("to export", "to hand back"), file=sys.stderr
        )
        return 2
    export.ensure_results(folder, args.course)
    try:
        roster = export.read_roster(args.roster or root / export.DEFAULT_ROSTER)
    except ValueError as e:
        print(f"cannot read the roster: {e}", file=sys.stderr)
        return 2
    out, unmatched = write_comments(args.assignment, folder, roster)
    print(f"one comment and one page per learner: {out}")
    print(f"all in one zip with manifest.csv: {out / 'comments.zip'}")
    if (out / "canvas_reupload.zip").exists():
        print(f"for Canvas's Re-Upload Submissions: {out / 'canvas_reupload.zip'}")
        if unmatched:
            print(f"  {len(unmatched)} learner(s) not named as in a Canvas download: {', '.join(unmatched)}")
    else:
        print("  no learner is named as in a Canvas download: attach the pages by manifest.csv's ids")
    return 0


if __name__ == "__main__":
    sys.exit(main())
