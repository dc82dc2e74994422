"""Repair a submitted notebook onto the released one before nbgrader sees it.

Learners hand in whatever their editor saved. Colab, VS Code and JupyterLab drop or keep cell metadata
differently; learners duplicate cells, retype an answer cell as markdown, delete or edit a test, add
scratch cells. nbgrader identifies cells only by their ``nbgrader`` metadata, so any of these can cost
points or stop autograding (nbgrader issues #424, #1083, #1398, #1941). This module rebuilds every
submission in the released notebook's shape:

* **released cells** (instructions, setup, imports, tests) are recognised by grade_id where the
  metadata survived, otherwise by their text; the release's copy is always what runs, so deleting or
  editing a test changes nothing (nbgrader restores hidden tests from its database).
* **answer cells** are the cells holding their anchor — the line ``def <grade_id>(`` that every answer
  cell of this book starts with — or, failing that, the cells still carrying the answer's metadata; a
  match in a markdown or raw cell is turned back into code. If several cells match, the one executed
  last (highest execution count) wins, else the last one in the notebook; the others are dropped.
* **other cells** the learner added stay where they were, after the released cell or answer they
  followed, with any nbgrader metadata removed, so helper functions still run but nothing they hold
  is graded. Empty cells are dropped.
* an answer that cannot be found becomes the released stub (``raise NotImplementedError``).

Every change is described in one sentence, and ``grade.py`` writes those into the learner's report. A
download without any cell metadata, as Colab saves notebooks, is the usual case and needs no sentence.
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass, field

import nbformat

from grading.assignment import drop_metadata, grade_id, is_answer, is_test, metadata

ANCHOR = "def {name}("


@dataclass
class Repaired:
    """A repaired notebook and the sentences saying what was changed."""

    notebook: nbformat.NotebookNode
    repairs: list[str] = field(default_factory=list)


def _anchor_matches(cell, name: str) -> bool:
    pattern = re.compile(rf"^\s*def\s+{re.escape(name)}\s*\(", re.M)
    return bool(pattern.search(cell.get("source", "")))


def _normalise(source: str) -> str:
    return "\n".join(line.rstrip() for line in source.strip().splitlines())


def _exec_count(cell) -> int:
    count = cell.get("execution_count")
    return count if isinstance(count, int) else -1


def repair(submitted: nbformat.NotebookNode, release: nbformat.NotebookNode) -> Repaired:
    """Maps ``submitted`` onto the structure of ``release``; returns the new notebook and its repairs.

    Args:
      submitted: the learner's notebook, as read by nbformat (any version, converted to v4).
      release: the released (student) notebook of the assignment, from exercises/.

    Returns:
      A :class:`Repaired` whose notebook has every released cell once, in release order, with the
      learner's answers and extra cells in place.
    """
    repairs: list[str] = []
    release_cells = release.cells
    cells = submitted.cells
    answer_at = {str(grade_id(c)): k for k, c in enumerate(release_cells) if is_answer(c)}
    release_at = {grade_id(c): k for k, c in enumerate(release_cells) if grade_id(c) and not is_answer(c)}
    # A download without any grading metadata (Colab saves notebooks that way) is matched by text and
    # `def` lines without a note; a notebook that lost it in some cells only gets a note per answer.
    metadata_kept = any(metadata(c) for c in cells)
    role: dict[int, tuple[str, str | int]] = {}  # index -> ("release", release index) | ("answer", name)

    # 1. Released cells (instructions, setup, imports, tests): by grade_id where the metadata survived,
    #    else by their text, in order (the hidden-test cells of an assignment may all read the same).
    claimed: set[int] = set()
    for i, cell in enumerate(cells):
        k = release_at.get(grade_id(cell))
        if k is not None and k not in claimed:
            role[i] = ("release", k)
            claimed.add(k)
    by_text: dict[str, list[int]] = {}
    for k, cell in enumerate(release_cells):
        if not is_answer(cell) and k not in claimed:
            by_text.setdefault(_normalise(cell.source), []).append(k)
    for i, cell in enumerate(cells):
        free = by_text.get(_normalise(cell.source)) if i not in role else None
        if free and not grade_id(cell):
            k = free.pop(0)
            role[i] = ("release", k)
            claimed.add(k)

    # 2. Answers: the cells that define each answer function, else those that still carry its
    #    metadata (the learner renamed or retyped the function). A cell defining two answers stays an
    #    extra cell.
    candidates: dict[str, list[int]] = {}
    for name in answer_at:
        free_cells = [i for i in range(len(cells)) if i not in role]
        found = [i for i in free_cells if _anchor_matches(cells[i], name)]
        if not found:
            found = [
                i
                for i in free_cells
                if grade_id(cells[i]) == name and (is_answer(cells[i]) or cells[i].cell_type != "code")
            ]
        candidates[name] = found
    defining = [i for found in candidates.values() for i in found]
    for name, found in candidates.items():
        candidates[name] = [i for i in found if defining.count(i) == 1]
        for i in candidates[name]:
            role[i] = ("answer", name)

    # 3. Choose one cell per answer.
    chosen: dict[str, int] = {}
    for name, found in candidates.items():
        if not found:
            repairs.append(
                f"no answer cell for {name} was found (no cell starts `def {name}(`); it scores 0."
            )
            continue
        best = max(found, key=lambda i: (_exec_count(cells[i]), i))
        chosen[name] = best
        if len(found) > 1:
            repairs.append(
                f"{len(found)} cells define {name}; graded the one run last (cell {best}), "
                "dropped the others."
            )
    for name, i in chosen.items():
        cell = cells[i]
        if metadata_kept and grade_id(cell) != name:
            repairs.append(
                f"the answer cell of {name} had lost its grading metadata; it was found by `def {name}(`."
            )
        if cell.cell_type != "code":
            repairs.append(
                f"the answer cell of {name} had been turned into {cell.cell_type}; "
                "it was turned back into code."
            )

    # 4. Rebuild in release order; each extra cell follows the released cell or answer it came after.
    after: dict[int, list] = {}  # release index (-1: the top) -> the extra cells that follow it
    anchor = -1
    chosen_cells = set(chosen.values())
    extras = 0
    for i, cell in enumerate(cells):
        kind, value = role.get(i, ("extra", -1))
        if kind == "release":
            anchor = int(value)
        elif kind == "answer":
            if i in chosen_cells:  # an answer's other copies are dropped
                anchor = answer_at[str(value)]
        elif cell.source.strip():  # an empty cell does nothing
            extra = copy.deepcopy(cell)
            drop_metadata(extra)
            after.setdefault(anchor, []).append(extra)
            extras += extra.cell_type == "code"

    out_cells = list(after.get(-1, []))
    missing_tests: list[str] = []
    submitted_at = {k: i for i, (kind, k) in role.items() if kind == "release"}
    for k, cell in enumerate(release_cells):
        gid = grade_id(cell)
        new = copy.deepcopy(cell)
        if is_answer(cell) and gid in chosen:
            new.source = cells[chosen[gid]].source  # released metadata, learner's code
        elif is_test(cell) and k not in submitted_at:
            missing_tests.append(str(gid))
        out_cells.append(new)
        out_cells.extend(after.get(k, []))
    if missing_tests:
        repairs.append(
            f"test cell(s) {', '.join(missing_tests)} had been deleted or edited beyond recognition; "
            "the released ones ran."
        )
    if extras:
        repairs.append(f"{extras} extra code cell(s) were kept where they were; they run but are not graded.")

    # The cells join after new_notebook, which validates what it is given: cells kept from a Colab download
    # (a learner's own) have no id yet, and nbformat would print a MissingIDFieldWarning for each batch.
    notebook = nbformat.v4.new_notebook(metadata=copy.deepcopy(release.metadata))
    notebook.cells = out_cells
    for k, cell in enumerate(notebook.cells):  # fresh ids: copied cells may share one, or have none
        cell["id"] = f"cell-{k:03d}"
        if cell.cell_type == "code":
            cell.setdefault("outputs", [])
            cell.setdefault("execution_count", None)
        else:
            cell.pop("outputs", None)
            cell.pop("execution_count", None)
    nbformat.validate(notebook)
    return Repaired(notebook=notebook, repairs=repairs)
