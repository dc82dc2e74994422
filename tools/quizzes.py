"""Pop quizzes keep their answers folded: nothing a page shows outside the answer's fold gives it away.

A chapter's pop quiz is a paragraph that starts ``**Pop quiz.**`` (or a heading "Pop quiz"), followed
by its answer, folded: a ``{admonition} Answer`` with ``:class: dropdown``. Its *region* runs from the
question to the next heading. Everything the page shows in that region outside the fold (prose, a code
cell's source unless its input is hidden, its outputs unless they are hidden) must not state the
answer: no *answer figure* (a number the answer writes and the question does not: ``64 MiB``,
``2.34e-03``, ``67,108,864``; single-digit integers are too common to count) and no *answer term*
(inline code the answer writes and the question does not: `` `psum_scatter` ``). A cell that checks
the answer is tagged ``hide-cell`` (or ``remove-cell``, or hides both its input and its output).

:func:`spoilers` is run on the chapters' sources by tests/test_chapters.py (prose and code) and on the
executed chapters by ``tools/notebooks.py prose`` (their outputs as well).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from decimal import Decimal

QUESTION = re.compile(r"^\*\*Pop quiz\.\*\*")
HEADING = re.compile(r"^#{1,6}\s+(.*)$")
FENCE = re.compile(r"^\s*(`{3,}|~{3,})(.*)$")
ANSWER = re.compile(r"^\{admonition\}\s+Answer\b")
INLINE_CODE = re.compile(r"`([^`\n]+)`")
HIDES_INPUT = {"hide-input", "remove-input", "remove_input", "hide-cell", "remove-cell", "remove_cell"}
HIDES_OUTPUT = {"hide-output", "remove-output", "remove_output", "hide-cell", "remove-cell", "remove_cell"}
_TAG = re.compile(r"<[^>]+>")


@dataclass
class Quiz:
    """One pop quiz of a notebook: where it starts, its question, its answer and what the page shows
    between the question and the next heading outside the answer's fold."""

    cell: int
    question: str = ""
    answer: str | None = None
    folded: bool = False
    shown: list[tuple[str, str]] = field(default_factory=list)  # (where, text) the reader sees
    _asking: bool = True  # still reading the question: its paragraph, up to a blank line or a cell

    def figures(self) -> set[Decimal | tuple[Decimal, str]]:
        """What the answer states and the question does not: each number with a unit, as (value,
        unit) ("8 GiB", whatever its size), and each bare number but a single-digit integer."""
        asked = _numbers(self.question) | {Decimal(n) for n in re.findall(r"\d+(?:\.\d+)?", self.question)}
        asked_with_units = _with_units(self.question)
        bare = {n for n in _numbers(self.answer or "") if n not in asked and not _small(n)}
        return bare | (_with_units(self.answer or "") - asked_with_units)

    def terms(self) -> set[str]:
        """The inline code the answer writes and the question does not (at least 4 characters)."""
        asked = set(INLINE_CODE.findall(self.question))
        return {t for t in INLINE_CODE.findall(self.answer or "") if t not in asked and len(t) >= 4}


# A number and its unit: "64 MiB", "0.75 ms", "1,572,864 B", "35 µs", "52 %".
WITH_UNIT = re.compile(
    r"(?<![\w.,])(\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?)\s?"
    r"(TFLOP/s|GB/s|KiB|MiB|GiB|TiB|KB|MB|GB|TB|B|bytes|ns|µs|us|ms|s|%)(?![\w/])"
)


def _numbers(text: str) -> set[Decimal]:
    from tools.prose import printed_numbers

    return printed_numbers(text)


def _with_units(text: str) -> set[tuple[Decimal, str]]:
    return {(Decimal(n.replace(",", "")), unit) for n, unit in WITH_UNIT.findall(text)}


def _small(n: Decimal) -> bool:
    return n == n.to_integral_value() and abs(n) < 10


