"""Sphinx extension: a page's claims folded into one list at its end, out of the reader's way.

A chapter checks its comparative sentences with ``claim("an eighth of the memory", ...)`` in the cells
that printed the values (shardbook/claims.py). The checks run whenever the chapter runs, but on the
built page they would be a third of some cells. So this extension takes every ``claim(...)`` statement
out of the code the page shows (a statement, or a loop or ``if`` holding only claims, with the comment
lines right above it) and lists them, sentence and code, in one folded block at the end of the page:
one line, "✓ The build checked N sentences of this page", that opens on a click to one line per
section of the page, each opening to its sentences, each of which links back to the text and opens to
the code that checks it (:func:`summary_html`), so a phone never unrolls every claim at once. The
notebooks (Colab's, the executed ones) keep the code as written; a false claim still stops the
chapter's execution.

:func:`page_lines` counts the lines a page shows and how many of them are claims';
``tools/notebooks.py prose`` fails when claims take :data:`MAX_CLAIM_SHARE` of a page or more.
"""

from __future__ import annotations

import ast
import html
import re
import textwrap
from dataclasses import dataclass
from urllib.parse import quote

#: The most of a page's lines that claims may take (issue 40: "under 2% of any page").
MAX_CLAIM_SHARE = 0.02
#: The classes myst-nb gives a cell whose code the page hides: its claims are out of the way already,
#: and a pop quiz's folded check must not have its answer listed at the page's end.
FOLDED_CELL = {"tag_hide-cell", "tag_hide-input", "tag_remove-cell", "tag_remove-input"}


@dataclass(frozen=True)
class Folded:
    """One claim statement taken out of a cell: the sentence(s) it checks and its code, dedented."""

    sentences: tuple[str, ...]
    code: str


def _is_claim_call(node: ast.AST) -> bool:
    if not isinstance(node, ast.Call):
        return False
    func = node.func
    return (isinstance(func, ast.Attribute) and func.attr == "claim") or (
        isinstance(func, ast.Name) and func.id == "claim"
    )


def _bodies(stmt: ast.stmt) -> list[list[ast.stmt]]:
    found = []
    for field in ("body", "orelse", "finalbody"):
        block = getattr(stmt, field, None)
        if isinstance(block, list) and block and isinstance(block[0], ast.stmt):
            found.append(block)
    return found


def _claim_only(stmt: ast.stmt) -> bool:
    """A ``claim(...)`` statement, or a loop, ``if`` or ``with`` whose every statement is claim-only."""
    if isinstance(stmt, ast.Expr):
        return _is_claim_call(stmt.value)
    if isinstance(stmt, (ast.For, ast.While, ast.If, ast.With)):
        return all(_claim_only(s) for block in _bodies(stmt) for s in block)
    return False


def _sentences(stmt: ast.stmt) -> tuple[str, ...]:
    found = []
    for node in ast.walk(stmt):
        if _is_claim_call(node) and node.args:  # type: ignore[attr-defined]
            first = node.args[0]  # type: ignore[attr-defined]
            if isinstance(first, ast.Constant) and isinstance(first.value, str):
                found.append(first.value)
    return tuple(found)


def _claim_statements(block: list[ast.stmt]) -> list[ast.stmt]:
    """The claim-only statements of a block and of the blocks inside it (a block left with something)."""
    found = []
    for stmt in block:
        if _claim_only(stmt):
            found.append(stmt)
        else:
            for inner in _bodies(stmt):
                if not all(_claim_only(s) for s in inner):  # a block is never emptied
                    found += _claim_statements(inner)
    return found


def split_claims(source: str) -> tuple[str, list[Folded]]:
    """The code a page shows of a cell (its claims taken out) and the claims taken out, in order.

    A cell that does not parse (IPython magics aside) is shown as it is.

    Example:
      >>> shown, folded = split_claims('x = 2\\n# the sum\\nclaim("x is two", x == 2)\\nprint(x)')
      >>> print(shown)
      x = 2
      print(x)
      >>> folded[0].sentences, folded[0].code
      (('x is two',), '# the sum\\nclaim("x is two", x == 2)')
    """
    if "claim" not in source:
        return source, []
    lines = source.splitlines()
    try:
        tree = ast.parse("\n".join("" if line.lstrip().startswith(("%", "!")) else line for line in lines))
    except SyntaxError:
        return source, []
    drop: set[int] = set()
    folded = []
    for stmt in _claim_statements(tree.body):
        first, last = stmt.lineno - 1, (stmt.end_lineno or stmt.lineno) - 1
        indent = lines[first][: len(lines[first]) - len(lines[first].lstrip())]
        while first > 0 and lines[first - 1].startswith(indent + "#"):  # its comment comes with it
            first -= 1
        drop.update(range(first, last + 1))
        code = textwrap.dedent("\n".join(lines[first : last + 1]))
        folded.append(Folded(_sentences(stmt), code))
    if not folded:
        return source, []
    kept = [line for number, line in enumerate(lines) if number not in drop]
    shown = re.sub(r"\n{3,}", "\n\n", "\n".join(kept)).strip("\n")
    return shown, folded


def _visible(text: str) -> int:
    return sum(1 for line in text.splitlines() if line.strip())


def _output_text(output) -> str:
    if output.get("output_type") == "stream":
        text = output.get("text", "")
    else:
        data = output.get("data", {})
        if any(k.startswith("image/") or k == "text/html" for k in data):
            return ""  # a picture or a table: counted as no line (the share is then an upper bound)
        text = data.get("text/plain", "") or output.get("evalue", "")
    return "".join(text) if isinstance(text, list) else text


