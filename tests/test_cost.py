"""Tests for shardbook.cost: the TPU model on real compiled programs of 8 simulated devices."""

import functools

import jax
import jax.numpy as jnp
import matplotlib
import pytest
from jax.sharding import AxisType, NamedSharding
from jax.sharding import PartitionSpec as P

from benchmarks.programs import ring_matmul
from shardbook import comms, cost

matplotlib.use("Agg")

B, D, F = 1024, 2048, 8192
US = 1e-6


@pytest.fixture(scope="module")
def mesh():
    return jax.make_mesh((2, 4), ("X", "Y"), axis_types=(AxisType.Auto,) * 2)


def _args(mesh, dtype, a_spec=None):
    a_spec = P("X", "Y") if a_spec is None else a_spec
    a = jax.device_put(jnp.ones((B, D), dtype), NamedSharding(mesh, a_spec))
    w = jax.device_put(jnp.ones((D, F), dtype), NamedSharding(mesh, P(None, "Y")))
    return a, w


def _plain(mesh):
    return jax.jit(lambda a, w: a @ w, out_shardings=NamedSharding(mesh, P("X", "Y")))


def _collective(mesh, unroll=True):
    body = functools.partial(ring_matmul, unroll=unroll)
    return jax.jit(
        jax.shard_map(body, mesh=mesh, in_specs=(P("X", "Y"), P(None, "Y")), out_specs=P("X", "Y"))
    )


def test_estimate_blocking_all_gather(mesh):
    # property: in plain jit the matmul waits for the all-gather: step = gather + matmul
    est = cost.estimate(comms.analyze(_plain(mesh), *_args(mesh, jnp.bfloat16)), chip="v5e")
    chip = cost.CHIPS["v5e"]
    flops = 2 * 512 * 2048 * 2048
    gather = 1.5 * 2**20 / chip.ici_link_bandwidth + 3 * chip.hop_latency  # a line of 4: one link's worth
    assert est.compute_seconds == pytest.approx(flops / chip.bf16_flops)
    assert est.communication_seconds == pytest.approx(gather)
    assert est.seconds == pytest.approx(gather + flops / chip.bf16_flops)
    (matmul,) = [e for e in est.events if e.stream == "compute"]
    assert matmul.blocked and matmul.start == pytest.approx(gather)


def test_estimate_collective_matmul_overlaps(mesh):
    # property: the ppermutes overlap the matmuls: less exposed communication than the plain version
    args = _args(mesh, jnp.bfloat16)
    plain = cost.estimate(comms.analyze(_plain(mesh), *args))
    ring = cost.estimate(comms.analyze(_collective(mesh), *args))
    assert ring.seconds < plain.seconds
    assert ring.exposed_communication_seconds < plain.exposed_communication_seconds
    assert len([e for e in ring.events if e.kind == "collective-permute"]) == 3
    assert len([e for e in ring.events if e.kind == "matmul"]) == 4


def test_estimate_int32_benchmark_within_ten_percent(mesh):
    # property: the published v5e-8 timings (311, 244, 224 µs) are matched within 10%
    cases = [
        (_plain(mesh), _args(mesh, jnp.int32), 311),
        (_collective(mesh), _args(mesh, jnp.int32), 244),
        (_plain(mesh), _args(mesh, jnp.int32, P("X", None)), 224),
    ]
    for fn, args, published in cases:
        est = cost.estimate(comms.analyze(fn, *args), chip="v5e")
        assert est.seconds / (published * US) == pytest.approx(1.0, abs=0.10)


def test_estimate_chips_and_errors(mesh):
    # property: faster chips give shorter steps; an unknown chip is named in the error
    report = comms.analyze(_plain(mesh), *_args(mesh, jnp.bfloat16))
    times = {name: cost.estimate(report, chip=name).seconds for name in ("v4", "v5e", "v6e")}
    assert times["v6e"] < times["v5e"]
    with pytest.raises(ValueError, match="v5e"):
        cost.estimate(report, chip="v9")


