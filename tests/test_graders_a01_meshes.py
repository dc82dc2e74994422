"""The graders of assignment 01_meshes: the solution passes, each typical mistake fails with its hint."""

import jax
import numpy as np
import pytest
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from grading.graders import a01_meshes as graders


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


def _brute_force_layout(mesh, shape, layout, raise_on_size_one=False):
    """A sharding_for_layout that tries every spec; optionally raises on a mesh with a size-1 axis."""
    if raise_on_size_one and 1 in mesh.devices.shape:
        raise IndexError("no second position along the axis")
    for spec in graders.all_specs(len(shape), tuple(mesh.axis_names)):
        sharding = NamedSharding(mesh, P(*spec))
        got = graders.oracle_layout(sharding, shape)
        if {d: tuple(slice(lo, hi) for lo, hi in box) for d, box in got.items()} == layout:
            return sharding
    raise AssertionError("no spec gives this layout")


def test_an_answer_raising_on_a_size_one_axis_hears_the_same_hint_as_the_self_check():
    graders.check_sharding_for_layout(_brute_force_layout)  # the brute force itself is right
    with pytest.raises(graders.CheckFailed, match=f"Hint: {graders.SIZE_ONE_HINT}"):
        graders.check_sharding_for_layout(lambda *a: _brute_force_layout(*a, raise_on_size_one=True))