def page_lines(nb, fold: bool = True) -> tuple[int, int]:
    """(lines the page of notebook ``nb`` shows, how many of them are claims'), counting non-blank lines
    of prose, of code not hidden by a tag, and of printed text (pictures and HTML tables count none).

    With ``fold`` the claims are folded as this extension folds them: the page shows one line of them.
    Without, as the page would show them unfolded: their code among the cells' code.
    """
    total = claims = 0
    any_claim = False
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            total += _visible(cell.source)
            continue
        if cell.cell_type != "code":
            continue
        tags = set(cell.get("metadata", {}).get("tags", []))
        shown, folded = split_claims(cell.source)
        any_claim = any_claim or bool(folded)
        if not tags & {"remove-input", "remove_input", "remove-cell", "hide-input", "hide-cell"}:
            if fold:
                total += _visible(shown)
            else:
                total += _visible(cell.source)
                claims += sum(_visible(f.code) for f in folded)
        if tags & {"remove-output", "remove_output", "remove-cell", "hide-output", "hide-cell"}:
            continue
        for output in cell.get("outputs", []):
            for line in _output_text(output).splitlines():
                total += bool(line.strip())
    if fold and any_claim:
        total, claims = total + 1, claims + 1  # the folded list's one line
    return total, claims


@dataclass(frozen=True)
class Place:
    """Where a folded claim sat: its section's anchor id and title (both empty outside any section)."""

    anchor: str = ""
    title: str = ""


def _link(sentence: str, place: Place) -> str:
    """A link to the sentence in the page: its section's anchor, then a text fragment that a browser
    that knows them (Chrome, Safari, Firefox) scrolls to and highlights; one that does not stops at the
    section."""
    text = quote(" ".join(re.sub(r"[*`]", "", sentence).split()), safe="").replace("-", "%2D")
    return f'<a class="sb-claim-link" href="#{html.escape(place.anchor)}:~:text={text}">in the text</a>'


def summary_html(folded: list[Folded], places: list[Place] | None = None) -> str:
    """The folded block at a page's end: one line; on a click, one line per section of the page (how
    many sentences it checked); on a click on a section, its sentences, each linked back to the text and
    folding the code that checks it. A phone thus opens a list as long as the page has sections, not one
    as long as all the claims' code."""
    places = places if places is not None else [Place()] * len(folded)
    sentences = sum(len(f.sentences) for f in folded)
    groups: dict[Place, list[Folded]] = {}
    for f, place in zip(folded, places, strict=True):
        groups.setdefault(place, []).append(f)
    parts = []
    for place, items in groups.items():
        lis = "".join(
            "<li>"
            + "".join(
                f"<details><summary><q>{html.escape(s)}</q></summary>{_link(s, place)}"
                f'<pre class="sb-claim-code">{html.escape(f.code)}</pre></details>'
                for s in f.sentences
            )
            + "</li>"
            for f in items
        )
        count = sum(len(f.sentences) for f in items)
        title = html.escape(place.title) if place.title else "this page"
        plural = "s" if count != 1 else ""
        parts.append(
            f'<details class="sb-claims-section"><summary>{title}: {count} sentence{plural}'
            f"</summary><ol>{lis}</ol></details>"
        )
    return (
        '<details class="sb-claims"><summary>✓ The build checked '
        f"{sentences} sentence{'s' if sentences != 1 else ''} of this page against the values its cells"
        " computed (the code of each check)</summary>"
        f"{''.join(parts)}</details>"
    )


def _place(node) -> Place:
    """The innermost section holding ``node``: its first id and its title's text."""
    from docutils import nodes  # type: ignore[import-untyped]

    while node is not None and not isinstance(node, nodes.section):
        node = node.parent
    if node is None:
        return Place()
    titles = [c for c in node.children if isinstance(c, nodes.title)]
    return Place((node.get("ids") or [""])[0], titles[0].astext() if titles else "")


def fold_doctree(doctree) -> list[Folded]:
    """Takes the claims out of every code cell myst-nb rendered into ``doctree`` and appends their list
    to the page's last section. Returns what it folded."""
    from docutils import nodes

    folded_all: list[Folded] = []
    places: list[Place] = []
    for cell in list(doctree.findall(nodes.container)):
        if cell.get("nb_element") != "cell_code":
            continue
        if FOLDED_CELL & set(cell.get("classes", [])):
            continue  # a cell folded already (a pop quiz's check): its claims stay inside its fold
        for source in [c for c in cell.children if c.get("nb_element") == "cell_code_source"]:
            for block in list(source.findall(nodes.literal_block)):
                shown, folded = split_claims(block.astext())
                if not folded:
                    continue
                folded_all += folded
                places += [_place(cell)] * len(folded)
                if shown.strip():
                    replacement = nodes.literal_block(shown, shown, **block.attributes)
                    block.replace_self(replacement)
                else:
                    source.parent.remove(source)
        if not cell.children:
            cell.parent.remove(cell)
    if folded_all:
        section = doctree
        while True:
            inner = [c for c in section.children if isinstance(c, nodes.section)]
            if not inner:
                break
            section = inner[-1]
        section += nodes.raw("", summary_html(folded_all, places), format="html")
    return folded_all


def _doctree_read(app, doctree) -> None:
    fold_doctree(doctree)


def setup(app) -> dict:
    app.connect("doctree-read", _doctree_read)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
