"""What a chapter's prose quotes, read against what its cells printed: the figures, the drawings, the claims.

Pure functions over a notebook (nbformat) and text; `python tools/notebooks.py prose` runs them over the
executed chapters, and tools/quizzes.py reads numbers with :func:`printed_numbers`.
"""

from __future__ import annotations

import ast
import re
from decimal import Decimal
from pathlib import Path

# A figure with a unit; not the end of a name ("1F1B" is no byte count).
QUOTED_FIGURE = re.compile(r"(?<![\w.])(\d[\d,]*(?:\.\d+)?)\s?(KiB|MiB|GiB|µs|ms|bytes|B|TFLOP/s|%)(?!\w)")
# A figure in scientific notation, a measured error: "9.57e-08" (a constant, "1e-2", is no figure).
# Looked for in prose outside code (`lr=1e-2`, a fenced PyTorch snippet).
QUOTED_SCIENTIFIC = re.compile(r"(?<![\w.])(\d+\.\d+e[-+]\d+)(?![\w.])")
_SCIENTIFIC = re.compile(r"(?<![\w.])(\d+(?:\.\d+)?e[-+]\d+)(?![\w.])")
_CODE_IN_PROSE = re.compile(r"^\s*(`{3,}|~{3,}).*?^\s*\1\s*$|`[^`\n]*`", re.M | re.S)

ROOT = Path(__file__).resolve().parents[1]


def chapter_sources(root: Path = ROOT) -> list[Path]:
    """The chapters' sources: the pages of book/ that the build reads as MyST Markdown notebooks."""
    from myst_nb.core.read import is_myst_markdown_notebook

    return sorted(p for p in (root / "book").glob("*.md") if is_myst_markdown_notebook(p.read_text()))


# Numbers as whole tokens: not part of a longer number or a name ("1.5" in "11.5", "x1"), and not a
# dimension after a comma ("64" in "f32[16,64]"); thousands may be grouped with commas ("4,227,072").
_GROUPED_NUMBER = re.compile(r"(?<![\w.,])\d{1,3}(?:,\d{3})+(?:\.\d+)?(?![\w]|[.,]\d)")
_PLAIN_NUMBER = re.compile(r"(?<![\w.,])\d+(?:\.\d+)?(?![\w]|[.,]\d)")


def printed_numbers(text: str) -> set[Decimal]:
    """The values of the whole numbers in `text` (311.0 and 311 are the same value; 1.14e-07 is one
    number)."""
    found = [m.replace(",", "") for m in _GROUPED_NUMBER.findall(text)] + _PLAIN_NUMBER.findall(text)
    return {Decimal(n) for n in found + _SCIENTIFIC.findall(text)}


def printed_text(nb) -> str:
    """Everything a notebook's cells printed or showed as text. A claim prints nothing, so a figure
    the prose quotes is found here only if the computation printed it, not the check that quotes it."""
    printed = []
    for cell in nb.cells:
        for output in cell.get("outputs", []):
            text = output.get("text") or output.get("data", {}).get("text/plain", "") or ""
            printed.append("".join(text) if isinstance(text, list) else text)
    return "\n".join(printed)


# Calls that make a matplotlib figure: shardbook's draw_* (and pyplot's) figures are closed in pyplot,
# so a notebook shows one only as the value of its cell or through display().
_DRAWS = re.compile(r"^(draw_\w+|subplots|figure|subplot_mosaic)$")


def unshown_figures(nb) -> list[str]:
    """'cell N draws a figure (draw_x) and shows none' for each code cell of an executed notebook that
    calls a drawing function (outside a function it defines) but has no image among its outputs: the
    figure was drawn and not shown, e.g. a draw_*() that is not the cell's last expression."""
    found = []
    for index, cell in enumerate(nb.cells):
        if cell.cell_type != "code" or not any(w in cell.source for w in ("draw_", "subplot", "figure(")):
            continue
        try:
            tree = ast.parse(
                "\n".join("" if ln.lstrip().startswith(("%", "!")) else ln for ln in cell.source.splitlines())
            )
        except SyntaxError:
            continue
        calls: list[str] = []

        def visit(node, calls=calls) -> None:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
                return  # drawn when called, by the cell that calls it
            if isinstance(node, ast.Call):
                func = node.func
                name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
                if _DRAWS.match(name):
                    calls.append(name)
            for child in ast.iter_child_nodes(node):
                visit(child)

        visit(tree)
        shown = any(
            any(k.startswith("image/") for k in output.get("data", {})) for output in cell.get("outputs", [])
        )
        if calls and not shown:
            found.append(
                f"cell {index} draws a figure ({calls[0]}) and shows none: make the figure the cell's last"
                " expression, or display() it"
            )
    return found


