"""The class's numbers, computed from the kept learner records (grading/record.py): per test, pass rate and
messages; the mistakes merged across tests; who scored 0 and why; the histogram's bins. The class report
(grading/classreport.py, grading/classpage.py) draws them; nothing here writes a file.

A test *passes* for a learner who got all of its points. A notebook that never ran (unreadable, not
this assignment, or stopped before any answer was kept) is counted apart: its learner is in the learner
table and under "scored 0", and out of every pass rate (``learners`` counts the notebooks that ran,
``not_run`` the others). A *mistake* is what a message says once the parts that vary between learners
and between a visible and a hidden test are set aside: a failed check (``what: expected …, got ….
Hint: …``) is its function and its hint, the call's arguments and the values expected and got left out;
any other message is the message with its numbers (sizes, indices, shapes, device ids) replaced by
``#``. Messages with one key are one mistake, in any test; any other difference (a name, a
PartitionSpec, a word) keeps them apart, except that a message quoting another one whole (a check
reporting the error the learner's code raised) joins that one.
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass, field

import nbformat

from grading import similarity
from grading.assignment import Assignment, grade_id
from grading.pagesafe import printable
from grading.record import LearnerRecord

#: Similar pairs shown side by side (all of them are in class_similarity.csv).
SHOWN_PAIRS = 30
NO_MESSAGE = "(failed without an error message)"
NOT_GRADED = "not graded: the notebook did not run (see the learners who scored 0)"
MESSAGE_CHARS = 300
#: The shortest message that another message quoting it whole is merged into (shorter ones are too
#: generic to say it is the same mistake).
QUOTED_CHARS = 20


def _cut(text: str, chars: int) -> str:
    """``text`` in at most ``chars`` characters, cut at a space (never inside a word) and marked "…"."""
    if len(text) <= chars:
        return text
    head = text[: chars - 1]
    return (head.rsplit(" ", 1)[0] if " " in head else head).rstrip(" ,;:") + "…"


def first_line(text: str) -> str:
    """The first non-empty line of ``text``, at most about MESSAGE_CHARS characters. A longer line is
    cut at a word, before its hint: a check's ``Hint: …`` is kept whole (up to MESSAGE_CHARS itself),
    and what was expected and got is shortened instead.

    >>> line = first_line("CheckFailed: f(x): expected " + "[1, 2] " * 60 + "got []. Hint: check the axes.")
    >>> len(line) <= MESSAGE_CHARS, line.endswith(" [1… Hint: check the axes.")
    (True, True)
    """
    line = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
    if len(line) <= MESSAGE_CHARS:
        return line
    said, sep, hint = line.partition(HINT)
    hint = _cut(hint, MESSAGE_CHARS)
    return _cut(said, max(MESSAGE_CHARS - len(sep) - len(hint), MESSAGE_CHARS // 3)) + sep + hint


#: How a check's message introduces its hint (shardbook.checks).
HINT = " Hint: "


def failing_messages(
    notebook: nbformat.NotebookNode, scores: dict[str, float], cells: list[tuple[str, float]]
) -> dict[str, str]:
    """grade_id -> the one-line error of each graded test cell that did not get all its points: its
    first line as the feedback page shows it (``grading.preprocessors.feedback_lines``)."""
    # Imported here: the preprocessors import nbgrader (seconds), which `make grade` loads beside its
    # start (grade._warm_up), not before it.
    from grading.preprocessors import feedback_lines

    points = dict(cells)
    errors: dict[str, str] = {}
    for cell in notebook.cells:
        gid = grade_id(cell)
        if gid not in points or scores.get(gid, 0.0) >= points[gid]:
            continue
        for output in cell.get("outputs", []):
            if output.get("output_type") == "error":
                # The sentence the learner read (a known JAX mistake translated), not JAX's raw text.
                said = feedback_lines(output.get("ename", "Error"), output.get("evalue", ""))
                # The learner's code chose it: no control character of theirs reaches a CSV, a comment
                # or a terminal as it is.
                errors[gid] = printable(first_line("\n".join(said)), newlines=False)
                break
        errors.setdefault(gid, NO_MESSAGE)
    return errors


def kept_details(
    files: dict[str, bytes], scores: dict[str, float], cells: list[tuple[str, float]], notebook_name: str
) -> dict[str, dict[str, str]]:
    """What learners/<learner>.json keeps for the class report, from a worker's autograded files:
    ``messages`` (grade_id -> first line of the error) and ``answers`` (answer grade_id -> source).

    Only the graded notebook, ``notebook_name``, is read: the folder also holds whatever files the
    learner's code wrote beside it, a notebook of its own making included."""
    data = files.get(notebook_name)
    if data is None:
        return {"messages": {}, "answers": {}}
    notebook = nbformat.reads(data.decode("utf-8"), as_version=4)
    return {"messages": failing_messages(notebook, scores, cells), "answers": Assignment(notebook).answers()}


