"""The whole book as one PDF, printed from the built site by the Chromium the site check uses.

    python tools/pdf.py build [--paper a4|letter] [--check]   _build/html/sharding-in-jax.pdf (make pdf)

Each page of the table of contents (_toc.yml: the introduction, the chapters, the appendices) is opened
in Chromium, served from _build/html as the site check serves it, and its article taken as the page
shows it (figures, tables, highlighted code, printed outputs); the pieces become one printable document
(_build/html/_pdf/book.html) with a cover and a table of contents, which Chromium prints with page
numbers; pypdf adds an outline of the chapters. On the way:

* the folded list of checked claims at a page's end is left out (it is the build's evidence, not
  reading), and so are the site's buttons, navigation and folded cells' toggles;
* each pop quiz's answer (a folded "Answer" admonition) is taken out of the text, the question marked
  "answer at the end of the chapter", and the answers printed together at the chapter's end;
* every figure is the desktop image (a printed page is narrower than the phone breakpoint), loaded
  eagerly; code and printed outputs wrap instead of running off the page (print CSS), and wide tables
  shrink their type.

The exercises are not printed: they are notebooks to run (on Colab), linked from the site.

The table of contents gets its page numbers in a second printing, read back from the first one's
text (poppler's pdftotext: the page where each chapter's title first stands); ``--check`` keeps the
first printing (contents without numbers: one printing less in make test). ``--check`` (make
pdf-check, in make test) also measures, before printing, that no code line, output, table or figure
is wider than the text column at A4 and at Letter width (nothing is cut off at the page's edge), and
reads the PDF back: every chapter's title is in its text, and the text is extractable. The text is
read once, from the first printing: the outlined PDF must keep that printing's pages, each drawn as
printed (:func:`same_pages`), so the text read is its own.
"""

from __future__ import annotations

import argparse
import io
import json
import re
import shutil
import sys
import time
import unicodedata
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tools.site_check import find_browser, launch, route_local_only, serve  # noqa: E402

HTML = ROOT / "_build" / "html"
NAME = "sharding-in-jax.pdf"
TITLE = "Sharding in JAX"
SITE_URL = "https://sharding-in-jax.github.io/sharding-in-jax/"
#: Paper -> (Playwright's format, the text column's width in CSS px with the margins below).
PAPERS = {"a4": ("A4", 210), "letter": ("Letter", 215.9)}  # paper width in mm
MARGIN_MM = 14
PX_PER_MM = 96 / 25.4

#: The print stylesheet of the combined document.
PRINT_CSS = f"""
@page {{ margin: {MARGIN_MM}mm {MARGIN_MM}mm 16mm {MARGIN_MM}mm; }}
html, body {{ background: white !important; }}
body {{ font-size: 10.5pt; margin: 0; }}
.sb-pdf-chapter {{ break-before: page; }}
.sb-pdf-cover {{ text-align: center; padding-top: 30vh; }}
.sb-pdf-cover h1 {{ font-size: 28pt; }}
.sb-pdf-toc {{ break-before: page; }}
.sb-pdf-toc ol {{ list-style: none; padding: 0; }}
.sb-pdf-toc li {{ display: flex; margin: 0.3em 0; }}
.sb-pdf-toc li .sb-pdf-dots {{ flex: 1; border-bottom: 1px dotted #999; margin: 0 0.4em 0.3em; }}
.sb-pdf-toc a {{ color: inherit; text-decoration: none; }}
pre, pre code, .highlight pre, div.output pre, .cell_output pre {{
  white-space: pre-wrap !important; overflow-wrap: anywhere !important; word-break: break-word;
  overflow: visible !important; max-height: none !important; font-size: 8.5pt;
}}
div.highlight, .cell_output, .output, div.cell {{
  overflow: visible !important; max-height: none !important;
}}
table {{ font-size: 8pt; max-width: 100%; }}
td, th {{ overflow-wrap: anywhere; }}
.table-wrapper, .pst-scrollable-table-container {{ overflow: visible !important; }}
img, svg, video, picture {{ max-width: 100% !important; height: auto; break-inside: avoid; }}
figure, .cell_output img {{ break-inside: avoid; }}
h1, h2, h3, h4 {{ break-after: avoid; }}
a {{ color: inherit; }}
.sb-pdf-quiz-mark {{ font-style: italic; color: #555; }}
.sb-pdf-answers {{ break-before: page; }}
.sb-pdf-answers .admonition {{ break-inside: avoid; }}
mjx-container {{ overflow: visible !important; }}
"""

