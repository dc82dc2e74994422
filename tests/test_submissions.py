"""Every committed wrong answer, graded in-process (tests/submissions): exactly the intended test cells
lose their points, each with the grader's sentence (expected, got, hint), and their output says the
intended thing; every reference solution runs without an error and scores full marks (so passes every
grader and self-check), each hidden test well inside the cell time limit. (tests/test_grading.py
shows, on assignment 1, that this in-process grading and `make grade` agree.)

Also the answer-only file format, the notebooks built from it, and the converter from wrong_*.ipynb.
"""

import json
import shutil

import nbformat
import pytest

from grading import worker
from grading.assignment import grade_id, metadata
from tests import submissions
from tests.conftest import GRADED_ASSIGNMENT, IN_PROCESS_ASSIGNMENTS, LLVM_LEVEL_FLAG
from tests.submissions import SubmissionError

ASSIGNMENTS = IN_PROCESS_ASSIGNMENTS
# A hidden test must leave room under the cell time limit of `make grade` (the default, 120 s) on a
# busy 2-core grading machine: in-process, without a kernel to start, it takes well under a tenth of
# it in CPU time (the slowest cell takes about 7 s). CPU time, not wall time: a loaded CI machine
# stretched a 4 s cell to 16.5 s of wall time, with no change to the cell.
SLOWEST_TEST_CELL = 12.0


def _stacks(got: dict, cells) -> str:
    """Where the worker processes of these test cells were when their check stopped them, if it did: a
    chance hang in CI then says where it hung."""
    found = {gid: text for gid, text in got["diagnostics"].items() if gid in cells}
    return "".join(f"\n{gid}'s workers when stopped:\n{text}" for gid, text in found.items())


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_each_wrong_answer_loses_exactly_the_intended_points_and_says_why(assignment, graded_in_process):
    results = graded_in_process(assignment)
    cells = dict(worker.graded_cells(assignment))
    subs = submissions.answer_only(assignment)
    assert set(results) == {"reference_solution", *subs}
    problems = []
    for name, sub in subs.items():
        got = results[name]
        lost = sub.lost(list(cells))
        want = {gid: 0.0 if gid in lost else points for gid, points in cells.items()}
        if got["scores"] != want:
            wrong = {g: (want[g], got["scores"].get(g)) for g in want if got["scores"].get(g) != want[g]}
            problems.append(
                f"{name}: (expected, got) per test cell {wrong}; outputs {got['output']}"
                + _stacks(got, wrong)
            )
        printed = "\n".join(got["output"].values())
        for text in sub.expected.get("feedback", []):
            if text not in printed:
                problems.append(f"{name}: its test cells never say {text!r}; they said:\n{printed}")
        # A mistake is told in words, by the self-check as by the hidden test: the grader's one sentence
        # (expected, got, a hint), or JAX's error translated into a sentence and a hint, never a bare
        # traceback; and every mistake costs hidden points.
        for gid in sorted(lost):
            said = got["output"][gid]
            graded = "CheckFailed: " not in said or ("expected" in said and "got" in said)
            if not (graded and "Hint:" in said and "Traceback" not in said):
                problems.append(
                    f"{name}: {gid} fails without the grader's sentence; it said:\n{said[-1500:]}"
                )
        if name.startswith("wrong_") and not any(gid.endswith("_hidden") for gid in lost):
            problems.append(f"{name} loses no hidden test: a mistake the hidden tests miss is untested")
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_reference_solution_scores_full_marks_in_time(assignment, graded_in_process):
    # Every cell of the exercise with the solution's answers runs without an error (what `notebooks run`
    # proved by executing solutions/ with papermill), and every test cell scores its points.
    got = graded_in_process(assignment)["reference_solution"]
    cells = dict(worker.graded_cells(assignment))
    assert not got["errors"], got["errors"]
    assert got["scores"] == cells, f"{got['output']}{_stacks(got, cells)}"
    slow = {g: (s, got["seconds"][g]) for g, s in got["cpu_seconds"].items() if s > SLOWEST_TEST_CELL}
    assert not slow, f"test cells over {SLOWEST_TEST_CELL} s of CPU in-process (CPU s, wall s): {slow}"


