"""tools/site_check.py: a synthetic site with a broken image, link or anchor is caught."""

import functools
import http.server
import importlib.util
import json
import threading
import time

import pytest

from tests.notebooks import ROOT
from tests.pages import shared_browser_check
from tools import site_check, site_static

PNG = bytes.fromhex(  # a 1x1 PNG
    "89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c4890000000d49444154789c6360000002"
    "000001e221bc330000000049454e44ae426082"
)


# The tests that open pages in Chromium: skipped where the system has no browser or playwright.
NEEDS_BROWSER = pytest.mark.skipif(
    site_check.find_browser() is None or importlib.util.find_spec("playwright") is None,
    reason="no Chromium or playwright here (CI installs both)",
)


def _check_pages(tmp_path, bodies: dict[str, str], head: str = "") -> dict[tuple[str, str], list[str]]:
    """Writes each body as book/<name>.html of a small site, checks them in Chromium; the problems
    found, by (name, viewport)."""
    html, _ = _site(tmp_path, GOOD)
    for name, body in bodies.items():
        (html / "book" / f"{name}.html").write_text(_page(body).replace("<head>", "<head>" + head))
    pages = [html / "book" / f"{name}.html" for name in bodies]
    results = shared_browser_check(
        html, pages, {}, site_check.find_browser(), None, set(), lambda text, secrets: [], False
    )
    return {(r.page.removeprefix("book/").removesuffix(".html"), r.viewport): r for r in results}


def _page(body: str, title: str = "page") -> str:
    return f"<!DOCTYPE html><html><head><title>{title}</title></head><body>{body}</body></html>"


def _notebook(outputs: list[dict]) -> str:
    cell = {"cell_type": "code", "metadata": {}, "source": "", "execution_count": 1, "outputs": outputs}
    return json.dumps({"cells": [cell], "metadata": {}, "nbformat": 4, "nbformat_minor": 5})


def _image_output():
    return {
        "output_type": "display_data",
        "metadata": {},
        "data": {"image/png": "iVBO", "text/plain": "<Figure>"},
    }


def _site(tmp_path, chapter_body: str, figures: int = 1):
    """_build-like folders: html/ (index -> book/ch.html, book/other.html) and the executed notebook."""
    html, executed = tmp_path / "html", tmp_path / "jupyter_execute"
    (html / "book").mkdir(parents=True)
    (html / "_images").mkdir()
    (html / "_images" / "fig.png").write_bytes(PNG)
    (html / "index.html").write_text('<meta http-equiv="Refresh" content="0; url=book/ch.html" />')
    (html / "book" / "other.html").write_text(
        _page('<h2 id="part-two">Two</h2><a href="ch.html#top">back</a>')
    )
    (html / "book" / "ch.html").write_text(_page(f'<h1 id="top">Chapter</h1>{chapter_body}'))
    (executed / "book").mkdir(parents=True)
    (executed / "book" / "ch.ipynb").write_text(_notebook([_image_output()] * figures))
    return html, executed


GOOD = (
    '<a href="other.html#part-two">next</a> <a href="#top">top</a> <a href="https://jax.dev">JAX</a>'
    '<a href="#top:~:text=Chapter">a text fragment</a>'
    '<div class="cell_output docutils container"><img src="../_images/fig.png" alt="a figure"></div>'
)


def test_a_clean_site_passes(tmp_path):
    html, executed = _site(tmp_path, GOOD)
    problems, expected = site_static.static_problems(html, executed)
    assert problems == []
    assert expected == {"book/ch.html": 1}
    assert [p.name for p in site_static.site_pages(html)] == ["ch.html", "other.html"]  # not the redirect


@pytest.mark.parametrize(
    "body, complaint",
    [
        (GOOD.replace("#part-two", "#part-three"), "no element with id 'part-three'"),
        (GOOD.replace('"#top"', '"#nowhere"'), "no element with id 'nowhere'"),
        (GOOD.replace("#top:~:", "#nowhere:~:"), "no element with id 'nowhere:~:text=Chapter'"),
        (GOOD.replace("other.html", "missing.html"), "points to a file that is not in the site"),
        (GOOD.replace("fig.png", "gone.png"), "loads '../_images/gone.png', which is not in the site"),
        (GOOD.replace("<img", "<p>&lt;Figure size 380x462 with 1 Axes&gt;</p><span"), "shows '<Figure size'"),
        (GOOD.replace('class="cell_output docutils container"', 'class="cell_input"'), "produced 1 figures"),
        (
            GOOD
            + '<div class="cell_output"><div class="output stream"><pre>a</pre></div>'
            + '<div class="output stream"><pre>b</pre></div></div>',
            "1 cells show their printed text in several boxes",
        ),
    ],
)
def test_a_broken_site_is_caught(tmp_path, body, complaint):
    html, executed = _site(tmp_path, body)
    problems, _ = site_static.static_problems(html, executed)
    assert any(complaint in p for p in problems), problems


