"""Graders of assignment 06_moe: oracles agree with JAX, routings are skewed, bounds hold."""

import jax
import jax.numpy as jnp
import nbformat
import numpy as np
import pytest
from jax.sharding import AxisType
from jax.sharding import PartitionSpec as P

from grading.assignment import grade_id
from grading.graders import a06_moe as graders
from shardbook.checks import CheckFailed, expect_no_intermediate_larger_than
from shardbook.comms import analyze
from tests.notebooks import ROOT, answers


def test_oracles_agree_with_jax():
    # The float64 token-by-token oracles match JAX's gather-and-einsum on small integers (exact).
    rng = np.random.default_rng(1)
    e, s, d, f = graders.SIZES[0]
    w, a = graders.small_ints(rng, (e, d, f)), graders.small_ints(rng, (s, d))
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
    mesh = graders.make_mesh((graders.N,), ("X",))
    n, c, d = 8, 16, 32

    def exchange(x):
        return jax.shard_map(
            lambda blk: jax.lax.all_to_all(blk.reshape(n, c, d), "X", 0, 0, tiled=True).reshape(n * c, d),
            mesh=mesh,
            in_specs=P("X", None),
            out_specs=P("X", None),
        )(x)

    report = analyze(exchange, graders.struct((n * n * c, d), mesh, P("X", None)))
    assert graders.bytes_sent(report) == (n - 1) * c * d * 4


def test_bounds_are_below_gathering_the_experts():
    # At the sizes the bounds are read, gathering W alone would exceed the bound the exercise states.
    def gather_w(e, s, d, f):
        return (graders.N - 1) * e * d * f * 4 // graders.N

    assert graders.allgather_bound(*graders.STRUCTURE_SIZE) < gather_w(*graders.STRUCTURE_SIZE)
    assert graders.all_to_all_bound(*graders.SIZES[0]) < gather_w(*graders.SIZES[0])


def _moe_local_by_masking(w, a, b):
    """Out = sum over experts e of [B == e] * (A @ W[e]): builds an [E, S, F] array."""
    per_expert = jnp.einsum("sd,edf->esf", a, w)
    mask = (b[None, :] == jnp.arange(w.shape[0])[:, None]).astype(a.dtype)
    return jnp.einsum("es,esf->sf", mask, per_expert)


def test_masking_over_experts_passes_exactly_while_e_is_below_d():
    # Exercise 6.1's condition: masking makes an [E, S, F] array, under S·D·F elements iff E < D. The
    # graders measure at E < D (so masking passes, as the prompt says); at E ≥ D it would not.
    e, s, d, f = graders.LOCAL_STRUCTURE_SIZE
    assert e < d
    graders.check_moe_local(_moe_local_by_masking)
    big_e = [
        jax.ShapeDtypeStruct(shape, dt) for shape, dt in (((d, d, f), jnp.float32), ((s, d), jnp.float32))
    ]
    with pytest.raises(CheckFailed, match="or more elements on a device"):
        expect_no_intermediate_larger_than(
            jax.jit(_moe_local_by_masking), *big_e, jax.ShapeDtypeStruct((s,), jnp.int32), elements=s * d * f
        )


def test_prompt_and_self_check_measure_moe_local_where_the_graders_do():
    nb = nbformat.read(ROOT / "solutions" / "06_moe" / "06_moe.ipynb", as_version=4)
    cells = {grade_id(c): " ".join(c.source.split()) for c in nb.cells}
    e, s, d, f = graders.LOCAL_STRUCTURE_SIZE
    assert f"E, S, D, F = {e}, {s}, {d}, {f}" in cells["ex_moe_local"]
    assert "E < D" in cells["ex_moe_local"] and "E < F" not in cells["ex_moe_local"]
    visible = cells["test_moe_local_visible"]
    assert f"(({e}, {d}, {f}), jnp.float32)" in visible or f"ShapeDtypeStruct(({e}, {d}, {f})" in visible
    assert f"elements={s} * {d} * {f}" in visible


def _ragged_dot_with_garbage(real):
    """ragged_dot that fills the rows no group covers with 1e6 (its docs leave them unspecified)."""

    def ragged_dot(lhs, rhs, group_sizes, **kwargs):
        out = real(lhs, rhs, group_sizes, **kwargs)
        covered = jnp.arange(out.shape[0]) < jnp.sum(group_sizes)
        return jnp.where(covered[:, None], out, 1e6)

    return ragged_dot


def test_moe_allgather_solution_does_not_rely_on_zeros_in_uncovered_rows(monkeypatch):
    # Exercise 6.2's solution masks explicitly: it stays right whatever a backend writes in rows that
    # no group covers (XLA:CPU writes zeros); an unmasked version is caught by this test.
    solution = answers(ROOT / "solutions" / "06_moe" / "06_moe.ipynb").moe_allgather
    monkeypatch.setattr(jax.lax, "ragged_dot", _ragged_dot_with_garbage(jax.lax.ragged_dot))
    graders.check_moe_allgather(solution)

    def unmasked(w, a, b, mesh):
        def per_device(w_block, a_block, b_block):
            e_local = w_block.shape[0]
            a_all = jax.lax.all_gather(a_block, "X", tiled=True)
            b_all = jax.lax.all_gather(b_block, "X", tiled=True)
            local = b_all - jax.lax.axis_index("X") * e_local
            key = jnp.where((local >= 0) & (local < e_local), local, e_local)
            order = jnp.argsort(key)
            sizes = jnp.bincount(key, length=e_local + 1)[:e_local].astype(jnp.int32)
            part_sorted = jax.lax.ragged_dot(a_all[order], w_block, sizes)
            part = jnp.zeros_like(part_sorted).at[order].set(part_sorted)
            return jax.lax.psum_scatter(part, "X", scatter_dimension=0, tiled=True)

        specs = (P("X", None, None), P("X", None), P("X"))
        return jax.shard_map(per_device, mesh=mesh, in_specs=specs, out_specs=P("X", None))(w, a, b)

    with pytest.raises(CheckFailed, match="entries differ"):
        graders.check_moe_allgather(unmasked)
