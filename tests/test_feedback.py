"""The feedback page a learner reads (grading/templates/named_feedback) and grading/feedback.py.

The page is rendered here by nbconvert with the project's own nbgrader configuration (the template nbgrader's
``generate_feedback`` uses in ``make grade``), from a notebook with one failed and one passed test whose
message is far wider than a phone; Chromium opens it at 1280 and 390 px.
"""

from __future__ import annotations

import re
from pathlib import Path

import nbformat
import pytest

from grading.record import ReportFolder
from tests import pages

ROOT = Path(__file__).resolve().parents[1]
#: The hint of assignment 1's axis-order mistake, as nbgrader wrote it on a page the issue measured.
LONG_MESSAGE = (
    "CheckFailed: sharding_for_layout(Mesh({'X': 4, 'Y': 2}, Auto axes), (16,), "
    "<layout of P(('Y', 'X'),)>): "
    "expected device 1 to hold [8:10], got [2:4] from your P(('X', 'Y'),). "
    "Hint: within a tuple entry the first mesh axis is the major one: ('X', 'Y') and ('Y', 'X') give "
    "the same blocks to different devices."
)
UNBROKEN = "expected_" + "x" * 300  # a message with no space to break at


def _test_cell(grade_id: str, points: float, score: float, message: str | None):
    cell = nbformat.v4.new_code_cell(f"check_{grade_id}()")
    cell.metadata["nbgrader"] = {
        "grade": True,
        "solution": False,
        "grade_id": grade_id,
        "points": points,
        "score": score,
    }
    if message:
        ename, _, evalue = message.partition(": ")
        cell.outputs = [nbformat.v4.new_output("error", ename=ename, evalue=evalue, traceback=[message])]
    return cell


def render_feedback(cells, score: float, max_score: float, late_penalty: float = 0.0) -> str:
    """A feedback page as ``make grade`` writes it: nbconvert's HTMLExporter configured by
    grading/nbgrader_config.py, plus the bootstrap path nbgrader's GenerateFeedback adds."""
    import nbgrader
    from nbconvert import HTMLExporter
    from traitlets.config.loader import PyFileConfigLoader

    config = PyFileConfigLoader("nbgrader_config.py", path=str(ROOT / "grading")).load_config()
    static = Path(nbgrader.__file__).parent / "server_extensions" / "formgrader" / "static"
    config.HTMLExporter.extra_template_paths = [str(static / "node_modules" / "bootstrap" / "dist" / "css")]
    answer = nbformat.v4.new_code_cell(
        "def sharding_for_layout(mesh, shape, layout):\n    return P(('X', 'Y'),)"
    )
    answer.metadata["nbgrader"] = {"grade": False, "solution": True, "grade_id": "sharding_for_layout"}
    notebook = nbformat.v4.new_notebook(cells=[answer, *cells])
    resources = {"nbgrader": {"notebook": "01_meshes", "score": score, "max_score": max_score}}
    resources["nbgrader"]["late_penalty"] = late_penalty
    body, _ = HTMLExporter(config=config).from_notebook_node(notebook, resources=resources)
    return body


@pytest.fixture(scope="module")
def feedback_page(tmp_path_factory) -> Path:
    cells = [
        _test_cell("test_sharding_for_layout_visible", 3, 0, LONG_MESSAGE),
        _test_cell("test_sharding_for_layout_unbroken", 1, 0, "CheckFailed: " + UNBROKEN),
        _test_cell("test_per_device_shape_visible", 1, 1, None),
    ]
    page = tmp_path_factory.mktemp("feedback") / "learner.html"
    page.write_text(render_feedback(cells, 1, 5))
    return page