def test_an_api_name_in_prose_must_link_to_its_reference_on_the_page(tmp_path):
    # tools/api_links.py links a name at its first occurrence per section: once on the page is enough;
    # a name in a heading, a code block or an output is not prose.
    jit = '<code class="docutils literal"><span class="pre">jax.jit(f)</span></code>'
    linked = (
        f'<a class="api-link reference external" href="{site_static.api_links.LINKS["jax.jit"]}">{jit}</a>'
    )
    not_prose = f"<h2>{jit}</h2><pre>{jit}</pre><div class='cell_output'>{jit}</div>"
    html, executed = _site(tmp_path, GOOD + not_prose + f"<p>Call {jit}.</p>")
    problems, _ = site_static.static_problems(html, executed)
    assert problems == ["book/ch.html: its prose names jax.jit but never links it (tools/api_links.py)"]
    html, executed = _site(tmp_path / "linked", GOOD + not_prose + f"<p>Call {linked}, then {jit}.</p>")
    assert site_static.static_problems(html, executed)[0] == []


def test_figures_are_counted_from_the_executed_notebooks(tmp_path):
    # An image output counts once; an HTML output (a JS animation) by its <img> tags; "<Figure size"
    # text with no image is a figure that never became one.
    outputs = [
        _image_output(),
        {"output_type": "display_data", "metadata": {}, "data": {"text/html": '<img id="anim"><img>'}},
        {"output_type": "execute_result", "metadata": {}, "execution_count": 1, "data": {"text/plain": "12"}},
        {"output_type": "stream", "name": "stdout", "text": "<Figure size 380x462 with 1 Axes>\n"},
    ]
    (tmp_path / "book").mkdir()
    (tmp_path / "book" / "ch.ipynb").write_text(_notebook(outputs))
    counts, problems = site_static.expected_figures(tmp_path)
    assert counts == {"book/ch.html": 3}
    assert problems == ["book/ch.html: cell 0 printed '<Figure size' instead of showing an image"]


def test_no_browser_fails_in_ci_and_by_default(monkeypatch, capsys):
    monkeypatch.setenv("CI", "true")
    assert site_check.no_browser("none here", allow=True) == 2
    monkeypatch.delenv("CI")
    assert site_check.no_browser("none here", allow=False) == 2
    assert site_check.no_browser("none here", allow=True) == 0
    assert "NO BROWSER" in capsys.readouterr().err


@NEEDS_BROWSER
def test_the_browser_sees_a_broken_image_and_a_script_error(tmp_path):
    html, executed = _site(tmp_path, GOOD)
    (html / "book" / "broken.html").write_text(
        _page(
            '<div class="cell_output"><img src="../_images/fig.png"><img src="../_images/gone.png"></div>'
            "<script>undefinedFunction()</script>"
            "<div class='highlight'><pre style='width:50px;overflow:auto'>" + "x" * 300 + "</pre></div>"
        )
    )
    pages = [html / "book" / "ch.html", html / "book" / "broken.html"]
    expected = {"book/ch.html": 1, "book/broken.html": 2}
    secrets = {"return the_secret_answer(x, y)"}
    (html / "book" / "ch.html").write_text(_page(GOOD + "<pre>return the_secret_answer(x, y)</pre>"))
    # As make site-check runs it, a Chromium per viewport launched for it (the other tests share one).
    results = site_check.browser_check(
        html, pages, expected, site_check.find_browser(), None, secrets, site_check.leaks.leaks_in, False
    )
    by_page = {(r.page, r.viewport): r for r in results}
    assert set(by_page) == {(p, v) for p in expected for v in site_check.VIEWPORTS}
    clean = by_page["book/ch.html", "phone"]
    assert (clean.images, clean.loaded) == (1, 1)
    assert clean.problems == ["shows solution/hidden line 'return the_secret_answer(x, y)'"]
    broken = " | ".join(by_page["book/broken.html", "desktop"].problems)
    assert "2 figures in the notebook, 2 output images on the page, 1 loaded" in broken
    assert "image did not load" in broken and "HTTP 404" in broken
    assert "JavaScript error" in broken and "undefinedFunction" in broken
    assert "scroll sideways with no visible cue" in broken