def test_llvm_at_o0_leaves_the_program_and_its_memory_as_they_are(llvm_at_its_default_level):
    # The in-process grading compiles with LLVM at -O0 (conftest.in_process_env). What a grader reads
    # of a compiled program is decided before LLVM runs: a sharded, scanned, rematerialised gradient
    # step, whose collectives the analyzer reads, compiles to the same text and the same memory.
    import jax
    import jax.numpy as jnp
    from jax.sharding import AxisType, NamedSharding
    from jax.sharding import PartitionSpec as P

    from shardbook import comms, hlo

    flag, value = LLVM_LEVEL_FLAG.removeprefix("--").split("=")
    mesh = jax.make_mesh((4, 2), ("data", "model"), axis_types=(AxisType.Explicit,) * 2)

    def loss(ws, x):
        h, _ = jax.lax.scan(jax.checkpoint(lambda h, w: (jax.nn.relu(h @ w), None)), x, ws)
        return (h**2).sum()

    step = jax.jit(jax.value_and_grad(loss))
    ws = jax.ShapeDtypeStruct((4, 256, 256), jnp.float32, sharding=NamedSharding(mesh, P(None, "data")))
    x = jax.ShapeDtypeStruct((64, 256), jnp.float32, sharding=NamedSharding(mesh, P("data")))
    lowered = step.lower(ws, x)
    default, at_o0 = lowered.compile(), lowered.compile(compiler_options={flag: int(value)})
    assert comms.analyze_text(default.as_text()).collectives, "a program with collectives"
    assert hlo.without_debug_info(at_o0.as_text()) == hlo.without_debug_info(default.as_text())
    fields = ("argument_size_in_bytes", "output_size_in_bytes", "alias_size_in_bytes", "temp_size_in_bytes")
    memory = [tuple(getattr(c.memory_analysis(), f) for f in fields) for c in (default, at_o0)]
    assert memory[0] == memory[1]


# ---------------------------------------------------------------------------------------------------
# The answer-only format (no JAX needed)

ANSWERS = ["per_device_shape", "devices_holding"]


def _write(tmp_path, text):
    path = tmp_path / "wrong_x.py"
    path.write_text(text)
    return path


def test_parse_answers_splits_the_file_at_each_answer_function(tmp_path):
    path = _write(
        tmp_path,
        '"""The mistake."""\n\nEXPECTED = {"lost": ["test_a"], "feedback": ["hint"]}\n\n\n'
        "def per_device_shape(x):\n    return _helper(x)\n\n\ndef _helper(x):\n    return x\n\n\n"
        "@decorated\ndef devices_holding(y):\n    return y\n",
    )
    doc, expected, answers = submissions.parse_answers(path, ANSWERS)
    assert doc == "The mistake."
    assert expected == {"lost": ["test_a"], "feedback": ["hint"]}
    # a private helper belongs to the answer above it; a decorator to the answer below it
    assert answers == {
        "per_device_shape": (
            "def per_device_shape(x):\n    return _helper(x)\n\n\ndef _helper(x):\n    return x\n"
        ),
        "devices_holding": "@decorated\ndef devices_holding(y):\n    return y\n",
    }


@pytest.mark.parametrize(
    "text, message",
    [
        ('EXPECTED = {"lost": []}\ndef per_device_shape(): pass\n', "no docstring"),
        ('"""d"""\ndef per_device_shape(): pass\n', "needs EXPECTED"),
        ('"""d"""\nEXPECTED = {"lost": []}\nimport os\ndef per_device_shape(): pass\n', "found 'Import'"),
        ('"""d"""\nEXPECTED = {"lost": []}\ndef helper(): pass\n', "found 'helper'"),
        ('"""d"""\nEXPECTED = {"lost": []}\n', "defines none of the answers"),
        ('"""d"""\nEXPECTED = dict(lost=[])\ndef per_device_shape(): pass\n', "literal dict"),
        ('"""d"""\nEXPECTED = {"lost": []}\n' + "def per_device_shape(): pass\n" * 2, "twice"),
        ('"""d"""\nEXPECTED = {"lost": [\n', "not valid Python"),
    ],
)
def test_parse_answers_says_what_is_wrong_with_a_file(tmp_path, text, message):
    with pytest.raises(SubmissionError, match=message):
        submissions.parse_answers(_write(tmp_path, text), ANSWERS)