def test_a_failed_test_says_failed_and_a_passed_one_passed(feedback_page):
    # The word, not only a colour: the heading of each test, and its line in the contents.
    text = feedback_page.read_text()
    headings = re.findall(
        r"Grade cell: <code>(\w+)</code></span>\s*<span class=\"verdict verdict-(\w+)\">(\w+)<", text
    )
    assert headings == [
        ("test_sharding_for_layout_visible", "failed", "failed"),
        ("test_sharding_for_layout_unbroken", "failed", "failed"),
        ("test_per_device_shape_visible", "passed", "passed"),
    ]
    contents = re.findall(r'<li class="(\w+)"><a href="#(\w+)">', text)
    assert contents == [
        ("failed", "test_sharding_for_layout_visible"),
        ("failed", "test_sharding_for_layout_unbroken"),
        ("passed", "test_per_device_shape_visible"),
    ]


def _rgb(css: str) -> tuple[int, ...]:
    return tuple(int(v) for v in re.findall(r"\d+", css)[:3])


def test_failure_is_red_and_every_message_wraps_in_chromium(feedback_page, tmp_path):
    # The page: the hint sat 836-1,196 px past the right edge with no scrollbar. Now every error's
    # text ends inside the window at 1280 and at 390 px, the failed panel's heading is red and says so, the
    # passed one's is not red, and the page never scrolls sideways (pages.at_both_widths).
    def check(page, viewport, width):
        facts = page.eval_on_selector_all(
            "div.output_error pre",
            "els => els.map(e => ({right: e.getBoundingClientRect().right,"
            " scroll: e.scrollWidth - e.clientWidth,"
            " text: e.innerText}))",
        )
        assert len(facts) == 2, facts
        for fact in facts:
            assert fact["right"] <= width and fact["scroll"] <= 0, (viewport, fact["right"], fact["scroll"])
        assert "different devices." in facts[0]["text"] and UNBROKEN in facts[1]["text"].replace("\n", "")
        for verdict, red in (("failed", True), ("passed", False)):
            heading = page.eval_on_selector(
                f"div.nbgrader_cell.{verdict} > .panel-heading",
                "e => ({bg: getComputedStyle(e).backgroundColor,"
                " label: e.querySelector('.verdict').innerText,"
                " labelBg: getComputedStyle(e.querySelector('.verdict')).backgroundColor,"
                " visible: e.querySelector('.verdict').getBoundingClientRect().right <= window.innerWidth})",
            )
            r, g, b = _rgb(heading["labelBg"])
            assert (r > 150 and g < 80 and b < 80) == red, (viewport, verdict, heading)
            assert heading["label"].strip().lower() == verdict and heading["visible"], (viewport, heading)
        error_bg = _rgb(page.eval_on_selector("div.output_error", "e => getComputedStyle(e).backgroundColor"))
        assert error_bg[0] > error_bg[2] + 10, (viewport, error_bg)  # a red ground, not white

    pages.at_both_widths(feedback_page, check, shots=tmp_path)


# grading/feedback.py: the exported score, the penalty and the reason for a cut-off cell, on the page.

ASSIGNMENT = "01_meshes"
TIMEOUT_NOTE = "test_devices_holding_hidden ran past the 15 s cell limit and was interrupted."
CANVAS_NAME = "smithjohn_LATE_4242_99_01_meshes"  # as Canvas's Download Submissions names a late file


def _interrupted_cell(grade_id: str, points: float):
    # What `make grade` wrote for a cell stopped at its time limit (seen on a graded broken_infinite_loop).
    cell = _test_cell(grade_id, points, 0, None)
    cell.outputs = [
        nbformat.v4.new_output("error", ename=name, evalue="", traceback=[f"{name}: "])
        for name in ("KeyboardInterrupt", "CellTimeoutError")
    ]
    return cell


