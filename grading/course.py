"""The course file: each assignment's due date, the late policy and per-learner extensions.

An optional TOML file, ``grading/course.toml`` (``make grade ... COURSE=path`` names another one)::

    [late]
    per_day = 10          # percent of the assignment's points taken per started day late
    cap = 50              # never more than this percent
    grace_minutes = 15    # a submission this close after the due date is on time

    [assignments.01_meshes]
    due = 2026-10-01T23:59:00Z   # a TOML date-time; without an offset it is UTC
    per_day = 20                  # optional: this assignment's own rule (per_day, cap, grace_minutes)

    [extensions.01_meshes]
    ada_lovelace = 2026-10-03T23:59:00Z   # a due date of her own
    alan_turing = 2                        # or days added to the assignment's due date

A learner is late by ``submitted - due`` (their extension's due date when they have one). Within the
grace period that is on time; beyond it each started day after the due date costs ``per_day`` percent
of the assignment's points, at most ``cap`` percent, and a total never drops below 0::

    >>> policy = LatePolicy(per_day=10, cap=25, grace_minutes=15)
    >>> due = datetime(2026, 10, 1, 23, 59, tzinfo=UTC)
    >>> policy.days_late(due, due + timedelta(minutes=10)), policy.days_late(due, due + timedelta(hours=25))
    (0, 2)
    >>> policy.penalty(days=3, max_score=20)
    5.0

Submission times come from a CSV the LMS exports (``TIMES=path``: a ``learner`` column, the learner id
or the file name as handed in, and a ``submitted`` column, ISO 8601) or else from each file's
modification time as it lies in the submissions folder; the class report says which.
"""

from __future__ import annotations

import csv
import math
import tomllib
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

#: Where the course file is looked for when none is named.
DEFAULT_COURSE_FILE = Path("grading") / "course.toml"
#: How a submission time was found, as the class report and learners/<learner>.json say it.
FROM_TIMES_CSV = "the LMS's submission times ({name})"
FROM_FILE_TIMES = "the files' modification times in the submissions folder"


@dataclass(frozen=True)
class LatePolicy:
    """Percent of the points taken per started day late, its cap, and a grace period."""

    per_day: float = 0.0
    cap: float = 100.0
    grace_minutes: float = 0.0

    def days_late(self, due: datetime, submitted: datetime) -> int:
        """Started days after ``due``; 0 within the grace period."""
        late = submitted - due
        if late <= timedelta(minutes=self.grace_minutes):
            return 0
        return math.ceil(late / timedelta(days=1))

    def penalty(self, days: int, max_score: float) -> float:
        """The points taken for ``days`` days late out of ``max_score``."""
        return max_score * min(self.cap, self.per_day * days) / 100


@dataclass
class Course:
    """What the course file says; an empty Course (no file) has no due dates."""

    policy: LatePolicy = field(default_factory=LatePolicy)
    due: dict[str, datetime] = field(default_factory=dict)
    policies: dict[str, LatePolicy] = field(default_factory=dict)
    #: assignment -> learner -> their own due date
    extensions: dict[str, dict[str, datetime]] = field(default_factory=dict)
    path: Path | None = None

    def has_due_date(self, assignment: str) -> bool:
        """Whether ``assignment`` has a due date, so that late penalties apply to it."""
        return assignment in self.due

    def due_for(self, assignment: str, learner: str) -> datetime | None:
        """The learner's due date of ``assignment``: their extension, else the assignment's."""
        return self.extensions.get(assignment, {}).get(learner, self.due.get(assignment))

    def late_policy(self, assignment: str) -> LatePolicy:
        """The late policy of ``assignment``: its own, else the course's."""
        return self.policies.get(assignment, self.policy)


def _when(value: object, where: str) -> datetime:
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    if isinstance(value, date):  # a bare date: the end of that day, UTC
        return datetime(value.year, value.month, value.day, 23, 59, 59, tzinfo=UTC)
    if isinstance(value, str):
        return parse_time(value, where)
    raise ValueError(f"{where}: expected a date-time such as 2026-10-01T23:59:00Z, got {value!r}")


