"""Checks the built site as a reader meets it: in a real browser, at desktop and phone sizes.

python tools/site_check.py                      check _build/html (run `make book` first)
python tools/site_check.py --allow-no-browser   outside CI, only warn when no browser can be had

Without a browser (read from the files, tools/site_static.py): every internal link and anchor resolves,
every local file a page loads exists, a cell's printed text is one box (merged streams), every figure a
cell produced (counted in the executed notebooks, _build/jupyter_execute) is an image on its page, and no
page shows matplotlib's "<Figure size ...>" text instead of a picture, no page shows a path of the machine
that built it (its checkout, a virtual environment's site-packages, a home folder, a kernel's
temporary file), also inside treescope's compressed outputs, and an API name of tools/api_links.py's
table that a page's prose writes in inline code is a link to its reference on that page.

In Chromium (Playwright for Python, driving the system browser), for every page at 1280x800 and 390x844:
the images of cell outputs loaded (naturalWidth > 0) and are as many as the notebook's figures; no
JavaScript error comes from the site's own files; no local request fails; the navigation works (phone:
☰ opens the sidebar, "On this page" opens the contents, tapped as a finger does, and leaves
no tooltip up when it closes; desktop: ☰ collapses the sidebar); nothing that
scrolls sideways lacks the scroll cue of _static/shardbook-output.js; every treescope output
(`nnx.display`) shows its tree once scrolled to; the text shown holds no solution
or hidden-test line (tools/notebooks.py's leak logic); the page asks no outside host for anything but
Colab's badge and MathJax (ALLOWED_EXTERNAL). At desktop size also: no code cell and no output box is
wider than its box (an output of a cell tagged `wide-output` may be, with its scroll cue: counted and
reported as deliberately wide). At phone size also: the page itself does not
scroll sideways (the element sticking out is named), no heading is cut off, no box of the text clips
its content without scrolling with the cue (animation controls, tables), every <img> has alt text, and
every figure's smallest text, as the phone shows it, is at least the page's body text (the sizes
tools/phone_figures.py writes on the <img>, times the scale the page shows the image at).
Screenshots of the pages with a problem go to _build/screenshots/ (--all-screenshots: of every page).

No browser: says so loudly and exits 2 (CI=true always fails; --allow-no-browser lets a local run pass).
"""

from __future__ import annotations

import argparse
import fnmatch
import functools
import http.server
import importlib.util
import os
import re
import shutil
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as a script: tools/ is a package of the repository root
    sys.path.insert(0, str(ROOT))
from tools import leaks, notebooks  # noqa: E402  (the leak logic: one for the notebooks and the site)

VIEWPORTS = {"desktop": (1280, 800), "phone": (390, 844)}
from tools.site_static import FIGURE_TEXT, site_pages, static_problems  # noqa: E402  (the checks without a browser)

# What a page of the book may fetch from another host: Colab's badge image and MathJax.
ALLOWED_EXTERNAL = (
    re.compile(r"^https://colab\.research\.google\.com/assets/colab-badge\.svg$"),
    re.compile(r"^https://cdn\.jsdelivr\.net/npm/mathjax@"),
)
# A cell tagged like this may print wider than the column (myst-nb writes tags as classes tag_<tag>).
WIDE_OUTPUT_TAG = "wide-output"
#: How long the check waits for a page to do what it should (draw a tree, open a dialog, load its
#: images). Only a broken page waits it out, so it is long enough for a machine busy with other work.
PATIENCE_MS = 10_000
PAGE_FACTS = """(WIDE_TAG) => {
  const images = Array.from(document.querySelectorAll('.cell_output img'));
  // Only the site's own images: an external one (Colab's badge) is not fetched by the check.
  const broken = Array.from(document.images)
    .filter(i => i.src.startsWith(location.origin) && !(i.complete && i.naturalWidth > 0));
  const wide = Array.from(document.querySelectorAll(
      'div.highlight pre, .cell_output pre, .pst-scrollable-table-container'))
    .filter(e => e.offsetParent !== null && e.scrollWidth - e.clientWidth > 1
                 && getComputedStyle(e).whiteSpace !== 'pre-wrap'
                 && !(e.classList.contains('sb-scrollable')
                      && e.parentElement.matches('.sb-more-right, .sb-more-left')));
  // At desktop size: code cells and output boxes wider than their box. An output of a cell tagged
  // wide-output may be (deliberately wide), if it shows the scroll cue.
  const overflows = e => e.offsetParent !== null && e.scrollWidth - e.clientWidth > 1;
  const cued = e => e.classList.contains('sb-scrollable')
    && e.parentElement.matches('.sb-more-right, .sb-more-left');
  const firstLine = e => (e.innerText || '').trim().split('\\n')[0].slice(0, 60);
  const code = Array.from(document.querySelectorAll('.cell_input div.highlight pre')).filter(overflows);
  const outputs = Array.from(document.querySelectorAll(
      '.cell_output pre, .cell_output .output.text_html')).filter(overflows);
  const deliberate = e => e.closest('.tag_' + WIDE_TAG) !== null && cued(e);
  return {
    codeOverflow: code.map(firstLine),
    outputOverflow: outputs.filter(e => !deliberate(e)).map(firstLine),
    wideOutputs: outputs.filter(deliberate).length,
    outputImages: images.length,
    loadedOutputImages: images.filter(i => i.complete && i.naturalWidth > 0).length,
    broken: broken.map(i => i.getAttribute('src')),
    text: document.body ? document.body.innerText : '',
    uncued: wide.length,
  };
}"""