@pytest.fixture
def graded_folder(tmp_path):
    """A report folder as write_reports leaves it, a due date passed, and each learner's page rendered by
    the project's template: a learner 2 days late with a failed test, and a Canvas-named one whose hidden
    test ran past the cell limit."""
    import json

    from grading import reports, worker
    from grading.course import read_course

    root = worker.copy_course(tmp_path, assignment=ASSIGNMENT)
    course_file = root / "grading" / "course.toml"
    course_file.write_text("[late]\nper_day = 10\n[assignments.01_meshes]\ndue = 2026-10-01T23:59:00Z\n")
    cells = worker.graded_cells(ASSIGNMENT, root)
    full = dict(cells)
    folder = root / "grading" / "reports" / ASSIGNMENT
    (folder / "learners").mkdir(parents=True)
    records = {
        "late_learner": (
            full | {"test_sharding_for_layout_visible": 0.0},
            {"test_sharding_for_layout_visible": LONG_MESSAGE},
            [],
            "2026-10-03T08:00:00+00:00",
        ),
        CANVAS_NAME: (
            full | {"test_devices_holding_hidden": 0.0},
            {"test_devices_holding_hidden": "KeyboardInterrupt: "},  # what a stopped cell's output says
            [TIMEOUT_NOTE],
            "2026-10-01T08:00:00+00:00",
        ),
    }
    for learner, (scores, messages, notes, submitted) in records.items():
        kept = {"learner": learner, "source": f"{learner}.ipynb", "scores": scores, "notes": notes}
        kept |= {"seconds": 1.0, "messages": messages, "answers": {"f": "x"}, "submitted": submitted}
        (folder / "learners" / f"{learner}.json").write_text(json.dumps(kept))
    reports.write_reports(ASSIGNMENT, [], root, course=read_course(course_file))
    max_score = sum(full.values())
    late_cells = [_test_cell("test_sharding_for_layout_visible", 1, 0, LONG_MESSAGE)]
    (folder / "feedback" / "late_learner.html").write_text(
        render_feedback(late_cells, max_score - 1, max_score)
    )
    cut_cells = [_interrupted_cell("test_devices_holding_hidden", 2)]
    (folder / "feedback" / f"{CANVAS_NAME}.html").write_text(
        render_feedback(cut_cells, max_score - 2, max_score)
    )
    return root, folder, max_score


def test_the_page_says_the_score_exported_the_penalty_and_why_a_cell_was_cut(graded_folder, tmp_path):
    # The issue: a late learner read 10.0/14 while 7.2 went to the LMS; a timed-out cell showed an empty
    # KeyboardInterrupt. Now the page says what make export sends and why, and the cell says its note.
    from grading import export, feedback

    root, folder, max_score = graded_folder
    kept = ReportFolder(root, ASSIGNMENT)
    assert [p.name for p in feedback.annotate_reports(kept)] == ["late_learner.html", f"{CANVAS_NAME}.html"]
    once = {p.name: p.read_bytes() for p in (folder / "feedback").glob("*.html")}
    assert feedback.annotate_reports(kept)  # a regrade writes the reports again: the pages stay the same
    assert {p.name: p.read_bytes() for p in (folder / "feedback").glob("*.html")} == once
    late = (folder / "feedback" / "late_learner.html").read_text()
    assert late.count('<div id="standing"') == 1
    exported = max_score - 1 - 0.2 * max_score  # 2 started days late at 10% of the points a day
    said = (  # 32 h 1 min after the due date: 2 started days
        f"Score sent to the LMS: {exported:g} of {max_score:g} ({max_score - 1:g} before the late penalty: "
        f"submitted 32 hours late (2 started days), {0.2 * max_score:g} points taken)."
    )
    assert said in late
    assert export.main([ASSIGNMENT, "--format", "csv", "--root", str(root)]) == 0
    with open(folder / "export" / "csv.csv") as f:
        rows = {r["learner"]: r for r in __import__("csv").DictReader(f)}
    assert float(rows["late_learner"]["total"]) == pytest.approx(exported)  # the same number as exported
    cut = (folder / "feedback" / f"{CANVAS_NAME}.html").read_text()
    assert "KeyboardInterrupt" not in cut and "CellTimeoutError" not in cut
    assert cut.count(TIMEOUT_NOTE) == 1  # in the box; the cell says it was interrupted, once
    assert cut.count(feedback.INTERRUPTED_FALLBACK) == 1
    assert f"Score sent to the LMS: {max_score - 2:g} of {max_score:g}." in cut

    def check(page, viewport, width):
        box = page.eval_on_selector(
            "#standing", "e => ({right: e.getBoundingClientRect().right, t: e.innerText})"
        )
        assert box["right"] <= width and "Score sent to the LMS" in box["t"], (viewport, box)

    pages.at_both_widths(folder / "feedback" / "late_learner.html", check, shots=tmp_path)


