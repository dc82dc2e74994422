"""Cross-references to chapters by name, never by a typed number: ``{chapter}`03_explicit_sharding```.

A source names the page (a file of book/, without its suffix); the reader sees "Chapter 3" (or
"Appendix A"), the number read from that page's title ("# 3. Explicit sharding: …"), so renumbering a
chapter renumbers every reference to it. ``{chapter}`chapter <03_explicit_sharding>``` writes the word
in lower case, for the middle of a sentence.

Two consumers, one reading of the role:

* the book's build (this module is a Sphinx extension): the role becomes a link to the page, and a
  target that is not a numbered page of book/ is a build warning (``-W`` fails the build);
* the notebooks generated from the sources (tools/notebooks.py): chapters' .ipynb that Colab opens and
  the assignments' notebooks, where MyST roles do not render, get the plain words ("Chapter 3").

tests/test_chapters.py fails on a hand-typed "Chapter 3", "chapters 0 and 10" or "Appendix A" in the
sources.
"""

from __future__ import annotations

import contextlib
import re
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BOOK = ROOT / "book"

#: ``{chapter}`target``` or ``{chapter}`word <target>```.
#: The role may break across a line (a source wrapped at its width), as the build reads it.
ROLE = re.compile(r"\{chapter\}`(?:(?P<word>[A-Za-z]+)\s+<(?P<target>[\w.-]+)>|(?P<bare>[\w.-]+))`")
#: A chapter or appendix named by a typed number (what the role replaces).
TYPED = re.compile(r"\b(?:[Cc]hapters?|[Cc]h\.|[Aa]ppendix|[Aa]ppendices)\s+(?:\d+|[A-Z]\b)")
_SINGLE = re.compile(r"\b(Chapter|chapter|Appendix|appendix) (\d+|[A-Z])\b(?!\.\d)")
_TAG = re.compile(r"<[^<>]*>")  # raw HTML: a picture's alt text says what the picture shows
_TITLE = re.compile(r"^# (?P<number>\d+|[A-Z])\. ", re.M)


class UnknownChapter(ValueError):
    """A role names no numbered page of book/, or says 'chapter' of an appendix (or the reverse)."""


@cache
def number(target: str) -> str:
    """The number ("3") or letter ("A") in the title of book/<target>.md."""
    source = BOOK / f"{target}.md"
    if not source.is_file():
        raise UnknownChapter(f"{{chapter}}`{target}`: book/ has no {target}.md")
    found = _TITLE.search(source.read_text().split("\n---\n", 1)[-1])
    if found is None:
        raise UnknownChapter(f"{{chapter}}`{target}`: the title of book/{target}.md has no number ('# 3. …')")
    return found.group("number")


def label(target: str, word: str | None = None) -> str:
    """What a reader sees: "Chapter 3", "Appendix A"; with ``word`` in lower case, "chapter 3"."""
    n = number(target)
    kind = "Chapter" if n.isdigit() else "Appendix"
    if word is not None and word.lower() != kind.lower():
        raise UnknownChapter(f"{{chapter}}`{word} <{target}>`: {target} is {kind} {n}")
    return f"{kind.lower() if word is not None and word.islower() else kind} {n}"


def _label_of(found: re.Match) -> tuple[str, str]:
    target = found.group("target") or found.group("bare")
    return target, label(target, found.group("word"))


def plain(markdown: str) -> str:
    """``markdown`` with each role written out as its words (for a notebook that MyST does not render)."""
    return ROLE.sub(lambda found: _label_of(found)[1], markdown)


@cache
def _pages() -> dict[str, str]:
    """Number or letter -> page, for every numbered page of book/."""
    pages = {}
    for source in sorted(BOOK.glob("*.md")):
        with contextlib.suppress(UnknownChapter):
            pages[number(source.stem)] = source.stem
    return pages


def as_roles(markdown: str) -> str:
    """``markdown`` with each "Chapter 3" / "chapter 3" / "Appendix A" of a numbered page written as the
    role (what a source says, for a notebook converted into one; plain() is its inverse)."""

    def role(found: re.Match) -> str:
        word, n = found.group(1), found.group(2)
        target = _pages().get(n)
        if target is None or label(target, word if word.islower() else None) != found.group(0):
            return found.group(0)
        return f"{{chapter}}`{word} <{target}>`" if word.islower() else f"{{chapter}}`{target}`"

    return _SINGLE.sub(role, markdown)


def typed_references(markdown: str) -> list[str]:
    """The chapters and appendices ``markdown`` names by a typed number instead of the role (not counting
    raw HTML, such as a picture's alt text, which describes the numbers the picture shows)."""
    return TYPED.findall(_TAG.sub("", ROLE.sub("", markdown)))


def _role(name, rawtext, text, lineno, inliner, options=None, content=None):
    from docutils import nodes  # type: ignore[import-untyped]
    from sphinx import addnodes

    found = ROLE.fullmatch(f"{{chapter}}`{text}`")
    try:
        if found is None:
            raise UnknownChapter(f"{{chapter}}`{text}`: expected a page of book/, or 'word <page>'")
        target, words = _label_of(found)
    except UnknownChapter as e:
        message = inliner.reporter.warning(str(e), line=lineno)
        return [inliner.problematic(rawtext, rawtext, message)], [message]
    ref = addnodes.pending_xref(
        rawtext,
        refdomain="std",
        reftype="doc",
        reftarget=target,
        refexplicit=True,
        refwarn=True,
        refdoc=inliner.document.settings.env.docname,
    )
    ref += nodes.inline(rawtext, words, classes=["xref", "std", "std-doc"])
    return [ref], []


def setup(app):
    app.add_role("chapter", _role)
    return {"parallel_read_safe": True, "parallel_write_safe": True, "version": "1"}
