"""Every figure a claim's sentence states is tested by that claim: the static half of issue 40's rule.

``tools/notebooks.py prose`` proves that a figure of the prose is *printed* somewhere on the page; a
printed figure may still be stale in the sentence (chapter 9 once said 1.11e-07 beside a table of
1.14e-07). This check reads every ``claim(sentence, holds, ..., figures={...})`` of the chapters'
sources and fails, naming file:line, when the sentence states a figure that is neither written in
the claim's condition (``holds``) nor given its measured value in ``figures=``, whose values
``shardbook.claim`` compares with the sentence at run time, rounded as written.

What counts as a figure (found with the prose check's own patterns, tools/prose.py):

* a number with a unit: KiB, MiB, GiB, µs, ms, bytes, B, TFLOP/s, % ("3.77 GiB", "52%");
* a number in scientific notation ("1.14e-07");
* a number with a fractional part ("1.3 billion", "0.97 ×");
* a factor: a number followed by "×" or "times" ("80×", "43 times fewer");
* a number with thousands separators ("1,792").

A bare integer is not a figure: in this book it is a count fixed by the example (the 8 devices of a
mesh, 16 sequences, K = 4096, chapter 5, step 6, "4 × 2 = 8 pieces"), which the reader can check
against the code above it. A figure given in ``figures=`` must take its value from a computation:
a numeric literal there restates the sentence and tests nothing, so it is refused too.

Run as ``python tools/claim_figures.py`` (prints the problems, exits 1 if any).
"""

from __future__ import annotations

import ast
import re
import sys
from decimal import Decimal, InvalidOperation
from pathlib import Path

if __package__ in (None, ""):  # run as a script
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tools.prose import (  # noqa: E402  (the prose check's figure parser; private names, reused)
    _GROUPED_NUMBER,
    _PLAIN_NUMBER,
    QUOTED_FIGURE,
    QUOTED_SCIENTIFIC,
    chapter_sources,
    printed_numbers,
)

#: A factor: "80×", "4× fewer", "6.6 times as long", "43 times fewer" (not "2 × 7/8", a product).
FACTOR = re.compile(r"(?<![\w.,])(\d[\d,]*(?:\.\d+)?)(?:×(?!\s?\d)|\s+times\b)")
#: Code in a sentence: a shape, "f32[32,32]", or a call, "psum(1.0, 'X')": its numbers are the
#: example's inputs, not figures.
CODE = re.compile(r"\w+\[[^\]]*\]|\w+\([^)]*\)")


def _value(number: str) -> Decimal | None:
    try:
        return Decimal(number.replace(",", ""))
    except InvalidOperation:
        return None


def sentence_figures(sentence: str) -> list[str]:
    """The figures `sentence` states, as written, first occurrence first, one per value.

    Example:
      >>> sentence_figures("3.77 GiB against 16 sequences, 80× less, 52% and 1.14e-07 (1,792 B)")
      ['3.77', '80', '52', '1.14e-07', '1,792']
    """
    sentence = CODE.sub(lambda m: " " * len(m.group(0)), sentence)
    found: list[tuple[int, str]] = []
    for pattern in (QUOTED_FIGURE, QUOTED_SCIENTIFIC, FACTOR, _GROUPED_NUMBER, _PLAIN_NUMBER):
        for match in pattern.finditer(sentence):
            number = match.group(1) if pattern.groups else match.group(0)
            if pattern is _PLAIN_NUMBER and "." not in number:
                continue  # a bare integer: a count the example fixes
            scientific = QUOTED_SCIENTIFIC.search(sentence, match.start())
            if pattern is _PLAIN_NUMBER and scientific is not None and scientific.start() == match.start():
                continue  # the mantissa of a scientific figure, found whole above
            found.append((match.start(), number))
    figures, values = [], set()
    for _, number in sorted(found):
        value = _value(number)
        if value is not None and value not in values:
            values.add(value)
            figures.append(number)
    return figures


def _literal_values(tree: ast.AST | None) -> set[Decimal]:
    """The numbers written in a piece of code, as values (3.77 and 3.770 alike; 1_792 too), in its
    number literals and in its strings (a figure compared as printed: ``f"{gib:.2f}" == "15.75"``)."""
    values: set[Decimal] = set()
    for node in ast.walk(tree) if tree is not None else ():
        if (
            isinstance(node, ast.Constant)
            and isinstance(node.value, (int, float))
            and not isinstance(node.value, bool)
        ):
            values.add(Decimal(repr(node.value)))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):  # f"{gib:.2f}" == "15.75"
            values |= printed_numbers(node.value)
    return values