def test_feedback_export_writes_a_comment_and_page_per_learner_and_a_canvas_reupload_zip(graded_folder):
    # Item 4: one command; per learner a comment and a page, a manifest with the LMS ids, one zip, and the
    # zip Canvas's Re-Upload Submissions reads (its rule: the first two all-digit parts of a name are the
    # user id and the id of the file handed in).
    import csv
    import zipfile

    from grading import comments, feedback

    root, folder, max_score = graded_folder
    feedback.annotate_reports(ReportFolder(root, ASSIGNMENT))
    assert comments.main([ASSIGNMENT, "--root", str(root)]) == 0
    out = folder / "export" / "comments"
    text = (out / "late_learner.txt").read_text()
    assert text.startswith(f"{ASSIGNMENT}: Score sent to the LMS: ")
    assert f"- test_sharding_for_layout_visible: {LONG_MESSAGE}" in text
    cut = (out / f"{CANVAS_NAME}.txt").read_text()
    assert f"- test_devices_holding_hidden: {TIMEOUT_NOTE}" in cut and "KeyboardInterrupt" not in cut
    with open(out / "manifest.csv", newline="") as f:
        manifest = {r["learner"]: r for r in csv.DictReader(f)}
    assert (
        manifest[CANVAS_NAME]["canvas_id"] == "4242"
        and manifest[CANVAS_NAME]["page"] == f"{CANVAS_NAME}.html"
    )
    assert manifest["late_learner"]["sis_login_id"] == "late_learner"
    with zipfile.ZipFile(out / "comments.zip") as z:
        assert {"manifest.csv", "late_learner.txt", "late_learner.html", f"{CANVAS_NAME}.html"} <= set(
            z.namelist()
        )
    # a second run after the late learner's page went (no longer graded): the zip does not ship it
    (out / "gone_learner.html").write_text("an earlier run's page")
    (folder / "feedback" / "late_learner.html").unlink()
    assert comments.main([ASSIGNMENT, "--root", str(root)]) == 0
    with zipfile.ZipFile(out / "comments.zip") as z:
        shipped = set(z.namelist())
    assert "gone_learner.html" not in shipped and "late_learner.html" not in shipped, shipped
    assert not (out / "late_learner.html").exists() and "late_learner.txt" in shipped
    # a comment points to the attached page only when there is one
    assert "The attached page" not in (out / "late_learner.txt").read_text()
    assert "The attached page shows your code" in (out / f"{CANVAS_NAME}.txt").read_text()
    with zipfile.ZipFile(out / "canvas_reupload.zip") as z:
        (name,) = z.namelist()
        assert [part for part in name.split("_") if part.isdigit()][:2] == ["4242", "99"]
        assert "Score sent to the LMS" in z.read(name).decode()


def test_feedback_export_before_grading_says_what_to_run(tmp_path, capsys):
    from grading import comments, worker

    root = worker.copy_course(tmp_path, assignment=ASSIGNMENT)
    assert comments.main([ASSIGNMENT, "--root", str(root)]) == 2
    assert f"run make grade ASSIGNMENT={ASSIGNMENT}" in capsys.readouterr().err


# grading/pagesafe.py and the template: a hostile notebook's page runs no script and shows the real score.

