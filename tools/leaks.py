"""The leak logic: which solution or hidden-test text a file shows. `python tools/notebooks.py leaks`
runs it over exercises/, the chapters and the built site; tools/site_check.py over the rendered pages.
It lists no files itself (tools/notebooks.py does), so it imports nothing of the tools it serves.

The secrets are the distinctive lines of the instructors' solution blocks and hidden tests
(:func:`secret_lines`); a line is generic, and not looked for, by its content alone (:data:`GENERIC`).
A secret is found whatever its layout: a statement is read whole, across the lines a formatter broke
it into (`return jax.ShapeDtypeStruct(` is generic, the whole `return` is not), and compared with
spaces, line breaks and trailing commas ignored; and a run of two or three consecutive statements,
each generic alone, is one when together they are long enough to be a solution's
(:func:`secret_statements`).
"""

from __future__ import annotations

import re
from pathlib import Path

import nbformat

from grading import assignment

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


# A run of statements, each generic alone, is a secret from this many characters (spaces aside) on.
RUN_CHARS = 32
_STRING = re.compile(r"\"(?:[^\"\\\n]|\\.)*\"|'(?:[^'\\\n]|\\.)*'")


def squeeze(text: str) -> str:
    """`text` as a layout-blind key: no whitespace, no trailing comma before a closing bracket (a
    formatter adds one when it breaks a call over lines)."""
    return re.sub(r",([)\]}])", r"\1", re.sub(r"\s+", "", text))


def _statements(block: str) -> list[str]:
    """The logical lines of a block of code, each on one line: a statement broken over lines inside
    brackets is joined with single spaces; comments and blank lines are dropped."""
    found, parts, depth = [], [], 0
    for raw in block.splitlines():
        line = TRAILING_COMMENT.sub("", raw).strip()
        if not line or line.startswith("#"):
            continue
        parts.append(line)
        bare = _STRING.sub("", line)
        depth += sum(bare.count(c) for c in "([{") - sum(bare.count(c) for c in ")]}")
        if depth <= 0 and not line.endswith("\\"):
            joined = re.sub(r"([(\[{]) ", r"\1", " ".join(parts))
            found.append(re.sub(r",? ([)\]}])", r"\1", joined))
            parts, depth = [], 0
    if parts:
        found.append(" ".join(parts))
    return found


def secret_statements(block: str) -> set[str]:
    """What of one solution block to look for elsewhere, beyond its lines (:func:`secret_texts`): each
    distinctive statement read whole, and each run of two or three consecutive statements that are
    generic alone but together at least :data:`RUN_CHARS` long."""
    statements = _statements(block)
    found: set[str] = set()
    for statement in statements:
        if _distinctive(statement):
            found.add(statement)
    for size in (2, 3):
        for start in range(len(statements) - size + 1):
            run = statements[start : start + size]
            if not any(_distinctive(s) for s in run) and len(squeeze("".join(run))) >= RUN_CHARS:
                found.add("\n".join(run))
    return found


def secret_lines_of(blocks: list[str], public: str = "") -> set[str]:
    """The secrets of some solution blocks (lines and statements), but those ``public`` text shows."""
    lines: set[str] = set()
    for block in blocks:
        for line in block.splitlines():
            lines.update(secret_texts(line))
        lines.update(secret_statements(block))
    shown = squeeze(public)
    return {line for line in lines if squeeze(line) not in shown}


def secret_lines(paths: list[Path]) -> set[str]:
    """Distinctive lines and statements of every solution block and hidden-test block of the instructor
    notebooks ``paths`` (``tools.notebooks.solution_notebooks()``): the texts :func:`leaks_in` looks for."""
    blocks: list[str] = []
    public: list[str] = []
    for path in paths:
        nb = nbformat.read(path, as_version=4)
        for cell in nb.cells:
            blocks += assignment.solution_blocks(cell.source) + assignment.hidden_blocks(cell.source)
            # What the instructor notebook shows outside its blocks is released with the exercise (the
            # code to repair in 3.2, a stub's docstring): it is public, not a leak.
            public.append(assignment.released_source(cell.source))
    return secret_lines_of(blocks, "\n".join(public))


def leaks_in(text: str, secrets: set[str]) -> list[str]:
    """What of `secrets` (and which nbgrader marker) appears in `text`; [] when nothing leaked.

    Used on notebook JSON, on the built HTML with its tags stripped, and by tools/site_check.py on the
    text a browser renders.
    """
    found = [f"nbgrader marker {marker!r}" for marker in assignment.marker_lines(text)]
    flat = squeeze(text)  # a formatter, a highlighter or a browser may change spaces and line breaks
    found += [
        f"solution/hidden line {line!r}" for line in sorted(secrets) if line in text or squeeze(line) in flat
    ]
    return found


def html_text(path: Path) -> str:
    import html

    raw = path.read_text(errors="replace")
    return html.unescape(re.sub(r"<[^>]+>", "", raw))


def notebook_plain_text(path: Path) -> str:
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