def _output_text(output) -> str:
    if output.get("output_type") == "stream":
        text = output.get("text", "")
    elif output.get("output_type") == "error":
        text = f"{output.get('ename', '')}: {output.get('evalue', '')}"
    else:
        data = output.get("data", {})
        text = data.get("text/plain", "") or ""
        html = data.get("text/html", "")
        html = "".join(html) if isinstance(html, list) else html
        text = ("".join(text) if isinstance(text, list) else text) + "\n" + _TAG.sub(" ", html)
    return "".join(text) if isinstance(text, list) else text


def find_quizzes(nb) -> list[Quiz]:
    """Every pop quiz of notebook ``nb`` (a source or an executed copy), with what its region shows."""
    quizzes: list[Quiz] = []
    quiz: Quiz | None = None
    for index, cell in enumerate(nb.cells):
        if cell.cell_type == "markdown":
            fence = None  # the open fence, and whether it is the quiz's answer
            in_answer = False
            shown: list[str] = []
            lines = cell.source.splitlines()
            for number, line in enumerate(lines):
                opened = FENCE.match(line)
                if fence is None and opened:
                    fence = opened[1]
                    if quiz is not None and ANSWER.match(opened[2].strip()) and quiz.answer is None:
                        body = []
                        for inner in lines[number + 1 :]:
                            if inner.strip() == fence:
                                break
                            body.append(inner)
                        quiz.answer = "\n".join(body)
                        quiz.folded = any(re.match(r"^:class:.*\bdropdown\b", b) for b in body)
                        quiz._asking, in_answer = False, quiz.folded
                        if not quiz.folded:
                            shown.append(line)
                        continue
                    if quiz is not None and not in_answer:
                        shown.append(line)
                    continue
                if fence is not None:
                    if line.strip() == fence:
                        fence, in_answer = None, False
                    elif quiz is not None and not in_answer:
                        shown.append(line)
                    continue
                heading = HEADING.match(line)
                if heading or QUESTION.match(line):
                    if quiz is not None and shown:
                        quiz.shown.append((f"cell {index}'s prose", "\n".join(shown)))
                    shown = []
                    quiz = None
                    if QUESTION.match(line) or (heading and heading[1].strip().lower() == "pop quiz"):
                        quiz = Quiz(cell=index)
                        quizzes.append(quiz)
                        if not heading:
                            quiz.question = line
                    continue
                if quiz is None:
                    continue
                if quiz._asking:  # the question is one paragraph
                    if line.strip() or not quiz.question.strip():
                        quiz.question += "\n" + line
                    else:
                        quiz._asking = False
                else:
                    shown.append(line)
            if quiz is not None and shown:
                quiz.shown.append((f"cell {index}'s prose", "\n".join(shown)))
        elif cell.cell_type == "code" and quiz is not None:
            quiz._asking = False
            tags = set(cell.get("metadata", {}).get("tags", []))
            if not tags & HIDES_INPUT:
                quiz.shown.append((f"cell {index}'s code", cell.source))
            if not tags & HIDES_OUTPUT:
                for output in cell.get("outputs", []):
                    quiz.shown.append((f"cell {index}'s output", _output_text(output)))
    return quizzes


def spoilers(nb) -> list[str]:
    """What the page of ``nb`` shows of a pop quiz's answer outside its fold, one line each; a quiz
    without a folded answer is one too. [] when every quiz keeps its answer to itself."""
    problems = []
    for quiz in find_quizzes(nb):
        where = f"the pop quiz of cell {quiz.cell}"
        if quiz.answer is None or not quiz.folded:
            problems.append(f"{where} has no folded answer (```{{admonition}} Answer + :class: dropdown)")
            continue
        figures, terms = quiz.figures(), quiz.terms()
        for place, text in quiz.shown:
            stated = _numbers(text) | _with_units(text)
            found = sorted(f"{n[0]} {n[1]}" if isinstance(n, tuple) else str(n) for n in stated & figures)
            found += sorted(t for t in terms if re.search(rf"(?<!\w){re.escape(t)}(?!\w)", text))
            if found:
                problems.append(
                    f"{where}: {place} shows its answer ({', '.join(found)}) outside the fold: tag a"
                    " checking cell hide-cell, and keep the answer's figures out of the prose around it"
                )
    return problems