#: Run in each page: makes its article printable and returns it (see the module's docstring).
EXTRACT_JS = r"""
async () => {
  const article = document.querySelector("article.bd-article") || document.querySelector("main");
  // the desktop image of every figure, loaded now
  for (const source of article.querySelectorAll("picture source")) source.remove();
  for (const img of article.querySelectorAll("img")) {
    img.loading = "eager";
    img.setAttribute("src", img.src);
  }
  await Promise.all([...article.querySelectorAll("img")].map(
    (img) => img.complete ? null : new Promise((ok) => { img.onload = ok; img.onerror = ok; })));
  // the folded claim list, buttons, the header links, folded cells' toggles
  const dropped = "details.sb-claims, .headerlink, button, .toggle-button, .sb-claim-link, .copybtn, script";
  for (const el of article.querySelectorAll(dropped)) el.remove();
  // pop quiz answers: out of the text, numbered, kept for the chapter's end
  const answers = [];
  let n = 0;
  for (const box of article.querySelectorAll(".admonition.dropdown, details.dropdown")) {
    const title = box.querySelector(".admonition-title, summary");
    if (!title || !/^\s*Answer\b/.test(title.textContent)) continue;
    n += 1;
    title.textContent = `Answer to pop quiz ${n}`;
    box.classList.remove("toggle-hidden", "dropdown");
    for (const hidden of box.querySelectorAll(".toggle-hidden")) hidden.classList.remove("toggle-hidden");
    if (box.tagName === "DETAILS") box.open = true;
    const mark = document.createElement("p");
    mark.className = "sb-pdf-quiz-mark";
    mark.textContent = `Pop quiz ${n}: the answer is at the end of the chapter.`;
    box.replaceWith(mark);
    answers.push(box.outerHTML);
  }
  // other folds print open; links to the site's pages keep their text only
  for (const d of article.querySelectorAll("details")) d.open = true;
  for (const a of article.querySelectorAll("a[href]")) {
    const href = a.getAttribute("href");
    if (!href.startsWith("#") && !/^https?:/.test(href)) a.removeAttribute("href");
    else if (/^https?:\/\/127\.0\.0\.1/.test(a.href)) a.removeAttribute("href");
  }
  const h1 = article.querySelector("h1");
  const styles = [...document.querySelectorAll("link[rel=stylesheet]")].map((l) => l.href);
  const inline = [...document.querySelectorAll("head style")].map((s) => s.textContent);
  return {title: h1 ? h1.textContent.replace(/[#¶]/g, "").trim() : document.title,
          html: article.innerHTML, answers, styles, inline};
}
"""

#: Run in the combined document at a paper's text width: everything wider than the column.
OVERFLOW_JS = r"""
() => {
  const found = [];
  const column = document.body.clientWidth;
  for (const el of document.querySelectorAll("pre, table, img, svg, .cell_output, mjx-container")) {
    const r = el.getBoundingClientRect();
    const wide = el.tagName === "PRE" ? el.scrollWidth > el.clientWidth + 1 : r.width > column + 1;
    if (wide && r.width > 0) {
      const chapter = el.closest(".sb-pdf-chapter");
      found.push(`${chapter ? chapter.dataset.title : "?"}: a ${el.tagName.toLowerCase()} ` +
                 `${Math.round(Math.max(r.width, el.scrollWidth))} px wide in a ${column} px column: ` +
                 (el.textContent || el.getAttribute("src") || "").trim().slice(0, 60));
    }
  }
  return found;
}
"""


def book_pages(root: Path = ROOT) -> list[str]:
    """The pages printed, in the table of contents' order: the root, then every chapter of the parts
    other than the exercises (as paths without suffix, e.g. 'book/intro')."""
    import yaml  # type: ignore[import-untyped]

    toc = yaml.safe_load((root / "_toc.yml").read_text())
    pages = [toc["root"]]
    for part in toc.get("parts", []):
        if part.get("caption", "").lower().startswith("exercise"):
            continue
        pages += [chapter["file"] for chapter in part.get("chapters", [])]
    return pages


def _combined(pieces: list[dict], numbers: dict[int, int] | None) -> str:
    """The one printable document: cover, table of contents (page numbers once known), the pages."""
    styles = "".join(f'<link rel="stylesheet" href="{href}">' for href in pieces[0]["styles"])
    inline = "".join(f"<style>{text}</style>" for p in pieces for text in p["inline"][:50])
    toc = "".join(
        f'<li><a href="#sb-pdf-{i}">{_escape(p["title"])}</a><span class="sb-pdf-dots"></span>'
        f"<span>{(numbers or {}).get(i, '')}</span></li>"
        for i, p in enumerate(pieces)
    )
    body = []
    for i, piece in enumerate(pieces):
        answers = ""
        if piece["answers"]:
            answers = (
                '<section class="sb-pdf-answers"><h2>Pop quiz answers</h2>'
                + "".join(piece["answers"])
                + "</section>"
            )
        title = _escape(piece["title"])
        body.append(
            f'<section class="sb-pdf-chapter bd-article" id="sb-pdf-{i}" data-title="{title}">'
            f"{piece['html']}{answers}</section>"
        )
    cover = (
        f'<section class="sb-pdf-cover"><h1>{TITLE}</h1><p>An open, interactive textbook on programming many '
        f"accelerators with JAX.</p><p>Printed {time.strftime('%Y-%m-%d')} from {SITE_URL}</p></section>"
    )
    return (
        '<!DOCTYPE html><html lang="en" data-theme="light"><head><meta charset="utf-8">'
        f"<title>{TITLE}</title>"
        f"{styles}{inline}<style>{PRINT_CSS}</style></head><body>{cover}"
        f'<nav class="sb-pdf-toc"><h2>Contents</h2><ol>{toc}</ol></nav>{"".join(body)}</body></html>'
    )