#: What the issue's hostile notebooks put on their pages: script in a markdown cell and in display(HTML(...)),
#: an <img onerror>, a javascript: link, a fake score over the real one, a JavaScript output, an SVG that
#: scripts. Each script would leave a mark: the page's title, a DOM attribute, a console message.
PWN = "document.title='pwned'; document.documentElement.setAttribute('data-pwned', '1'); console.log('pwned')"
FAKE_SCORE = "01_meshes (Score: 14.0 / 14.0)"
HOSTILE_MARKDOWN = (
    f'# My answers\n\n<script>{PWN}</script>\n\n<img src=x onerror="{PWN}">\n\n'
    "<a href=\"javascript:document.title='pwned'\">click</a> <a href='https://example.org/'>a link</a>\n\n"
    f"<h4 id='standing' class='verdict verdict-passed' style='position:fixed;top:0;left:0;z-index:9'>"
    f"{FAKE_SCORE}</h4>\n\n**bold** and `code`"
)
HOSTILE_OUTPUTS = [
    {"text/html": f"<script>document.querySelector('h4').innerText = '{FAKE_SCORE}'; {PWN}</script>"},
    {"text/html": f'<iframe srcdoc="<script>parent.{PWN}</script>"></iframe><svg onload="{PWN}"></svg>'},
    {"application/javascript": PWN, "text/plain": "<IPython.core.display.Javascript object>"},
    {"image/svg+xml": f"<svg xmlns='http://www.w3.org/2000/svg' onload=\"{PWN}\"><script>1</script></svg>"},
    {"text/markdown": f'<img src=x onerror="{PWN}"> *fine*'},
]


def hostile_page(folder: Path) -> Path:
    """A feedback page of a notebook whose markdown cell and outputs try every trick above, rendered by
    the course's template and its box filled as write_reports fills it (3 of 5 points)."""
    from grading import feedback

    markdown = nbformat.v4.new_markdown_cell(HOSTILE_MARKDOWN)
    code = nbformat.v4.new_code_cell("display(HTML(...))")
    code.outputs = [nbformat.v4.new_output("display_data", data=data) for data in HOSTILE_OUTPUTS]
    png = nbformat.v4.new_output("display_data", data={"image/png": "iVBORw0KGgo="})
    png.metadata = {"image/png": {"width": f"1 onerror={PWN!r}", "height": 20}}  # unquoted in nbconvert's
    code.outputs.append(png)
    raw = nbformat.v4.new_raw_cell(
        f"<script>{PWN}</script><b>raw</b>", metadata={"raw_mimetype": "text/html"}
    )
    cells = [
        markdown,
        code,
        raw,
        _test_cell("test_sharding_for_layout_visible", 2, 0, "CheckFailed: expected <b>P('X')</b>, got P()"),
        _test_cell("test_per_device_shape_visible", 3, 3, None),
    ]
    standing = feedback.Standing(
        "mallory", total=3, max_score=5, exported=3, notes=["<script>x</script> note"]
    )
    page = folder / "mallory.html"
    page.write_text(feedback.annotate(render_feedback(cells, 3, 5), standing), encoding="utf-8")
    return page


