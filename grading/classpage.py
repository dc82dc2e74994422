"""The parts of the class report (class.html, grading/classreport.py) that tell the instructor whom to help:
the opening lines naming the hardest test and the commonest mistake, the sortable learner table, and the
mistakes merged across tests. Each function takes the report's ``ClassSummary`` and returns HTML.

The table sorts in the page itself: a click on a column's heading sorts by it (again: the other way), by
the ``data-sort`` value of each cell; the script is inline, so the page works from a file, offline.
"""

from __future__ import annotations

import html

from grading import protocol
from grading.classsummary import ClassSummary, Mistake

#: Mistakes listed on the page (all of them are in class_mistakes.csv).
SHOWN_MISTAKES = 15
#: Learners named per mistake before the rest fold away.
SHOWN_LEARNERS = 8

SORT_JS = """
document.querySelectorAll('table.sortable').forEach(function (table) {
  table.querySelectorAll('th').forEach(function (th, column) {
    th.addEventListener('click', function () {
      var body = table.tBodies[0];
      var rows = Array.prototype.slice.call(body.rows);
      var up = th.getAttribute('aria-sort') !== 'ascending';
      table.querySelectorAll('th').forEach(function (h) { h.removeAttribute('aria-sort'); });
      th.setAttribute('aria-sort', up ? 'ascending' : 'descending');
      var numeric = th.classList.contains('num');
      rows.sort(function (a, b) {
        var x = a.cells[column].dataset.sort, y = b.cells[column].dataset.sort;
        var c = numeric ? parseFloat(x) - parseFloat(y) : x.localeCompare(y);
        return up ? c : -c;
      });
      rows.forEach(function (r) { body.appendChild(r); });
    });
  });
});
"""

CSS = """
table.sortable th { cursor: pointer; user-select: none; white-space: nowrap; }
table.sortable th::after { content: ' \\2195'; color: #999; font-size: 0.8em; }
table.sortable th[aria-sort=ascending]::after { content: ' \\2191'; color: #1d1d1f; }
table.sortable th[aria-sort=descending]::after { content: ' \\2193'; color: #1d1d1f; }
.flag { display: inline-block; border-radius: 3px; padding: 0 0.35em; margin: 0 0.2em 0.1em 0;
        font-size: 0.8rem; background: #eef; white-space: nowrap; }
.flag.bad { background: #fdecea; color: #7a1a14; }
.flag.late { background: #fff4d6; color: #6a4a00; }
.headline { font-size: 1.02rem; }
#learner-table td:first-child { overflow-wrap: anywhere; min-width: 6rem; }
#learner-table td.flags { min-width: 5.5rem; }
#learner-table .flag { white-space: normal; overflow-wrap: anywhere; }
@media (max-width: 600px) {
  body { padding-left: 0.5rem; padding-right: 0.5rem; }
  #learner-table td:first-child { min-width: 4.5rem; }
  #learner-table td.flags { min-width: 4.8rem; }
  #learner-table td, #learner-table th { padding: 0.2rem 0.2rem; }
  #learner-table th { white-space: normal; }
  table.sortable th::after { content: ''; }
}
"""


def _fmt(x: float) -> str:
    return f"{round(x, 4):g}"


def _names(names: list[str]) -> str:
    shown = ", ".join(html.escape(n) for n in names[:SHOWN_LEARNERS])
    if len(names) <= SHOWN_LEARNERS:
        return shown
    rest = ", ".join(html.escape(n) for n in names[SHOWN_LEARNERS:])
    return f"{shown} <details><summary>and {len(names) - SHOWN_LEARNERS} more</summary>{rest}</details>"