def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")


def _column_px(paper: str) -> int:
    return int((PAPERS[paper][1] - 2 * MARGIN_MM) * PX_PER_MM)


def _flat(text: str) -> str:
    """Text as compared: ligatures undone (NFKC: "ﬀ" is "ff"), whitespace one space, lower case."""
    return re.sub(r"\s+", " ", unicodedata.normalize("NFKC", text)).strip().lower()


#: Poppler's text extractor (Debian's poppler-utils, tools/system_packages.py).
PDFTOTEXT = "pdftotext"


def page_texts(pdf: bytes) -> list[str]:
    """The text of each page of a PDF, as compared (:func:`_flat`), read by poppler's ``pdftotext``.

    Poppler ends each page's text with a form feed, a blank page's too, so the list has one entry per
    page. It reads the book's 408 pages in about 1 s of CPU; pypdf's ``extract_text``, which this
    replaced, took 16 s, half of `make pdf-check` (2026-12-07), and found the same chapter pages."""
    import subprocess

    if shutil.which(PDFTOTEXT) is None:
        raise RuntimeError(f"make pdf reads the PDF back with {PDFTOTEXT}: apt-get install poppler-utils")
    done = subprocess.run(
        [PDFTOTEXT, "-q", "-enc", "UTF-8", "-", "-"], input=pdf, capture_output=True, check=True, timeout=300
    )
    *pages, rest = done.stdout.decode("utf-8").split("\f")
    if rest.strip():
        raise RuntimeError(f"{PDFTOTEXT} wrote text after the last page's form feed: {rest[:200]!r}")
    return [_flat(page) for page in pages]


def chapter_pages(texts: list[str], titles: list[str], after: int = 1) -> dict[int, int]:
    """Each site page's first printed page (1-based), from the pages' texts (:func:`page_texts`): the
    first page, after the previous one's and past the table of contents (the first ``after`` pages and
    those that list every title), whose text opens with that title (each chapter starts a page with
    its heading)."""
    found, at = {}, after
    while at < len(texts) and all(_flat(t) in texts[at] for t in titles[1:3]):
        at += 1  # the table of contents
    for i, title in enumerate(titles):
        for j in range(at, len(texts)):
            if 0 <= texts[j].find(_flat(title)) < 40:  # its heading opens the page (a link to it would not)
                found[i], at = j + 1, j + 1
                break
    return found


def with_outline(pdf: bytes, titles: list[str], numbers: dict[int, int]) -> bytes:
    """The PDF with an outline (bookmarks) of its chapters, each at its first page."""
    from pypdf import PdfReader, PdfWriter

    writer = PdfWriter(clone_from=PdfReader(io.BytesIO(pdf)))
    writer.add_outline_item(title="Contents", page_number=1)
    for i, title in enumerate(titles):
        if i in numbers:
            writer.add_outline_item(title=title, page_number=numbers[i] - 1)
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


def same_pages(pdf: bytes, printed: bytes) -> bool:
    """Whether ``pdf`` has the pages of ``printed``, each drawn by the same content (the outline and
    the document's other objects may differ)."""
    from pypdf import PdfReader

    def drawn(page) -> bytes | None:
        contents = page.get_contents()
        return None if contents is None else contents.get_data()

    ours, theirs = PdfReader(io.BytesIO(pdf)).pages, PdfReader(io.BytesIO(printed)).pages
    return len(ours) == len(theirs) and all(drawn(a) == drawn(b) for a, b in zip(ours, theirs, strict=True))