def exercise_of(grade_id: str, exercises: list[str]) -> str:
    """The exercise (answer grade_id) a test cell checks: ``test_<exercise>_<what>``, the longest match."""
    matches = [e for e in exercises if grade_id.startswith(f"test_{e}_") or grade_id == f"test_{e}"]
    return max(matches, key=len) if matches else "other"


@dataclass
class TestSummary:
    """One graded test cell across the class."""

    grade_id: str
    exercise: str
    points: float
    passed: int
    learners: int  # whose notebook ran
    messages: dict[str, list[str]] = field(default_factory=dict)  # message -> learners, commonest first
    not_run: int = 0  # learners whose notebook never ran: out of the pass rate

    @property
    def pass_rate(self) -> float:
        """The fraction of the learners whose notebook ran with all of this test's points."""
        return self.passed / self.learners if self.learners else 0.0


@dataclass
class Mistake:
    """One mistake across the class: messages with one ``mistake_key``."""

    key: str
    learners: list[str]  # sorted, each once
    tests: list[str]  # grade_ids, notebook order
    messages: dict[str, int]  # each exact message -> how many (learner, test) pairs said it


_NUMBER = re.compile(r"(?<![\w.])\d+(?:\.\d+)?(?:e[-+]?\d+)?(?!\w)")


#: A failed check's message (shardbook.checks): ``Name: function(arguments): expected …, got …. Hint: …``.
_CHECK = re.compile(r"^(?P<name>\w+): (?P<function>[A-Za-z_][\w.]*)\(.*?: expected .*?(?P<hint> Hint: .*)$")


def mistake_key(message: str) -> str:
    """What stays the same of one mistake between learners and between a visible and a hidden test.

    A failed check is its function and its hint: the call's arguments and the values expected and got
    differ between a self-check and a hidden test on other shapes and meshes, the hint (what the check
    recognised) does not. Any other message is itself with every number replaced by ``#`` (sizes,
    indices, shapes, device ids); digits inside a name (``f32``, ``x_block2``) are kept.

    >>> mistake_key("CheckFailed: f(Mesh({'X': 4})): expected P('X'), got P('Y'). Hint: swap them.")
    'CheckFailed: f(…): expected …, got …. Hint: swap them.'
    """
    check = _CHECK.match(message)
    if check:
        return f"{check['name']}: {check['function']}(…): expected …, got ….{_NUMBER.sub('#', check['hint'])}"
    return _NUMBER.sub("#", message)


@dataclass
class ClassSummary:
    """Everything the class report shows, computed from the kept records."""

    assignment: str
    max_score: float
    totals: dict[str, float]
    adjusted: dict[str, float]  # learner -> total after the late penalty (empty without a due date)
    tests: list[TestSummary]
    zeros: dict[str, str]  # learner -> why they scored 0
    late: dict[str, tuple[int, float]]  # learner -> (days late, points taken)
    times_from: str
    pairs: list[similarity.Pair]
    answers: dict[str, dict[str, str]]
    not_run: list[str] = field(default_factory=list)  # learners whose notebook never ran
    failed: dict[str, list[str]] = field(default_factory=dict)  # learner -> grade_ids without all points
    notes: dict[str, list[str]] = field(default_factory=dict)  # learner -> report.txt's notes
    mistakes: list[Mistake] = field(default_factory=list)  # commonest first
    pages: set[str] = field(default_factory=set)  # learners with a feedback/<learner>.html

    def hardest(self) -> list[TestSummary]:
        """The tests, lowest pass rate first (notebook order among equals)."""
        return sorted(self.tests, key=lambda t: t.pass_rate)


def _why_zero(notes: list[str]) -> str:
    text = " ".join(notes)
    if "not a readable notebook" in text:
        return "unreadable: " + next(n for n in notes if "not a readable notebook" in n)
    if "limit for one notebook" in text:
        return "time-out: " + next(n for n in notes if "limit for one notebook" in n)
    if "kernel died too many times" in text or "nbgrader could not grade" in text or "Ray worker" in text:
        return "crash: " + first_line(next(n for n in notes if "died" in n or "could not" in n or "Ray" in n))
    if "could not be matched" in text:
        return "not this assignment: " + first_line(next(n for n in notes if "could not be matched" in n))
    return "every test failed" + (f" ({first_line(notes[0])})" if notes else "")