def test_a_hostile_notebooks_page_holds_no_script_and_only_harmless_tags(tmp_path):
    # Static: no <script> element, no event handler, no javascript: URL anywhere in the page, and the CSP
    # that forbids script comes first in the head (before anything that could run).
    from html.parser import HTMLParser

    from grading import pagesafe

    text = hostile_page(tmp_path).read_text()
    assert "&lt;script&gt;" in text  # shown escaped, as text
    elements: list[tuple[str, dict]] = []

    class Collect(HTMLParser):
        def handle_starttag(self, tag, attrs):
            elements.append((tag, dict(attrs)))

    Collect().feed(text)
    assert len(elements) > 100 and not [
        t for t, _ in elements if t in ("script", "iframe", "object", "embed")
    ]
    for tag, attrs in elements:
        assert not [a for a in attrs if a.startswith("on")], (tag, attrs)
        for url in (attrs.get("href"), attrs.get("src")):
            assert not (url or "").strip().lower().startswith(("javascript:", "data:text")), (tag, attrs)
    head = text.split("</head>")[0]
    csp = re.search(r'<meta content="([^"]*)" http-equiv="Content-Security-Policy"', head)
    assert csp and csp[1] == pagesafe.FEEDBACK_CSP and "script-src 'none'" in csp[1], head[:600]
    assert head.index("Content-Security-Policy") < head.index("<style")
    assert text.count('id="standing"') == 1
    assert not [a for _, a in elements if "position" in a.get("style", "")]  # nothing laid over the page
    assert 'href="https://example.org/"' in text and "<strong>bold</strong>" in text  # formatting kept


def test_a_hostile_notebooks_page_runs_no_learner_script_in_chromium(tmp_path):
    # The pages ran the learner's script in the instructor's browser (and in Canvas after a
    # re-upload); one showed a fake "Score: 14.0 / 14.0". Opened in Chromium: no script ran (title,
    # attribute and console untouched), the heading and the box say the real score, and nothing of the
    # learner's is laid over the top of the page.
    page = hostile_page(tmp_path)

    def check(browser_page, viewport, width):
        facts = browser_page.evaluate(
            "() => ({title: document.title, mark: document.documentElement.getAttribute('data-pwned'),"
            " heading: document.querySelector('h4').innerText,"
            " box: document.querySelectorAll('#standing').length,"
            " boxText: document.querySelector('#standing').innerText,"
            " fixed: Array.from(document.querySelectorAll('body *')).filter("
            "   e => getComputedStyle(e).position === 'fixed').length})"
        )
        assert facts["title"] == "01_meshes" and facts["mark"] is None, (viewport, facts)
        assert facts["heading"] == "01_meshes (Score: 3.0 / 5.0)", (viewport, facts)
        assert facts["box"] == 1 and "Score sent to the LMS: 3 of 5." in facts["boxText"], (viewport, facts)
        assert facts["fixed"] == 0, (viewport, facts)

    console = _console_of(page, check)
    assert not [m for m in console if "pwned" in m], console


def _console_of(page: Path, check) -> list[str]:
    """Opens ``page`` at both widths with ``check``; returns every console message Chromium printed."""
    said: list[str] = []
    pages.at_both_widths(page, check, console=said)
    return said


def test_the_pages_csp_stops_a_script_the_sanitiser_let_through(tmp_path):
    # The second layer alone: a page whose body had a script and an inline handler put back in (as a
    # template change or a sanitiser bug could) still runs neither, because of its CSP meta.
    text = hostile_page(tmp_path).read_text()
    bypass = f"<script>{PWN}</script><img src='data:,x' onerror=\"{PWN}\">"
    forged = tmp_path / "forged.html"
    forged.write_text(text.replace("<body>", "<body>" + bypass, 1), encoding="utf-8")

    def check(browser_page, viewport, width):
        mark = browser_page.evaluate(
            "() => [document.title, document.documentElement.getAttribute('data-pwned')]"
        )
        assert mark == ["01_meshes", None], (viewport, mark)

    assert not [m for m in _console_of(forged, check) if m == "pwned"]


def test_printable_spells_out_what_would_act_on_a_terminal_or_a_reader():
    # Property: learner text bound for report.txt, an LMS comment or the terminal keeps its letters
    # (any script) and newlines, and every control or format character comes out as its escape, so
    # none can erase a line, move the cursor, set a title or reverse the text that follows.
    from grading import pagesafe

    hostile = "x\x1b[1A\x1b[2K\rbob: 14 of 14\x07\u202etxt.exe\u2028\x00\udcff"
    shown = pagesafe.printable(hostile)
    assert shown == ("x\\x1b[1A\\x1b[2K\\rbob: 14 of 14\\x07\\u202etxt.exe\\u2028\\x00\\udcff")
    assert all(c.isprintable() for c in shown)
    assert pagesafe.printable("José Núñez 李雷\n\tdef f():") == "José Núñez 李雷\n\tdef f():"
    assert pagesafe.printable("a\nb\tc", newlines=False) == "a\\nb\\tc"