# At phone size: what makes the page scroll sideways, what is cut off, and images without alt text.
# A box that clips its content (overflow-x other than visible) is fine only if it scrolls and shows
# the cue of _static/shardbook-output.js (class sb-scrollable inside a frame with sb-more-left/right).
LAYOUT_FACTS = """() => {
  const vw = document.documentElement.clientWidth;
  const name = e => {
    let s = e.tagName.toLowerCase() + (e.id ? '#' + e.id : '');
    const cls = (typeof e.className === 'string' ? e.className : '').trim().split(/\\s+/).filter(Boolean);
    if (cls.length) s += '.' + cls.slice(0, 2).join('.');
    const text = (e.innerText || e.textContent || '').trim().replace(/\\s+/g, ' ');
    return text ? `${s} "${text.slice(0, 60)}"` : s;
  };
  const shown = e => { const r = e.getBoundingClientRect(); const st = getComputedStyle(e);
    return r.width > 0 && r.height > 0 && st.visibility !== 'hidden' && st.display !== 'none'; };
  const clips = e => getComputedStyle(e).overflowX !== 'visible';
  const cued = e => e.classList.contains('sb-scrollable') && e.parentElement !== null
    && e.parentElement.matches('.sb-scroll-frame.sb-more-right, .sb-scroll-frame.sb-more-left');
  const insideClip = e => { for (let a = e.parentElement; a && a !== document.body; a = a.parentElement)
    if (clips(a)) return true; return false; };
  const all = Array.from(document.body.querySelectorAll('*'));
  const out = [], cut = [], clipped = [];
  // The text column: what runs past its right edge overlaps the margin, or the screen's edge.
  const article = document.querySelector('.bd-article');
  const colRight = article ? article.getBoundingClientRect().right
    - parseFloat(getComputedStyle(article).paddingRight) : vw;
  const inColumn = e => article !== null && e !== article && article.contains(e);
  const sticksOut = e => { const r = e.getBoundingClientRect();
    return r.right > vw + 1 || r.left < -1 || (inColumn(e) && r.right > colRight + 1); };
  for (const e of all) {
    const st = getComputedStyle(e);
    if (st.position === 'fixed' || !shown(e)) continue;
    if (e.closest('dialog:not([open]), .bd-sidebar-primary, .bd-sidebar-secondary, [aria-hidden=true]'))
      continue;
    if (sticksOut(e) && !insideClip(e) && !(e.parentElement && sticksOut(e.parentElement)
        && e.parentElement !== document.body)) out.push(name(e));
    if (/^H[1-6]$/.test(e.tagName) && e.scrollWidth > e.clientWidth + 1) cut.push(name(e));
    if (e.closest('.bd-article') && clips(e) && e.scrollWidth > e.clientWidth + 1
        && !(/^(auto|scroll)$/.test(st.overflowX) && cued(e))) clipped.push(name(e));
  }
  const noAlt = Array.from(document.images).filter(i => !(i.getAttribute('alt') || '').trim())
    .map(i => i.id ? `img#${i.id}` : `img ${(i.getAttribute('src') || '(no src)').slice(0, 60)}`);
  // Figure text as shown: a figure's smallest text (tools/phone_figures.py writes it on the <img>, in CSS
  // px of the image the browser chose at its own size) times the scale the page shows that image at.
  const paragraph = document.querySelector('.bd-article p') || document.body;
  const bodyPx = parseFloat(getComputedStyle(paragraph).fontSize);
  const figureText = Array.from(document.querySelectorAll('.cell_output img[data-sb-text-px]'))
    .filter(i => shown(i) && i.naturalWidth > 0).map(i => {
      const phone = (i.currentSrc || '').endsWith('/' + i.dataset.sbPhoneSrc);
      const own = parseFloat(phone ? i.dataset.sbPhoneTextPx : i.dataset.sbTextPx);
      return {px: own * i.getBoundingClientRect().width / i.naturalWidth, phone,
              width: i.getBoundingClientRect().width, alt: (i.getAttribute('alt') || '').slice(0, 60)};
    });
  const columnPx = article ? article.clientWidth - parseFloat(getComputedStyle(article).paddingLeft)
    - parseFloat(getComputedStyle(article).paddingRight) : vw;
  return {pageWidth: document.documentElement.scrollWidth, viewport: vw, out, cut, clipped, noAlt,
          bodyPx, columnPx, figureText};
}"""


