"""The harness every grader shares (grading/graders/common.py): meshes, descriptions, shared checks."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import AxisType
from jax.sharding import PartitionSpec as P

from grading.graders import common
from shardbook.checks import CheckFailed
from shardbook.comms import analyze


def ids(mesh):
    return [d.id for d in mesh.devices.flat]


def test_make_mesh_orders_and_axis_types():
    # In id order by default (as jax.make_mesh on CPU), Explicit unless asked; a seed shuffles the
    # order reproducibly, reverse reverses it; a smaller mesh takes the first devices.
    plain = common.make_mesh((2, 4))
    assert ids(plain) == [d.id for d in jax.make_mesh((2, 4), ("X", "Y")).devices.flat]
    assert plain.axis_names == ("X", "Y") and set(plain.axis_types) == {AxisType.Explicit}
    auto = common.make_mesh((8,), ("X",), axis_type=AxisType.Auto)
    assert auto.axis_types == (AxisType.Auto,)
    shuffled = common.make_mesh((4, 2), shuffle=5)
    assert ids(shuffled) != sorted(ids(shuffled)) and ids(shuffled) == ids(
        common.make_mesh((4, 2), shuffle=5)
    )
    assert ids(common.make_mesh((8,), ("X",), reverse=True)) == list(range(8))[::-1]
    assert sorted(ids(common.make_mesh((2, 3)))) == list(range(6))


def test_show_and_call_text_describe_arguments():
    mesh = common.make_mesh((2, 4), axis_type=AxisType.Auto, shuffle=3)
    assert common.show(mesh).startswith("Mesh({'X': 2, 'Y': 4}, Auto axes, device ids [")
    x = common.place(np.zeros((4, 8), np.float32), mesh, P("X", "Y"))
    assert common.call_text("f", (x, 3)) == "f(float32[4,8] P('X', 'Y'), 3)"
    assert common.show({0: (slice(0, 2),), 1: (slice(2, 4),)}) == "layout{…}"


def test_oracle_block_means_is_each_devices_own_block():
    mesh = common.make_mesh((2, 4), shuffle=1)
    host = np.random.default_rng(0).normal(size=(8, 12)).astype(np.float32)
    x = common.place(host, mesh, P("X", "Y"))
    got = np.zeros((2, 4))
    for shard in x.addressable_shards:
        (r0, r1), (c0, c1) = [(s.start, s.stop) for s in shard.index]
        got[r0 // 4, c0 // 3] = np.asarray(shard.data, np.float64).mean()
    np.testing.assert_allclose(common.oracle_block_means(host, 2, 4), got, rtol=1e-6)


def test_expect_kinds_and_bytes_names_the_kind_or_the_bytes():
    mesh = common.make_mesh((2, 4), axis_type=AxisType.Auto)
    args = (common.struct((16, 32), mesh, P("X", "Y")), common.struct((32, 64), mesh, P("Y", None)))
    report = analyze(jax.jit(lambda a, w: jnp.matmul(a, w)), *args)
    assert report.total_bytes > 0
    common.expect_kinds_and_bytes(report, "f()", ("all-reduce",), report.total_bytes, "the bound", "h")
    with pytest.raises(CheckFailed, match=r"f\(\): expected only collective-permute, got .*Hint: h"):
        common.expect_kinds_and_bytes(report, "f()", ("collective-permute",), 10**9, "the bound", "h")
    with pytest.raises(CheckFailed, match=r"expected at most .* sent per device \(the bound\), got"):
        common.expect_kinds_and_bytes(
            report, "f()", ("all-reduce",), report.total_bytes - 1, "the bound", "h"
        )
    with pytest.raises(CheckFailed, match="sent per device"):  # a grader's own byte count
        common.expect_kinds_and_bytes(report, "f()", ("all-reduce",), 10, "the bound", "h", sent=11)


def test_graders_and_self_checks_share_one_kind_and_byte_check():
    # One harness: the grader's check is shardbook.checks.expect_report, the one behind expect_collectives.
    from shardbook.checks import expect_collectives

    mesh = common.make_mesh((2, 4), axis_type=AxisType.Auto)
    args = (common.struct((16, 32), mesh, P("X", "Y")), common.struct((32, 64), mesh, P("Y", None)))
    fn = jax.jit(lambda a, w: jnp.matmul(a, w))
    messages = []
    for check in (
        lambda: common.expect_kinds_and_bytes(
            analyze(fn, *args), "f()", ("collective-permute",), 1, "b", "h"
        ),
        lambda: expect_collectives(fn, *args, allowed=("collective-permute",), what="f()", hint="h"),
    ):
        with pytest.raises(CheckFailed) as failure:
            check()
        messages.append(str(failure.value))
    assert messages[0] == messages[1], messages
