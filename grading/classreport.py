"""The class report: how a whole class did on one assignment, as a page with pictures and as CSV.

Written by ``make grade`` and ``make regrade`` beside scores.csv, from the kept ``learners/*.json``
alone (so the local and the Ray engine give the same report), into ``grading/reports/<assignment>/``:

* ``class.html`` — who needs help first: a table of every learner (score, score exported after the
  late penalty, days late, tests failed, flags, a link to the learner's ``feedback/<learner>.html``),
  sortable by any column in the page itself (inline script, no network); the hardest test and the
  commonest mistake named in the opening lines; the score distribution (a histogram); each test's
  pass rate, hardest first (a bar per test, coloured by exercise); the commonest mistakes, one row per
  mistake across tests with the learners who made it; the learners who scored 0 and why, late
  submissions, and the pairs of answers that look copied, side by side;
* ``class_scores.png``, ``class_pass_rates.png`` — its two pictures (matplotlib);
* ``class_tests.csv`` — grade_id, exercise, points, passed, learners, pass_rate, not_run (notebook
  order);
* ``class_messages.csv`` — grade_id, message, count, learners (space-separated ids);
* ``class_mistakes.csv`` — mistake, learners_count, tests, learners, example (the merged rows);
* ``class_histogram.csv`` — low, high, learners (the histogram's bins; adjusted totals too when a due
  date applies);
* ``class_similarity.csv`` — learner_a, learner_b, exercise, score, shared.

A test *passes* for a learner who got all of its points. A notebook that never ran (unreadable, not
this assignment, or stopped before any answer was kept) is counted apart: its learner is in the learner
table and under "scored 0", and out of every pass rate (``learners`` counts the notebooks that ran,
``not_run`` the others). A *mistake* is a message with its numbers (sizes, indices, shapes, device ids)
replaced by ``#``: messages that differ only there, in any test, are one mistake; any other difference
(a name, a PartitionSpec, a word) keeps them apart, except that a message quoting another one whole (a
check reporting the error the learner's code raised) joins that one. A message is the first line of the
error a failing test cell raised (``AssertionError: expected ... got ... — hint``), kept per learner in
``learners/<learner>.json`` under ``messages``; the answers compared for similarity are kept there
under ``answers``.
"""

from __future__ import annotations

import csv
import difflib
import html
import io
import re
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

from grading import classpage, similarity
from grading.assignment import Assignment, grade_id

#: Similar pairs shown side by side (all of them are in class_similarity.csv).
SHOWN_PAIRS = 30
NO_MESSAGE = "(failed without an error message)"
NOT_GRADED = "not graded: the notebook did not run (see the learners who scored 0)"
MESSAGE_CHARS = 300
#: The shortest message that another message quoting it whole is merged into (shorter ones are too
#: generic to say it is the same mistake).
QUOTED_CHARS = 20


def first_line(text: str) -> str:
    """The first non-empty line of ``text``, at most MESSAGE_CHARS characters."""
    line = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
    return line if len(line) <= MESSAGE_CHARS else line[: MESSAGE_CHARS - 1] + "…"


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
                errors[gid] = first_line("\n".join(said))
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
    """One mistake across the class: messages equal once their numbers are replaced by ``#``."""

    key: str
    learners: list[str]  # sorted, each once
    tests: list[str]  # grade_ids, notebook order
    messages: dict[str, int]  # each exact message -> how many (learner, test) pairs said it


_NUMBER = re.compile(r"(?<![\w.])\d+(?:\.\d+)?(?:e[-+]?\d+)?(?!\w)")


