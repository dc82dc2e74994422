"""A graded learner as a type, and the one folder that holds every graded learner of an assignment.

``LearnerRecord`` is what ``make grade`` keeps of one learner in
``grading/reports/<assignment>/learners/<learner>.json``; scores.csv, report.txt, the class report, the
exports, the comments and the box on each feedback page are all views of these records
(grading/reports.py writes them). ``ReportFolder`` knows every path under
``grading/reports/<assignment>/`` (as nbgrader's ``CourseDirectory`` knows a course's): no other module
spells them.

Adding a field: give it a default in ``LearnerRecord`` and a place in ``_ORDER`` (where it goes in the
JSON); records written before it read back with the default. A key this version does not know is kept
in ``extra`` and written back unchanged, so an older grader never drops what a newer one wrote.

    >>> r = LearnerRecord.from_json('{"learner": "ada", "scores": {"test_f": 1.0}, "later": 3}')
    >>> r.total([("test_f", 2.0)]), r.extra
    (1.0, {'later': 3})
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

#: The keys of learners/<learner>.json, in the order they are written.
_ORDER = (
    "learner",
    "source",
    "scores",
    "notes",
    "seconds",
    "phases",
    "messages",
    "answers",
    "submitted",
    "submitted_from",
    "result",
)


@dataclass
class Result:
    """What a learner's scores come to under the course file in force: the raw total, the assignment's
    points, and, when a due date applies, the lateness and the score exported after its penalty."""

    total: float
    max_score: float
    dated: bool = False  # the course file gives the assignment a due date
    days_late: int = 0  # started days after the due date (0 within the grace period)
    hours_late: float = 0.0
    penalty: float = 0.0

    @property
    def exported(self) -> float:
        """The score sent to the LMS: the total after the late penalty."""
        return self.total - self.penalty

    @property
    def is_late(self) -> bool:
        return self.days_late > 0 or self.penalty > 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "total": self.total,
            "max_score": self.max_score,
            "dated": self.dated,
            "days_late": self.days_late,
            "hours_late": self.hours_late,
            "penalty": self.penalty,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Result:
        return cls(**{f.name: data[f.name] for f in fields(cls) if f.name in data})


@dataclass
class LearnerRecord:
    """One graded learner, as learners/<learner>.json keeps it.

    Attributes:
      learner: the learner id (the file name handed in, made safe).
      source: the file's name as handed in.
      scores: grade_id -> points of each graded test cell (a cell not graded is absent: 0).
      notes: what was unusual, in plain words (report.txt's lines).
      seconds, phases: how long grading took, and where (copy, autograde, results, feedback).
      messages: grade_id -> the first line of the error of each test without all its points.
      answers: answer grade_id -> the learner's source (the class report's similarity); empty when the
        notebook never ran.
      submitted, submitted_from: the ISO 8601 submission time and where it was found.
      result: the totals and lateness ``write_reports`` last computed (None until then).
      extra: keys of the JSON this version does not know, kept as they were.
    """

    learner: str
    source: str = ""
    scores: dict[str, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0
    phases: dict[str, float] = field(default_factory=dict)
    messages: dict[str, str] = field(default_factory=dict)
    answers: dict[str, str] = field(default_factory=dict)
    submitted: str | None = None
    submitted_from: str | None = None
    result: Result | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def total(self, cells: list[tuple[str, float]]) -> float:
        """The raw total over the graded cells ``cells`` ((grade_id, points), as worker.graded_cells)."""
        return sum(self.scores.get(gid, 0.0) for gid, _ in cells)

    @property
    def never_ran(self) -> bool:
        """Its notebook never ran: no answer was kept and no test left a message."""
        return not self.answers and not self.messages

    @property
    def failed(self) -> dict[str, str]:
        """grade_id -> message of each test without all its points that left one."""
        return self.messages

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key in _ORDER:
            value = getattr(self, key)
            if key == "result":
                if value is None:
                    continue
                value = value.to_dict()
            out[key] = value
        return out | self.extra

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=1)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> LearnerRecord:
        known = {f.name for f in fields(cls)} - {"extra"}
        values = {k: v for k, v in data.items() if k in known}
        if isinstance(values.get("result"), dict):
            values["result"] = Result.from_dict(values["result"])
        values["scores"] = {k: float(v) for k, v in values.get("scores", {}).items()}
        return cls(**values, extra={k: v for k, v in data.items() if k not in known})

    @classmethod
    def from_json(cls, text: str) -> LearnerRecord:
        return cls.from_dict(json.loads(text))


class ReportFolder:
    """``grading/reports/<assignment>/`` under a course ``root``: every path in it, and its records.

    Layout: ``learners/<learner>.json`` (the records), ``feedback/<learner>.html``, ``submissions/
    <learner>.ipynb`` (as handed in, for --regrade), ``history/<learner>/`` (earlier hand-ins),
    ``scores.csv``, ``report.txt``, ``class.html`` and ``class_*``, ``export/<format>.csv`` and
    ``export/comments/``.
    """

    def __init__(self, root: Path, assignment: str):
        self.root = root
        self.assignment = assignment
        self.path = root / "grading" / "reports" / assignment

    @classmethod
    def all_under(cls, root: Path) -> Iterator[ReportFolder]:
        """Every assignment graded under ``root`` (with a scores.csv), by name."""
        for scores in sorted((root / "grading" / "reports").glob("*/scores.csv")):
            yield cls(root, scores.parent.name)

    @property
    def learners(self) -> Path:
        return self.path / "learners"

    @property
    def feedback(self) -> Path:
        return self.path / "feedback"

    @property
    def submissions(self) -> Path:
        return self.path / "submissions"

    @property
    def history(self) -> Path:
        return self.path / "history"

    def history_of(self, learner: str) -> Path:
        """A learner's earlier hand-ins and their results: ``history/<learner>/<n>.{ipynb,json,html}``."""
        return self.history / learner

    @property
    def exports(self) -> Path:
        return self.path / "export"

    @property
    def comments(self) -> Path:
        return self.exports / "comments"

    @property
    def scores_csv(self) -> Path:
        return self.path / "scores.csv"

    @property
    def report_txt(self) -> Path:
        return self.path / "report.txt"

    @property
    def class_html(self) -> Path:
        return self.path / "class.html"

    def record_path(self, learner: str) -> Path:
        return self.learners / f"{learner}.json"

    def page(self, learner: str) -> Path:
        """The learner's feedback page (it may not exist: a notebook that never ran has none)."""
        return self.feedback / f"{learner}.html"

    def submission(self, learner: str) -> Path:
        return self.submissions / f"{learner}.ipynb"

    def export_file(self, fmt: str) -> Path:
        return self.exports / f"{fmt}.csv"

    def graded(self) -> bool:
        """Whether any learner of the assignment was graded here."""
        return any(self.learners.glob("*.json"))

    def read(self, learner: str) -> LearnerRecord | None:
        path = self.record_path(learner)
        return LearnerRecord.from_json(path.read_text()) if path.exists() else None

    def write(self, record: LearnerRecord) -> None:
        self.learners.mkdir(parents=True, exist_ok=True)
        self.record_path(record.learner).write_text(record.to_json())

    def records(self) -> list[LearnerRecord]:
        """Every graded learner, by file name."""
        return [LearnerRecord.from_json(p.read_text()) for p in sorted(self.learners.glob("*.json"))]
