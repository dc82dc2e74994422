"""The assignment notebook: what each cell is, its markers, its points and its answers, in one place.

Every other module of the course asks this one "what kind of cell is this?" (nbgrader's own
``nbgrader/utils.py`` plays that part for nbgrader). An assignment notebook has four kinds of cell, and
its source (``solutions/NN_x/NN_x.md``) states only a cell's ``grade_id`` and, for a test, its points;
the rest of nbgrader's metadata follows from them (:func:`nbgrader_metadata`):

====================  =====================================  =========================================
kind                  which cells                            nbgrader metadata
====================  =====================================  =========================================
``INSTRUCTIONS``      every markdown cell                    locked
``LOCKED``            the code cells ``setup``, ``imports``  locked
``TEST``              code cells whose id starts ``test_``   graded (``points``), locked
``ANSWER``            every other code cell (id = function)  solution, unlocked
====================  =====================================  =========================================

In a source a code cell carries ``:grade_id: per_device_shape`` (and a test ``:points: 1``) as MyST
cell options; a markdown cell ``+++ {"grade_id": "intro"}``. :func:`expand` writes the full metadata
into the generated ``.ipynb`` (the file nbgrader reads), :func:`shorten` goes back.

In an ``.ipynb`` (a generated notebook, a release, or a learner's download with whatever metadata
survived), a cell's kind is read from nbgrader's flags, as nbgrader reads them: :func:`kind`.

The markers (one spelling, one tolerance: a marker line may be indented and may carry text after it):

>>> strip_solution_markers("def f():\\n    ### BEGIN SOLUTION\\n    return 1\\n    ### END SOLUTION\\n")
'def f():\\n    return 1\\n'
"""

from __future__ import annotations

import copy
import enum
import json
import linecache
import re
from collections.abc import Mapping
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[1]

SCHEMA_VERSION = 3
#: The words of nbgrader's markers; a marker line is ``### <words>``.
BEGIN_SOLUTION, END_SOLUTION = "BEGIN SOLUTION", "END SOLUTION"
BEGIN_HIDDEN_TESTS, END_HIDDEN_TESTS = "BEGIN HIDDEN TESTS", "END HIDDEN TESTS"
MARKERS = (BEGIN_SOLUTION, END_SOLUTION, BEGIN_HIDDEN_TESTS, END_HIDDEN_TESTS)
#: The code cells every assignment has, locked: the Colab setup cell and the imports cell.
SETUP, IMPORTS = "setup", "imports"
LOCKED_CODE = (SETUP, IMPORTS)
TEST_PREFIX = "test_"
#: What a hidden-test block becomes on a feedback page.
HIDDEN_NOTE = "# Hidden tests ran here; their result is shown below.\n"


def _line(words: str) -> str:
    return rf"^[ \t]*### {words}[^\n]*"


def _block(begin: str, end: str) -> re.Pattern:
    """A marked block: group 1 is the text between the marker lines."""
    return re.compile(rf"{_line(begin)}\n(.*?){_line(end)}(?:\n|\Z)", re.S | re.M)


SOLUTION_BLOCK = _block(BEGIN_SOLUTION, END_SOLUTION)
HIDDEN_BLOCK = _block(BEGIN_HIDDEN_TESTS, END_HIDDEN_TESTS)
_SOLUTION_MARKER_LINE = re.compile(rf"(?:{_line(BEGIN_SOLUTION)}|{_line(END_SOLUTION)})(?:\n|\Z)", re.M)


class Kind(enum.Enum):
    """What a cell of an assignment notebook is."""

    INSTRUCTIONS = "instructions"  # markdown, locked
    LOCKED = "locked"  # setup and imports
    ANSWER = "answer"  # the learner's function, between solution markers
    TEST = "test"  # a graded cell: a self-check or hidden tests


# ---------------------------------------------------------------------------------------------------
# One cell


