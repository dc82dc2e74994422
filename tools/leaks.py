"""`python tools/notebooks.py leaks`: no solution or hidden-test text in exercises/ or the built site.

The secrets are the distinctive lines of the instructors' solution blocks and hidden tests
(:func:`secret_lines`); a line is generic, and not looked for, by its content alone (:data:`GENERIC`).
"""

from __future__ import annotations

import re
from pathlib import Path

import nbformat

from grading import assignment
from tools import notebooks

# Lines too generic to count as a leak when they appear elsewhere, judged by content: a bare keyword,
# a closing bracket, an empty container or constant, or anything short. A `return` is judged by what it
# returns, so a one-line solution (`return jnp.matmul(x, w, out_sharding=P("X", "Y"))`) counts.
GENERIC = re.compile(
    r"^(pass|else:|try:|finally:|continue|break|return|[)\]}]+[,:]?"
    r"|[\w.]+ = (\[\]|\{\}|None|True|False|\d+|set\(\))|.{0,24})$"
)
RETURN = re.compile(r"^(return|yield)\b\s*")
TRAILING_COMMENT = re.compile(r"\s+#\s[^\"']*$")


def _distinctive(text: str) -> bool:
    """A line worth looking for: not a keyword, bracket, empty value or short line (judged by content).

    A `return` or `yield` is judged by its expression: `return out` is generic, `return jnp.matmul(x,
    w, out_sharding=P("X", "Y"))` is a one-line solution.
    """
    body = RETURN.sub("", text)
    return not (GENERIC.match(text) or GENERIC.match(body) or len(re.findall(r"[A-Za-z_]\w*", body)) < 2)


def secret_texts(line: str) -> list[str]:
    """The texts of one solution line to look for elsewhere: the line, and the line without its trailing
    comment (copying the code without the comment is still a leak); [] when both are too generic."""
    text = line.strip()
    if not text or text.startswith("#"):
        return []
    return [t for t in dict.fromkeys((text, TRAILING_COMMENT.sub("", text))) if _distinctive(t)]


def secret_lines(paths: list[Path] | None = None) -> set[str]:
    """Distinctive lines of every solution block and hidden-test block in solutions/ (or `paths`)."""
    lines: set[str] = set()
    public: set[str] = set()
    for path in notebooks.solution_notebooks() if paths is None else paths:
        nb = nbformat.read(path, as_version=4)
        for cell in nb.cells:
            for block in assignment.solution_blocks(cell.source) + assignment.hidden_blocks(cell.source):
                for line in block.splitlines():
                    lines.update(secret_texts(line))
            # What the instructor notebook shows outside its blocks is released with the exercise (the
            # code to repair in 3.2, a stub's docstring): it is public, not a leak.
            released = assignment.released_source(cell.source)
            public.update(line.strip() for line in released.splitlines())
    return lines - public


def leaks_in(text: str, secrets: set[str]) -> list[str]:
    """What of `secrets` (and which nbgrader marker) appears in `text`; [] when nothing leaked.

    Used on notebook JSON, on the built HTML with its tags stripped, and by tools/site_check.py on the
    text a browser renders.
    """
    found = [f"nbgrader marker {marker!r}" for marker in assignment.marker_lines(text)]
    flat = re.sub(r"[ \t]+", " ", text)  # a highlighter or a browser may change runs of spaces
    found += [f"solution/hidden line {line!r}" for line in sorted(secrets) if line in text or line in flat]
    return found


def _html_text(path: Path) -> str:
    import html

    raw = path.read_text(errors="replace")
    return html.unescape(re.sub(r"<[^>]+>", "", raw))


def _notebook_text(path: Path) -> str:
    """A notebook's JSON followed by its cells' sources and text outputs as plain text: in the JSON a
    line with quotes reads `P(\\"X\\")`, so a secret line with quotes is looked for in the plain text."""
    raw = path.read_text(errors="replace")
    nb = nbformat.reads(raw, as_version=4)
    parts = [raw]
    for cell in nb.cells:
        parts.append(cell.source)
        for output in cell.get("outputs", []):
            text = output.get("text") or output.get("data", {}).get("text/plain", "") or ""
            parts.append("".join(text) if isinstance(text, list) else text)
    return "\n".join(parts)


def cmd_leaks(args) -> None:
    """No solution or hidden-test line, and no nbgrader marker, in exercises/ or the built site."""
    secrets = secret_lines()
    if not secrets:
        notebooks.fail("found no solution lines to look for: is solutions/ empty?")
    targets = [(p, _notebook_text(p)) for p in notebooks.exercise_notebooks()]
    # Anything else released with an exercise (an assignment's .md source must never be among them).
    released = notebooks._files(notebooks.ROOT / "exercises")
    targets += [(p, p.read_text(errors="replace")) for p in released if p.suffix != ".ipynb"]
    html_root = notebooks.ROOT / "_build" / "html"
    if args.require_html and not html_root.is_dir():
        notebooks.fail("_build/html does not exist: build the book first (make book)")
    if html_root.is_dir():
        targets += [(p, _html_text(p)) for p in html_root.rglob("*.html")]
        targets += [(p, _notebook_text(p)) for p in html_root.rglob("*.ipynb")]
        # The other sources Sphinx publishes beside the pages (intro.md as _sources/book/intro.md).
        targets += [(p, p.read_text(errors="replace")) for p in (html_root / "_sources").rglob("*.md*")]
        for forbidden in ("solutions", "grading"):
            if (html_root / forbidden).exists() or (html_root / "_sources" / forbidden).exists():
                notebooks.fail(f"_build/html contains {forbidden}/: it must never be published")
    found = []
    for path, text in targets:
        found += [f"{path.relative_to(notebooks.ROOT)}: {what}" for what in leaks_in(text, secrets)]
    if found:
        notebooks.fail("hidden text leaked:\n  " + "\n  ".join(found[:20]))
    print(f"no leaks: {len(secrets)} solution and hidden-test lines checked in {len(targets)} files")