def parse_time(text: str, where: str = "a submission time") -> datetime:
    """An ISO 8601 time (``2026-10-01T23:59:00Z``, ``2026-10-01 23:59:00+02:00``) as an aware datetime."""
    try:
        when = datetime.fromisoformat(text.strip().replace("Z", "+00:00").replace(" UTC", "+00:00"))
    except ValueError:
        raise ValueError(
            f"{where}: expected an ISO 8601 time such as 2026-10-01T23:59:00Z, got {text!r}"
        ) from None
    return when if when.tzinfo else when.replace(tzinfo=UTC)


_POLICY_KEYS = {"per_day", "cap", "grace_minutes"}


def _policy(table: dict, base: LatePolicy, where: str) -> LatePolicy:
    values = {k: table[k] for k in _POLICY_KEYS if k in table}
    for key, value in values.items():
        if not isinstance(value, int | float) or value < 0:
            raise ValueError(f"{where}.{key}: expected a number >= 0, got {value!r}")
    return LatePolicy(**{**base.__dict__, **{k: float(v) for k, v in values.items()}})


def read_course(path: Path | None) -> Course:
    """The course file at ``path`` (an empty Course when it is None or does not exist).

    Raises:
      ValueError: a due date, extension or rule that is not what the module docstring shows,
        quoting the bad value.
    """
    if path is None or not path.exists():
        return Course()
    data = tomllib.loads(path.read_text())
    unknown = set(data) - {"late", "assignments", "extensions"}
    if unknown:
        raise ValueError(f"{path}: unknown tables {sorted(unknown)}; expected late, assignments, extensions")
    course = Course(policy=_policy(data.get("late", {}), LatePolicy(), "late"), path=path)
    for name, table in data.get("assignments", {}).items():
        if "due" in table:
            course.due[name] = _when(table["due"], f"assignments.{name}.due")
        if _POLICY_KEYS & set(table):
            course.policies[name] = _policy(table, course.policy, f"assignments.{name}")
    for name, table in data.get("extensions", {}).items():
        own = course.extensions.setdefault(name, {})
        for learner, value in table.items():
            where = f"extensions.{name}.{learner}"
            if isinstance(value, int | float) and not isinstance(value, bool):
                if name not in course.due:
                    raise ValueError(f"{where}: {value} days added, but assignments.{name} has no due date")
                own[learner] = course.due[name] + timedelta(days=value)
            else:
                own[learner] = _when(value, where)
    return course


def read_times(path: Path) -> dict[str, datetime]:
    """learner id (or file name as handed in) -> submission time, from a CSV with ``learner`` and
    ``submitted`` columns.

    Raises:
      ValueError: the columns are missing or a time is not ISO 8601 (the row is named).
    """
    with open(path, newline="") as f:
        reader = csv.DictReader(f)
        if not {"learner", "submitted"} <= set(reader.fieldnames or []):
            raise ValueError(f"{path}: expected columns learner,submitted, got {reader.fieldnames}")
        return {
            row["learner"].strip(): parse_time(row["submitted"], f"{path} line {n}")
            for n, row in enumerate(reader, 2)
        }


def submission_times(files: dict[str, Path], times_csv: Path | None) -> tuple[dict[str, datetime], str]:
    """learner -> submission time of each file in ``files`` (learner -> path), and where they came from.

    From ``times_csv`` when given (a row may name the learner id or the file name; a learner it does
    not list has no time), else from each file's modification time.
    """
    if times_csv is not None:
        listed = read_times(times_csv)
        found = {}
        for learner, path in files.items():
            when = listed.get(learner, listed.get(path.name))
            if when is not None:
                found[learner] = when
        return found, FROM_TIMES_CSV.format(name=times_csv.name)
    return {
        learner: datetime.fromtimestamp(path.stat().st_mtime, tz=UTC) for learner, path in files.items()
    }, FROM_FILE_TIMES


@dataclass(frozen=True)
class Late:
    """One learner's lateness on one assignment and what it cost."""

    days: int
    penalty: float
    adjusted: float


def late(
    course: Course, assignment: str, learner: str, submitted: str | None, total: float, max_score: float
) -> Late:
    """The days late, penalty and adjusted total of a learner whose raw total is ``total``.

    ``submitted`` is an ISO 8601 time as learners/<learner>.json keeps it; without a time or a due
    date nothing is taken.
    """
    due = course.due_for(assignment, learner)
    if due is None or not submitted:
        return Late(0, 0.0, total)
    policy = course.late_policy(assignment)
    days = policy.days_late(due, parse_time(submitted))
    penalty = min(total, policy.penalty(days, max_score))
    return Late(days, penalty, total - penalty)