def test_safe_html_keeps_a_notebooks_formatting_and_escapes_the_rest():
    from html.parser import HTMLParser

    from grading import pagesafe

    vectors = [
        "<svg><script>alert(1)</script></svg>",
        "<iframe src='javascript:alert(1)'></iframe><object data=x></object><embed src=x>",
        "<a href='JaVaScRiPt:alert(1)'>a</a><a href=' javascript:alert(1)'>b</a>",
        "<a href='&#106;avascript:alert(1)'>c</a><a href='data:text/html,<script>alert(1)</script>'>d</a>",
        "<img src=x onerror=alert(1)><img src='data:image/svg+xml;base64,PHN2Zz4='><body onload=alert(1)>",
        "<meta http-equiv='refresh' content='0;url=https://evil.example'><base href='https://evil.example/'>",
        "<form action='https://evil.example'><input name=p></form><style>h4{display:none}</style>",
        "<div id='standing' class='verdict verdict-passed panel' style='position:absolute;color:red'>x</div>",
        "<details open ontoggle=alert(1)><summary>s</summary></details><math><mi xlink:href='javascript:1'>",
    ]

    class Collect(HTMLParser):
        def __init__(self):
            super().__init__()
            self.tags: list[tuple[str, list[tuple[str, str | None]]]] = []

        def handle_starttag(self, tag, attrs):
            self.tags.append((tag, attrs))

    for vector in vectors:
        out = pagesafe.safe_html(vector)
        collect = Collect()
        collect.feed(out)
        for tag, attrs in collect.tags:
            assert tag in pagesafe.TAGS, (vector, out)
            for name, value in attrs:
                assert not name.startswith("on"), (vector, out)
                assert name != "id" or value not in pagesafe.RESERVED_IDS, (vector, out)
                assert name != "class" or "verdict" not in (value or ""), (vector, out)
                if name in ("href", "src"):
                    scheme = (value or "").split(":", 1)[0].strip().lower()
                    assert scheme in ("http", "https", "mailto") or (value or "").startswith(
                        ("#", "data:image/png", "data:image/jpeg", "data:image/gif", "data:image/webp")
                    ), (vector, out)
                assert "position" not in (value or ""), (vector, out)
    assert pagesafe.safe_html("<p style='text-align:right'><em>kept</em></p>") == (
        '<p style="text-align:right;"><em>kept</em></p>'
    )


def test_the_course_s_own_markdown_passes_the_sanitiser_unchanged():
    # Every markdown cell of every released exercise renders to the same HTML with and without
    # safe_html: an ordinary learner's page loses nothing (headings, links, code, tables, the Colab badge).
    # Compared as the page keeps it: nbconvert writes the page through BeautifulSoup, so `<img/>` and
    # `<img>` come out alike.
    from bs4 import BeautifulSoup
    from nbconvert.filters import markdown2html

    def as_page(html: str) -> str:
        return str(BeautifulSoup(html, "html.parser"))

    from grading import pagesafe

    checked = 0
    for path in sorted((ROOT / "exercises").glob("*/*.ipynb")):
        for cell in nbformat.read(path, as_version=4).cells:
            if cell.cell_type == "markdown":
                rendered = markdown2html(cell.source)
                assert as_page(pagesafe.safe_html(rendered)) == as_page(rendered), (
                    path.name,
                    cell.source[:200],
                )
                checked += 1
    assert checked > 50, checked


