"""Graders of assignment 03_explicit_sharding: the solution passes; each typical mistake fails with a hint."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import PartitionSpec as P

from grading.graders import a03_explicit_sharding as graders
from grading.graders.common import struct
from shardbook import analyze
from shardbook.checks import CheckFailed


def test_type_text_agrees_with_jax():
    # The type the graders expect is, character for character, what jax.typeof prints.
    for sizes in graders.MESH_LAYOUTS:
        mesh = graders.make_mesh(sizes)
        for spec in [*graders.RUNNING_SPECS, P(), P("X"), P(None, ("Y", "X"))]:
            x = graders.place(np.zeros((16, 24), np.float32), mesh, spec)
            assert graders.type_text((16, 24), spec) == str(jax.typeof(x)), (sizes, spec)


def test_oracles_agree_with_jax():
    # The NumPy oracles and JAX on one device compute the same values.
    rng = np.random.default_rng(0)
    x, w_in, w_out = (rng.uniform(-1, 1, s).astype(np.float32) for s in [(8, 16), (16, 64), (64, 16)])
    np.testing.assert_allclose(graders.oracle_matmul(x, w_in), x @ w_in, rtol=1e-5, atol=1e-5)
    mlp = jax.nn.relu(jnp.asarray(x) @ w_in) @ w_out
    np.testing.assert_allclose(graders.oracle_mlp(x, w_in, w_out), mlp, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(graders.oracle_running_total(x), jnp.cumsum(x, axis=1), rtol=1e-5, atol=1e-5)


def test_byte_budgets_match_the_analyzer():
    # The budgets are exactly what the analyzer reports for the intended collective, on every mesh.
    rng = np.random.default_rng(1)
    for sizes in graders.MESH_LAYOUTS:
        mesh = graders.make_mesh(sizes)
        b, d, f = graders.MATMUL_SHAPES[0]
        x = graders.place(rng.uniform(-1, 1, (b, d)).astype(np.float32), mesh, P("X", "Y"))
        w = graders.place(rng.uniform(-1, 1, (d, f)).astype(np.float32), mesh, P("Y", None))
        with jax.set_mesh(mesh):
            rs = analyze(lambda x, w: jnp.matmul(x, w, out_sharding=P("X", "Y")), x, w)
            ar = analyze(lambda x, w: jnp.matmul(x, w, out_sharding=P("X", None)), x, w)
        assert rs.total_bytes == graders.bytes_reduce_scatter(b // sizes[0], f, sizes[1]), sizes
        assert ar.total_bytes == graders.bytes_all_reduce(b // sizes[0], f, sizes[1]), sizes


def test_hidden_cases_cover_every_mesh_layout_and_a_sharded_cumsum_dimension():
    # Each grader tries all four mesh layouts; running_total tries layouts whose columns are split.
    assert {sizes for sizes, _ in graders.matmul_cases()} == set(graders.MESH_LAYOUTS)
    assert {sizes for sizes, _ in graders.split_cases()} == set(graders.MESH_LAYOUTS)
    cases = graders.running_total_cases()
    assert {sizes for sizes, _, _ in cases} == set(graders.MESH_LAYOUTS)
    assert any(len(spec) > 1 and spec[1] is not None for _, spec, _ in cases)
    assert len({spec for _, spec, _ in cases}) >= 4


def test_grader_reports_a_sharding_error_in_words():
    # A learner function that raises JAX's ShardingTypeError gets one sentence naming the call.
    def unfixed(x, w_in, w_out):
        return jax.nn.relu(x @ w_in) @ w_out

    with pytest.raises(CheckFailed, match=r"mlp_block\(float32\[.*\) on a mesh .* got ShardingTypeError"):
        graders.check_mlp_block(unfixed)


def _split_contraction(x, w):
    # 3.4's intended answer: keep only my slice of D of x (free), then reduce-scatter the partial sums.
    return jnp.matmul(jax.reshard(x, P("X", "Y")), w, out_sharding=P("X", "Y"))


def _split_moves_weight(x, w):
    # Only the output layout: XLA makes w fit x, an all-to-all of w over Y.
    return jnp.matmul(x, w, out_sharding=P("X", "Y"))


def test_split_contraction_budget_is_met_by_the_answer_and_broken_by_moving_w_on_every_layout():
    # The intended answer sends exactly the reduce-scatter budget (nothing when nY = 1); moving w sends
    # more than the budget on every layout with nY > 1, for every hidden shape (D >= 16 B).
    for sizes in graders.MESH_LAYOUTS:
        mesh = graders.make_mesh(sizes)
        for b, d, f in graders.SPLIT_SHAPES:
            x = struct((b, d), mesh, P("X", None))
            w = struct((d, f), mesh, P("Y", None))
            budget = graders.bytes_reduce_scatter(b // sizes[0], f, sizes[1])
            with jax.set_mesh(mesh):
                right = analyze(_split_contraction, x, w)
                moved = analyze(_split_moves_weight, x, w)
            assert [c.kind for c in right.collectives] == (["reduce-scatter"] if sizes[1] > 1 else [])
            assert right.total_bytes == budget, (sizes, b, d, f)
            if sizes[1] > 1:
                assert moved.total_bytes > budget
                assert "reduce-scatter" not in {c.kind for c in moved.collectives}


def test_split_contraction_grader_passes_the_answer_and_a_reshard_of_the_product():
    # Resharding the all-reduced product to P('X', 'Y') compiles to all-reduce + slice, which XLA turns
    # into the same reduce-scatter: as cheap as the intended answer, so it passes too.
    graders.check_matmul_split_contraction(_split_contraction)
    graders.check_matmul_split_contraction(lambda x, w: jax.reshard(x @ w, P("X", "Y")))


@pytest.mark.parametrize(
    ("wrong", "message"),
    [
        (_split_moves_weight, r"expected only reduce-scatter, got all-to-all.*w is D/B times larger"),
        (
            lambda x, w: jnp.matmul(x, jax.reshard(w, P()), out_sharding=P("X", "Y")),
            r"expected only reduce-scatter, got all-gather",
        ),
        (lambda x, w: x @ w, r"expected the type float32\[8@X,16@Y\], got float32\[8@X,16\]"),
        (lambda x, w: jax.reshard(x, P("X", "Y")) @ w, r"got ShardingTypeError"),
        (
            lambda x, w: jnp.matmul(jax.reshard(x, P(None, "Y")), w, out_sharding=P("X", "Y")),
            r"expected only reduce-scatter, got all-gather",
        ),
    ],
)
def test_split_contraction_grader_fails_each_plausible_mistake_with_its_hint(wrong, message):
    with pytest.raises(CheckFailed, match=message):
        graders.check_matmul_split_contraction(wrong)