def _course(tmp_path, assignment="01_meshes"):
    """A scratch root with one assignment's solution and exercise, and an empty submissions folder."""
    for part in ("solutions", "exercises"):
        shutil.copytree(submissions.ROOT / part / assignment, tmp_path / part / assignment)
    (tmp_path / "tests" / "submissions" / assignment).mkdir(parents=True)
    return tmp_path / "tests" / "submissions" / assignment


def test_built_notebook_replaces_only_the_named_answers_and_downloads_like_colab(tmp_path):
    folder = _course(tmp_path)
    (folder / "wrong_x.py").write_text(
        '"""d"""\nEXPECTED = {"lost": []}\n\n\ndef per_device_shape(shape, mesh, spec):\n    return None\n'
    )
    sub = submissions.load("01_meshes", tmp_path)["wrong_x"]
    nb = submissions.notebook(sub, "01_meshes", tmp_path)
    solved = submissions.notebook(None, "01_meshes", tmp_path)
    pairs = zip(nb.cells, solved.cells, strict=True)
    changed = [grade_id(c) for c, s in pairs if c.source != s.source]
    assert changed == ["per_device_shape"]
    colab = json.loads(submissions.colab_bytes(sub, "01_meshes", tmp_path))
    assert colab["nbformat_minor"] == 0 and "colab" in colab["metadata"]
    assert not any(metadata(c) for c in colab["cells"])
    assert "    return None" in "".join(c["source"] for c in colab["cells"])


def test_load_refuses_a_submission_described_twice_or_not_at_all(tmp_path):
    folder = _course(tmp_path)
    (folder / "wrong_x.py").write_text('"""d"""\nEXPECTED = {"lost": []}\ndef per_device_shape(): pass\n')
    (folder / "expected.json").write_text(json.dumps({"wrong_x": {"lost": []}}))
    with pytest.raises(SubmissionError, match="described twice"):
        submissions.load("01_meshes", tmp_path)
    (folder / "expected.json").write_text(json.dumps({"broken_y": {"lost": []}}))
    with pytest.raises(SubmissionError, match="entries for missing files"):
        submissions.load("01_meshes", tmp_path)
    (folder / "expected.json").write_text("{}")
    nbformat.write(nbformat.v4.new_notebook(), folder / "broken_y.ipynb")
    with pytest.raises(SubmissionError, match="no entry in expected.json"):
        submissions.load("01_meshes", tmp_path)


WRONG = "def per_device_shape(shape, mesh, spec):\n    return shape\n"


