"""What a learner's feedback page adds to nbgrader's: the score sent to the LMS and why it differs, and
the notes on how the notebook was graded.

nbgrader renders the page in the worker (grading/templates/named_feedback) with the raw score, each
test marked passed or failed, and a cell stopped at its time limit saying so. Under the score heading
the template leaves an empty slot, ``<!-- standing --><!-- /standing -->``: the worker knows neither the
late penalty (the course file and submission times are the driver's) nor every note. Once
``write_reports`` has kept each learner's ``LearnerRecord`` (grading/record.py), one call fills the
slot of every page from the records, with the template's own ``standing.html.j2``::

    from grading import feedback
    feedback.annotate_reports(folder)   # folder: a grading.record.ReportFolder

The box (``<div id="standing">``) says the score exported (after the late penalty when a due date
applies, as ``make export`` sends it), the raw score, how late and what it cost, and the notes
report.txt holds for the learner, each in the words meant for the learner (``learner_note``: a crash's
log stays in report.txt). Filling a slot again replaces its box, so the call can be repeated; a page
without the slot (not nbgrader's, or written by an older grader) is left alone. By hand:
``python -m grading.feedback 01_meshes``.
"""

from __future__ import annotations

import argparse
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

from grading.record import LearnerRecord, ReportFolder

ROOT = Path(__file__).resolve().parents[1]
TEMPLATES = Path(__file__).resolve().parent / "templates" / "named_feedback"
#: The slot the template leaves under the score heading (standing.html.j2 writes both markers).
SLOT_BEGIN, SLOT_END = "<!-- standing -->", "<!-- /standing -->"


@dataclass
class Standing:
    """One learner's result as the feedback box and the comment say it: a view of a LearnerRecord."""

    learner: str
    total: float
    max_score: float
    exported: float
    days_late: int = 0
    penalty: float = 0.0
    hours_late: float = 0.0
    failed: dict[str, str] = field(default_factory=dict)  # grade_id -> first line of its message
    notes: list[str] = field(default_factory=list)

    @classmethod
    def of(cls, record: LearnerRecord) -> Standing:
        """The standing of a record whose ``result`` write_reports has computed.

        Raises:
          ValueError: the record has no result yet (written by an older grader: grade or regrade again).
        """
        r = record.result
        if r is None:
            raise ValueError(f"{record.learner}: expected a record with its result, got none")
        return cls(
            learner=record.learner,
            total=r.total,
            max_score=r.max_score,
            exported=r.exported,
            days_late=r.days_late,
            penalty=r.penalty,
            hours_late=r.hours_late,
            failed=dict(record.messages),
            notes=list(record.notes),
        )

    @property
    def is_late(self) -> bool:
        return self.days_late > 0 or self.penalty > 0

    @property
    def sentence(self) -> str:
        return score_sentence(self)

    @property
    def learner_notes(self) -> list[str]:
        return [learner_note(n) for n in self.notes]


def _fmt(x: float) -> str:
    return f"{round(x, 4):g}"


def standings(folder: ReportFolder) -> dict[str, Standing]:
    """learner -> Standing for every graded learner of ``folder``."""
    return {r.learner: Standing.of(r) for r in folder.records()}


def late_words(days: int, hours: float) -> str:
    """'34.5 hours late (2 started days)': the late rule counts every started day."""
    started = f"{days} started day{'s' if days != 1 else ''}"
    return f"{_fmt(round(hours, 1))} hours late ({started})" if hours > 0 else f"{started} late"


def score_sentence(s: Standing) -> str:
    """'Score sent to the LMS: 7.2 of 14 (10 before the late penalty: submitted 34.5 hours late (2 started
    days), 2.8 points taken).'"""
    said = f"Score sent to the LMS: {_fmt(s.exported)} of {_fmt(s.max_score)}"
    if s.is_late:
        said += (
            f" ({_fmt(s.total)} before the late penalty: submitted {late_words(s.days_late, s.hours_late)}, "
        )
        said += f"{_fmt(s.penalty)} points taken)"
    return said + "."


#: Notes whose detail is for the instructor (a log, a traceback): the learner reads this sentence.
_FOR_THE_INSTRUCTOR = (
    (
        re.compile(r"^nbgrader could not grade"),
        "The grader stopped on this notebook before it could score it; it scored 0. "
        "Your instructor has the details.",
    ),
    (
        re.compile(r"^feedback could not be generated"),
        "This page could not be made in full; the score above stands. Your instructor has the details.",
    ),
)


def learner_note(note: str) -> str:
    """A grading note as the learner reads it: a crash's note becomes a plain sentence (its log and
    nbgrader's usage text stay in report.txt); any other note is its first line.

    >>> learner_note("nbgrader could not grade this notebook; scored 0. Its log ends:\\nusage: nbgrader")[:50]
    'The grader stopped on this notebook before it coul'
    """
    for pattern, said in _FOR_THE_INSTRUCTOR:
        if pattern.match(note):
            return said
    first = note.strip().splitlines()[0] if note.strip() else ""
    if first != note.strip():
        first = first.rstrip(":") + " (your instructor has the details)."
    return first


#: What a cell stopped at its time limit leaves as its message (nbconvert's, nbgrader's): no words.
INTERRUPTED_MESSAGE = re.compile(r"(?:KeyboardInterrupt|CellTimeoutError):?\s*$")
#: Said of a stopped cell whose note is not found (and, by the template, in the cell on the page).
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


def _box_template():
    import jinja2

    env = jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES), keep_trailing_newline=False)
    return env.get_template("standing.html.j2")


def annotate(page: str, standing: Standing) -> str:
    """``page`` (a feedback page as the template wrote it, or as this function left it) with its slot
    holding the standing box.

    Raises:
      ValueError: the page has no slot (it is not the course template's page).
    """
    head, begin, rest = page.partition(SLOT_BEGIN)
    _, end, tail = rest.partition(SLOT_END)
    if not begin or not end:
        raise ValueError(f"{standing.learner}: expected the template's '{SLOT_BEGIN}' slot in the page")
    box = _box_template().render(standing=standing)
    return head + box + tail


def annotate_reports(folder: ReportFolder) -> list[Path]:
    """Fills the box of every graded learner's ``feedback/<learner>.html``; returns the pages filled. The
    entry point ``reports.write_reports`` calls once the records are kept; running it again leaves the
    pages as they are. A page without the template's slot is left alone."""
    done = []
    for learner, standing in standings(folder).items():
        page = folder.page(learner)
        if not page.exists():
            continue
        text = page.read_text(encoding="utf-8")
        if SLOT_BEGIN in text:
            page.write_text(annotate(text, standing), encoding="utf-8")
            done.append(page)
    return done


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Add the exported score and grading notes to feedback pages."
    )
    parser.add_argument("assignment", help="assignment id, e.g. 01_meshes (graded by make grade)")
    parser.add_argument("--root", type=Path, default=ROOT, help="course root (the repository)")
    args = parser.parse_args(argv)
    folder = ReportFolder(args.root.resolve(), args.assignment)
    if not folder.graded():
        print(f"nothing to annotate: no learner in {folder.learners} (run make grade first)", file=sys.stderr)
        return 2
    print(f"{len(annotate_reports(folder))} feedback page(s) annotated in {folder.feedback}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