def summarise(
    assignment: str,
    records: list[LearnerRecord],
    cells: list[tuple[str, float]],
    exercises: list[str],
    excluded: dict[str, list[str]],
    adjusted: dict[str, float] | None = None,
    late: dict[str, tuple[int, float]] | None = None,
    times_from: str = "",
) -> ClassSummary:
    """The class's numbers from the learners' records (as write_reports keeps them).

    Args:
      exercises: the assignment's answer grade_ids, in notebook order (tests are grouped by them).
      excluded: exercise -> sources that are no one's answer (reference solution, stub).
      adjusted, late: totals after late penalties and (days, points taken), when a due date applies.
    """
    totals = {r.learner: r.total(cells) for r in records}
    # A notebook that never ran keeps no answers (kept_details had no graded notebook to read).
    not_run = sorted(r.learner for r in records if r.never_ran)
    ran = [r for r in records if r.learner not in not_run]
    tests = []
    failed: dict[str, list[str]] = {r.learner: [] for r in records}
    for gid, points in cells:
        passed = sum(1 for r in ran if r.scores.get(gid, 0.0) >= points)
        by_message: dict[str, list[str]] = defaultdict(list)
        for r in records:
            if r.scores.get(gid, 0.0) < points:
                failed[r.learner].append(gid)
                message = r.messages.get(gid)
                if message is None:  # no notebook ran: the reason is under "Learners who scored 0"
                    message = NOT_GRADED if r.learner in not_run else NO_MESSAGE
                by_message[message].append(r.learner)
        ordered = dict(sorted(by_message.items(), key=lambda kv: (-len(kv[1]), kv[0])))
        tests.append(
            TestSummary(
                gid, exercise_of(gid, exercises), points, passed, len(ran), ordered, len(records) - len(ran)
            )
        )
    zeros = {r.learner: _why_zero(r.notes) for r in records if totals[r.learner] == 0}
    answers = {r.learner: r.answers for r in records if r.answers}
    return ClassSummary(
        assignment=assignment,
        max_score=sum(p for _, p in cells),
        totals=totals,
        adjusted=adjusted or {},
        tests=tests,
        zeros=zeros,
        late={k: v for k, v in (late or {}).items() if v[0] > 0},
        times_from=times_from,
        pairs=similarity.similar_pairs(answers, excluded),
        answers=answers,
        not_run=not_run,
        failed=failed,
        notes={r.learner: list(r.notes) for r in records},
        mistakes=merge_mistakes(tests),
    )


def merge_mistakes(tests: list[TestSummary]) -> list[Mistake]:
    """The failing messages of every test grouped by ``mistake_key``, most learners first. A notebook that
    never ran, or a test that failed without a message, is no mistake of the learner's and is left out."""
    merged: dict[str, Mistake] = {}
    for t in tests:
        for message, learners in t.messages.items():
            if message in (NOT_GRADED, NO_MESSAGE):
                continue
            key = mistake_key(message)
            m = merged.setdefault(key, Mistake(key, [], [], {}))
            m.learners = sorted(set(m.learners) | set(learners))
            if t.grade_id not in m.tests:
                m.tests.append(t.grade_id)
            m.messages[message] = m.messages.get(message, 0) + len(learners)
    # A check that reports the error the learner's code raised quotes it whole ("expected a result, got
    # NameError: name 'math' is not defined. Hint: ..."): that message joins the row of the error it quotes.
    for key in sorted(merged, key=len, reverse=True):
        said = [_NUMBER.sub("#", message) for message in merged[key].messages]
        quoted = [k for k in merged if k != key and len(k) >= QUOTED_CHARS and any(k in m for m in said)]
        if quoted:
            into, m = merged[min(quoted, key=len)], merged.pop(key)
            into.learners = sorted(set(into.learners) | set(m.learners))
            into.tests += [t for t in m.tests if t not in into.tests]
            for message, count in m.messages.items():
                into.messages[message] = into.messages.get(message, 0) + count
    return sorted(merged.values(), key=lambda m: (-len(m.learners), -len(m.tests), m.key))


def histogram_bins(max_score: float) -> list[tuple[float, float]]:
    """[low, high) bins covering 0..max_score (the last one closed): one per point up to 30 points."""
    count = int(max_score) if 0 < max_score <= 30 and float(max_score).is_integer() else 20
    width = max_score / count if max_score > 0 else 1.0
    return [(k * width, (k + 1) * width) for k in range(count)]


def bin_counts(totals: list[float], bins: list[tuple[float, float]]) -> list[int]:
    """How many totals fall in each bin; a total on a boundary goes up, the maximum into the last."""
    counts = [0] * len(bins)
    for t in totals:
        k = next(
            (i for i, (lo, hi) in enumerate(bins) if lo <= t < hi), len(bins) - 1 if t >= bins[-1][0] else 0
        )
        counts[k] += 1
    return counts
