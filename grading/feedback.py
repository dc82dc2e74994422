"""What a learner's feedback page adds to nbgrader's: the score sent to the LMS and why it differs, and
the reason for any cell cut off while grading.

nbgrader's page (grading/templates/named_feedback) shows the raw score and each cell's output. A late
learner read 10.0/14 while 7.2 went to the LMS, and a cell stopped at the time limit showed an empty
``KeyboardInterrupt:``; the reasons were only in ``report.txt``. After ``write_reports`` has written
``scores.csv`` and ``learners/<learner>.json``, one call rewrites every page from them::

    from grading import feedback
    feedback.annotate_reports(folder)   # folder = grading/reports/<assignment>

Each ``feedback/<learner>.html`` then opens with a box (``<div id="standing">``): the score exported
(the ``adjusted`` column of scores.csv when a due date applies, as ``make export`` sends it), the raw
score, days late and points taken, and the notes ``report.txt`` holds for the learner (a cell that ran
past its time limit, stopped the kernel, ran out of memory, or had its output cut). An error output
that says only ``KeyboardInterrupt:`` or ``CellTimeoutError:`` (what an interrupted cell leaves) is
replaced by the note naming that cell. Rewriting a page again replaces its box, so the call can be
repeated. By hand:
``python -m grading.feedback 01_meshes``.
"""

from __future__ import annotations

import argparse
import csv
import html
import json
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
_BOX = re.compile(r'\n?<div id="standing".*?<!-- /standing -->\n?', re.S)  # as annotate puts it
_HEADING = re.compile(r"(<h4>[^<]*\(Score: [^<]*\)</h4>)")
_CELL = re.compile(r'(?=<div class="cell border-box-sizing)')
# An output an interrupted cell leaves: nbconvert's "KeyboardInterrupt: " and nbgrader's "CellTimeoutError: ".
_INTERRUPTED = re.compile(
    r'<div class="output_area">\s*<div class="prompt">[^<]*</div>\s*'
    r'<div class="output_subarea output_text output_error">\s*<pre>\s*'
    r"(?:KeyboardInterrupt|CellTimeoutError)\b[^<]*</pre>\s*</div>\s*</div>"
)
_ANCHOR = re.compile(r'<a name="([\w.-]+)"></a>')


@dataclass
class Standing:
    """One learner's result as scores.csv and learners/<learner>.json keep it."""

    learner: str
    total: float
    max_score: float
    exported: float
    days_late: int = 0
    penalty: float = 0.0
    failed: dict[str, str] = field(default_factory=dict)  # grade_id -> first line of its message
    notes: list[str] = field(default_factory=list)


def _fmt(x: float) -> str:
    return f"{round(x, 4):g}"