def headline(s: ClassSummary) -> str:
    """One paragraph: the hardest test (lowest pass rate among the notebooks that ran) and the commonest
    mistake, each with its numbers."""
    parts = []
    hardest = s.hardest()
    if hardest and hardest[0].learners and hardest[0].pass_rate == 1:
        parts.append(f"Every one of the {hardest[0].learners} notebook(s) that ran passed every test.")
    elif hardest and hardest[0].learners:
        t = hardest[0]
        parts.append(
            f"Hardest test: <code>{html.escape(t.grade_id)}</code> ({html.escape(t.exercise)}), passed by "
            f"{t.passed} of the {t.learners} notebook(s) that ran ({100 * t.pass_rate:.0f}%)."
        )
    parts += _commonest(s)
    return f"<p class='headline'>{' '.join(parts)}</p>\n" if parts else ""


def _commonest(s: ClassSummary) -> list[str]:
    """The opening line's sentence on mistakes: the commonest one when it is one and made by two learners
    or more; else how many share the top count, or that no two learners made the same mistake."""
    if not s.mistakes:
        return []
    link = "(<a href='#mistakes'>all mistakes</a>)"
    top = len(s.mistakes[0].learners)
    tied = [m for m in s.mistakes if len(m.learners) == top]
    if top < 2:
        return [f"No two learners made the same mistake: {len(s.mistakes)} mistake(s), each by one {link}."]
    if len(tied) > 1:
        return [f"{len(tied)} mistakes are the commonest, each made by {top} learners {link}."]
    m = s.mistakes[0]
    return [
        f"Commonest mistake: <span class='message'>{html.escape(example_message(m))}</span>, made by "
        f"{top} learners in {len(m.tests)} test(s) {link}."
    ]


def example_message(m: Mistake) -> str:
    """The wording of mistake ``m`` said most often (the last in sort order among equals)."""
    return max(m.messages, key=lambda k: (m.messages[k], k))


#: The notes (grading/worker.py) of a cell that was stopped: the kernel died, the cell or the whole
#: notebook ran past its time limit, or it ran out of memory.
CUT_OFF = ("stopped the Python kernel", "limit for one", "ran past the", "ran out of memory")


def _flags(s: ClassSummary, learner: str) -> tuple[str, str]:
    """(HTML of the learner's flags, their text to sort by)."""
    flags: list[tuple[str, str, str]] = []  # (class, label, title)
    if learner in s.not_run:
        flags.append(("bad", "never ran", s.zeros.get(learner, "")))
    elif learner in s.zeros:
        flags.append(("bad", "scored 0", s.zeros[learner]))
    if learner in s.late:
        days, taken = s.late[learner]
        flags.append(("late", f"late {days} d", f"{_fmt(taken)} point(s) taken"))
    crashed = [n for n in s.notes.get(learner, []) if any(cut in n for cut in CUT_OFF)]
    if crashed and learner not in s.not_run:
        flags.append(("bad", "cell cut off", "; ".join(crashed)))
    interfered = [n for n in s.notes.get(learner, []) if any(i in n for i in protocol.INTERFERED_NOTES)]
    if interfered:  # hooks undone before the tests, a test with no proof it ran, tools replaced
        flags.append(("bad", "tests interfered", "; ".join(interfered)))
    alike: dict[str, list[str]] = {}  # the other learner -> the exercises they answered alike
    for p in s.pairs:
        if learner in (p.a, p.b):
            alike.setdefault(p.b if learner == p.a else p.a, []).append(f"{p.exercise} {100 * p.score:.0f}%")
    for other, exercises in alike.items():
        flags.append(("", f"alike: {other}", f"alike in {', '.join(exercises)} (see below)"))
    text = " ".join(label for _, label, _ in flags)
    return (
        "".join(
            f"<span class='flag {c}' title='{html.escape(title, quote=True)}'>{html.escape(label)}</span>"
            for c, label, title in flags
        ),
        text,
    )