def layout_problems(facts: dict) -> list[str]:
    """Findings from LAYOUT_FACTS: sideways scrolling, cut-off headings, clipped boxes, missing alt."""
    problems = []
    if facts["pageWidth"] > facts["viewport"] + 1:
        where = "; ".join(facts["out"][:5]) or "no single element found"
        problems.append(
            f"the page scrolls sideways ({facts['pageWidth']} px wide in a {facts['viewport']} px"
            f" screen): {where}"
        )
    elif facts["out"]:
        problems.append(f"runs past the text column: {'; '.join(facts['out'][:5])}")
    problems += [f"heading cut off: {h}" for h in facts["cut"]]
    problems += [f"clipped by its box with no scroll cue: {e}" for e in facts["clipped"][:5]]
    problems += [f"image without alt text: {i}" for i in facts["noAlt"]]
    problems += figure_text_problems(facts.get("figureText", []), facts.get("bodyPx", 0.0))
    return problems


def figure_text_problems(figures: list[dict], body_px: float) -> list[str]:
    """A figure whose smallest text, as the phone shows it, is smaller than the page's body text.

    Example:
      >>> figure_text_problems([{"px": 5.5, "phone": False, "width": 358, "alt": "Two grids"}], 16)
      ["figure text 5.5 px, smaller than the body text's 16 px (the desktop image at 358 px): 'Two grids'"]
    """
    return [
        f"figure text {f['px']:.1f} px, smaller than the body text's {body_px:g} px"
        f" (the {'phone' if f['phone'] else 'desktop'} image at {f['width']:.0f} px): {f['alt']!r}"
        for f in figures
        if f["px"] < body_px - 0.05
    ]


VISIBLE = (
    "el => { const r = el.getBoundingClientRect();"
    " return r.width > 0 && r.height > 0 && getComputedStyle(el).visibility !== 'hidden'; }"
)


@dataclass
class PageResult:
    page: str
    viewport: str
    expected: int
    images: int = 0
    loaded: int = 0
    problems: list[str] = field(default_factory=list)
    screenshot: str = ""
    wide_outputs: int = 0  # outputs of cells tagged wide-output that scroll in their box (desktop)
    body_px: float = 0.0  # the body text's size (phone), CSS px
    column_px: float = 0.0  # the text column's width (phone), CSS px
    figure_text_px: list[float] = field(default_factory=list)  # each figure's smallest text (phone), CSS px


def find_browser() -> str | None:
    """The system Chromium: $CHROMIUM, /usr/bin/chromium, or chromium / chromium-browser on PATH."""
    candidates = [os.environ.get("CHROMIUM", ""), "/usr/bin/chromium"]
    candidates += [shutil.which(n) or "" for n in ("chromium", "chromium-browser", "google-chrome")]
    return next((c for c in candidates if c and os.access(c, os.X_OK)), None)


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


def serve(html_root: Path) -> tuple[http.server.ThreadingHTTPServer, str]:
    """Serves the site on an ephemeral localhost port (stop it with .shutdown())."""
    handler = functools.partial(_QuietHandler, directory=str(html_root))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}/"