def test_convert_keeps_the_mistake_drops_stale_copies_and_reads_back(tmp_path):
    folder = _course(tmp_path)
    nb = submissions.notebook(None, "01_meshes", tmp_path)
    for cell in nb.cells:
        gid = grade_id(cell)
        if gid == "per_device_shape":  # the intended mistake, wrapped in nbgrader's markers
            cell.source = f"### BEGIN SOLUTION\n{WRONG}### END SOLUTION\n"
        if gid == "devices_holding":  # an older, still correct, spelling of the solution
            cell.source += "\n# an old comment\n"
    nbformat.write(nb, folder / "wrong_shapes.ipynb")
    # a Colab download (no metadata): answers are found by the function each cell defines
    colab = submissions.colab_bytes(None, "01_meshes", tmp_path).decode()
    colab = colab.replace("def shard_sums(", "def shard_sums(*_):\\n    return 0\\n\\n\\ndef _unused(")
    (folder / "ok_colab.ipynb").write_text(colab)
    expected = {
        "_about": "kept",
        "wrong_shapes": {"lost": ["test_per_device_shape_visible", "test_per_device_shape_hidden"]},
        "ok_colab": {"lost": [], "feedback": ["x"]},
        "broken_z": {"lost": "all"},
    }
    (folder / "expected.json").write_text(json.dumps(expected))
    nbformat.write(nbformat.v4.new_notebook(), folder / "broken_z.ipynb")
    said = submissions.convert("01_meshes", tmp_path)
    assert said == [
        "ok_colab.ipynb -> ok_colab.py: kept ['shard_sums']",
        "wrong_shapes.ipynb -> wrong_shapes.py: kept ['per_device_shape'], dropped ['devices_holding']",
    ]
    assert sorted(p.name for p in folder.iterdir()) == [
        "broken_z.ipynb",
        "expected.json",
        "ok_colab.py",
        "wrong_shapes.py",
    ]
    assert set(json.loads((folder / "expected.json").read_text())) == {"_about", "broken_z"}
    subs = submissions.load("01_meshes", tmp_path)
    assert subs["wrong_shapes"].answers == {"per_device_shape": WRONG}
    assert subs["wrong_shapes"].expected == expected["wrong_shapes"]
    assert subs["ok_colab"].expected == {"lost": [], "feedback": ["x"]}
    assert "def _unused(" in subs["ok_colab"].answers["shard_sums"]


def test_convert_refuses_a_notebook_without_expectation_or_difference(tmp_path):
    folder = _course(tmp_path)
    nbformat.write(submissions.notebook(None, "01_meshes", tmp_path), folder / "wrong_same.ipynb")
    with pytest.raises(SubmissionError, match="no entry"):
        submissions.convert("01_meshes", tmp_path)
    # A second, good notebook is not converted either: all or nothing.
    good = submissions.notebook(None, "01_meshes", tmp_path)
    answer = next(c for c in good.cells if grade_id(c) == "shard_sums")
    answer.source += "\n# changed\n"
    nbformat.write(good, folder / "wrong_good.ipynb")
    described = {"wrong_same": {"lost": []}, "wrong_good": {"lost": []}}
    (folder / "expected.json").write_text(json.dumps(described))
    with pytest.raises(SubmissionError, match="no answer cell differs"):
        submissions.convert("01_meshes", tmp_path)
    left = sorted(p.name for p in folder.iterdir())
    assert left == ["expected.json", "wrong_good.ipynb", "wrong_same.ipynb"]


def test_in_process_grading_scores_a_raising_test_cell_zero_and_keeps_going(tmp_path):
    # The harness itself, without JAX: a tiny assignment whose second test raises.
    sol = tmp_path / "solutions" / "00_tiny"
    sol.mkdir(parents=True)
    nb = nbformat.v4.new_notebook()

    def cell(source, **meta):
        c = nbformat.v4.new_code_cell(source)
        c.metadata["nbgrader"] = meta
        return c

    nb.cells = [
        cell("import math", grade_id="imports", locked=True),
        cell("def f():\n    return 1\n", grade_id="f", solution=True),
        cell("print('one'); assert f() == 1", grade_id="test_f_visible", grade=True, points=1),
        cell("raise ValueError('expected 2, got 1')", grade_id="test_f_hidden", grade=True, points=2),
        cell("x = math.pi", grade_id="test_g_visible", grade=True, points=3),
        nbformat.v4.new_code_cell("1 / 0  # a plain cell that raises"),
    ]
    nbformat.write(nb, sol / "00_tiny.ipynb")
    submitted = nbformat.from_dict(json.loads(json.dumps(nb)))
    submitted.cells[2].source = "pass  # a learner who edited the test: the instructor's source runs"
    import shardbook.checks

    before = shardbook.checks
    result = submissions.grade_in_process(submitted, "00_tiny", tmp_path)
    import shardbook.checks as after  # this process keeps its own modules (the prologue dropped them)

    assert after is before
    assert result["scores"] == {"test_f_visible": 1.0, "test_f_hidden": 0.0, "test_g_visible": 3.0}
    assert result["output"]["test_f_visible"] == "one\n"
    assert result["output"]["test_f_hidden"] == "ValueError: expected 2, got 1"
    assert result["errors"] == {"cell 5 (no grade_id)": "ZeroDivisionError: division by zero"}
    only = submissions.grade_in_process(submitted, "00_tiny", tmp_path, only={"test_g_visible"})
    assert only["scores"] == {"test_g_visible": 3.0}