def test_layout_findings_name_what_is_wrong():
    facts = {
        "pageWidth": 477,
        "viewport": 390,
        "out": ['code.literal "xla/service/gpu"'],
        "cut": [],
        "clipped": [],
    }
    facts["noAlt"] = ["img#_anim_img1"]
    problems = site_check.layout_problems(facts)
    assert problems == [
        'the page scrolls sideways (477 px wide in a 390 px screen): code.literal "xla/service/gpu"',
        "image without alt text: img#_anim_img1",
    ]
    clean = {"pageWidth": 390, "viewport": 390, "out": [], "cut": [], "clipped": [], "noAlt": []}
    assert site_check.layout_problems(clean) == []


LONG = "xla_gpu_all_reduce_combine_threshold_bytes_" * 3
PHONE_PAGES = {
    # Long inline code that does not wrap: the whole page scrolls sideways.
    "sideways": f"<article class='bd-article'><p>The flag <code class='literal'>{LONG}</code>.</p></article>",
    # Something a few pixels wider than the text column: into the margin, not yet past the screen.
    "column": "<article class='bd-article' style='padding:0 40px'><p>"
    "<span class='wide' style='display:inline-block;width:340px'>x</span></p></article>",
    # A heading whose text is cut by its own box.
    "heading": f"<article class='bd-article'><h2 style='overflow:hidden'>Steering {LONG}</h2></article>",
    # A row of buttons wider than its box, which hides the rest (the animation controls).
    "clipped": "<article class='bd-article'><div class='anim-buttons' style='width:300px;overflow:hidden;"
    "white-space:nowrap'>" + "<button style='width:60px'>b</button>" * 9 + "</div></article>",
    # An image (an animation frame, as a data: URI) with no alt text.
    "no-alt": "<article class='bd-article'><img id='frame' src='data:image/png;base64,iVBO'></article>",
    # Fine: a wide block that scrolls in its own box and shows the cue, and an image with alt text.
    "fine": "<article class='bd-article'><div class='sb-scroll-frame sb-more-right'>"
    f"<pre class='sb-scrollable' style='overflow-x:auto'>{LONG}</pre></div>"
    "<img src='../_images/fig.png' alt='a figure'></article>",
}


@NEEDS_BROWSER
def test_the_browser_sees_what_breaks_a_phone_layout(tmp_path):
    found = _check_pages(tmp_path, PHONE_PAGES, head="<meta name='viewport' content='width=device-width'>")
    phone = {name: r.problems for (name, viewport), r in found.items() if viewport == "phone"}
    desktop = [p for (_, viewport), r in found.items() if viewport == "desktop" for p in r.problems]
    assert not any("sideways" in p or "alt text" in p for p in desktop)  # layout checks: phone only
    assert any(p.startswith("the page scrolls sideways") and "code.literal" in p for p in phone["sideways"])
    assert phone["column"] == ['runs past the text column: span.wide "x"'], phone["column"]
    assert any(p.startswith("heading cut off: h2") for p in phone["heading"]), phone["heading"]
    assert any(
        p.startswith("clipped by its box with no scroll cue: div.anim-buttons") for p in phone["clipped"]
    )
    assert phone["no-alt"] == ["image without alt text: img#frame"], phone["no-alt"]
    assert phone["fine"] == [], phone["fine"]


def _site_with_book_static(tmp_path):
    """A small built site (GOOD) carrying the book's own CSS and output script."""
    html, _ = _site(tmp_path, GOOD)
    static = html / "_static"
    static.mkdir()
    for name in ("shardbook.css", "shardbook-output.js", "shardbook-treescope-fix.js"):
        (static / name).write_text((ROOT / "_static" / name).read_text())
    return html