def _visible(page, selector: str):
    """The first visible element matching `selector`, or None."""
    for handle in page.query_selector_all(selector):
        if handle.evaluate(VISIBLE):
            return handle
    return None


def _check_treescope(page) -> list[str]:
    """Every treescope output (an `nnx.display` tree) shows its tree once a reader scrolls to it: treescope
    draws it into the container's shadow root only when it comes near the screen, and draws nothing at
    all when its set-up script did not run (what _static/shardbook-treescope-fix.js prevents). The page
    has loaded by now, so a container that was never set up (no data-setup, treescope's mark) never will
    be: that is said at once, without waiting."""
    problems = []
    containers = page.query_selector_all("treescope-container")
    drawn = "el => !!el.shadowRoot && !!el.shadowRoot.querySelector('.treescope_root')"
    for number, container in enumerate(containers, start=1):
        container.scroll_into_view_if_needed()
        try:
            page.wait_for_function(
                f"el => ({drawn})(el) || !el.dataset.setup", arg=container, timeout=PATIENCE_MS
            )
        except Exception:
            pass
        if container.evaluate(drawn):
            continue
        shown = container.evaluate("el => el.shadowRoot ? el.shadowRoot.textContent.trim() : ''")
        if not container.evaluate("el => !!el.dataset.setup"):
            why = "its set-up script never ran"
        else:
            why = f"{PATIENCE_MS // 1000} s after scrolling to it, " + (
                f"it shows {shown[:40]!r}" if shown else "empty"
            )
        problems.append(f"treescope output {number} shows no tree ({why})")
    if containers:
        page.evaluate("window.scrollTo(0, 0)")
    return problems


def _check_navigation(page, viewport: str, require: bool) -> list[str]:
    """Phone: ☰ opens the site navigation, "On this page" the contents (where the page has them);
    desktop: ☰ collapses the sidebar and a second click brings it back."""
    problems = []
    toggle = _visible(page, ".primary-toggle")
    if toggle is None:
        return ["no visible ☰ (.primary-toggle) button"] if require else []
    if viewport == "phone":
        toggle.tap()
        try:
            page.wait_for_selector(
                "#pst-primary-sidebar-modal[open] .bd-docs-nav, dialog[open] nav", timeout=PATIENCE_MS
            )
        except Exception:
            problems.append("☰ did not open the site navigation")
        page.keyboard.press("Escape")
        page.wait_for_selector("dialog[open]", state="detached", timeout=PATIENCE_MS)
        secondary = _visible(page, ".secondary-toggle")
        if secondary is not None and page.query_selector(
            "#pst-page-navigation-heading-2, .page-toc, nav.bd-toc-nav"
        ):
            secondary.tap()  # a finger, as on a phone: a tap also leaves the button's tooltip behind
            try:
                page.wait_for_selector("#pst-secondary-sidebar-modal[open]", timeout=PATIENCE_MS)
            except Exception:
                problems.append('"On this page" did not open the contents')
            page.keyboard.press("Escape")
            page.wait_for_selector("dialog[open]", state="detached", timeout=PATIENCE_MS)
            page.wait_for_timeout(700)  # past Bootstrap's delay before a tooltip shows
            tip = _visible(page, ".tooltip")
            if tip is not None:
                problems.append(
                    f'the tooltip "{tip.inner_text().strip()}" stays up after "On this page" closes'
                    " (it takes the next tap)"
                )
    else:
        sidebar = page.query_selector("#pst-primary-sidebar")
        if sidebar is None or not sidebar.evaluate(VISIBLE):
            return problems
        for state, problem in (
            (False, "☰ did not collapse the sidebar"),
            (True, "a second ☰ did not bring it back"),
        ):
            toggle.click()
            try:
                page.wait_for_function(
                    f"el => ({VISIBLE})(el) === {str(state).lower()}", arg=sidebar, timeout=PATIENCE_MS
                )
            except Exception:
                problems.append(problem)
            if page.query_selector("dialog[open]") is not None:
                problems.append("☰ opened a dialog instead of collapsing the sidebar")
                page.keyboard.press("Escape")
                break
    return problems


