"""What a page the grader writes lets through of the learner's HTML: formatting, never script.

A learner controls the markdown cells of the notebook handed in and every output its code displays
(``display(HTML(...))``, a ``_repr_html_``, Markdown, SVG, JavaScript). The feedback page
(grading/templates/named_feedback) shows them to the instructor, and after Canvas's *Re-Upload
Submissions* to the learner inside Canvas, so a ``<script>``, an ``<img onerror=...>`` or a
``javascript:`` link there would run in the instructor's browser (and could rewrite the score the page
shows). Two layers stop that:

* ``safe_html`` (the template's ``safe_html`` filter, registered in grading/nbgrader_config.py) keeps
  the harmless formatting a notebook uses (headings, paragraphs, lists, tables, code, emphasis, links
  to http(s)/mailto/#, images, a few text-only CSS properties) and escapes every other tag into visible
  text (``&lt;script&gt;``), so the instructor sees what was attempted. Event-handler attributes,
  ``javascript:`` and ``data:`` links, CSS that moves or covers things (``position``, ``margin``,
  ``transform``) and classes or ids of the page's own furniture (the score box, the pass/fail labels)
  are dropped. JavaScript outputs are not rendered at all, and an SVG output is shown as an image,
  where browsers never run script.
* ``FEEDBACK_CSP``, a Content-Security-Policy ``<meta>`` every feedback page carries first in its
  head, forbids script of any origin: should a future template or filter let markup through, the
  browser still runs none of it. The class report's CSP (``class_csp``) allows only its own inline
  sorting script, by hash.

Plain text has its own function: :func:`printable` spells out the control characters of learner
text bound for report.txt, an LMS comment or the terminal (the worker applies it to every note).

``tests/test_feedback.py`` renders a hostile notebook with the course's template and opens it in
Chromium: no learner script runs and the score shown is the real one.
"""

from __future__ import annotations

import base64
import hashlib
import re
import unicodedata

# bleach comes with nbconvert (which requires bleach[css] for its own sanitiser); it has no type stubs.
import bleach  # type: ignore[import-untyped]
from bleach.css_sanitizer import CSSSanitizer  # type: ignore[import-untyped]

#: Tags a notebook's markdown and HTML outputs may keep (any other tag is shown escaped, as text).
TAGS = frozenset(
    {
        *("a", "abbr", "b", "blockquote", "br", "caption", "code", "dd", "del", "details", "div", "dl", "dt"),
        *("em", "h1", "h2", "h3", "h4", "h5", "h6", "hr", "i", "img", "ins", "kbd", "li", "ol", "p", "pre"),
        *("s", "samp", "small", "span", "strong", "sub", "summary", "sup", "table", "tbody", "td", "tfoot"),
        *("th", "thead", "tr", "u", "ul", "var"),
    }
)
#: Text-only CSS: nothing that moves, sizes or layers an element over the page's own score.
CSS_PROPERTIES = frozenset(
    {
        *("background-color", "color", "font-style", "font-weight", "font-family", "text-align"),
        *("text-decoration", "vertical-align", "white-space", "display"),
    }
)
#: Classes a learner may use: syntax highlighting (pygments' short names), markdown2html's heading
#: anchors and code languages, shardbook's table classes. Not the page's own (standing, verdict-*, panel).
_CLASS = re.compile(r"^(?:[a-z]{1,3}\d?|highlight|anchor-link|language-[\w+-]+|sb-[\w-]+)$")
#: Ids the page itself uses: a learner's element may not take them.
RESERVED_IDS = frozenset({"top", "toc", "standing", "standing-style", "notebook", "notebook-container"})
_PROTOCOLS = frozenset({"http", "https", "mailto"})
_DATA_IMAGE = re.compile(r"^data:image/(?:png|jpeg|gif|webp);base64,[A-Za-z0-9+/=\s]*$")


def _attribute(tag: str, name: str, value: str) -> bool:
    if name in ("title", "style", "colspan", "rowspan"):
        return True
    if name == "class":
        return all(_CLASS.match(c) for c in value.split())
    if name == "id":
        return value not in RESERVED_IDS and not value.startswith("standing")
    if tag == "a" and name == "href":
        return value.startswith("#") or value.split(":", 1)[0].strip().lower() in _PROTOCOLS
    if tag == "img" and name == "src":
        return bool(_DATA_IMAGE.match(value)) or value.split(":", 1)[0].strip().lower() in _PROTOCOLS
    if tag == "img" and name in ("alt", "width", "height"):
        return True
    return tag == "ol" and name == "start"


_CLEANER = bleach.Cleaner(
    tags=TAGS,
    attributes=_attribute,
    protocols=_PROTOCOLS | {"data"},  # data: only where _attribute allows it (an image's src)
    strip=False,
    strip_comments=True,
    css_sanitizer=CSSSanitizer(allowed_css_properties=CSS_PROPERTIES),
)


def safe_html(html: object) -> str:
    """``html`` (a learner's markdown rendered, or an HTML output) with only harmless formatting kept:
    any other tag escaped into text, event handlers, script URLs and layout CSS dropped.

    >>> safe_html('<b>ok</b><img src=x onerror="alert(1)"><script>alert(2)</script>')
    '<b>ok</b><img>&lt;script&gt;alert(2)&lt;/script&gt;'
    """
    text = html.decode() if isinstance(html, bytes) else str(html)
    return _CLEANER.clean(text)


#: Every feedback page's policy: no script, no frame, no plugin, no form, no base; styles and images
#: (data: and https:, as a notebook's markdown links them) only. The template writes it (a Jinja
#: template cannot import it); tests/test_feedback.py holds the page's policy to this one.
FEEDBACK_CSP = (
    "default-src 'none'; script-src 'none'; object-src 'none'; frame-src 'none'; base-uri 'none'; "
    "form-action 'none'; style-src 'unsafe-inline'; img-src data: https:; font-src data:"
)


def csp_meta(policy: str) -> str:
    """The ``<meta>`` that applies ``policy`` to the page it heads (it must precede any script)."""
    return f'<meta http-equiv="Content-Security-Policy" content="{policy}">'


def script_hash(script: str) -> str:
    """The CSP source that allows exactly the inline ``<script>`` whose text is ``script``."""
    digest = hashlib.sha256(script.encode("utf-8")).digest()
    return f"'sha256-{base64.b64encode(digest).decode()}'"


def class_csp(script: str) -> str:
    """The class report's policy: its own inline ``script`` alone (by hash), its pictures beside it."""
    return (
        f"default-src 'none'; script-src {script_hash(script)}; object-src 'none'; base-uri 'none'; "
        "form-action 'none'; style-src 'unsafe-inline'; img-src 'self' file: data:"
    )


def printable(text: str, newlines: bool = True) -> str:
    """``text`` as plain text that shows what it holds: every control or format character (an escape
    sequence's ESC, a carriage return, a right-to-left override, a line or paragraph separator) written
    as its Python escape (``\\x1b``, ``\\r``, ``\\u202e``); newlines and tabs kept, unless
    ``newlines`` is False. For learner text in the plain-text reports (report.txt, the LMS comments, the
    driver's terminal): a file name or a hook's ``__name__`` could otherwise erase or forge a line there.

    >>> printable("x\\x1b[2Kbob: 14/14\\r")
    'x\\\\x1b[2Kbob: 14/14\\\\r'
    """
    kept = "\n\t" if newlines else ""
    return "".join(
        c
        if c in kept or not unicodedata.category(c).startswith(("C", "Zl", "Zp"))
        else c.encode("unicode_escape", "backslashreplace").decode("ascii")
        for c in text
    )