def check_pdf(pdf: bytes, titles: list[str], texts: list[str] | None = None) -> list[str]:
    """What is wrong with the printed book: a chapter whose title its text lacks, text that cannot be
    extracted, no table of contents or no outline. ``texts``: the pages' texts (:func:`page_texts`)
    when already read, from this PDF or from one with the same pages (:func:`same_pages`)."""
    from pypdf import PdfReader

    reader = PdfReader(io.BytesIO(pdf))
    flat = _flat(" ".join(texts if texts is not None else page_texts(pdf)))
    problems = []
    if len(flat) < 2000 * len(titles):
        problems.append(
            f"only {len(flat)} characters of text could be extracted from {len(reader.pages)} pages"
        )
    for title in titles:
        if _flat(title) not in flat:
            problems.append(f"the chapter {title!r} is not in the PDF's text")
    if "contents" not in flat[:5000]:
        problems.append("no table of contents at the start")
    if not reader.outline:
        problems.append("the PDF has no outline (bookmarks)")
    return problems


def build(html: Path, paper: str, check: bool, out: Path) -> int:
    from playwright.sync_api import sync_playwright

    browser_path = find_browser()
    if browser_path is None:
        print("make pdf needs Chromium (Debian: apt-get install chromium; or set $CHROMIUM)", file=sys.stderr)
        return 1
    pages = [p for p in book_pages() if (html / f"{p}.html").is_file()]
    missing = [p for p in book_pages() if p not in pages]
    if missing or not pages:
        print(f"no built page for {missing or 'any chapter'} in {html}: run make book first", file=sys.stderr)
        return 1
    started = time.monotonic()
    server, base = serve(html)
    problems: list[str] = []
    try:
        with sync_playwright() as pw:
            browser = launch(pw, browser_path)  # the one Chromium of a run
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            route_local_only(page, base)
            pieces = []
            for name in pages:
                page.goto(base + name + ".html", wait_until="load")
                pieces.append(page.evaluate(EXTRACT_JS))
            titles = [p["title"] for p in pieces]
            folder = html / "_pdf"
            folder.mkdir(exist_ok=True)
            combined = folder / "book.html"
            combined.write_text(_combined(pieces, None))
            page.emulate_media(media="print")
            if check:
                for each in PAPERS:
                    page.set_viewport_size({"width": _column_px(each), "height": 1000})
                    page.goto(base + "_pdf/book.html", wait_until="load")
                    problems += [f"{PAPERS[each][0]}: {p}" for p in page.evaluate(OVERFLOW_JS)]
            page.set_viewport_size({"width": _column_px(paper), "height": 1000})
            page.goto(base + "_pdf/book.html", wait_until="load")
            footer = (
                '<div style="font-size:8px;width:100%;text-align:center;color:#555">'
                f'{TITLE} · <span class="pageNumber"></span> / <span class="totalPages"></span></div>'
            )

            def printed() -> bytes:
                return page.pdf(
                    format=PAPERS[paper][0],
                    print_background=True,
                    display_header_footer=True,
                    header_template="<span></span>",
                    footer_template=footer,
                )

            first = printed()
            texts = page_texts(first)  # read once: the check reads the same pages again
            numbers = chapter_pages(texts, titles)
            if not check:  # the check reads the first printing (its contents only lack the numbers)
                combined.write_text(_combined(pieces, numbers))
                page.goto(base + "_pdf/book.html", wait_until="load")
                first = printed()
            final = with_outline(first, titles, numbers)
            browser.close()
    finally:
        server.shutdown()
    out.write_bytes(final)
    from pypdf import PdfReader

    count = len(PdfReader(io.BytesIO(final)).pages)
    print(
        f"pdf: {out.relative_to(ROOT) if out.is_relative_to(ROOT) else out}: {count} pages, "
        f"{len(final) / 2**20:.1f} MiB, {len(pieces)} pages of the site ({PAPERS[paper][0]}), "
        f"{time.monotonic() - started:.0f} s"
    )
    if len(numbers) < len(titles):
        problems.append(f"no page number found for {[t for i, t in enumerate(titles) if i not in numbers]}")
    if check:
        # the outline is added to the first printing's pages, whose text was read: if they are still
        # the same pages, that text is the final PDF's
        same = same_pages(final, first)
        if not same:
            problems.append("adding the outline changed the printed pages")
        problems += check_pdf(final, titles, texts if same else None)
    for problem in problems:
        print(f"pdf: {problem}", file=sys.stderr)
    (html / "_pdf" / "contents.json").write_text(
        json.dumps(dict(zip(titles, numbers.values(), strict=False)))
    )
    return 1 if problems else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("command", choices=["build"])
    parser.add_argument("--paper", choices=list(PAPERS), default="a4")
    parser.add_argument(
        "--check", action="store_true", help="also check widths at A4 and Letter, read it back"
    )
    parser.add_argument("--html", type=lambda p: Path(p).resolve(), default=HTML)
    parser.add_argument("--out", type=Path, help=f"default: <html>/{NAME}")
    args = parser.parse_args(argv)
    return build(args.html, args.paper, args.check, args.out or args.html / NAME)


if __name__ == "__main__":
    sys.exit(main())