@NEEDS_BROWSER
def test_the_site_css_keeps_a_phone_page_in_its_column(tmp_path):
    # The book's own _static files on a page with what broke the phone layout: long inline code in a
    # paragraph and a heading, a table wider than the column, a figure drawn 900 px wide, and
    # matplotlib's JS animation (374 px slider, a row of nine buttons). The themes' rules that matter
    # are copied in: Sphinx's nowrap inline code, myst-nb's output box that scrolls.
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.animation import FuncAnimation

    html = _site_with_book_static(tmp_path)
    fig, ax = plt.subplots(figsize=(9, 3), dpi=100)
    ax.set_title("a wide figure")
    fig.savefig(html / "_images" / "wide.png")
    # As a chapter shows it: shardbook's wrapper (alt text, no stylesheet from a CDN).
    from shardbook.viz import animation_html

    frames = FuncAnimation(fig, lambda i: ax.set_title(f"frame {i}"), frames=2)
    animation = animation_html(frames, alt="a title that changes").data
    plt.close(fig)
    path = "xla/service/gpu/transforms/reduce_scatter_creator.cc"
    code = f"<code class='docutils literal'><span class='pre'>{path}</span></code>"
    row = "<td>" + " ".join(["several", "words"] * 6) + "</td>"
    body = (
        "<article class='bd-article' style='padding:0 16px'>"
        f"<h2>Steering intermediates with {code}</h2><p>The pass is {code}.</p>"
        f"<div class='pst-scrollable-table-container'><table><tr>{row * 4}</tr></table></div>"
        "<div class='cell_output'><img src='../_images/wide.png' alt='a wide figure'></div>"
        f"<div class='cell_output'><div class='output text_html'>{animation}</div></div></article>"
    )
    head = (
        "<head><meta name='viewport' content='width=device-width'>"
        "<link rel='stylesheet' href='../_static/shardbook.css'>"
        "<style>span.pre{white-space:nowrap} div.cell_output .output{max-width:100%;overflow-x:auto}</style>"
        "<script src='../_static/shardbook-output.js'></script>"
    )
    (html / "book" / "phone.html").write_text(_page(body).replace("<head>", head))
    results = shared_browser_check(
        html,
        [html / "book" / "phone.html"],
        {"book/phone.html": 2},
        site_check.find_browser(),
        None,
        set(),
        lambda text, secrets: [],
        False,
    )
    phone = next(r for r in results if r.viewport == "phone")
    assert phone.problems == [], phone.problems


@NEEDS_BROWSER
def test_code_wraps_on_a_phone_with_a_hanging_indent_and_copies_unchanged(tmp_path):
    # Property: on a phone a code cell's long lines wrap inside its box (no sideways scroll), each line
    # a span whose continuation is indented past the line's own indentation, a token spanning two lines
    # (a docstring) split without losing a character; the text is what it was, line breaks included.
    # What a cell printed keeps its lines, and on a desktop code keeps its lines too.
    from html import escape

    from tests.pages import at_both_widths

    html = _site_with_book_static(tmp_path)
    long_line = "    total = " + " + ".join(f"value_{i}" for i in range(20))  # wider than 1280 px
    code = f'def f():\n    """A docstring\n    over two lines."""\n{long_line}\n    return total\n'
    marked = code.replace(
        '"""A docstring\n    over two lines."""',
        '<span class="sd">"""A docstring\n    over two lines."""</span>',
    )
    printed = "\n".join("name  " + "  ".join(f"column_{i}" for i in range(24)) for _ in range(2))
    body = (
        "<article class='bd-article' style='padding:0 16px'>"
        f"<div class='cell_input'><div class='highlight'><pre id='code'>{marked}</pre></div></div>"
        f"<div class='cell_output'><div class='highlight'><pre id='out'>{escape(printed)}</pre></div></div>"
        "</article>"
    )
    head = (
        "<head><meta name='viewport' content='width=device-width'>"
        "<link rel='stylesheet' href='../_static/shardbook.css'>"
        "<style>div.highlight pre{white-space:pre;overflow-x:auto}</style>"
        "<script src='../_static/shardbook-output.js'></script>"
    )
    page_path = html / "book" / "code.html"
    page_path.write_text(_page(body).replace("<head>", head))

    def check(page, viewport, width):
        text = page.evaluate("document.getElementById('code').textContent")
        assert text == code, (viewport, text)
        wide = page.evaluate(
            "(() => { const p = document.getElementById('code'); return p.scrollWidth - p.clientWidth; })()"
        )
        out = page.evaluate(
            "(() => { const p = document.getElementById('out'); return p.scrollWidth - p.clientWidth; })()"
        )
        assert out > 0, viewport  # printed columns keep their line and scroll
        indents = page.evaluate(
            "[...document.querySelectorAll('#code .sb-line')]"
            ".map(s => s.style.getPropertyValue('--sb-indent').trim())"
        )
        assert indents == ["0", "4", "4", "4", "4"], indents
        lines = page.evaluate(
            "[...document.querySelectorAll('#code .sb-line')]"
            ".map(s => Math.round(s.getBoundingClientRect().height))"
        )
        if viewport == "phone":
            assert wide <= 1, f"the code box scrolls sideways by {wide} px on a phone"
            assert lines[3] > lines[0], lines  # the long line wrapped
            x = page.evaluate("""(() => {
                const span = document.querySelectorAll('#code .sb-line')[3];
                const range = document.createRange();
                range.selectNodeContents(span);
                const rects = [...range.getClientRects()];
                return [Math.round(rects[0].left), Math.round(rects[rects.length - 1].left)];
            })()""")
            assert x[1] > x[0], x  # the continuation starts right of the line's first column
        else:
            assert wide > 0 and lines[3] == lines[0], (wide, lines)  # a desktop keeps the line whole

    at_both_widths(page_path, check)


