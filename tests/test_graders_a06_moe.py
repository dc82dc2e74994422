"""Graders of assignment 06_moe: oracles agree with JAX, routings are skewed, bounds hold."""

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import AxisType
from jax.sharding import PartitionSpec as P

from grading.graders import a06_moe as graders
from shardbook.comms import analyze


def test_oracles_agree_with_jax():
    # The float64 token-by-token oracles match JAX's gather-and-einsum on small integers (exact).
    rng = np.random.default_rng(1)
    e, s, d, f = graders.SIZES[0]
    w, a = graders._ints(rng, (e, d, f)), graders._ints(rng, (s, d))
    b = graders.routing("uniform", rng, s, e)
    np.testing.assert_array_equal(graders.oracle_moe(w, a, b), np.asarray(jnp.einsum("sd,sdf->sf", a, w[b])))
    bk = graders.routing_topk("skewed", rng, s, e, 3)
    expected = np.mean([np.asarray(jnp.einsum("sd,sdf->sf", a, w[bk[:, j]])) for j in range(3)], axis=0)
    np.testing.assert_allclose(graders.oracle_topk(w, a, bk), expected, rtol=1e-6)


def test_routings_include_one_expert_and_empty_experts():
    # Skewed cases exist: one expert gets every token, and half the experts get none.
    rng = np.random.default_rng(2)
    e, s = 16, 128
    assert set(graders.routing("all_to_first", rng, s, e)) == {0}
    assert set(graders.routing("all_to_last", rng, s, e)) == {e - 1}
    assert len(set(graders.routing("even_only", rng, s, e))) <= e // 2
    assert np.mean(graders.routing("skewed", rng, s, e) == 1) > 0.6
    assert all(size[0] % 8 == 0 and size[3] > size[0] for size in graders.SIZES)


def test_value_meshes_cover_both_axis_types_and_a_shuffle():
    meshes = graders.value_meshes()
    assert {m.axis_types[0] for m in meshes} == {AxisType.Explicit, AxisType.Auto}
    assert all(m.axis_names == ("X",) and m.devices.size == 8 for m in meshes)
    assert any([d.id for d in m.devices.flat] != sorted(d.id for d in m.devices.flat) for m in meshes)


def test_bytes_sent_counts_every_all_to_all_block():
    # A tiled all_to_all of an [n, C, D] f32 buffer sends (n - 1)·C·D·4 bytes per device.
    mesh = graders.make_mesh()
    n, c, d = 8, 16, 32

    def exchange(x):
        return jax.shard_map(
            lambda blk: jax.lax.all_to_all(blk.reshape(n, c, d), "X", 0, 0, tiled=True).reshape(n * c, d),
            mesh=mesh,
            in_specs=P("X", None),
            out_specs=P("X", None),
        )(x)

    report = analyze(exchange, graders._struct((n * n * c, d), mesh, P("X", None)))
    assert graders.bytes_sent(report) == (n - 1) * c * d * 4


def test_bounds_are_below_gathering_the_experts():
    # At the sizes the bounds are read, gathering W alone would exceed the bound the exercise states.
    def gather_w(e, s, d, f):
        return (graders.N - 1) * e * d * f * 4 // graders.N

    assert graders.allgather_bound(*graders.STRUCTURE_SIZE) < gather_w(*graders.STRUCTURE_SIZE)
    assert graders.all_to_all_bound(*graders.SIZES[0]) < gather_w(*graders.SIZES[0])