def _is_claim(node: ast.AST) -> bool:
    if not isinstance(node, ast.Call):
        return False
    func = node.func
    return getattr(func, "attr", None) == "claim" or getattr(func, "id", None) == "claim"


def claim_problems(code: str, where: str = "") -> list[str]:
    """'where:line: ...' for each figure of a claim sentence in `code` that its claim does not test.

    Example:
      >>> claim_problems('claim("3.77 GiB", x < 4)', "ch.md")
      ['ch.md:1: claim("3.77 GiB") states 3.77, which neither its condition writes nor figures= gives']
      >>> claim_problems('claim("3.77 GiB", x < 4, figures={"3.77": x})')
      []
    """
    try:
        tree = ast.parse(code)
    except SyntaxError as e:
        return [f"{where}:{e.lineno}: does not parse ({e.msg})"]
    problems = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or not _is_claim(node) or not node.args:
            continue
        first = node.args[0]
        if not (isinstance(first, ast.Constant) and isinstance(first.value, str)):
            continue  # tools/notebooks.py prose refuses it
        sentence, line = first.value, f"{where}:{node.lineno}"
        holds = (
            node.args[1]
            if len(node.args) > 1
            else next((k.value for k in node.keywords if k.arg == "holds"), None)
        )
        written = _literal_values(holds)
        given: set[Decimal] = set()
        for keyword in node.keywords:
            if keyword.arg != "figures":
                continue
            if not isinstance(keyword.value, ast.Dict):
                problems.append(f'{line}: claim("{sentence}") gives figures= as no dict literal')
                continue
            for key, value in zip(keyword.value.keys, keyword.value.values, strict=True):
                if not (isinstance(key, ast.Constant) and isinstance(key.value, str)):
                    problems.append(f'{line}: claim("{sentence}") has a figures= key that is no string')
                    continue
                if isinstance(value, ast.Constant) or (
                    isinstance(value, ast.UnaryOp) and isinstance(value.operand, ast.Constant)
                ):
                    problems.append(
                        f'{line}: claim("{sentence}") gives {key.value} a literal, which tests nothing:'
                        " pass the value the cell computed"
                    )
                if key.value not in sentence_figures(sentence):
                    problems.append(
                        f'{line}: claim("{sentence}") gives {key.value}, a figure it does not state'
                    )
                figure = _value(key.value)
                if figure is not None:
                    given.add(figure)
        percents = {_value(n) for n, unit in QUOTED_FIGURE.findall(sentence) if unit == "%"}
        as_percent = {v * 100 for v in written}  # "within 15%" tested by a condition's 0.15
        for number in sentence_figures(sentence):
            stated = _value(number)
            if stated not in written | given and not (stated in percents and stated in as_percent):
                problems.append(
                    f'{line}: claim("{sentence}") states {number}, which neither its condition writes'
                    " nor figures= gives"
                )
    return problems


def _code(source: Path) -> list[tuple[int, str]]:
    """The code cells of a MyST chapter source: (line of the cell's first code line, code)."""
    cells, lines = [], source.read_text().splitlines()
    index = 0
    while index < len(lines):
        if lines[index].startswith("```{code-cell}"):
            index += 1
            if index < len(lines) and lines[index] == "---":  # options as a YAML block
                index = lines.index("---", index + 1) + 1
            while index < len(lines) and re.match(r"^:\w+: ", lines[index]):  # options, one a line
                index += 1
            start = index
            while index < len(lines) and lines[index] != "```":
                index += 1
            body = ["" if ln.lstrip().startswith(("%", "!")) else ln for ln in lines[start:index]]
            cells.append((start, "\n".join(body)))
        index += 1
    return cells


def source_problems(sources: list[Path] | None = None) -> list[str]:
    """The problems of every claim in the chapters' sources, as 'book/x.md:LINE: ...'."""
    problems = []
    for source in sources if sources is not None else chapter_sources():
        for offset, code in _code(source):
            for problem in claim_problems(code, "@"):
                line, rest = problem[2:].split(":", 1)
                name = source.name if source.parent.name != "book" else f"book/{source.name}"
                problems.append(f"{name}:{offset + int(line)}:{rest}")
    return problems


def main() -> None:
    problems = source_problems()
    if problems:
        print("claim figures no condition tests:\n  " + "\n  ".join(problems))
        sys.exit(1)
    print("every figure a claim's sentence states is written in its condition or given its value: ok")


if __name__ == "__main__":
    main()