def _listen(page, base: str) -> list[str]:
    """A list that collects, as they happen, the page's JavaScript errors, console errors logged from
    the site's own files, and local requests that failed or answered 4xx/5xx."""
    events: list[str] = []

    def on_console(msg):
        if msg.type == "error" and (msg.location.get("url") or base).startswith(base):
            events.append(f"console error from {msg.location.get('url')}: {msg.text}")

    def on_failed(request):
        if request.url.startswith(base):
            events.append(f"request failed: {request.url} ({request.failure})")

    def on_response(response):
        if response.url.startswith(base) and response.status >= 400:
            events.append(f"HTTP {response.status} for {response.url}")

    def on_request(request):
        url = request.url
        if url.startswith(base) or not re.match(r"^(https?:)?//", url):
            return  # the site itself, or data:, blob:, about:
        if not any(allowed.match(url) for allowed in ALLOWED_EXTERNAL):
            events.append(f"asks an outside host for {url[:120]}")

    page.on("request", on_request)
    page.on("pageerror", lambda error: events.append(f"JavaScript error: {error}"))
    page.on("console", on_console)
    page.on("requestfailed", on_failed)
    page.on("response", on_response)
    return events


def route_local_only(target, base: str) -> None:
    """Aborts every request of ``target`` (a Playwright page or context) outside ``base``: no network.

    The pattern is a regular expression, which Playwright hands to the browser: only the requests it
    matches, those for other sites, are intercepted. The site's own requests (about 1,900 a site
    check) then load without a round trip through this process: a handler deciding on every URL
    made the site check take 35 s of CPU, this 30 s (one run each, 2026-12-07)."""
    target.route(re.compile(f"^(?!{re.escape(base)})"), lambda route: route.abort())


def _screenshot(page, shots: Path, name: str, phone: bool) -> str:
    """The whole page, as JPEG to keep a long chapter small; returns its path."""
    shot = shots / f"{name}.jpg"
    page.screenshot(path=str(shot), full_page=True, quality=60 if phone else 70)
    return str(shot)


def launch(playwright, browser_path: str):
    """The system Chromium at ``browser_path``, launched by ``playwright`` (its sync API) as the checks
    and the PDF want it: headless, no sandbox (a container), no GPU."""
    return playwright.chromium.launch(executable_path=browser_path, args=["--no-sandbox", "--disable-gpu"])