def test_affected_tests_follow_names_from_the_replaced_answers(tmp_path):
    # An answer-only file changes a test cell's outcome only through a name it defines: the test cells
    # of a replaced answer run, and those of an unchanged answer that calls it; the rest do not.
    folder = _course(tmp_path)
    (folder / "wrong_x.py").write_text(
        '"""d"""\nEXPECTED = {"lost": []}\n\n\ndef shard_sums(x):\n    return _mine(x)\n\n\n'
        "def _mine(x):\n    return x\n"
    )
    sub = submissions.load("01_meshes", tmp_path)["wrong_x"]
    assert submissions.affected_tests(sub, "01_meshes", tmp_path) == {
        "test_shard_sums_visible",
        "test_shard_sums_hidden",
    }
    solution = tmp_path / "solutions" / "01_meshes" / "01_meshes.ipynb"
    nb = nbformat.read(solution, as_version=4)
    cell = next(c for c in nb.cells if grade_id(c) == "per_device_shape")
    calls = "    _mine  # calls the replaced helper\n### END SOLUTION"
    cell.source = cell.source.replace("### END SOLUTION", calls)
    nbformat.write(nb, solution)
    assert submissions.affected_tests(sub, "01_meshes", tmp_path) == {
        "test_shard_sums_visible",
        "test_shard_sums_hidden",
        "test_per_device_shape_visible",
        "test_per_device_shape_hidden",
    }


def test_whole_notebook_submissions_only_where_a_make_grade_batch_grades_them():
    # This module grades answer-only files; whole notebooks are graded only by assignment 1's batch
    # (tests/test_grading.py). A notebook elsewhere would be checked by nothing.
    for assignment in submissions.assignments_with_submissions():
        subs = submissions.load(assignment)  # also: every file readable, each described exactly once
        notebooks = sorted(n for n, s in subs.items() if not s.answer_only)
        if assignment != GRADED_ASSIGNMENT:
            assert not notebooks, (
                f"tests/submissions/{assignment}: {notebooks} would be graded by no test; write them as "
                f"answer-only .py (python -m tests.submissions convert {assignment}), or put notebook-level "
                f"damage in {GRADED_ASSIGNMENT}"
            )
        assert any(s.answer_only for s in subs.values()), f"{assignment}: no wrong answer at all"


@pytest.mark.parametrize("assignment", submissions.assignments_with_submissions())
def test_feedback_pages_would_hide_every_hidden_test_line(assignment):
    # What `make grade` shows a learner of each assignment's test cells: the autograded cell (the
    # hardening prologue, the instructor's source) and a traceback quoting it, after this course's
    # feedback preprocessor. tests/test_grading.py checks real feedback pages of assignment 1.
    from grading.preprocessors import HideHiddenTests

    hidden = submissions.hidden_test_lines(assignment)
    assert hidden, f"{assignment} has no hidden tests"
    tests = submissions.graded_test_cells(assignment)
    hider = HideHiddenTests()
    shown = []
    for gid, source in submissions.cells_to_run(submissions.notebook(None, assignment), assignment):
        if gid not in tests:
            continue
        cell = nbformat.v4.new_code_cell(source)
        cell.metadata["nbgrader"] = {"grade": True, "grade_id": gid, "points": tests[gid][0]}
        traceback = [f"  File <cell>, line {k}\n    {line}" for k, line in enumerate(source.splitlines())]
        error = nbformat.v4.new_output("error", ename="CheckFailed", evalue="hint", traceback=traceback)
        cell.outputs = [error]
        cell, _ = hider.preprocess_cell(cell, {}, 0)
        shown.append(cell.source + json.dumps(cell.outputs))
    text = "\n".join(shown)
    assert "grading.tamper" not in text  # the prologue is gone too
    leaked = sorted(line for line in hidden if line in text)
    assert not leaked, leaked
