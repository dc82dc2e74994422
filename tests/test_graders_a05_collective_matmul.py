"""Graders of assignment 05_collective_matmul: the solution passes, each typical mistake fails with a hint."""

import jax
import numpy as np
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from grading.graders import a05_collective_matmul as graders


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