def browser_check(
    html_root: Path,
    pages: list[Path],
    expected: dict[str, int],
    browser_path: str,
    shots: Path | None,
    secrets: set[str],
    leaks_in,
    require_nav: bool = True,
    all_shots: bool = False,
    browser=None,
) -> list[PageResult]:
    """Opens every page at every viewport in Chromium; one PageResult per (page, viewport). Screenshots
    go to ``shots``: of each page with a problem, or (``all_shots``) of every page, with the first figure
    and the open navigation on a phone besides. The viewports run side by side, each in a thread with a
    Chromium of its own (Playwright's sync API wants an instance per thread): a page's checks wait on
    timers and on Chromium more than on this process (88 s one after the other in CI, 65 s side by
    side, 2026-12-03). One Chromium for both, one viewport after the other, saves a launch (1.0-1.6 s
    of 31-33 s of CPU, the whole book, /usr/bin/time) but waits 101 s instead of 77 (2026-12-06).

    ``browser``: a Chromium already launched (Playwright's sync ``Browser``, driven from this thread);
    the viewports then run one after the other in it, each in a context of its own, closed however the
    checks end (the tests share one Chromium a process this way: tests/pages.py)."""
    from concurrent.futures import ThreadPoolExecutor

    def in_own_chromium(viewport: str) -> list[PageResult]:
        from playwright.sync_api import sync_playwright

        with sync_playwright() as pw:
            launched = launch(pw, browser_path)
            try:
                return one_viewport(launched, viewport)
            finally:
                launched.close()

    def one_viewport(browser, viewport: str) -> list[PageResult]:
        width, height = VIEWPORTS[viewport]
        phone = viewport == "phone"
        results: list[PageResult] = []
        context = browser.new_context(
            viewport={"width": width, "height": height}, is_mobile=phone, has_touch=phone
        )
        try:
            # Only the site itself is loaded: no CDN, no analytics, and a run needs no network.
            route_local_only(context, base)
            page = context.new_page()
            events = _listen(page, base)
            for path in pages:
                rel = path.relative_to(html_root).as_posix()
                result = PageResult(rel, viewport, expected.get(rel, 0))
                events.clear()
                try:
                    page.goto(base + rel, wait_until="load", timeout=30000)
                except Exception as error:  # a page that does not load is a finding, not a crash
                    result.problems.append(f"did not load: {error}")
                    results.append(result)
                    continue
                try:
                    page.wait_for_function(
                        "Array.from(document.images).every(i => i.complete)", timeout=PATIENCE_MS
                    )
                except Exception:
                    result.problems.append(f"images still loading after {PATIENCE_MS // 1000} s")
                result.problems += _check_treescope(page)
                facts = page.evaluate(PAGE_FACTS, WIDE_OUTPUT_TAG)
                result.images, result.loaded = facts["outputImages"], facts["loadedOutputImages"]
                if result.loaded != result.expected or result.images != result.expected:
                    result.problems.append(
                        f"{result.expected} figures in the notebook, {result.images} output images on the"
                        f" page, {result.loaded} loaded"
                    )
                result.problems += [f"image did not load: {src}" for src in facts["broken"]]
                if FIGURE_TEXT in facts["text"]:
                    result.problems.append(f"shows {FIGURE_TEXT!r} text instead of a figure")
                if facts["uncued"]:
                    result.problems.append(f"{facts['uncued']} blocks scroll sideways with no visible cue")
                result.problems += [f"shows {what}" for what in leaks_in(facts["text"], secrets)]
                if not phone:
                    result.problems += [
                        f"code cell wider than its box at {width} px: {line!r}"
                        for line in facts["codeOverflow"]
                    ]
                    result.problems += [
                        f"output wider than its box at {width} px (tag the cell {WIDE_OUTPUT_TAG!r}"
                        f" if meant): {line!r}"
                        for line in facts["outputOverflow"]
                    ]
                    result.wide_outputs = facts["wideOutputs"]
                if phone:
                    layout = page.evaluate(LAYOUT_FACTS)
                    result.problems += layout_problems(layout)
                    result.body_px, result.column_px = layout["bodyPx"], layout["columnPx"]
                    result.figure_text_px = [f["px"] for f in layout["figureText"]]
                name = f"{rel.replace('/', '__').removesuffix('.html')}--{viewport}"
                if shots is not None and all_shots:
                    result.screenshot = _screenshot(page, shots, name, phone)
                if shots is not None and all_shots and phone and result.images:
                    # On a phone, also the first figure as a reader scrolls to it.
                    first = page.query_selector(".cell_output img")
                    if first is not None:
                        first.scroll_into_view_if_needed()
                    page.screenshot(path=str(shots / f"{name}--first-figure.png"))
                    page.evaluate("window.scrollTo(0, 0)")
                result.problems += _check_navigation(page, viewport, require_nav)
                if shots is not None and all_shots and phone and path == pages[0]:
                    toggle = _visible(page, ".primary-toggle")
                    if toggle is not None:
                        toggle.click()
                        page.wait_for_timeout(300)
                        page.screenshot(path=str(shots / "navigation-open--phone.png"))
                        page.keyboard.press("Escape")
                result.problems += events
                if shots is not None and not all_shots and result.problems:
                    result.screenshot = _screenshot(page, shots, name, phone)  # the page that failed
                results.append(result)
        finally:
            context.close()
        return results

    html_root = html_root.resolve()
    server, base = serve(html_root)
    try:
        if browser is not None:
            return [result for viewport in VIEWPORTS for result in one_viewport(browser, viewport)]
        with ThreadPoolExecutor(max_workers=len(VIEWPORTS)) as pool:
            return [result for results in pool.map(in_own_chromium, VIEWPORTS) for result in results]
    finally:
        server.shutdown()
        server.server_close()