def printed_as_token(number: str, text: str) -> bool:
    """Whether `number`, as quoted in prose, is printed in `text` as a whole number of the same value.

    "1.5" is not found in "11.5" or "1.53"; "4,227,072" is found as itself or as "4227072"; "311" is
    found as "311.0".
    """
    return Decimal(number.replace(",", "")) in printed_numbers(text)


_MARKUP = re.compile(r"[*`]")


def _plain(text: str) -> str:
    """Prose as a reader reads it: no emphasis or code markup, one space between words."""
    return " ".join(_MARKUP.sub("", text).split())


def claimed_sentences(nb) -> tuple[list[str], list[str]]:
    """The sentences a notebook's code cells check with ``claim(...)``, and the problems found.

    A claim's sentence must be a string literal (so that it can be read here without running the
    cell) and must occur, word for word, in the notebook's markdown cells.
    """
    prose = _plain("\n".join(c.source for c in nb.cells if c.cell_type == "markdown"))
    sentences, problems = [], []
    for index, cell in enumerate(nb.cells):
        if cell.cell_type != "code" or "claim(" not in cell.source:
            continue
        try:
            tree = ast.parse("\n".join(line for line in cell.source.splitlines() if not line.startswith("%")))
        except SyntaxError as e:
            problems.append(f"cell {index}: does not parse ({e.msg})")
            continue
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            if name != "claim":
                continue
            first = node.args[0] if node.args else None
            if not (isinstance(first, ast.Constant) and isinstance(first.value, str)):
                problems.append(f"cell {index}, line {node.lineno}: claim()'s sentence is no string literal")
                continue
            sentences.append(first.value)
            if _plain(first.value) not in prose:
                problems.append(f'cell {index}: claim("{first.value}") quotes words the prose lacks')
    return sentences, problems


# A sentence ends at . ! ? before a capital, a quote or markup; a list item or a table row is one too.
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z*(`\"'\[])|\n(?=\s*(?:[-*+] |\d+\. |\|))|\n\s*\n")
_FENCED = re.compile(r"^\s*(`{3,}|~{3,})(?!\{admonition\}).*?^\s*\1\s*$", re.M | re.S)
_DIRECTIVE_LINE = re.compile(r"^\s*(?:`{3,}|~{3,}|:\w+:).*$", re.M)
_TABLE_RULE = re.compile(r"^[\s-]*-{3,}[\s-]*$", re.M)
# a paragraph whose every figure has one source says so once, with the tag
_FOR_THE_PARAGRAPH = re.compile(r"every (?:time|figure) in this paragraph")


def prose_sentences(markdown: str) -> list[str]:
    """The sentences of a markdown cell as a reader reads them: code blocks out, markup and line breaks
    gone; a list item or a table row counts as a sentence."""
    text = _DIRECTIVE_LINE.sub("", _FENCED.sub("", markdown))
    return [" ".join(_MARKUP.sub("", s).split()) for s in _SENTENCE_END.split(text) if s.strip()]


def unsourced_tpu_figures(nb) -> list[str]:
    """'cell N says/prints "..."' for each TPU time or memory figure, in a notebook's prose or its
    printed outputs, that names no source (shardbook/sources.py: its tags, and what counts as a TPU
    figure).

    Prose is read sentence by sentence; a paragraph whose figures share one source may say it once,
    "(*model · XLA:CPU program*, as every time in this paragraph)". Output is read line by line, except
    a table (a block with a rule of dashes under its header), which is read whole: its caption or a
    source column says it once.
    """
    from shardbook.sources import carries_source, is_tpu_figure, is_tpu_table

    found = []
    for index, cell in enumerate(nb.cells):
        if cell.cell_type == "markdown":
            for paragraph in re.split(r"\n\s*\n", cell.source):
                sentences = prose_sentences(paragraph)
                if any(_FOR_THE_PARAGRAPH.search(s) and carries_source(s) for s in sentences):
                    continue  # one tag for all its figures: "(model · …, as every time in this paragraph)"
                for sentence in sentences:
                    if is_tpu_figure(sentence) and not carries_source(sentence):
                        found.append(f'cell {index} says "{sentence[:160]}" without its source')
            continue
        for output in cell.get("outputs", []):
            text = output.get("text") or output.get("data", {}).get("text/plain", "") or ""
            text = "".join(text) if isinstance(text, list) else text
            for block in re.split(r"\n\s*\n", text):
                if _TABLE_RULE.search(block):
                    rule = _TABLE_RULE.search(block)
                    head, body = block[: rule.start()], block[rule.end() :]  # type: ignore[union-attr]
                    if is_tpu_table(head, body) and not carries_source(block):
                        found.append(f'cell {index} prints a table "{head.strip()[:120]}" without its source')
                    continue
                for line in block.splitlines():
                    if is_tpu_figure(line, printed=True) and not carries_source(line):
                        found.append(f'cell {index} prints "{line.strip()[:160]}" without its source')
    return found
