"""The site's checks without a browser, read from the built files: links and anchors resolve, each local
file a page loads exists, figures are images (as many as the executed notebooks drew), a cell's printed
text is one box, and no page shows a path of the machine that built it (tools/site_check.py runs these
first, then the browser's).
"""

from __future__ import annotations

import html
import json
import re
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

from tools import api_links

ROOT = Path(__file__).resolve().parents[1]
EXTERNAL = re.compile(r"^([a-z][a-z0-9+.-]*:|//)", re.I)  # http:, mailto:, data:, javascript:, //host
FIGURE_TEXT = "<Figure size"
IMAGE_MIME = re.compile(r"^image/")
# Paths of the machine that built the site: its checkout, an environment's packages, a home folder, a
# kernel's temporary files. A reader needs none of them, and they say where and by whom a page was built.
MACHINE_PATH = re.compile(
    r"(?:/[\w.+-]+)*/(?:site|dist)-packages/|/(?:home|Users)/[\w.-]+/|/tmp/ipykernel_\d+|/\.venv/"
    + "|"
    + re.escape(str(ROOT))
    + r"(?=[/\s\"'<]|$)"
)
# treescope (nnx.display) stores its tree compressed, as base64 of zlib/deflate data, unfolded in the page.
COMPRESSED = re.compile(r"[A-Za-z0-9+/]{400,}={0,2}")


REDIRECT = re.compile(r"""<meta http-equiv=["']?refresh["']?[^>]*url=([^"'>]+)""", re.I)


def site_pages(html_root: Path, redirects: bool = False) -> list[Path]:
    """Every page of the site: the .html files outside Sphinx's folders (_static, _images, _sources).

    Pages that only redirect (index.html -> book/intro.html) are left out unless `redirects`.
    """
    pages = sorted(
        p
        for p in html_root.rglob("*.html")
        if not any(part.startswith("_") for part in p.relative_to(html_root).parts)
    )
    return [p for p in pages if redirects or not REDIRECT.search(p.read_text(errors="replace")[:2000])]


# The MIME types myst-nb renders in HTML, best first (its default render priority, shortened).
RENDER_PRIORITY = ("text/html", "image/svg+xml", "image/png", "image/jpeg", "image/gif", "text/plain")


def output_figures(output: dict) -> int:
    """Images one output becomes on the page: 1 for an image, the <img> tags of an HTML output (a
    matplotlib JS animation is one), 0 for text."""
    data = output.get("data", {})
    shown = next((mime for mime in RENDER_PRIORITY if mime in data), None)
    if shown == "text/html":
        return len(re.findall(r"<img\b", "".join(data[shown]), re.I))
    return int(shown is not None and IMAGE_MIME.match(shown) is not None)


def expected_figures(executed_root: Path) -> tuple[dict[str, int], list[str]]:
    """Figures each executed notebook's cells produced, keyed by the page they become (book/x.html).

    An output that is only the text "<Figure size ...>" is a figure that never became an image (a
    non-inline matplotlib backend, e.g. MPLBACKEND=Agg inherited by the kernel): it is reported.
    """
    counts, problems = {}, []
    for path in sorted(executed_root.rglob("*.ipynb")):
        rel = path.relative_to(executed_root).with_suffix(".html").as_posix()
        nb = json.loads(path.read_text())
        count = 0
        for index, cell in enumerate(nb.get("cells", [])):
            for output in cell.get("outputs", []):
                figures = output_figures(output)
                count += figures
                text = output.get("text") or output.get("data", {}).get("text/plain", "")
                if not figures and FIGURE_TEXT in "".join(text):
                    problems.append(
                        f"{rel}: cell {index} printed {FIGURE_TEXT!r} instead of showing an image"
                    )
        counts[rel] = count
    return counts, problems