def test_paths_of_the_build_machine_are_found_also_in_compressed_outputs(tmp_path):
    # A path of the checkout or of a virtual environment tells a reader nothing and names the machine;
    # treescope keeps its tree compressed in the page, so the check looks inside that too.
    import base64
    import zlib

    hidden = "# Defined at line 54 of /srv/me/.venv/lib/python3.12/site-packages/flax/nnx/nn/dtypes.py"
    payload = base64.b64encode(zlib.compress((hidden + " " * 400).encode())).decode()
    assert len(payload) >= 100
    compressed = base64.b64encode(zlib.compress((hidden + "x" * 2000).encode(), level=0)).decode()
    assert site_static.machine_paths(f"<script>decode('{compressed}')</script>") == [
        "/srv/me/.venv/lib/python3.12/site-packages/"
    ]
    assert site_static.machine_paths(f"<pre>{ROOT}/book/x.py</pre>") == [str(ROOT)]
    assert site_static.machine_paths("<pre>/home/someone/notes.txt</pre>") == ["/home/someone/"]
    # What shardbook.setup() leaves: the module path from the package on.
    assert site_static.machine_paths("# Defined at line 54 of flax/nnx/nn/dtypes.py") == []
    html, executed = _site(tmp_path, GOOD + f"<pre>{ROOT}/book/ch.md</pre>")
    problems, _ = site_static.static_problems(html, executed)
    assert problems == [f"book/ch.html: shows paths of the machine that built it: {ROOT}"]


DESKTOP_PAGES = {
    # A code cell and a printed table wider than the column: both are findings at 1280 px.
    "wide": "<div class='cell'><div class='cell_input'><div class='highlight'><pre style='width:600px'>"
    + "long_name = "
    + "x" * 200
    + "</pre></div></div><div class='cell_output'><div class='output stream'>"
    "<pre style='width:600px'>" + "column   " * 40 + "</pre></div></div></div>",
    # Fine: a cell tagged wide-output whose output scrolls with the cue; Colab's badge.
    "tagged": "<div class='cell tag_wide-output'><div class='cell_output'><div class='sb-scroll-frame "
    "sb-more-right'><pre class='sb-scrollable' style='width:600px;overflow-x:auto'>"
    + "column   "
    * 40
    + "</pre></div></div></div>"
    "<img src='https://colab.research.google.com/assets/colab-badge.svg' alt='Open in Colab'>",
    # A stylesheet from a CDN: an outside host.
    "cdn": "<link rel='stylesheet' href='https://maxcdn.example.com/font-awesome.min.css'><p>x</p>",
}


@NEEDS_BROWSER
def test_the_browser_sees_wide_code_wide_outputs_and_outside_requests(tmp_path):
    found = _check_pages(tmp_path, DESKTOP_PAGES)
    desktop = {name: r for (name, viewport), r in found.items() if viewport == "desktop"}
    wide = desktop["wide"].problems
    assert any(p.startswith("code cell wider than its box at 1280 px: 'long_name = x") for p in wide), wide
    assert any(p.startswith("output wider than its box at 1280 px") for p in wide), wide
    assert [p for p in desktop["tagged"].problems if "wider" in p or "outside" in p] == []
    assert desktop["tagged"].wide_outputs == 1
    assert any(
        p.startswith("asks an outside host for https://maxcdn.example.com") for p in desktop["cdn"].problems
    ), desktop["cdn"].problems


