"""grading/assignment.py: the assignment notebook's one home (cell kinds, markers, points, answers)."""

from __future__ import annotations

import copy
import re

import nbformat
import pytest

from grading import assignment
from grading.assignment import Assignment, Kind
from tests.notebooks import ASSIGNMENTS, ROOT
from tools import notebooks as nbtools


@pytest.mark.parametrize("name", ASSIGNMENTS)
def test_round_trip_every_generated_notebook(name):
    # Byte for byte: each generated .ipynb (what nbgrader reads) is its cells' short form expanded
    # again, and what the .md source generates; so no cell, and no score, can change.
    path = ROOT / "solutions" / name / f"{name}.ipynb"
    text = path.read_text()
    nb = nbformat.reads(text, as_version=4)
    short = copy.deepcopy(nb)
    for cell in short.cells:
        assignment.shorten(cell)
        assert set(cell.metadata) <= {"grade_id", "points"}, cell.metadata
        assignment.expand(cell)
    assert nbtools.notebook_text(short) == text
    assert nbtools.notebook_text(nbtools.source_notebook(path.with_suffix(".md"))) == text


@pytest.mark.parametrize("name", ASSIGNMENTS)
def test_kind_follows_from_grade_id(name):
    # Every cell's kind, read from nbgrader's flags, is the one its type and grade_id give.
    for cell in Assignment.solution(name).cells:
        gid = assignment.grade_id(cell)
        assert gid and assignment.kind(cell) is assignment.kind_from_id(cell.cell_type, gid), gid


def test_sources_state_grade_id_and_points_in_one_line_each():
    # A source never spells nbgrader's generated keys; each cell's options are short lines.
    for source in nbtools.solution_sources():
        text = source.read_text()
        assert not re.search(r"\b(schema_version|solution|locked|task):", text), source
        assert '"nbgrader"' not in text and "\nnbgrader:" not in text, source


def test_nbgrader_metadata_of_each_kind():
    # Only a test cell carries points, and only an answer is unlocked.
    assert assignment.nbgrader_metadata("markdown", "intro")["locked"] is True
    assert assignment.nbgrader_metadata("code", "imports")["solution"] is False
    answer = assignment.nbgrader_metadata("code", "per_device_shape")
    assert answer["solution"] is True and answer["locked"] is False and "points" not in answer
    test = assignment.nbgrader_metadata("code", "test_f_hidden", 2)
    assert test["grade"] is True and test["points"] == 2
    with pytest.raises(ValueError, match="test cell"):
        assignment.nbgrader_metadata("code", "test_f_hidden")
    with pytest.raises(ValueError, match="points=1"):
        assignment.nbgrader_metadata("code", "f", 1)


def test_shorten_refuses_metadata_that_does_not_follow_from_grade_id():
    cell = nbformat.v4.new_code_cell("pass")
    cell.metadata["nbgrader"] = {**assignment.nbgrader_metadata("code", "f"), "locked": True}
    with pytest.raises(ValueError, match="does not follow from its grade_id"):
        assignment.shorten(cell)


def test_markers_have_one_tolerance():
    # Indented or not, with text after them or not, a marker is a marker, in every reader.
    source = (
        "def f():\n"
        "    ### BEGIN SOLUTION (the answer)\n"
        "    return 1\n"
        "    ### END SOLUTION\n"
        "### BEGIN HIDDEN TESTS\n"
        "check(f)\n"
        "  ### END HIDDEN TESTS\n"
    )
    assert assignment.solution_blocks(source) == ["    return 1\n"]
    assert assignment.hidden_blocks(source) == ["check(f)\n"]
    assert assignment.strip_solution_markers(source).startswith("def f():\n    return 1\n### BEGIN HIDDEN")
    assert assignment.hide_hidden_tests(source).endswith("### END SOLUTION\n" + assignment.HIDDEN_NOTE)
    assert assignment.released_source(source) == "def f():\n"
    assert assignment.solution_span(source) == (2, 4)
    assert assignment.marker_lines(source) == list(assignment.MARKERS)


def test_answers_tests_and_with_answers():
    a = Assignment.solution("01_meshes")
    answers = a.answers()
    assert list(answers) == a.answer_ids() == [c.id for c in a.of_kind(Kind.ANSWER)]
    assert all("BEGIN SOLUTION" not in s and f"def {gid}(" in s for gid, s in answers.items())
    tests = a.tests()
    assert sum(points for points, _ in tests.values()) == 14
    assert a.graded_cells()[0] == ("test_per_device_shape_visible", 1.0)
    assert "graders.check_per_device_shape(per_device_shape)" in a.hidden_test_lines()
    nb = a.with_answers({"shard_sums": "def shard_sums(x):\n    return 0\n"})
    assert Assignment(nb).source("shard_sums") == "def shard_sums(x):\n    return 0\n"
    assert a.source("shard_sums") != Assignment(nb).source("shard_sums")  # a copy
    with pytest.raises(ValueError, match="no answer cell"):
        a.with_answers({"nope": ""})
    with pytest.raises(KeyError, match="nope"):
        a.index("nope")


def test_kind_of_a_learners_cell_reads_nbgrader_flags():
    # A download keeps whatever metadata survived; no metadata is no kind.
    cell = nbformat.v4.new_code_cell("pass")
    assert assignment.kind(cell) is None and assignment.points(cell) == 0
    cell.metadata["nbgrader"] = {"grade": True, "grade_id": "sneaky", "points": 100, "solution": False}
    assert assignment.kind(cell) is Kind.TEST and assignment.points(cell) == 100
    assignment.drop_metadata(cell)
    assert assignment.metadata(cell) == {}


def test_run_cell_keeps_function_source():
    import inspect

    namespace: dict = {}
    assignment.run_cell("def f():\n    return 1\n", "<cell f>", namespace)
    assert inspect.getsource(namespace["f"]) == "def f():\n    return 1\n"


# Modules that read notebooks, and the test helpers, speak grading/assignment.py: none reads nbgrader's
# cell metadata or spells a marker itself.
READERS = ["grading", "tools", "shardbook", "tests/notebooks.py", "tests/submissions/__init__.py"]
NBGRADER_METADATA = re.compile(r"""\.get\(["']nbgrader["']|\[["']nbgrader["']\]|\.nbgrader\b""")
MARKER = re.compile(r"(BEGIN|END) (SOLUTION|HIDDEN TESTS)")


def test_no_module_reads_nbgrader_metadata_or_spells_a_marker():
    files = []
    for name in READERS:
        path = ROOT / name
        files += sorted(path.rglob("*.py")) if path.is_dir() else [path]
    offenders = []
    for path in files:
        if path == ROOT / "grading" / "assignment.py":
            continue
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if NBGRADER_METADATA.search(line) or MARKER.search(line):
                offenders.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert not offenders, "read these through grading/assignment.py:\n" + "\n".join(offenders)
    # Test files read cells through it too (they may still build odd metadata on purpose).
    for path in sorted((ROOT / "tests").glob("test_*.py")):
        assert not re.search(r"""\.get\(["']nbgrader["']""", path.read_text()), path
