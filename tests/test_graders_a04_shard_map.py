"""The graders of assignment 04_shard_map: the solution passes, each typical mistake fails with its hint."""

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import AxisType
from jax.sharding import PartitionSpec as P

from grading.graders import a04_shard_map as graders
from shardbook import analyze
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