@NEEDS_BROWSER
def test_only_a_page_with_a_problem_leaves_a_screenshot_unless_all_are_asked(tmp_path):
    # Property: a full-page screenshot costs seconds on a long chapter, so `make test` takes those of the
    # pages that failed (what a maintainer opens), and --all-screenshots every page at both sizes.
    html, _ = _site(tmp_path, GOOD)
    (html / "book" / "bad.html").write_text(_page(GOOD + "<script>undefinedFunction()</script>"))
    pages = [html / "book" / "ch.html", html / "book" / "bad.html"]
    for all_shots in (False, True):
        shots = tmp_path / f"shots-{all_shots}"
        shots.mkdir()
        results = shared_browser_check(
            html, pages, {"book/ch.html": 1}, site_check.find_browser(), shots, set(),
            lambda text, secrets: [], False, all_shots=all_shots,
        )  # fmt: skip
        failing = {r.page for r in results if r.problems}
        assert failing == {"book/bad.html"}
        taken = sorted(p.name for p in shots.glob("*.jpg"))
        pages_shot = ["ch", "bad"] if all_shots else ["bad"]
        assert taken == sorted(f"book__{p}--{v}.jpg" for p in pages_shot for v in site_check.VIEWPORTS)


@NEEDS_BROWSER
def test_the_browser_measures_figure_text_as_a_phone_shows_it(tmp_path):
    # A figure with a phone image (tools/phone_figures.py's <picture>) shows it below 700 px, its text
    # at least the body text's size; the same figure without one is shrunk into the column and its
    # text named as too small. A check that cannot fail is a defect: the second page must fail it.
    import base64
    import hashlib

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from shardbook.viz import phone
    from tools import phone_figures

    html = _site_with_book_static(tmp_path)
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.5))
    for ax in axes:
        ax.bar(["all-gather", "all-reduce"], [3, 1])
        ax.set_title("bytes per collective", fontsize=10)
    data, metadata = phone.figure_bundle(fig)
    plt.close(fig)
    desktop = base64.b64decode(data["image/png"])
    digest = hashlib.sha256(desktop).hexdigest()
    info = metadata[phone.PHONE_KEY]
    (html / "_images" / f"{digest}.png").write_bytes(desktop)
    (html / "_images" / "phone.png").write_bytes(base64.b64decode(info["png"]))
    img = f'<img alt="Two bar charts" src="../_images/{digest}.png" />'
    with_phone = phone_figures.picture_html(img, {digest: info}, {digest: "phone.png"})
    without = img.replace(" />", f' data-sb-text-px="{info["desktop_min_text_px"]}" />')
    head = (
        "<meta name='viewport' content='width=device-width'>"
        "<link rel='stylesheet' href='../_static/shardbook.css'>"
        "<script src='../_static/shardbook-output.js'></script>"
    )
    article = "<article class='bd-article' style='padding:0 16px'><p>Body text.</p>{}</article>"
    bodies = {
        "phone": article.format(f"<div class='cell_output'>{with_phone}</div>"),
        "desktop-only": article.format(f"<div class='cell_output'>{without}</div>"),
    }
    for name, body in bodies.items():
        (html / "book" / f"{name}.html").write_text(_page(body).replace("<head>", "<head>" + head))
    pages = [html / "book" / f"{name}.html" for name in bodies]
    results = shared_browser_check(
        html, pages, {}, site_check.find_browser(), None, set(), lambda text, secrets: [], False
    )
    found = {(r.page.removeprefix("book/").removesuffix(".html"), r.viewport): r for r in results}
    assert not any("figure text" in p for p in found["phone", "phone"].problems), found["phone", "phone"]
    assert found["phone", "phone"].figure_text_px[0] >= 16, found["phone", "phone"].figure_text_px
    assert found["phone", "phone"].body_px == 16
    [small] = [p for p in found["desktop-only", "phone"].problems if "figure text" in p]
    assert "smaller than the body text's 16 px (the desktop image at" in small, small
    assert not any("figure text" in p for p in found["phone", "desktop"].problems)  # phones only


