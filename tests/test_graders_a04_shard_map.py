"""The graders of assignment 04_shard_map: each typical mistake fails with its hint, oracles and byte
budgets agree with the solution. That the solution passes every grader is tests/test_submissions.py's."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import AxisType
from jax.sharding import PartitionSpec as P

from grading.graders import a04_shard_map as graders
from shardbook import analyze
from shardbook.checks import CheckFailed
from tests.notebooks import ROOT, answers

SOLUTION = answers(ROOT / "solutions" / "04_shard_map" / "04_shard_map.ipynb")


def test_cases_cover_every_layout_and_axis_type():
    # The hidden tests use all four 8-device layouts, each with Auto and with Explicit axes.
    seen = {(sizes, mesh.axis_types[0]) for mesh, sizes, _ in graders.cases(0)}
    assert {s for s, _ in seen} == set(graders.MESH_LAYOUTS)
    assert {t for _, t in seen} == {jax.sharding.AxisType.Auto, jax.sharding.AxisType.Explicit}
    assert len(seen) == 2 * len(graders.MESH_LAYOUTS)


def test_block_oracles_agree_with_jax():
    # The naive per-block oracles agree with a shard_map computation on a 2 x 4 mesh.
    mesh = graders.make_mesh((2, 4))
    host = np.random.default_rng(0).normal(size=(8, 12)).astype(np.float32)
    x = graders.place(host, mesh, P("X", "Y"))
    means = jax.shard_map(
        lambda b: jnp.mean(b, keepdims=True), mesh=mesh, in_specs=P("X", "Y"), out_specs=P("X", "Y")
    )
    np.testing.assert_allclose(means(x), graders.oracle_block_means(host, 2, 4), rtol=1e-5, atol=1e-6)
    rolled = jax.shard_map(
        lambda b: jnp.roll(b, -3, axis=0) - b, mesh=mesh, in_specs=P("X", "Y"), out_specs=P("X", "Y")
    )
    np.testing.assert_allclose(rolled(x), graders.oracle_roll_within_shards(host, -3, 2, 4), atol=1e-6)
    np.testing.assert_allclose(
        graders.oracle_center_rows(host), host - host.mean(axis=1, keepdims=True), atol=1e-5
    )


def test_byte_budgets_match_the_analyzer():
    # The budgets the graders allow equal what the analyzer measures for the reference answers.
    mesh = graders.make_mesh((2, 4), axis_type=AxisType.Auto)
    x = graders.place(np.ones((6, 16), np.float32), mesh, P("X", "Y"))
    report = analyze(lambda a: SOLUTION.center_rows(a, mesh), x)
    assert report.total_bytes == graders.bytes_all_reduce(3, 4)
    mesh = graders.make_mesh((4, 2))
    x = graders.place(np.ones((8, 8), np.float32), mesh, P("X", None))
    report = analyze(lambda a: SOLUTION.rows_to_columns(a, mesh), x)
    assert report.count("all-to-all") == 1 and report.total_bytes == graders.bytes_all_to_all(2 * 8, 4)


def test_global_roll_cases_cover_layouts_signs_whole_blocks_and_shuffled_devices():
    # 4.5's hidden cases: every layout with both axis types, shifts of both signs within the contract
    # (1 <= |shift| <= rows), shift ±1, a whole block, a shift in between, and devices out of id order.
    cases = graders.global_roll_cases()
    assert {(sizes, mesh.axis_types[0]) for mesh, sizes, _, _ in cases} >= {
        (sizes, kind) for sizes in graders.MESH_LAYOUTS for kind in graders.AXIS_TYPES
    }
    assert all(1 <= abs(shift) <= rows for _, _, (rows, _), shift in cases)
    shifts = [(shift, rows) for _, _, (rows, _), shift in cases]
    assert any(s > 0 for s, _ in shifts) and any(s < 0 for s, _ in shifts)
    assert any(abs(s) == 1 for s, _ in shifts) and any(abs(s) == rows for s, rows in shifts)
    assert any(1 < abs(s) < rows for s, rows in shifts)
    assert any(abs(s) < rows and sizes[0] > 1 for _, sizes, (rows, _), s in cases)
    ids = [[d.id for d in mesh.devices.flat] for mesh, *_ in cases]
    assert any(order != sorted(order) for order in ids)


def _roll_blocks(body):
    """A roll_global_shmap answer built from a per-block body(x_block, shift, n) inside shard_map."""

    def answer(x, shift, mesh):
        return jax.shard_map(
            lambda b: body(b, shift, mesh.shape["X"]), mesh=mesh, in_specs=P("X", "Y"), out_specs=P("X", "Y")
        )(x)

    return answer


def _ring(n, step):
    return [(i, (i + step) % n) for i in range(n)]


def _whole_block(b, shift, n):
    # ppermute the whole block, then keep the rows needed: right values, S/nX rows sent.
    k = abs(shift)
    if shift > 0:
        return jnp.concatenate([jax.lax.ppermute(b, "X", _ring(n, 1))[-k:], b[:-k]], axis=0)
    return jnp.concatenate([b[k:], jax.lax.ppermute(b, "X", _ring(n, -1))[:k]], axis=0)


def _gathered(b, shift, n):
    # all_gather the rows, roll the whole array, keep my block.
    whole = jnp.roll(jax.lax.all_gather(b, "X", tiled=True), shift, axis=0)
    return jax.lax.dynamic_slice_in_dim(whole, jax.lax.axis_index("X") * b.shape[0], b.shape[0], 0)


def _roll_body(b, shift, n, wrap=True):
    # the boundary rows to the neighbour (without the pair n-1 -> 0 or 0 -> n-1 if not wrap).
    k, pairs = abs(shift), _ring(n, 1 if shift > 0 else -1)
    if not wrap:
        pairs = [(i, j) for i, j in pairs if abs(i - j) == 1]
    if shift > 0:
        return jnp.concatenate([jax.lax.ppermute(b[-k:], "X", pairs), b[:-k]], axis=0)
    return jnp.concatenate([b[k:], jax.lax.ppermute(b[:k], "X", pairs)], axis=0)


def test_global_roll_oracle_and_budget_match_the_solution_on_every_case():
    # The solution equals the oracle exactly and sends exactly |shift| rows of its block, on every
    # hidden case (a 1 x 8 mesh included: a permute of a device to itself, still within the bound).
    rng = np.random.default_rng(5)
    for mesh, (n_x, n_y), (rows, cols), shift in graders.global_roll_cases():
        host = rng.normal(size=(rows * n_x, cols * n_y)).astype(np.float32)
        x = graders.place(host, mesh, P("X", "Y"))
        got = SOLUTION.roll_global_shmap(x, shift, mesh)
        np.testing.assert_array_equal(got, graders.oracle_roll_global(host, shift))
        np.testing.assert_array_equal(graders.oracle_roll_global(host, shift), jnp.roll(host, shift, axis=0))
        report = analyze(lambda a, shift=shift, mesh=mesh: SOLUTION.roll_global_shmap(a, shift, mesh), x)
        assert [c.kind for c in report.collectives] == ["collective-permute"]
        assert report.total_bytes == graders.bytes_boundary_rows(shift, cols)


@pytest.mark.parametrize(
    ("wrong", "message"),
    [
        (_roll_blocks(lambda b, shift, n: jnp.roll(b, shift, axis=0)), "that is the roll within each block"),
        (_roll_blocks(lambda b, shift, n: _roll_body(b, -shift, n)), "that is the roll by -shift"),
        (_roll_blocks(_whole_block), r"expected at most \d+ B sent per device.*only the \|shift\| rows"),
        (_roll_blocks(_gathered), "expected only collective-permute, got all-gather"),
        (lambda x, shift, mesh: jax.jit(lambda a: jnp.roll(a, shift, axis=0))(x), "ShardingTypeError"),
        (_roll_blocks(lambda b, shift, n: _roll_body(b, shift, n, wrap=False)), "row r of the whole array"),
    ],
)
def test_global_roll_grader_fails_each_plausible_mistake_with_its_hint(wrong, message):
    with pytest.raises(CheckFailed, match=message):
        graders.check_roll_global_shmap(wrong)
