"""Graders of assignment 05_collective_matmul: the solution passes, each typical mistake fails with a hint."""

import json

import jax
import nbformat
import numpy as np
import pytest
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from grading.graders import a05_collective_matmul as graders
from shardbook.checks import CheckFailed
from tests.notebooks import ROOT, answers, nbgrader_meta

SOLUTION_PATH = ROOT / "solutions" / "05_collective_matmul" / "05_collective_matmul.ipynb"
SOLUTION = answers(SOLUTION_PATH)
SUBMISSIONS = ROOT / "tests" / "submissions" / "05_collective_matmul"
EXPECTED = json.loads((SUBMISSIONS / "expected.json").read_text())
FUNCTIONS = [
    "matmul_allgather",
    "matmul_allreduce",
    "matmul_reducescatter",
    "matmul_allgather_bidir",
    "matmul_reducescatter_bidir",
    "transformer_mlp",
]


def _answer_sources(path):
    """grade_id -> source of each answer cell, without nbgrader's markers."""
    nb = nbformat.read(path, as_version=4)
    out = {}
    for cell in nb.cells:
        meta = nbgrader_meta(cell)
        if meta.get("solution"):
            lines = [
                line for line in cell.source.splitlines() if "### BEGIN" not in line and "### END" not in line
            ]
            out[meta["grade_id"]] = "\n".join(lines).strip()
    return out


@pytest.mark.parametrize("name", FUNCTIONS)
def test_solution_passes_every_grader(name):
    # The reference answer scores full marks on every hidden case.
    getattr(graders, f"check_{name}")(getattr(SOLUTION, name))


@pytest.mark.parametrize("name", [n for n in EXPECTED if n.startswith("wrong_")])
def test_wrong_submission_fails_exactly_the_intended_graders(name):
    # Each committed wrong answer fails the hidden grader of the function it gets wrong, and only that.
    # Answers identical to the solution's are covered by the test above and not graded again (time).
    learner = answers(SUBMISSIONS / f"{name}.ipynb")
    theirs, ours = _answer_sources(SUBMISSIONS / f"{name}.ipynb"), _answer_sources(SOLUTION_PATH)
    lost = {
        gid.removeprefix("test_").removesuffix("_hidden") for gid in EXPECTED[name]["lost"] if "hidden" in gid
    }
    assert lost, name
    for fn in FUNCTIONS:
        check = getattr(graders, f"check_{fn}")
        if fn in lost:
            with pytest.raises(CheckFailed) as failure:
                check(getattr(learner, fn))
            message = str(failure.value)
            assert "expected" in message and "got" in message and "Hint:" in message, message
        elif theirs[fn] != ours[fn]:
            check(getattr(learner, fn))


def test_oracle_agrees_with_jax():
    # The float64 NumPy oracle and JAX's own sharded product agree on a value case.
    mesh = graders.make_mesh((2, 4))
    rng = np.random.default_rng(1)
    a, w = graders._ints(rng, (16, 32)), graders._ints(rng, (32, 64))
    got = jax.jit(lambda a, w: a @ w, out_shardings=NamedSharding(mesh, P("X", "Y")))(
        graders._put(a, mesh, P("X", None)), graders._put(w, mesh, P(None, "Y"))
    )
    np.testing.assert_array_equal(np.asarray(got), graders.oracle_matmul(a, w))


def test_value_meshes_cover_layouts_axis_types_and_a_shuffle():
    # The hidden tests see every layout, both axis types, and devices out of id order.
    meshes = graders.value_meshes()
    assert {tuple(m.devices.shape) for m in meshes} == set(graders.MESH_LAYOUTS)
    assert {m.axis_types[0] for m in meshes} == {jax.sharding.AxisType.Explicit, jax.sharding.AxisType.Auto}
    assert any([d.id for d in m.devices.flat] != sorted(d.id for d in m.devices.flat) for m in meshes)


def test_permute_directions_reads_shifts_along_y():
    # A left shift on a 4-long 'Y' axis reads as shift 3 (= -1), whatever the 'X' coordinate.
    mesh = graders.make_mesh((2, 4))
    args = graders._ag_structs(mesh, {"B": 16, "D": 32, "F": 64})
    report = graders.analyze(jax.jit(lambda a, w: graders.reference_ring_allgather(a, w, mesh)), *args)
    assert graders._permute_directions(report, {"X": 2, "Y": 4}) == {3}


def test_grader_reports_a_crash_in_words():
    # A learner function that raises gets one sentence naming the call and the error.
    def broken(*args):
        raise KeyError("Z")

    with pytest.raises(CheckFailed, match=r"matmul_allgather\(.*\) raised KeyError"):
        graders.check_matmul_allgather(broken)


def test_grader_says_not_attempted():
    def stub(*args):
        raise NotImplementedError("Exercise not attempted yet")

    with pytest.raises(CheckFailed, match="not written yet"):
        graders.check_transformer_mlp(stub)