def metadata(cell) -> dict:
    """A cell's nbgrader metadata ({} when it has none)."""
    return cell.get("metadata", {}).get("nbgrader", {}) or {}


def grade_id(cell) -> str | None:
    """A cell's nbgrader grade_id, or None."""
    gid = metadata(cell).get("grade_id")
    return str(gid) if gid is not None else None


def drop_metadata(cell) -> None:
    """Removes a cell's nbgrader metadata (a learner's extra cell: it runs, nothing in it is graded)."""
    cell.get("metadata", {}).pop("nbgrader", None)


def kind(cell) -> Kind | None:
    """A cell's kind from its nbgrader flags, as nbgrader reads them; None without nbgrader metadata."""
    meta = metadata(cell)
    if not meta:
        return None
    if meta.get("solution"):
        return Kind.ANSWER
    if meta.get("grade"):
        return Kind.TEST
    return Kind.INSTRUCTIONS if cell.get("cell_type") == "markdown" else Kind.LOCKED


def is_answer(cell) -> bool:
    return kind(cell) is Kind.ANSWER


def is_test(cell) -> bool:
    """A graded test cell (graded, not an answer)."""
    return kind(cell) is Kind.TEST


def points(cell) -> float:
    """The points of a test cell; 0 for any other cell."""
    return float(metadata(cell).get("points", 0)) if is_test(cell) else 0.0


def kind_from_id(cell_type: str, gid: str) -> Kind:
    """The kind a source's cell has, from its type and grade_id alone (see the module's table)."""
    if cell_type == "markdown":
        return Kind.INSTRUCTIONS
    if gid in LOCKED_CODE:
        return Kind.LOCKED
    return Kind.TEST if gid.startswith(TEST_PREFIX) else Kind.ANSWER


def nbgrader_metadata(cell_type: str, gid: str, points: float | None = None) -> dict:
    """nbgrader's full metadata of a cell, from its type, grade_id and (a test's) points.

    >>> nbgrader_metadata("code", "test_f_visible", 1)["grade"]
    True
    """
    k = kind_from_id(cell_type, gid)
    if (points is not None) != (k is Kind.TEST):
        raise ValueError(
            f"cell {gid!r}: a test cell (grade_id test_…) states its points and no other cell does;"
            f" got points={points!r} on a {k.value} cell"
        )
    meta: dict = {"grade": k is Kind.TEST, "grade_id": gid, "locked": k is not Kind.ANSWER}
    if k is Kind.TEST:
        meta["points"] = points
    meta.update({"schema_version": SCHEMA_VERSION, "solution": k is Kind.ANSWER, "task": False})
    return meta


def new_cell(cell_type: str, source: str, gid: str, points: float | None = None) -> nbformat.NotebookNode:
    """A new cell of an assignment notebook, with nbgrader's metadata for its grade_id and points."""
    make = nbformat.v4.new_markdown_cell if cell_type == "markdown" else nbformat.v4.new_code_cell
    cell = make(source)
    cell.metadata["nbgrader"] = nbgrader_metadata(cell_type, gid, points)
    return cell


def expand(cell) -> None:
    """Turns a source cell's short form (``grade_id``, ``points`` in its metadata) into nbgrader's."""
    meta = cell.get("metadata", {})
    if "grade_id" not in meta:
        return
    gid, pts = meta.pop("grade_id"), meta.pop("points", None)
    meta["nbgrader"] = nbgrader_metadata(cell.cell_type, str(gid), pts)


def shorten(cell) -> None:
    """The inverse of :func:`expand`: keeps only grade_id and points; ValueError where nbgrader's
    metadata says something they do not imply (the cell's kind disagrees with its grade_id)."""
    meta = cell.get("metadata", {})
    full = meta.get("nbgrader")
    if not full:
        return
    gid, pts = str(full.get("grade_id", "")), full.get("points") if full.get("grade") else None
    try:
        same = gid and nbgrader_metadata(cell.cell_type, gid, pts) == full
    except ValueError:
        same = False
    if not same:
        raise ValueError(
            f"cell {gid or '(no grade_id)'}: its nbgrader metadata {full} does not follow from its grade_id"
            " (markdown: locked; setup/imports: locked; test_…: graded with points; else an answer)"
        )
    del meta["nbgrader"]
    meta["grade_id"] = gid
    if pts is not None:
        meta["points"] = pts


