"""The graders of assignment 02_auto_sharding: the solution passes, each typical mistake fails with a hint."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import AxisType, NamedSharding
from jax.sharding import PartitionSpec as P

from grading.graders import a02_auto_sharding as graders
from shardbook import analyze
from shardbook.checks import CheckFailed
from tests.notebooks import ROOT, answers

SOLUTION = answers(ROOT / "solutions" / "02_auto_sharding" / "02_auto_sharding.ipynb")


def test_block_means_oracle_agrees_with_jax():
    # The loop oracle equals the mean of each device's own shard, found through the array's shards.
    mesh = graders.make_mesh((2, 4), axis_type=AxisType.Auto, shuffle=3)
    host = np.random.default_rng(0).normal(size=(16, 8)).astype(np.float32)
    x = jax.device_put(host, NamedSharding(mesh, P("X", "Y")))
    by_device = {shard.device: float(np.asarray(shard.data).mean()) for shard in x.addressable_shards}
    from_shards = np.vectorize(lambda d: by_device[d])(mesh.devices)
    np.testing.assert_allclose(graders.oracle_block_means(host, 2, 4), from_shards, rtol=1e-5, atol=1e-6)


def test_block_shape_oracle_agrees_with_jax():
    # The naive per-device shape equals NamedSharding.shard_shape for every spec the hidden tests use.
    for mesh in graders.mesh_cases():
        for spec in graders.SPECS_2D:
            assert graders.oracle_block_shape((32, 64), dict(mesh.shape), spec) == NamedSharding(
                mesh, spec
            ).shard_shape((32, 64))
        for spec in graders.SPECS_3D:
            assert graders.oracle_block_shape((8, 16, 24), dict(mesh.shape), spec) == NamedSharding(
                mesh, spec
            ).shard_shape((8, 16, 24))


def test_mlp_oracle_agrees_with_jax():
    mesh = graders.make_mesh((4, 2), axis_type=AxisType.Auto)
    hosts, placed = graders.mlp_inputs(mesh, 8, 256, 1024, seed=0)
    got = jax.jit(lambda x, w_in, w_out: jax.nn.relu(x @ w_in) @ w_out)(*placed)
    np.testing.assert_allclose(np.asarray(got), graders.oracle_mlp(*hosts), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("sizes", graders.MESH_LAYOUTS)
def test_mlp_budget_is_what_the_solution_sends_and_the_plain_program_exceeds_it(sizes):
    # The budget formula is exactly the solution's traffic; where 'Y' splits anything, the unconstrained
    # program (which moves a weight) sends more, so the exercise is not passed by doing nothing.
    mesh = graders.make_mesh(sizes, axis_type=AxisType.Auto)
    for batch, d_model, d_ff in graders.MLP_SHAPES:
        _, placed = graders.mlp_inputs(mesh, batch, d_model, d_ff, seed=0)
        budget = graders.mlp_byte_budget(batch, d_model, d_ff, *sizes)
        solved = analyze(graders.jit_mlp(SOLUTION.constrained_mlp, mesh), *placed)
        plain = analyze(
            graders.jit_mlp(lambda x, w_in, w_out, mesh: jax.nn.relu(x @ w_in) @ w_out, mesh), *placed
        )
        assert solved.total_bytes == budget
        assert plain.total_bytes > budget if sizes[1] > 1 else plain.total_bytes == 0


def test_plain_matmul_all_reduces_twice_the_bytes_of_the_solution():
    # Why exercise 2.2 matters: without an output sharding the same matmul sends twice as much.
    mesh = graders.make_mesh((4, 2), axis_type=AxisType.Auto)
    a = jax.device_put(jnp.ones((16, 32)), NamedSharding(mesh, P("X", "Y")))
    w = jax.device_put(jnp.ones((32, 64)), NamedSharding(mesh, P("Y", None)))
    plain = analyze(jnp.matmul, a, w)
    solved = analyze(lambda a, w: SOLUTION.reduce_scatter_matmul(a, w, mesh), a, w)
    assert [c.kind for c in plain.collectives] == ["all-reduce"]
    assert [c.kind for c in solved.collectives] == ["reduce-scatter"]
    assert plain.total_bytes == 2 * solved.total_bytes


def test_shard_map_is_refused():
    # The contract of 2.1 is jax.jit alone: a shard_map answer with the right values still fails.
    def with_shard_map(x, mesh):
        body = lambda x_block: jnp.mean(x_block).reshape(1, 1)
        return jax.shard_map(body, mesh=mesh, in_specs=P("X", "Y"), out_specs=P("X", "Y"))(x)

    with pytest.raises(CheckFailed, match="shard_map"):
        graders.check_block_means_jit(with_shard_map)


def test_shuffled_mesh_really_changes_device_order():
    mesh = graders.mesh_cases()[-1]
    assert [d.id for d in mesh.devices.flat] != list(range(8))