def learner_table(s: ClassSummary) -> str:
    """Every learner, lowest score first: score, exported score, days late, tests failed, flags, and a
    link to the learner's feedback page; sortable by a click on any heading."""
    out = ["<h2 id='learners'>Learners</h2>\n"]
    late_columns = bool(s.adjusted)
    exported = (
        " <em>exported</em> is the score <code>make export</code> sends to the LMS, after the late penalty."
        if late_columns
        else ""
    )
    out.append(
        "<p>Lowest score first; click a column's heading to sort by it, and hover a flag for its reason."
        f"{exported}</p>\n"
    )
    head = "<th>learner</th><th class='num'>score</th>"
    head += "<th class='num'>exported</th><th class='num wide'>started days late</th>" if late_columns else ""
    head += "<th class='num wide'>tests failed</th><th>flags</th><th>feedback</th>"
    out.append(
        "<div class='scroll'><table id='learner-table' class='sortable'>"
        f"<thead><tr>{head}</tr></thead><tbody>\n"
    )
    order = sorted(s.totals, key=lambda k: (s.adjusted.get(k, s.totals[k]), k))
    for learner in order:
        name = html.escape(learner)
        total = s.totals[learner]
        cells = [
            f"<td data-sort='{name}'>{name}</td>",
            f"<td class='num' data-sort='{total}'>{_fmt(total)}</td>",
        ]
        if late_columns:
            sent = s.adjusted.get(learner, total)
            days = s.late.get(learner, (0, 0.0))[0]
            cells.append(f"<td class='num' data-sort='{sent}'>{_fmt(sent)}</td>")
            cells.append(f"<td class='num wide' data-sort='{days}'>{days}</td>")
        failed = len(s.failed.get(learner, []))
        cells.append(f"<td class='num wide' data-sort='{failed}'>{failed}</td>")
        flags, text = _flags(s, learner)
        cells.append(f"<td class='flags' data-sort='{html.escape(text, quote=True)}'>{flags}</td>")
        link = (
            f"<a href='feedback/{html.escape(learner, quote=True)}.html'>feedback</a>"
            if learner in s.pages
            else "none (see report.txt)"
        )
        cells.append(f"<td data-sort='{int(learner in s.pages)}'>{link}</td>")
        out.append(f"<tr>{''.join(cells)}</tr>\n")
    out.append("</tbody></table></div>\n")
    return "".join(out)


def mistakes(s: ClassSummary) -> str:
    """The commonest mistakes, one row per mistake across tests: an example message, how many learners,
    in which tests, and who."""
    out = ["<h2 id='mistakes'>Commonest mistakes</h2>\n"]
    out.append(
        "<p>Messages that differ only in their numbers (sizes, indices, shapes, device ids) are one "
        "mistake, in whichever test it showed, and so is a message quoting another one whole (a check "
        "reporting the error the learner's code raised); any other difference keeps two messages apart. "
        "Notebooks that never ran are left out. Each test's exact messages are in "
        "<code>class_messages.csv</code>.</p>\n"
    )
    if not s.mistakes:
        return "".join(out) + "<p>No learner whose notebook ran failed a test with a message.</p>\n"
    out.append(
        "<div class='scroll'><table id='mistakes-table'><tr><th>mistake (the commonest wording)</th>"
        "<th class='num'>learners</th><th>tests</th><th>who</th></tr>\n"
    )
    for m in s.mistakes[:SHOWN_MISTAKES]:
        example = example_message(m)
        variants = f" <small>({len(m.messages)} wordings)</small>" if len(m.messages) > 1 else ""
        tests = " ".join(f"<code>{html.escape(t)}</code>" for t in m.tests)
        out.append(
            f"<tr><td class='message'>{html.escape(example)}{variants}</td>"
            f"<td class='num'>{len(m.learners)}</td>"
            f"<td>{tests}</td><td>{_names(m.learners)}</td></tr>\n"
        )
    out.append("</table></div>\n")
    rest = s.mistakes[SHOWN_MISTAKES:]
    if rest:
        out.append(f"<p>and {len(rest)} other mistake(s), in class_mistakes.csv.</p>\n")
    return "".join(out)