def mistake_key(message: str) -> str:
    """``message`` with every number replaced by ``#``: sizes, indices, shapes and device ids vary between
    learners and between a visible and a hidden test, the mistake does not. Digits inside a name
    (``f32``, ``x_block2``) are kept."""
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
    records: list[dict],
    cells: list[tuple[str, float]],
    exercises: list[str],
    excluded: dict[str, list[str]],
    adjusted: dict[str, float] | None = None,
    late: dict[str, tuple[int, float]] | None = None,
    times_from: str = "",
) -> ClassSummary:
    """The class's numbers from learners/*.json records (as write_reports keeps them).

    Args:
      exercises: the assignment's answer grade_ids, in notebook order (tests are grouped by them).
      excluded: exercise -> sources that are no one's answer (reference solution, stub).
      adjusted, late: totals after late penalties and (days, points taken), when a due date applies.
    """
    totals = {r["learner"]: sum(r["scores"].get(gid, 0.0) for gid, _ in cells) for r in records}
    # A notebook that never ran keeps no answers (kept_details had no graded notebook to read).
    not_run = sorted(r["learner"] for r in records if r.get("answers", True) == {} and not r.get("messages"))
    ran = [r for r in records if r["learner"] not in not_run]
    tests = []
    failed: dict[str, list[str]] = {r["learner"]: [] for r in records}
    for gid, points in cells:
        passed = sum(1 for r in ran if r["scores"].get(gid, 0.0) >= points)
        by_message: dict[str, list[str]] = defaultdict(list)
        for r in records:
            if r["scores"].get(gid, 0.0) < points:
                failed[r["learner"]].append(gid)
                message = r.get("messages", {}).get(gid)
                if message is None:  # no notebook ran: the reason is under "Learners who scored 0"
                    message = NOT_GRADED if r["learner"] in not_run else NO_MESSAGE
                by_message[message].append(r["learner"])
        ordered = dict(sorted(by_message.items(), key=lambda kv: (-len(kv[1]), kv[0])))
        tests.append(
            TestSummary(
                gid, exercise_of(gid, exercises), points, passed, len(ran), ordered, len(records) - len(ran)
            )
        )
    zeros = {r["learner"]: _why_zero(r.get("notes", [])) for r in records if totals[r["learner"]] == 0}
    answers = {r["learner"]: r.get("answers", {}) for r in records if r.get("answers")}
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
        notes={r["learner"]: list(r.get("notes", [])) for r in records},
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
        quoted = [k for k in merged if k != key and len(k) >= QUOTED_CHARS and k in key]
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


def _fmt(x: float) -> str:
    return f"{x:g}"