def no_browser(reason: str, allow: bool) -> int:
    """Says loudly that the browser check did not run; non-zero unless allowed (never in CI)."""
    ci = os.environ.get("CI", "").lower() in ("1", "true", "yes")
    bar = "!" * 100
    print(
        f"{bar}\nSITE CHECK: NO BROWSER — {reason}\nThe built site was NOT checked in a browser.",
        file=sys.stderr,
    )
    print(
        "Install Chromium (Debian: apt-get install chromium) and playwright (requirements.txt).",
        file=sys.stderr,
    )
    if allow and not ci:
        print(f"--allow-no-browser given outside CI: not failing.\n{bar}", file=sys.stderr)
        return 0
    print(
        f"Failing{' (CI=true)' if ci else ''}; pass --allow-no-browser to skip locally.\n{bar}",
        file=sys.stderr,
    )
    return 2


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--html", type=lambda p: Path(p).resolve(), default=ROOT / "_build" / "html")
    parser.add_argument("--executed", type=Path, default=ROOT / "_build" / "jupyter_execute")
    parser.add_argument("--screenshots", type=Path, default=ROOT / "_build" / "screenshots")
    parser.add_argument(
        "--all-screenshots",
        action="store_true",
        help="a screenshot of every page at both sizes (else only of the pages with a problem)",
    )
    parser.add_argument(
        "--allow-no-browser", action="store_true", help="outside CI, only warn without a browser"
    )
    parser.add_argument(
        "--pages", nargs="*", default=[], help="only pages matching these globs (book/0*.html)"
    )
    args = parser.parse_args(argv)
    start = time.monotonic()
    if not (args.html / "index.html").exists():
        print(f"FAILED: {args.html}/index.html does not exist: run `make book` first", file=sys.stderr)
        return 1
    problems, expected = static_problems(args.html, args.executed)
    pages = [
        p
        for p in site_pages(args.html)
        if not args.pages or any(fnmatch.fnmatch(p.relative_to(args.html).as_posix(), g) for g in args.pages)
    ]
    print(f"site check: {len(pages)} pages, {sum(expected.values())} figures in the executed notebooks")
    if problems:
        print("FAILED (from the files):\n  " + "\n  ".join(problems), file=sys.stderr)
        return 1
    print(f"links, anchors, local files and figures in the HTML: ok ({time.monotonic() - start:.1f} s)")
    browser = find_browser()
    if browser is None:
        return no_browser(
            "no Chromium found ($CHROMIUM, /usr/bin/chromium, chromium on PATH)", args.allow_no_browser
        )
    if importlib.util.find_spec("playwright") is None:
        return no_browser("the playwright package is not installed", args.allow_no_browser)
    if args.screenshots:
        if not args.pages:  # a full run replaces every screenshot; --pages replaces those pages' only
            shutil.rmtree(args.screenshots, ignore_errors=True)
        args.screenshots.mkdir(parents=True, exist_ok=True)
    results = browser_check(
        args.html,
        pages,
        expected,
        browser,
        args.screenshots,
        leaks.secret_lines(notebooks.solution_notebooks()),
        leaks.leaks_in,
        all_shots=args.all_screenshots,
    )
    by_page: dict[str, dict[str, PageResult]] = {}
    for r in results:
        by_page.setdefault(r.page, {})[r.viewport] = r
    width = max(len(page) for page in by_page)
    print(f"{'page':<{width}} {'figures':>7} {'desktop':>8} {'phone':>6}   (images loaded)")
    for page, views in by_page.items():
        d, p = views.get("desktop"), views.get("phone")  # None: that viewport was not checked
        figures = d.expected if d else p.expected if p else "-"
        print(f"{page:<{width}} {figures:>7} {d.loaded if d else '-':>8} {p.loaded if p else '-':>6}")
    failed = [f"{r.page} ({r.viewport}): {problem}" for r in results for problem in r.problems]
    desktop = [r for r in results if r.viewport == "desktop"]
    code_wide = sum(p.startswith("code cell wider") for r in desktop for p in r.problems)
    output_wide = sum(p.startswith("output wider") for r in desktop for p in r.problems)
    print(
        f"at {VIEWPORTS['desktop'][0]} px: {code_wide} code cells and {output_wide} output boxes wider than"
        f" their box; {sum(r.wide_outputs for r in desktop)} outputs deliberately wide ({WIDE_OUTPUT_TAG!r})"
    )
    phones = [r for r in results if r.viewport == "phone" and r.figure_text_px]
    if phones:
        sizes = [px for r in phones for px in r.figure_text_px]
        print(
            f"at {VIEWPORTS['phone'][0]} px: body text {phones[0].body_px:g} px in a"
            f" {phones[0].column_px:.0f} px column; {len(sizes)} figures with measured text,"
            f" the smallest {min(sizes):.1f} px"
        )
    seconds = time.monotonic() - start
    if failed:
        print("FAILED (in Chromium):\n  " + "\n  ".join(failed), file=sys.stderr)
        print(f"site check: failed after {seconds:.1f} s; screenshots in {args.screenshots}", file=sys.stderr)
        return 1
    print(
        f"site check: {len(by_page)} pages x {len(VIEWPORTS)} sizes in Chromium: ok in {seconds:.1f} s;"
        f" screenshots in {args.screenshots}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