def test_estimate_fori_loop_matches_unrolled(mesh):
    # property: a rolled loop is played iteration by iteration: same step time as the unrolled one
    args = _args(mesh, jnp.bfloat16)
    t_rolled = cost.estimate(comms.analyze(_collective(mesh, unroll=False), *args))
    t_unrolled = cost.estimate(comms.analyze(_collective(mesh, unroll=True), *args))
    assert t_rolled.seconds == pytest.approx(t_unrolled.seconds, rel=1e-6)
    assert t_rolled.communication_seconds == pytest.approx(t_unrolled.communication_seconds, rel=1e-6)


def test_draw_timeline(mesh):
    # property: one bar per event, the blocked matmul hatched
    est = cost.estimate(comms.analyze(_plain(mesh), *_args(mesh, jnp.bfloat16)))
    ax = cost.draw_timeline(est)
    assert len(ax.patches) == len(est.events)
    assert any(p.get_hatch() == "//" for p in ax.patches)
    assert "v5e" in ax.get_title()


@pytest.mark.parametrize("order", [("plain", "ring"), ("ring", "plain")])
def test_draw_timeline_shared_axis_covers_every_bar(mesh, order):
    # regression: two panels sharing x stopped at the last-drawn (shorter) step, cutting plain jit's
    # last matmul off, and the top panel had no tick numbers
    import matplotlib.pyplot as plt

    args = _args(mesh, jnp.bfloat16)
    ests = {
        "plain": cost.estimate(comms.analyze(_plain(mesh), *args)),
        "ring": cost.estimate(comms.analyze(_collective(mesh), *args)),
    }
    fig, axes = plt.subplots(2, 1, sharex=True)
    for ax, name in zip(axes, order, strict=True):
        cost.draw_timeline(ests[name], ax=ax)
    fig.canvas.draw()
    last_end = max(e.end for est in ests.values() for e in est.events) * 1e6
    for ax in axes:
        assert ax.get_xlim()[1] >= last_end
        labels = [t.get_text() for t in ax.get_xticklabels() if t.get_visible()]
        assert any(lab.strip() for lab in labels), "every panel shows its time ticks"
    plt.close(fig)


def test_collective_seconds_ring_vs_line():
    # property: an axis that closes into a ring uses both directions: half the time of a line
    chip = cost.CHIPS["v5e"]
    c = comms.Collective("all-gather", "ag", "bf16", ((4,),), ((64,),), 16, ("X",), [], 1, 2**20)
    ring = cost.collective_seconds(c, chip, {"X": 16})
    line = cost.collective_seconds(comms.Collective(**{**c.__dict__, "group_size": 8}), chip, {"X": 8})
    assert ring == pytest.approx(2**20 / (2 * chip.ici_link_bandwidth) + 15 * chip.hop_latency)
    assert line == pytest.approx(2**20 / chip.ici_link_bandwidth + 7 * chip.hop_latency)


def test_a_conditional_is_charged_its_costliest_branch():
    # One branch runs: the estimate charges the larger matmul, not both branches added.
    a = jnp.ones((2048, 4096), jnp.bfloat16)
    w = jnp.ones((4096, 8192), jnp.bfloat16)

    def both(a, w, which):
        return jax.lax.switch(which, (lambda: (a @ w[:, :1024]).sum(), lambda: (a @ w).sum()))

    branches = cost.estimate(comms.analyze(jax.jit(both), a, w, jnp.int32(0)))
    alone = cost.estimate(comms.analyze(jax.jit(lambda a, w: (a @ w).sum()), a, w))
    assert branches.compute_seconds == pytest.approx(alone.compute_seconds, rel=0.01)


def test_a_loop_inside_a_branch_is_charged_every_trip():
    # A branch that scans a matmul 4 times costs 4 matmuls: the loop's trips count inside a conditional.
    a = jnp.ones((2048, 4096), jnp.bfloat16)
    w = jnp.ones((4, 4096, 4096), jnp.bfloat16)

    def looped(a, w, which):
        scan = lambda: jax.lax.scan(lambda h, wi: (h @ wi, None), a, w)[0].sum()  # noqa: E731
        return jax.lax.switch(which, (lambda: a.sum(), scan))

    once = cost.estimate(comms.analyze(jax.jit(lambda a, w: (a @ w[0]).sum()), a, w))
    branches = cost.estimate(comms.analyze(jax.jit(looped), a, w, jnp.int32(1)))
    assert branches.compute_seconds == pytest.approx(4 * once.compute_seconds, rel=0.05)