def write_csvs(summary: ClassSummary, folder: Path) -> None:
    """class_tests.csv, class_messages.csv, class_histogram.csv and class_similarity.csv."""
    with open(folder / "class_tests.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["grade_id", "exercise", "points", "passed", "learners", "pass_rate", "not_run"])
        for t in summary.tests:
            w.writerow(
                [
                    t.grade_id,
                    t.exercise,
                    _fmt(t.points),
                    t.passed,
                    t.learners,
                    f"{t.pass_rate:.4f}",
                    t.not_run,
                ]
            )
    with open(folder / "class_messages.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["grade_id", "message", "count", "learners"])
        for t in summary.tests:
            for message, learners in t.messages.items():
                w.writerow([t.grade_id, message, len(learners), " ".join(sorted(learners))])
    with open(folder / "class_mistakes.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["mistake", "learners_count", "tests", "learners", "example"])
        for m in summary.mistakes:
            example = max(m.messages, key=lambda k: (m.messages[k], k))
            w.writerow([m.key, len(m.learners), " ".join(m.tests), " ".join(m.learners), example])
    bins = histogram_bins(summary.max_score)
    raw = bin_counts(list(summary.totals.values()), bins)
    late = bin_counts(list(summary.adjusted.values()), bins) if summary.adjusted else None
    with open(folder / "class_histogram.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["low", "high", "learners", *(["learners_adjusted"] if late else [])])
        for k, (lo, hi) in enumerate(bins):
            w.writerow([_fmt(round(lo, 4)), _fmt(round(hi, 4)), raw[k], *([late[k]] if late else [])])
    with open(folder / "class_similarity.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["learner_a", "learner_b", "exercise", "score", "shared"])
        for p in summary.pairs:
            w.writerow([p.a, p.b, p.exercise, f"{p.score:.3f}", p.shared])


def import_matplotlib():
    """matplotlib's pyplot, drawing to files (Agg); grade.py imports it early, beside other work."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def draw_pictures(summary: ClassSummary, folder: Path) -> None:
    """class_scores.png (histogram of totals) and class_pass_rates.png (a bar per test by exercise)."""
    from matplotlib.ticker import MaxNLocator

    plt = import_matplotlib()

    bins = histogram_bins(summary.max_score)
    edges = [lo for lo, _ in bins] + [bins[-1][1]]
    fig, ax = plt.subplots(figsize=(7, 3.2), dpi=110)
    ax.hist(list(summary.totals.values()), bins=edges, color="#4878a8", edgecolor="white", label="raw total")
    if summary.adjusted:
        ax.hist(
            list(summary.adjusted.values()),
            bins=edges,
            histtype="step",
            color="#c0504d",
            linewidth=2,
            linestyle="--",
            label="after late penalty",
        )
        ax.legend(loc="upper left", frameon=False)
    ax.set_xlabel(f"total points (of {_fmt(summary.max_score)})")
    ax.set_ylabel("learners")
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.spines[["top", "right"]].set_visible(False)
    fig.tight_layout()
    fig.savefig(folder / "class_scores.png")
    plt.close(fig)

    exercises = list(dict.fromkeys(t.exercise for t in summary.tests))
    colours = plt.get_cmap("tab10")
    hardest = summary.hardest()
    n = len(hardest)
    fig, ax = plt.subplots(figsize=(7, 0.9 + 0.32 * n), dpi=110)
    ys = list(range(n))[::-1]  # the hardest test on top
    for y, t in zip(ys, hardest, strict=True):
        colour = colours(exercises.index(t.exercise) % 10)
        ax.barh(y, 100 * t.pass_rate, color=colour, height=0.7)
        ax.text(min(100 * t.pass_rate + 1, 88), y, f"{100 * t.pass_rate:.0f}%", va="center", fontsize=8)
    ax.set_yticks(ys, [t.grade_id for t in hardest], fontsize=8)
    ax.set_xlim(0, 100)
    ran = hardest[0].learners if hardest else 0
    ax.set_xlabel(f"of the {ran} notebooks that ran, those with all the test's points (%)")
    handles = [plt.Rectangle((0, 0), 1, 1, color=colours(k % 10)) for k in range(len(exercises))]
    ax.legend(
        handles, exercises, loc="lower center", bbox_to_anchor=(0.5, 1.0), ncol=2, frameon=False, fontsize=8
    )
    ax.spines[["top", "right"]].set_visible(False)
    fig.tight_layout()
    fig.savefig(folder / "class_pass_rates.png")
    plt.close(fig)


_CSS = """
body { font-family: system-ui, sans-serif; margin: 0 auto; padding: 0 1rem 3rem; max-width: 62rem;
       line-height: 1.45; color: #1d1d1f; }
h1 { font-size: 1.5rem; } h2 { font-size: 1.2rem; margin-top: 2rem; } h3 { font-size: 1rem; }
img { max-width: 100%; height: auto; display: block; }
.scroll { overflow-x: auto; max-width: 100%; }
table { border-collapse: collapse; font-size: 0.9rem; }
td, th { border-bottom: 1px solid #ddd; padding: 0.25rem 0.5rem; text-align: left; vertical-align: top; }
td.num, th.num { text-align: right; white-space: nowrap; }
code, .message { font-family: ui-monospace, monospace; font-size: 0.85rem; }
.message { overflow-wrap: anywhere; }
@media (max-width: 600px) { .wide { display: none; } }
.note { background: #f4f6f8; border-left: 4px solid #8aa; padding: 0.5rem 0.8rem; }
details summary { cursor: pointer; }
table.diff { font-family: ui-monospace, monospace; font-size: 0.8rem; }
table.diff td { border: none; padding: 0 0.3rem; white-space: pre; }
.diff_header { color: #888; } .diff_next { display: none; }
.diff_add { background: #d7f5d7; } .diff_chg { background: #fbf0b4; } .diff_sub { background: #f8d0d0; }
"""


def render_html(summary: ClassSummary) -> str:
    """The class report page (pictures referenced by file name, beside it)."""
    s = summary
    n = len(s.totals)
    out = io.StringIO()
    w = out.write
    w("<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'>")
    w("<meta name='viewport' content='width=device-width, initial-scale=1'>")
    w(
        f"<title>Class report: {html.escape(s.assignment)}</title>"
        f"<style>{_CSS}{classpage.CSS}</style></head><body>\n"
    )
    w(f"<h1>Class report: {html.escape(s.assignment)}</h1>\n")
    totals = sorted(s.totals.values())
    median = totals[len(totals) // 2] if totals else 0.0
    full = sum(1 for t in totals if t == s.max_score)
    w(
        f"<p>{n} learner(s) graded; median {_fmt(median)} of {_fmt(s.max_score)} points; "
        f"{full} with full marks, {len(s.zeros)} with 0"
        + (f"; <a href='#not-run'>{len(s.not_run)} notebook(s) never ran</a>" if s.not_run else "")
        + ". The same numbers are in <code>class_tests.csv</code>, <code>class_messages.csv</code>, "
        "<code>class_mistakes.csv</code>, <code>class_histogram.csv</code> and "
        "<code>class_similarity.csv</code>; each learner's row is in <code>scores.csv</code>.</p>\n"
    )
    w(classpage.headline(s))
    w(classpage.learner_table(s))
    w("<h2 id='scores'>Scores</h2>\n")
    alt = f"Histogram of the {n} learners' total points, from 0 to {_fmt(s.max_score)}"
    if s.adjusted:
        alt += ", with the totals after the late penalty drawn as a dashed outline"
    w(f"<img id='histogram' src='class_scores.png' alt='{html.escape(alt)}.'>\n")

    w("<h2 id='tests'>Pass rate of each test, hardest first</h2>\n")
    ran = s.tests[0].learners if s.tests else 0
    w(
        f"<p>Of the {ran} notebook(s) that ran"
        + (
            f"; the {len(s.not_run)} that never ran are <a href='#not-run'>counted apart</a>"
            if s.not_run
            else ""
        )
        + ".</p>\n"
    )
    w(
        "<img id='pass-rates' src='class_pass_rates.png' alt='A bar per test cell, the hardest on top: the "
        "percentage of the notebooks that ran with all its points, coloured by the exercise it checks.'>\n"
    )
    w("<div class='scroll'><table id='tests-table'><tr><th>test</th><th class='wide'>exercise</th>")
    w("<th class='num'>passed</th><th class='num'>rate</th></tr>\n")
    for t in s.hardest():
        w(
            f"<tr><td><code>{html.escape(t.grade_id)}</code></td>"
            f"<td class='wide'>{html.escape(t.exercise)}</td>"
            f"<td class='num'>{t.passed}/{t.learners}</td>"
            f"<td class='num'>{100 * t.pass_rate:.0f}%</td></tr>\n"
        )
    w("</table></div>\n")

    w(classpage.mistakes(s))

    w("<h2 id='zeros'>Learners who scored 0</h2>\n")
    if not s.zeros:
        w("<p>None.</p>\n")
    else:
        w("<div class='scroll'><table><tr><th>learner</th><th>why</th></tr>\n")
        for learner, why in sorted(s.zeros.items()):
            w(f"<tr><td>{html.escape(learner)}</td><td class='message'>{html.escape(why)}</td></tr>\n")
        w("</table></div><p>Each learner's notes are in report.txt.</p>\n")
    if s.not_run:
        w(f"<h3 id='not-run'>Notebooks that never ran ({len(s.not_run)})</h3>\n")
        w(
            "<p>Out of every pass rate and mistake above: "
            + ", ".join(html.escape(x) for x in s.not_run)
            + ". Why is in the table above and in report.txt.</p>\n"
        )

    if s.times_from:
        w("<h2 id='late'>Late submissions</h2>\n")
        w(f"<p>Submission times are {html.escape(s.times_from)}.</p>\n")
        if not s.late:
            w("<p>No submission was late.</p>\n")
        else:
            w("<div class='scroll'><table><tr><th>learner</th><th class='num'>days late</th>")
            w("<th class='num'>points taken</th><th class='num'>total</th></tr>\n")
            for learner, (days, taken) in sorted(s.late.items()):
                w(
                    f"<tr><td>{html.escape(learner)}</td><td class='num'>{days}</td>"
                    f"<td class='num'>{_fmt(round(taken, 4))}</td>"
                    f"<td class='num'>{_fmt(round(s.adjusted.get(learner, 0.0), 4))} "
                    f"(raw {_fmt(s.totals[learner])})</td></tr>\n"
                )
            w("</table></div>\n")

    w("<h2 id='similarity'>Answers that look alike</h2>\n")
    w(
        "<p class='note'>Answers are compared exercise by exercise after removing comments, docstrings and "
        "formatting and renaming every variable; what the reference solution or the stub contains, and "
        f"what more than {similarity.common_limit(len(s.answers))} learners share, counts for no one. "
        f"A pair is listed when at least {100 * similarity.THRESHOLD:.0f}% of the rest of their two "
        "answers is shared. "
        "It cannot see an answer copied and then restructured (statements reordered or rewritten), a "
        "source outside this class (the web, another year, a chatbot), or two learners who both copied "
        "the reference solution. A pair is a reason to read both answers, never proof.</p>\n"
    )
    if not s.pairs:
        w(f"<p>No pair of the {len(s.answers)} learners' answers looks alike.</p>\n")
    else:
        differ = difflib.HtmlDiff(wrapcolumn=60)
        w(f"<p>{len(s.pairs)} pair(s), most alike first")
        w(
            f" (the first {SHOWN_PAIRS} shown; all in class_similarity.csv)"
            if len(s.pairs) > SHOWN_PAIRS
            else ""
        )
        w(".</p>\n")
        for p in s.pairs[:SHOWN_PAIRS]:
            w(
                f"<details class='pair'><summary>{html.escape(p.a)} and {html.escape(p.b)}: "
                f"<code>{html.escape(p.exercise)}</code>, {100 * p.score:.0f}% alike "
                f"({p.shared} shared runs of {similarity.K} tokens)</summary>\n"
            )
            w(f"<div class='scroll'>{similarity.side_by_side(p, s.answers, differ)}</div></details>\n")
    w(f"<script>{classpage.SORT_JS}</script>\n")
    w("</body></html>\n")
    return out.getvalue()


def write_class_report(summary: ClassSummary, folder: Path) -> Path:
    """Writes class.html, its pictures and its CSVs into ``folder``; returns the page's path."""
    summary.pages = {p.stem for p in (folder / "feedback").glob("*.html")}
    write_csvs(summary, folder)
    draw_pictures(summary, folder)
    page = folder / "class.html"
    page.write_text(render_html(summary))
    return page