class _PageParser(HTMLParser):
    """Collects a page's ids, links, loaded resources and cell-output images."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.ids: set[str] = set()
        self.links: list[str] = []
        self.resources: list[str] = []
        self.output_images = 0
        self.split_outputs = 0  # cells whose printed text is cut into several boxes (unmerged streams)
        self._cell_output_depth = 0  # >0 while inside <div class="cell_output ...">
        self._div_stack: list[bool] = []
        self._stream_boxes: list[int] = []  # per open cell_output: its stdout boxes
        self.prose_code: list[str] = []  # inline code of prose: not in a link, heading, <pre> or output
        self._not_prose: list[str] = []  # open <a>, <h1>..<h6>, <pre>
        self._code: list[str] | None = None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        for key in ("id", "name") if tag == "a" else ("id",):
            if a.get(key):
                self.ids.add(a[key])
        if tag == "div":
            classes = (a.get("class") or "").split()
            is_output = "cell_output" in classes
            self._div_stack.append(is_output)
            self._cell_output_depth += is_output
            if is_output:
                self._stream_boxes.append(0)
            elif self._stream_boxes and {"output", "stream"} <= set(classes):
                self._stream_boxes[-1] += 1
        if tag == "a" and a.get("href"):
            self.links.append(a["href"])
        if tag in ("img", "script") and a.get("src"):
            self.resources.append(a["src"])
        if tag == "link" and a.get("href") and (a.get("rel") or "") in ("stylesheet", "icon", "preload"):
            self.resources.append(a["href"])
        if tag == "img" and self._cell_output_depth:
            self.output_images += 1
        if tag in ("a", "pre", "h1", "h2", "h3", "h4", "h5", "h6"):
            self._not_prose.append(tag)
        if tag == "code" and not (self._not_prose or self._cell_output_depth):
            self._code = []

    def handle_data(self, data):
        if self._code is not None:
            self._code.append(data)

    def handle_endtag(self, tag):
        if tag in ("a", "pre", "h1", "h2", "h3", "h4", "h5", "h6") and tag in self._not_prose:
            del self._not_prose[len(self._not_prose) - 1 - self._not_prose[::-1].index(tag) :]
        if tag == "code" and self._code is not None:
            self.prose_code.append("".join(self._code))
            self._code = None
        if tag == "div" and self._div_stack:
            closed_output = self._div_stack.pop()
            self._cell_output_depth -= closed_output
            if closed_output:
                self.split_outputs += self._stream_boxes.pop() > 1


def _decompressed(text: str) -> list[str]:
    """The text inside the compressed payloads of a page (treescope's outputs), as far as it decodes."""
    import base64
    import binascii
    import zlib

    found = []
    for blob in COMPRESSED.findall(text):
        try:
            raw = base64.b64decode(blob + "=" * (-len(blob) % 4))
        except (binascii.Error, ValueError):
            continue
        for wbits in (-15, 15, 31):
            try:
                found.append(zlib.decompress(raw, wbits).decode("utf-8", "replace"))
                break
            except zlib.error:
                continue
    return found


def machine_paths(text: str) -> list[str]:
    """The build machine's paths in a page's HTML, in the order found, each once (also compressed ones)."""
    found: list[str] = []
    for part in [text, *_decompressed(text)]:
        for match in MACHINE_PATH.finditer(part):
            if match.group(0) not in found:
                found.append(match.group(0))
    return found


def _parse(path: Path) -> _PageParser:
    parser = _PageParser()
    parser.feed(path.read_text(errors="replace"))
    return parser


def _resolve(html_root: Path, page: Path, target: str) -> tuple[Path | None, str]:
    """The file and fragment an internal href/src of `page` points to; (None, "") for external ones."""
    if not target or EXTERNAL.match(target):
        return None, ""
    parts = urlsplit(target)
    fragment = unquote(parts.fragment)
    if not parts.path:
        return page, fragment
    file = (page.parent / unquote(parts.path)).resolve()
    if target.endswith("/") or file.is_dir():
        file = file / "index.html"
    return file, fragment


def static_problems(html_root: Path, executed_root: Path | None) -> tuple[list[str], dict[str, int]]:
    """What can be checked from the files alone; returns the problems and the figures per page."""
    html_root = html_root.resolve()
    problems = []
    expected: dict[str, int] = {}
    if executed_root is not None:
        if not executed_root.is_dir():
            problems.append(f"{executed_root} does not exist: build the book with `make book` first")
        else:
            expected, found = expected_figures(executed_root)
            problems += found
    pages = site_pages(html_root, redirects=True)
    parsed = {page: _parse(page) for page in pages}
    for page, parser in parsed.items():
        rel = page.relative_to(html_root).as_posix()
        raw = page.read_text(errors="replace")
        redirect = REDIRECT.search(raw[:2000])
        if redirect:
            parser.links.append(redirect.group(1).strip())
        text = html.unescape(re.sub(r"<[^>]+>", "", raw))
        if FIGURE_TEXT in text:
            problems.append(f"{rel}: shows {FIGURE_TEXT!r} text where a figure should be")
        paths = machine_paths(raw)
        if paths:
            problems.append(f"{rel}: shows paths of the machine that built it: {', '.join(paths[:3])}")
        if parser.split_outputs:
            problems.append(
                f"{rel}: {parser.split_outputs} cells show their printed text in several boxes"
                " (set nb_merge_streams: true in _config.yml)"
            )
        if parser.output_images < expected.get(rel, 0):
            problems.append(
                f"{rel}: its notebook produced {expected[rel]} figures,"
                f" the page has {parser.output_images} images"
            )
        for href in parser.links:
            file, fragment = _resolve(html_root, page, href)
            if file is None:
                continue
            if not file.is_relative_to(html_root) or not file.exists():
                problems.append(f"{rel}: link {href!r} points to a file that is not in the site")
            elif fragment and file.suffix == ".html":
                ids = parsed[file].ids if file in parsed else _parse(file).ids
                # "#id:~:text=words" is a text fragment: the browser scrolls to the element, then the words
                if fragment.split(":~:", 1)[0] not in ids:
                    problems.append(f"{rel}: link {href!r}: no element with id {fragment!r} on that page")
        for name, url in sorted({link for c in parser.prose_code if (link := api_links.api_link(c))}):
            if url not in parser.links:
                problems.append(f"{rel}: its prose names {name} but never links it (tools/api_links.py)")
        for src in parser.resources:
            file, _ = _resolve(html_root, page, src)
            if file is not None and not file.exists():
                problems.append(f"{rel}: loads {src!r}, which is not in the site")
    return problems, expected


# ------------------------------------------------------------------------------------------------
# The browser part.