def test_a_crash_s_comment_is_a_plain_sentence_and_points_to_no_page(graded_folder):
    # The issue: comments for crashes carried nbgrader's traceback and usage text, and every comment
    # ended "The attached page shows your code…" also where there was no page.
    from grading import comments, reports
    from grading.course import read_course

    root, folder, _ = graded_folder
    log = "Traceback (most recent call last):\n  File x\nMissingEntry\nusage: nbgrader autograde [-h]"
    crashed = ReportFolder(root, ASSIGNMENT)
    kept = {"learner": "crashed", "source": "crashed.ipynb", "scores": {}, "answers": {}, "messages": {}}
    kept["notes"] = ["nbgrader could not grade this notebook; scored 0. Its log ends:\n" + log]
    (crashed.learners / "crashed.json").write_text(__import__("json").dumps(kept))
    reports.write_reports(ASSIGNMENT, [], root, course=read_course(root / "grading" / "course.toml"))
    assert comments.main([ASSIGNMENT, "--root", str(root)]) == 0
    text = (crashed.comments / "crashed.txt").read_text()
    assert "The grader stopped on this notebook before it could score it; it scored 0." in text
    for raw in ("Traceback", "usage:", "MissingEntry", "nbgrader", "attached page"):
        assert raw not in text, (raw, text)
    assert "usage: nbgrader" in crashed.report_txt.read_text()  # the instructor keeps the log


def hand_in(folder: Path) -> None:
    """This module's notebook of the session's hostile batch (tests/conftest.py: hostile_batch), graded
    by `make grade`: the issue's hand-in, the reference answers plus a markdown cell and a cell of the
    learner's own that display script."""
    import json

    from tests import submissions
    from tests.conftest import GRADED_ASSIGNMENT

    download = json.loads(submissions.colab_bytes(None, GRADED_ASSIGNMENT))
    shows = (
        "from IPython.display import HTML, Javascript, display\n"
        f"display(HTML({HOSTILE_OUTPUTS[0]['text/html']!r}))\n"
        f"display(Javascript({PWN!r}))\n"
    )
    download["cells"][1:1] = [
        {"cell_type": "markdown", "metadata": {}, "source": HOSTILE_MARKDOWN},
        {"cell_type": "code", "metadata": {}, "source": shows, "outputs": [], "execution_count": None},
    ]
    (folder / "mallory.ipynb").write_text(json.dumps(download))


@pytest.mark.xdist_group("grading")  # reads the session's hostile batch, a `make grade` (see CONTRIBUTING.md)
def test_a_hostile_notebook_graded_by_make_grade_gets_a_page_that_runs_none_of_it(hostile_batch):
    # The hand-in (hand_in above), through the real pipeline (nbgrader's generate_feedback with
    # the course's template, then the driver's box): full marks, a page that holds no script, and in
    # Chromium the real score with no learner script run.
    from tests.conftest import GRADED_ASSIGNMENT

    kept = hostile_batch.first
    record = kept.read("mallory")
    assert record and record.result and record.result.total == record.result.max_score > 0
    page = kept.page("mallory")
    text = page.read_text()
    assert "<script" not in text.lower() and "&lt;script&gt;" in text and "not run on this page" in text
    total = f"{record.result.total:.1f}"

    def check(browser_page, viewport, width):
        facts = browser_page.evaluate(
            "() => [document.title, document.documentElement.getAttribute('data-pwned'),"
            " document.querySelector('h4').innerText, document.querySelector('#standing').innerText]"
        )
        assert facts[:2] == [GRADED_ASSIGNMENT, None], (viewport, facts)
        assert facts[2] == f"{GRADED_ASSIGNMENT} (Score: {total} / {total})", (viewport, facts)
        assert f"Score sent to the LMS: {record.result.total:g} of {record.result.max_score:g}" in facts[3]

    assert not [m for m in _console_of(page, check) if "pwned" in m]