def standings(folder: Path) -> dict[str, Standing]:
    """learner -> Standing for every row of ``folder/scores.csv``."""
    with open(folder / "scores.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    out = {}
    for row in rows:
        learner = row["learner"]
        kept_path = folder / "learners" / f"{learner}.json"
        kept = json.loads(kept_path.read_text()) if kept_path.exists() else {}
        total = float(row["total"])
        dated = row.get("adjusted") not in (None, "")
        out[learner] = Standing(
            learner=learner,
            total=total,
            max_score=float(row["max"]),
            exported=float(row["adjusted"]) if dated else total,
            days_late=int(row["days_late"]) if dated else 0,
            penalty=float(row["penalty"]) if dated else 0.0,
            failed=dict(kept.get("messages", {})),
            notes=list(kept.get("notes", [])),
        )
    return out


def score_sentence(s: Standing) -> str:
    """'Score sent to the LMS: 7.2 of 14 (10 before the late penalty: 2 days late, 2.8 points taken).'"""
    said = f"Score sent to the LMS: {_fmt(s.exported)} of {_fmt(s.max_score)}"
    if s.days_late > 0 or s.penalty > 0:
        days = f"{s.days_late} day{'s' if s.days_late != 1 else ''}"
        said += f" ({_fmt(s.total)} before the late penalty: submitted {days} late, "
        said += f"{_fmt(s.penalty)} points taken)"
    return said + "."


def _box(s: Standing) -> str:
    late = " late" if s.days_late > 0 or s.penalty > 0 else ""
    out = [f'<div id="standing" class="standing{late}">', f"<p><b>{html.escape(score_sentence(s))}</b></p>"]
    if s.notes:
        out.append("<p>While your notebook was graded:</p><ul>")
        out += [f"<li>{html.escape(n)}</li>" for n in s.notes]
        out.append("</ul>")
    out.append("</div><!-- /standing -->\n")
    return "\n".join(out)


_STYLE = (
    '<style id="standing-style">#standing{border-left:5px solid #4878a8;background:#f4f6f8;'
    "padding:.5em .8em;margin:.5em 0;overflow-wrap:anywhere}"
    "#standing.late{border-left-color:#b3261e;background:#fdecea}</style>"
)


#: What a cell stopped at its time limit leaves as its message (nbconvert's, nbgrader's): no words.
INTERRUPTED_MESSAGE = re.compile(r"(?:KeyboardInterrupt|CellTimeoutError):?\s*$")
#: Said of a stopped cell whose note is not found.
INTERRUPTED_FALLBACK = "This cell was interrupted while it was graded (it ran past the time limit)."


def _reason(notes: list[str], cell_id: str) -> str | None:
    """The note that says why the cell ``cell_id`` (a grade_id) was cut off, if one does."""
    for note in notes:
        if note.startswith(cell_id + " ") or f"({cell_id})" in note:
            return note
    return None


def failure_message(standing: Standing, grade_id: str) -> str:
    """The first line of a failed test's message, or for a cell stopped at its time limit (whose message
    is an empty ``KeyboardInterrupt:``) the note that says why."""
    message = standing.failed[grade_id]
    if INTERRUPTED_MESSAGE.match(message):
        return _reason(standing.notes, grade_id) or INTERRUPTED_FALLBACK
    return message


def annotate(page: str, standing: Standing) -> str:
    """``page`` (a feedback page as nbgrader wrote it, or as this function left it) with the standing box
    under its heading and each bare ``KeyboardInterrupt`` output replaced by the note that explains it.

    Raises:
      ValueError: the page has no nbgrader score heading to put the box under.
    """
    page = _BOX.sub("", page)
    if not _HEADING.search(page):
        raise ValueError(f"{standing.learner}: expected nbgrader's '<h4>... (Score: ...)</h4>' heading")
    page = _HEADING.sub(lambda m: m.group(1) + "\n" + _box(standing), page, count=1)
    if 'id="standing-style"' not in page:
        page = page.replace("</head>", _STYLE + "\n</head>", 1)
    chunks = _CELL.split(page)
    for k, chunk in enumerate(chunks):
        if not _INTERRUPTED.search(chunk):
            continue
        anchors = _ANCHOR.findall(chunk)
        reason = next((r for a in anchors if (r := _reason(standing.notes, a))), None)
        reason = reason or INTERRUPTED_FALLBACK
        said = (
            '<div class="output_area"><div class="prompt"></div>'
            '<div class="output_subarea output_text output_error">'
            f"<pre>{html.escape(reason)}</pre></div></div>"
        )
        first = _INTERRUPTED.search(chunk)
        assert first is not None
        rest = _INTERRUPTED.sub("", chunk[first.end() :])  # the second of the pair says nothing more
        chunks[k] = chunk[: first.start()] + said + rest
    return "".join(chunks)


def annotate_reports(folder: Path) -> list[Path]:
    """Rewrites every ``folder/feedback/<learner>.html`` of a learner in ``folder/scores.csv``; returns the
    pages rewritten. The entry point ``reports.write_reports`` calls once the reports are written; running
    it again leaves the pages as they are. A page without nbgrader's score heading is left alone."""
    done = []
    for learner, standing in standings(folder).items():
        page = folder / "feedback" / f"{learner}.html"
        if page.exists() and _HEADING.search(page.read_text(encoding="utf-8")):  # nbgrader's page
            page.write_text(annotate(page.read_text(encoding="utf-8"), standing), encoding="utf-8")
            done.append(page)
    return done


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Add the exported score and grading notes to feedback pages."
    )
    parser.add_argument("assignment", help="assignment id, e.g. 01_meshes (graded by make grade)")
    parser.add_argument("--root", type=Path, default=ROOT, help="course root (the repository)")
    args = parser.parse_args(argv)
    folder = args.root.resolve() / "grading" / "reports" / args.assignment
    if not (folder / "scores.csv").exists():
        print(f"nothing to annotate: no {folder / 'scores.csv'} (run make grade first)", file=sys.stderr)
        return 2
    print(f"{len(annotate_reports(folder))} feedback page(s) annotated in {folder / 'feedback'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
