"""The graders of assignment 01_meshes: the solution passes, each typical mistake fails with its hint."""

import json

import jax
import numpy as np
import pytest
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from grading.graders import a01_meshes as graders
from shardbook.checks import CheckFailed
from tests.notebooks import ROOT, answers

SOLUTION = answers(ROOT / "solutions" / "01_meshes" / "01_meshes.ipynb")
SUBMISSIONS = ROOT / "tests" / "submissions" / "01_meshes"
EXPECTED = json.loads((SUBMISSIONS / "expected.json").read_text())
FUNCTIONS = ["per_device_shape", "devices_holding", "sharding_for_layout", "shard_sums"]


@pytest.mark.parametrize("name", FUNCTIONS)
def test_solution_passes_every_grader(name):
    # The reference answer scores full marks on every hidden case.
    getattr(graders, f"check_{name}")(getattr(SOLUTION, name))


@pytest.mark.parametrize("name", [n for n in EXPECTED if n.startswith("wrong_")])
def test_wrong_submission_fails_exactly_the_intended_graders(name):
    # Each committed wrong answer fails the hidden grader of the function it gets wrong, and only that.
    learner = answers(SUBMISSIONS / f"{name}.ipynb")
    lost = {
        gid.removeprefix("test_").removesuffix("_hidden") for gid in EXPECTED[name]["lost"] if "hidden" in gid
    }
    for fn in FUNCTIONS:
        check = getattr(graders, f"check_{fn}")
        if fn in lost:
            with pytest.raises(CheckFailed) as failure:
                check(getattr(learner, fn))
            message = str(failure.value)
            assert "expected" in message and "got" in message and "Hint:" in message, message
        else:
            check(getattr(learner, fn))


def test_per_device_shape_oracle_agrees_with_jax():
    # The naive oracle and JAX's own shard_shape agree on every hidden case that divides evenly.
    for shape, axes, spec in graders.per_device_shape_cases():
        expected = graders.oracle_per_device_shape(shape, axes, spec)
        mesh = graders.make_mesh(tuple(axes.values()), tuple(axes))
        sharding = NamedSharding(mesh, P(*spec))
        if expected == "ValueError":
            with pytest.raises(ValueError):  # JAX's IndivisibleError is a ValueError
                jax.device_put(np.zeros(shape), sharding)
        else:
            assert sharding.shard_shape(shape) == expected


def test_all_specs_enumerates_each_axis_once_with_orders():
    # On a 2-axis mesh a 2-D array has 11 specs: 1 + 2·2 (one axis) + 2·2 (both on one dim, 2 orders) + 2.
    specs = graders.all_specs(2, ("X", "Y"))
    assert len(specs) == len(set(specs)) == 11
    assert (("X", "Y"), None) in specs and (("Y", "X"), None) in specs and ("X", "Y") in specs


def test_shuffled_mesh_really_changes_device_order():
    # The hidden tests' shuffled meshes must not be in id order, or they would test nothing.
    mesh = graders.make_mesh((4, 2), ("X", "Y"), shuffle=101)
    assert [d.id for d in mesh.devices.flat] != list(range(8))


def test_grader_reports_a_crash_in_words():
    # A learner function that raises gets one sentence naming the call and the error.
    def broken(*args):
        raise KeyError("Z")

    with pytest.raises(CheckFailed, match=r"per_device_shape\(.*\) raised KeyError"):
        graders.check_per_device_shape(broken)


def test_grader_says_not_attempted():
    def stub(*args):
        raise NotImplementedError("Exercise not attempted yet")

    with pytest.raises(CheckFailed, match="not written yet"):
        graders.check_shard_sums(stub)