#: Where a treescope output's set-up script starts: the server below stops there.
TREESCOPE_SETUP = b'<treescope-run-here><script type="application/octet-stream">'
#: What a page asks for once the parser has reached its treescope output (a script just before it).
REACHED = "/__reached-the-output"


def _serve_cut_at_treescope_setup(html_root):
    """site_check.serve, except that a page holding a treescope output arrives in two parts: up to the
    start of the output's set-up script, then the rest, once the browser has parsed that far (the page's
    script just before the output asks for REACHED) and a moment more, as on a slow network, or when a
    busy machine's parser stops there. Waiting on the browser, not on a clock, keeps it so on any
    machine."""
    reached = threading.Event()
    one_at_a_time = threading.Lock()  # the viewports ask side by side: each page waits for its own signal

    class CutHandler(site_check._QuietHandler):
        def do_GET(self):
            if self.path == REACHED:
                reached.set()
                self.send_response(204)
                self.end_headers()
                return
            super().do_GET()

        def copyfile(self, source, outputfile):
            data = source.read()
            cut = data.find(TREESCOPE_SETUP)
            if cut < 0:
                outputfile.write(data)
                return
            cut += len(TREESCOPE_SETUP)
            with one_at_a_time:
                reached.clear()
                outputfile.write(data[:cut])
                outputfile.flush()
                reached.wait(timeout=20)
                time.sleep(0.2)
                outputfile.write(data[cut:])

    server = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(CutHandler, directory=str(html_root))
    )
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}/"


@NEEDS_BROWSER
@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # treescope's look through numpy at import
@pytest.mark.parametrize("with_fix", [True, False], ids=["with-the-fix", "treescope-alone"])
def test_a_treescope_output_shows_its_tree_however_the_page_arrives(tmp_path, monkeypatch, with_fix):
    # CI failed by chance on chapter 0 at phone size: "root.defns.insertContent is not a function", and
    # `nnx.display`'s tree was an empty box. Treescope runs an output's scripts as soon as their
    # element is parsed; when the parser stopped after the set-up script's tag, the script ran empty.
    # Here the page always stops there: treescope alone fails the same way, with the book's
    # _static/shardbook-treescope-fix.js in <head> (as every page of the book has it) the tree shows.
    # The tree is wider than the page, in a cell tagged wide-output, as chapter 0's is: drawn only once
    # scrolled to, long after the page loaded, it must still get the scroll cue of shardbook-output.js.
    import numpy as np
    import treescope

    html = _site_with_book_static(tmp_path)
    tree = {"kernel": np.arange(6).reshape(2, 3), "note": "a line wider than any screen " * 12}
    output = treescope.render_to_html(tree)
    assert TREESCOPE_SETUP.decode() in output  # the cut falls where the CI run's did
    head = "<meta name='viewport' content='width=device-width'>"
    head += "<link rel='stylesheet' href='../_static/shardbook.css'>"
    head += "<script src='../_static/shardbook-output.js'></script>"
    if with_fix:
        head += "<script src='../_static/shardbook-treescope-fix.js'></script>"
    filler = "<p>Body text.</p>" * 80  # the output starts below the fold: treescope draws it when near
    signal = f"<script>fetch('{REACHED}')</script>"
    cell = (
        f"<div class='cell tag_wide-output'><div class='cell_output'><div class='output text_html'>{output}"
    )
    body = f"<article class='bd-article'>{filler}{signal}{cell}</div></div></div></article>"
    (html / "book" / "tree.html").write_text(_page(body).replace("<head>", "<head>" + head))
    monkeypatch.setattr(site_check, "serve", _serve_cut_at_treescope_setup)
    results = shared_browser_check(
        html,
        [html / "book" / "tree.html"],
        {},
        site_check.find_browser(),
        None,
        set(),
        lambda text, secrets: [],
        False,
    )
    assert {r.viewport for r in results} == set(site_check.VIEWPORTS)
    for result in results:
        if with_fix:
            assert result.problems == [], result
            assert result.wide_outputs == (result.viewport == "desktop"), result  # drawn, wide, cued
        else:
            found = " | ".join(result.problems)
            assert "treescope output 1 shows no tree (its set-up script never ran)" in found, found
            assert "JavaScript error: root.defns.insertContent is not a function" in found, found
