"""Repair a submitted notebook onto the released one before nbgrader sees it.

Learners hand in whatever their editor saved. Colab, VS Code and JupyterLab drop or keep cell metadata
differently; learners duplicate cells, retype an answer cell as markdown, delete or edit a test, add
scratch cells. nbgrader identifies cells only by their ``nbgrader`` metadata, so any of these can cost
points or stop autograding (nbgrader issues #424, #1083, #1398, #1941). This module rebuilds every
submission in the released notebook's shape:

* **answer cells** are found by grade_id where the metadata survived, otherwise by their anchor — the
  line ``def <grade_id>(`` that every answer cell of this book starts with; a match in a markdown or
  raw cell is turned back into code. If several cells match, the one executed last (highest
  execution count) wins, else the last one in the notebook; the others are dropped.
* **test cells and locked cells** (setup, imports, instructions) always come from the release, so
  deleting or editing them changes nothing; nbgrader restores hidden tests from its database.
* **other cells** the learner added stay where they were, relative to the cells around them, with any
  nbgrader metadata removed, so helper functions still run but nothing they hold is graded.
* an answer that cannot be found becomes the released stub (``raise NotImplementedError``).

Every change is described in one sentence, and ``grade.py`` writes those into the learner's report.
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass, field

import nbformat

ANCHOR = "def {name}("


@dataclass
class Repaired:
    """A repaired notebook and the sentences saying what was changed."""

    notebook: nbformat.NotebookNode
    repairs: list[str] = field(default_factory=list)


def _meta(cell) -> dict:
    return cell.get("metadata", {}).get("nbgrader", {}) or {}


def _is_answer(cell) -> bool:
    return bool(_meta(cell).get("solution"))


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
    answers = [_meta(c)["grade_id"] for c in release_cells if _is_answer(c)]
    known_ids = {_meta(c).get("grade_id") for c in release_cells if _meta(c).get("grade_id")}
    released_text = {
        _normalise(c.source): _meta(c).get("grade_id") for c in release_cells if not _is_answer(c)
    }

    # 1. Which submitted cells are candidates for each answer?
    candidates: dict[str, list[int]] = {name: [] for name in answers}
    role: dict[int, str] = {}  # submitted index -> "answer:<id>" | "release:<id>" | "extra"
    for i, cell in enumerate(submitted.cells):
        gid = _meta(cell).get("grade_id")
        if gid in candidates and (_is_answer(cell) or cell.cell_type != "code" or _anchor_matches(cell, gid)):
            candidates[gid].append(i)
            role[i] = f"answer:{gid}"
            continue
        if gid in known_ids:
            role[i] = f"release:{gid}"
            continue
        matched = [name for name in answers if _anchor_matches(cell, name)]
        if not matched and _normalise(cell.source) in released_text:
            # A released cell that lost its metadata (same text as the release): the release copy is used.
            role[i] = "release:" + ",".join(released_text[_normalise(cell.source)])
        elif len(matched) == 1:
            candidates[matched[0]].append(i)
            role[i] = f"answer:{matched[0]}"
        else:
            role[i] = "extra"

    # 2. Choose one cell per answer.
    chosen: dict[str, int] = {}
    for name, found in candidates.items():
        if not found:
            repairs.append(
                f"no answer cell for {name} was found (no cell starts `def {name}(`); it scores 0."
            )
            continue
        best = max(found, key=lambda i: (_exec_count(submitted.cells[i]), i))
        chosen[name] = best
        if len(found) > 1:
            repairs.append(
                f"{len(found)} cells define {name}; graded the one run last (cell {best}), "
                "dropped the others."
            )
    for name, i in chosen.items():
        cell = submitted.cells[i]
        if not _meta(cell).get("grade_id"):
            repairs.append(
                f"the answer cell of {name} had lost its grading metadata; it was found by `def {name}(`."
            )
        if cell.cell_type != "code":
            repairs.append(
                f"the answer cell of {name} had been turned into {cell.cell_type}; "
                "it was turned back into code."
            )

    # 3. Rebuild in release order; learners' extra cells follow the released cell they came after.
    by_release_anchor: dict[str, list] = {}
    last_anchor = "<start>"
    chosen_indices = set(chosen.values())
    extras = 0
    for i, cell in enumerate(submitted.cells):
        kind = role[i]
        if kind.startswith("answer:"):
            if i in chosen_indices:
                last_anchor = kind.split(":", 1)[1]
            continue
        if kind.startswith("release:"):
            last_anchor = kind.split(":", 1)[1].split(",")[-1]
            continue
        extra = copy.deepcopy(cell)
        extra.get("metadata", {}).pop("nbgrader", None)
        by_release_anchor.setdefault(last_anchor, []).append(extra)
        extras += extra.cell_type == "code"

    present = {g for r in role.values() if r.startswith("release:") for g in r.split(":", 1)[1].split(",")}
    out_cells = list(by_release_anchor.get("<start>", []))
    missing_tests = []
    for cell in release_cells:
        gid = _meta(cell).get("grade_id")
        if _is_answer(cell):
            if gid in chosen:
                learner = submitted.cells[chosen[gid]]
                new = copy.deepcopy(cell)  # released metadata, learner's code
                new.source = learner.source
                out_cells.append(new)
            else:
                out_cells.append(copy.deepcopy(cell))
        else:
            if _meta(cell).get("grade") and gid not in present:
                missing_tests.append(gid)
            out_cells.append(copy.deepcopy(cell))
        out_cells.extend(by_release_anchor.get(gid, []))
    if missing_tests:
        repairs.append(
            f"test cell(s) {', '.join(missing_tests)} had been deleted or lost their metadata; restored."
        )
    if extras:
        repairs.append(f"{extras} extra code cell(s) were kept where they were; they run but are not graded.")

    notebook = nbformat.v4.new_notebook(cells=out_cells, metadata=copy.deepcopy(release.metadata))
    for k, cell in enumerate(notebook.cells):  # fresh ids: copied cells may share one
        cell["id"] = f"cell-{k:03d}"
        if cell.cell_type == "code":
            cell.setdefault("outputs", [])
            cell.setdefault("execution_count", None)
        else:
            cell.pop("outputs", None)
            cell.pop("execution_count", None)
    nbformat.validate(notebook)
    return Repaired(notebook=notebook, repairs=repairs)