def short_form(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """A copy of a notebook whose cells state only grade_id and points (see :func:`shorten`)."""
    nb = copy.deepcopy(nb)
    for cell in nb.cells:
        shorten(cell)
    return nb


def full_form(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """The notebook with nbgrader's full metadata in each cell that states a grade_id (in place)."""
    for cell in nb.cells:
        expand(cell)
    return nb


# ---------------------------------------------------------------------------------------------------
# Markers


def strip_solution_markers(source: str) -> str:
    """An answer cell's source without its BEGIN/END SOLUTION lines (the solution kept)."""
    return _SOLUTION_MARKER_LINE.sub("", source)


def solution_span(source: str) -> tuple[int, int]:
    """The 1-based lines of the BEGIN and END SOLUTION markers (1 and the last line where absent)."""
    lines = source.splitlines()
    begin, end = re.compile(_line(BEGIN_SOLUTION)), re.compile(_line(END_SOLUTION))
    lo = next((n for n, line in enumerate(lines, 1) if begin.match(line)), 1)
    hi = next((n for n, line in enumerate(lines, 1) if end.match(line)), len(lines))
    return lo, hi


def solution_blocks(source: str) -> list[str]:
    """The text between each pair of solution markers."""
    return SOLUTION_BLOCK.findall(source)


def hidden_blocks(source: str) -> list[str]:
    """The text between each pair of hidden-test markers."""
    return HIDDEN_BLOCK.findall(source)


def hide_hidden_tests(source: str, note: str = HIDDEN_NOTE) -> str:
    """``source`` with each hidden-test block (markers included) replaced by ``note``."""
    return HIDDEN_BLOCK.sub(note, source)


def released_source(source: str) -> str:
    """What a learner sees of a cell's text: solution and hidden-test blocks removed."""
    return HIDDEN_BLOCK.sub("", SOLUTION_BLOCK.sub("", source))


def marker_lines(source: str) -> list[str]:
    """The markers ``source`` spells anywhere (a leak, where a released file holds one)."""
    return [words for words in MARKERS if words in source]


# ---------------------------------------------------------------------------------------------------
# The notebook


class Assignment:
    """An assignment notebook (instructor's, released, or a learner's), read through its cells' kinds.

    >>> a = Assignment.solution("01_meshes")
    >>> a.answer_ids()[:2]
    ['per_device_shape', 'devices_holding']
    """

    def __init__(self, notebook: nbformat.NotebookNode, name: str = ""):
        self.notebook = notebook
        self.name = name

    @classmethod
    def read(cls, path: Path | str) -> Assignment:
        path = Path(path)
        return cls(nbformat.read(path, as_version=4), path.parent.name)

    @classmethod
    def solution(cls, assignment: str, root: Path = ROOT) -> Assignment:
        """The instructor's notebook, solutions/<assignment>/<assignment>.ipynb."""
        return cls.read(_one_notebook(root / "solutions" / assignment))

    @classmethod
    def release(cls, assignment: str, root: Path = ROOT) -> Assignment:
        """The released exercise, exercises/<assignment>/<assignment>.ipynb."""
        return cls.read(_one_notebook(root / "exercises" / assignment))

    @property
    def cells(self) -> list:
        return self.notebook.cells

    def of_kind(self, k: Kind) -> list:
        return [c for c in self.cells if kind(c) is k]

    def index(self, gid: str) -> int:
        """The position of the cell with this grade_id; KeyError when there is none."""
        for k, cell in enumerate(self.cells):
            if grade_id(cell) == gid:
                return k
        raise KeyError(f"{self.name or 'the notebook'} has no cell with grade_id {gid!r}")

    def cell(self, gid: str):
        return self.cells[self.index(gid)]

    def source(self, gid: str) -> str:
        return self.cell(gid).source

    def answer_ids(self) -> list[str]:
        """The grade_ids (function names) of the answer cells, in order."""
        return [str(grade_id(c)) for c in self.of_kind(Kind.ANSWER)]

    def answers(self) -> dict[str, str]:
        """grade_id -> source of each answer cell, without the solution markers."""
        return {str(grade_id(c)): strip_solution_markers(c.source) for c in self.of_kind(Kind.ANSWER)}

    def tests(self) -> dict[str, tuple[float, str]]:
        """grade_id -> (points, source) of each test cell, in order."""
        return {str(grade_id(c)): (points(c), c.source) for c in self.of_kind(Kind.TEST)}

    def graded_cells(self) -> list[tuple[str, float]]:
        """(grade_id, points) of each test cell, in order."""
        return [(gid, pts) for gid, (pts, _) in self.tests().items()]

    def hidden_test_lines(self) -> set[str]:
        """The stripped code lines of every hidden-test block."""
        return {
            line.strip()
            for _, source in self.tests().values()
            for block in hidden_blocks(source)
            for line in block.splitlines()
            if line.strip()
        }

    def with_answers(self, answers: Mapping[str, str]) -> nbformat.NotebookNode:
        """A copy of the notebook whose answer cells hold ``answers`` (grade_id -> source); the others
        keep theirs. ValueError naming any answer the notebook has no cell for."""
        nb = copy.deepcopy(self.notebook)
        unknown = sorted(set(answers) - set(self.answer_ids()))
        if unknown:
            raise ValueError(f"{self.name or 'the notebook'} has no answer cell {unknown}")
        for cell in nb.cells:
            gid = grade_id(cell)
            if is_answer(cell) and gid is not None and gid in answers:
                cell.source = answers[gid]
        return nb


def reads_download(text: str) -> nbformat.NotebookNode:
    """A notebook a learner handed in, read as ``nbformat.reads(text, as_version=4)`` reads it, but
    quietly: a download of format 4.5 or later whose cells lost their ids (Colab strips cell metadata)
    gets ids first, where nbformat would print a ``MissingIDFieldWarning`` on the instructor's terminal
    and add them itself."""
    try:
        raw = json.loads(text)
    except ValueError:
        raw = None  # not JSON: nbformat says so in its own words below
    minor = raw.get("nbformat_minor") if isinstance(raw, dict) else None
    if isinstance(raw, dict) and raw.get("nbformat") == 4 and isinstance(minor, int) and minor >= 5:
        cells = [c for c in raw.get("cells") or [] if isinstance(c, dict)]
        taken = {c["id"] for c in cells if isinstance(c.get("id"), str)}
        for k, cell in enumerate(cells):
            if "id" not in cell:
                cell["id"] = next(
                    f"cell-{k}-{n}" for n in range(len(cells) + 1) if f"cell-{k}-{n}" not in taken
                )
                taken.add(cell["id"])
        text = json.dumps(raw)
    return nbformat.reads(text, as_version=4)


def _one_notebook(folder: Path) -> Path:
    notebooks = sorted(folder.glob("*.ipynb"))
    if len(notebooks) != 1:
        raise FileNotFoundError(f"expected one notebook in {folder}, found {[p.name for p in notebooks]}")
    return notebooks[0]


# ---------------------------------------------------------------------------------------------------
# Running cells in this process


def run_cell(source: str, filename: str, namespace: dict) -> None:
    """Runs a cell's source in ``namespace`` as a notebook kernel does: its functions keep their source
    (``inspect.getsource`` reads it from linecache, as in IPython), which shardbook.hosts sends on."""
    linecache.cache[filename] = (len(source), None, source.splitlines(keepends=True), filename)
    exec(compile(source, filename, "exec"), namespace)
