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

The numbers come from grading/classsummary.py (what a pass, a mistake and a notebook that never ran
are); the learner table, the opening lines and the mistakes from grading/classpage.py. A message is the
first line of the error a failing test cell raised, kept per learner in ``learners/<learner>.json`` under
``messages``; the answers compared for similarity are kept there under ``answers``. The page carries a
Content-Security-Policy that lets its own sorting script run and nothing else (grading/pagesafe.py).
"""

from __future__ import annotations

import csv
import difflib
import html
import io
from pathlib import Path

from grading import classpage, pagesafe, similarity
from grading.classsummary import (  # noqa: F401 (the class report's names, as before the split)
    MESSAGE_CHARS,
    NO_MESSAGE,
    NOT_GRADED,
    QUOTED_CHARS,
    SHOWN_PAIRS,
    ClassSummary,
    Mistake,
    TestSummary,
    bin_counts,
    exercise_of,
    failing_messages,
    first_line,
    histogram_bins,
    kept_details,
    merge_mistakes,
    mistake_key,
    summarise,
)


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
    w(pagesafe.csp_meta(pagesafe.class_csp(classpage.SORT_JS)))
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
            w("<div class='scroll'><table><tr><th>learner</th><th class='num'>started days late</th>")
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
