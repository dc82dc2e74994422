"""Tests for shardbook.cost: the TPU model on real compiled programs of 8 simulated devices, and on the
programs a real TPU v5e ran (shardbook/data/tpu_v5e.json)."""

import dataclasses
import functools
import gzip
import json

import jax
import jax.numpy as jnp
import matplotlib
import pytest
from jax.sharding import AxisType, NamedSharding
from jax.sharding import PartitionSpec as P

from benchmarks.programs import ring_matmul
from shardbook import comms, cost, hbm, links, records, vector, viz

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
    modelled = {"plain": plain.seconds, "ring": ring.seconds}  # the cost model's estimates, not a clock
    assert min(modelled, key=modelled.__getitem__) == "ring", modelled
    exposed = {"plain": plain.exposed_communication_seconds, "ring": ring.exposed_communication_seconds}
    assert min(exposed, key=exposed.__getitem__) == "ring", exposed  # modelled, like the line above
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
    ax = viz.draw_timeline(est)
    assert len(ax.patches) == len(est.events)
    assert any(p.get_hatch() == "//" for p in ax.patches)
    assert "v5e" in ax.get_title()
    # the figure names its source: the model on XLA:CPU's program, unless the title already names one
    assert ax.get_title().endswith("\nmodel · XLA:CPU program")
    assert viz.draw_timeline(est, title="x (TPU compiler)").get_title() == "x (TPU compiler)"


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
        viz.draw_timeline(ests[name], ax=ax)
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


def _permute(pairs, nbytes=2**20, axes=("X",)):
    return comms.Collective("collective-permute", "cp", "bf16", ((4,),), ((4,),), 2, axes, pairs, 1, nbytes)


@pytest.mark.parametrize("n", [16, 8])
def test_a_one_way_ring_permute_uses_one_link_direction(n):
    # property: on a ring (n = 16 on a v5e) a one-way shift holds one direction at the one-way bandwidth;
    # on a line (n = 8) the pair that closes the ring goes back along the line: both directions, n-1 hops
    chip = cost.CHIPS["v5e"]
    c = _permute([[i, (i + 1) % n] for i in range(n)])
    seconds, used = links.collective_links(c, chip, {"X": n})
    hops = 1 if n == 16 else n - 1
    assert seconds == pytest.approx(2**20 / chip.ici_link_bandwidth + hops * chip.hop_latency)
    assert used == (("+",) if n == 16 else ("+", "-"))
    # a shift by two along a line: every link's forward direction carries two blocks
    seconds, used = links.collective_links(_permute([[i, i + 2] for i in range(n - 2)]), chip, {"X": n})
    assert used == ("+",)
    assert seconds == pytest.approx(2 * 2**20 / chip.ici_link_bandwidth + 2 * chip.hop_latency)
    # an all-gather may use both directions whatever the axis
    gather = comms.Collective("all-gather", "ag", "bf16", ((4,),), ((64,),), n, ("X",), [], 1, 2**20)
    assert links.collective_links(gather, chip, {"X": n})[1] == ("+", "-")


@pytest.mark.parametrize("wraparound, expected_halves", [(4, 1), (16, 2)])
def test_permutes_going_opposite_ways_overlap_only_on_a_ring(mesh, wraparound, expected_halves):
    # property: half a block left and half right, as two permutes: on a ring (wraparound 4 on the
    # 4-long 'Y') they run at once, the step takes one half-block; on a line they take turns
    import dataclasses

    chip = dataclasses.replace(cost.CHIPS["v5e"], wraparound_size=wraparound)
    left = [(i, (i + 3) % 4) for i in range(4)]
    right = [(i, (i + 1) % 4) for i in range(4)]

    def body(x):
        half = x.shape[0] // 2
        sent = jax.lax.ppermute(x[:half], "Y", left), jax.lax.ppermute(x[half:], "Y", right)
        return jnp.concatenate(sent)

    f = jax.jit(jax.shard_map(body, mesh=mesh, in_specs=P("X", "Y"), out_specs=P("X", "Y")))
    x = jax.ShapeDtypeStruct((B, D), jnp.bfloat16, sharding=NamedSharding(mesh, P("X", "Y")))
    est = cost.estimate(comms.analyze(f, x), chip=chip)
    permutes = [e for e in est.events if e.kind == "collective-permute"]
    assert len(permutes) == 2
    half_block = 512 * 512 * 2 / 2
    hops = 1 if wraparound == 4 else 3
    one = half_block / chip.ici_link_bandwidth + hops * chip.hop_latency
    assert [e.seconds for e in permutes] == pytest.approx([one, one])
    assert est.seconds == pytest.approx(expected_halves * one)


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


# ---------------------------------------------------------------------------------------------------
# TPU programs: the kernels the chip's own compiler wrote, against one-chip times measured on a v5e

# A scanned layer as the TPU compiler writes it: one fusion reads layer i's weights from the stacked
# [12, ...] buffer (a dynamic-slice inside it), one writes a layer back in place (a dynamic-update-slice
# as the fusion's result), one plain copy reads and writes the whole buffer. The index lives in scalar
# memory (S(6)) and the sliced layer in VMEM (S(1)): neither touches HBM.
_TPU_SNIPPET = """HloModule stacked, is_scheduled=true

%fused_slice (p0: f32[12,256,512], p1: s32[]) -> f32[1,256,512] {
  %p0 = f32[12,256,512]{2,1,0:T(8,128)} parameter(0)
  %p1 = s32[]{:T(128)} parameter(1)
  %z = s32[]{:T(128)} constant(0)
  ROOT %ds = f32[1,256,512]{2,1,0:T(8,128)} dynamic-slice(%p0, %p1, %z, %z), dynamic_slice_sizes={1,256,512}
}

%fused_update (q0: f32[12,256,512], q1: f32[1,256,512], q2: s32[]) -> f32[12,256,512] {
  %q0 = f32[12,256,512]{2,1,0:T(8,128)} parameter(0)
  %q1 = f32[1,256,512]{2,1,0:T(8,128)S(1)} parameter(1)
  %q2 = s32[]{:T(128)} parameter(2)
  %zero.1 = s32[]{:T(128)} constant(0)
  ROOT %dus = f32[12,256,512]{2,1,0:T(8,128)} dynamic-update-slice(%q0, %q1, %q2, %zero.1, %zero.1)
}

ENTRY %main (w: f32[12,256,512], i: s32[], u: f32[1,256,512]) -> f32[12,256,512] {
  %w = f32[12,256,512]{2,1,0:T(8,128)} parameter(0)
  %i = s32[]{:T(128)S(6)} parameter(1)
  %u = f32[1,256,512]{2,1,0:T(8,128)} parameter(2)
  %layer = f32[1,256,512]{2,1,0:T(8,128)S(1)} fusion(%w, %i), kind=kLoop, calls=%fused_slice
  %updated = f32[12,256,512]{2,1,0:T(8,128)} fusion(%w, %layer, %i), kind=kLoop, calls=%fused_update
  %view = f32[12,256,512]{2,1,0:T(8,128)} bitcast(%updated)
  %again = f32[12,256,512]{2,1,0:T(8,128)} dynamic-update-slice(%view, %u, %i, %i, %i)
  ROOT %whole = f32[12,256,512]{2,1,0:T(8,128)} copy(%again)
}
"""
_LAYER = 256 * 512 * 4  # one f32[1,256,512] layer
_STACK = 12 * _LAYER


def test_tpu_hbm_bytes_slices_and_in_place_updates():
    # property: a fused dynamic-slice reads its slice, not the stacked buffer; a dynamic-update-slice
    # (fused or alone) writes its update in place; VMEM and scalar memory cost nothing; views are free
    report = comms.analyze_text(_TPU_SNIPPET)
    assert report.platform == "tpu", "the tiled layouts T(8,128) mark the text as a TPU program"
    module = report.module
    entry = module.entry
    charged = {i.name: cost.tpu_hbm_bytes(module, entry, i) for i in entry.instructions}
    expected = {
        "w": None,
        "i": None,
        "u": None,
        "layer": _LAYER,  # the slice read; the result lands in VMEM
        "updated": _LAYER,  # the update written; the VMEM operand and the index are free
        "view": None,
        "again": 2 * _LAYER,  # the update read from HBM and written in place
        "whole": 2 * _STACK,  # a copy reads and writes all of it
    }
    assert charged == expected, f"expected HBM bytes per op {expected}, got {charged}"


def test_estimate_of_a_tpu_program_charges_every_kernel():
    # property: each kernel of a TPU program takes its HBM reads and writes at the measured read and
    # write bandwidths (a kernel that only writes, at the rate measured for that), one after another; a
    # call takes at least the measured fixed cost
    est = cost.estimate(comms.analyze_text(_TPU_SNIPPET), chip="v5e")
    measured = cost.CHIPS["v5e"].measured
    assert measured is not None
    assert measured.hbm_read_bandwidth and measured.hbm_write_bandwidth
    assert measured.hbm_write_alone_bandwidth
    reads, writes = _LAYER + _LAYER + _STACK, _LAYER + _STACK  # the first, third and fourth kernels
    kernels = reads / measured.hbm_read_bandwidth + writes / measured.hbm_write_bandwidth
    kernels += _LAYER / measured.hbm_write_alone_bandwidth  # the second reads nothing: it only writes
    assert [e.kind for e in est.events] == ["memory"] * 4
    assert est.device_seconds == pytest.approx(kernels)
    assert est.memory_seconds == pytest.approx(kernels) and est.compute_seconds == 0
    assert est.seconds == pytest.approx(max(kernels, measured.call_seconds))
    assert "other kernels" in repr(est) and "at least" in repr(est)


def test_v5e_measured_rates_are_read_off_the_record():
    # property: each measured constant is what its program of shardbook/data/tpu_v5e.json says (0.5%)
    record = records.tpu_record("v5e")["programs"]
    m = cost.V5E_MEASURED

    def rate(name):
        return record[name]["flops"] / record[name]["seconds"]

    assert m.bf16_matmul_flops == pytest.approx(rate("matmul bfloat16 8192"), rel=0.005)
    assert m.f32_matmul_flops == pytest.approx(rate("matmul float32 4096"), rel=0.02)
    add = record["add f32"]
    assert m.hbm_bandwidth == pytest.approx(add["bytes_accessed"] / add["seconds"], rel=0.005)
    assert m.hbm_read_bandwidth and m.hbm_write_bandwidth
    sums = record["row sums f32"]  # reads 2**29 bytes, writes 64 KiB
    assert m.hbm_read_bandwidth == pytest.approx(2**29 / sums["seconds"], rel=0.005)
    written = add["seconds"] - 2**30 / m.hbm_read_bandwidth  # add f32: reads 2**30, writes 2**29
    assert m.hbm_write_bandwidth == pytest.approx(2**29 / written, rel=0.005)
    n = 16384 * 8192  # the vector unit's rates, per element: the programs whose time they set
    rates = dict(m.vector_seconds)
    assert m.vector_op_seconds == pytest.approx(record["polynomial x4 f32"]["seconds"] / (256 * n), rel=0.005)
    assert rates["sine"] == pytest.approx(record["sin x4 f32"]["seconds"] / (4 * n), rel=0.005)
    assert rates["erf"] == pytest.approx(record["erf x4 f32"]["seconds"] / (4 * n), rel=0.005)
    divides = record["divide x16 f32"]["seconds"] / n - 32 * m.vector_op_seconds
    assert rates["divide"] == pytest.approx(divides / 16, rel=0.005)
    assert m.call_seconds == pytest.approx(record["one small add"]["seconds"], rel=0.005)
    # what kernels share or repeat (benchmarks.tpu_programs.kernel_sharing)
    assert m.sincos_second_seconds == pytest.approx(
        (record["sine and cosine of one array f32"]["seconds"] - n * rates["sine"]) / n, rel=0.005
    )
    reciprocals = record["reciprocal x16 f32"]["seconds"] / n - 32 * m.vector_op_seconds
    assert m.reciprocal_seconds == pytest.approx(reciprocals / 16, rel=0.005)
    assert m.hbm_write_alone_bandwidth == pytest.approx(
        2**29 / record["write a row broadcast f32"]["seconds"], rel=0.005
    )
    copy = 2**28 / m.hbm_read_bandwidth + 2**27 / m.hbm_write_bandwidth  # its copy to another layout
    bf16_lanes = (record["every other lane bf16"]["seconds"] - copy) / 2**26
    assert m.lane_stride_bf16_seconds == pytest.approx(bf16_lanes, rel=0.005)
    assert m.f32_high_matmul_flops == pytest.approx(rate("matmul float32 8192 at high"), rel=0.005)
    assert m.f32_highest_matmul_flops == pytest.approx(rate("matmul float32 8192 at highest"), rel=0.005)
    # read off benchmarks.tpu_programs.kernel_sweeps, each the time its rule leaves unexplained
    with gzip.open(records.RECORDS / "tpu_v5e_programs.json.gz", "rt") as f:
        texts = json.load(f)

    def without(name, **zero):
        chip = dataclasses.replace(cost.CHIPS["v5e"], measured=dataclasses.replace(m, **zero))
        return cost.estimate(comms.analyze_text(texts[name]), chip).seconds

    writes = record["mostly writing bf16, 16384 x 128 x 16384"]["seconds"] - 2**22 / m.hbm_read_bandwidth
    assert m.hbm_matmul_write_bandwidth == pytest.approx(2**29 / writes, rel=0.005)
    adam = "Adam inside its gradient's matmul f32, 1024 x 16384"  # 384 grid steps, 3 results in HBM
    # read off before Measured.balance_exponent (kernel_sweeps_fourteenth), which puts it 0.7% over
    left = record[adam]["seconds"] - without(adam, result_step_seconds=0.0, balance_exponent=0.0)
    assert 0.005 < without(adam) / record[adam]["seconds"] - 1 < 0.02
    assert m.result_step_seconds == pytest.approx(left / (384 * 2), rel=0.005)
    hots = "one-hot sums over 50304, 8 x 1024 rows"  # 1,024 groups of 8 rows, 197 blocks of lanes
    left = record[hots]["seconds"] - without(hots, lane_reduce_seconds=0.0)
    assert m.lane_reduce_seconds == pytest.approx(left / (1024 * 197), rel=0.005)
    # read off benchmarks.tpu_programs.kernel_sweeps_second: the same sum written to one dimension
    hots = "one-hot sums over 50432, 8192 rows"  # 1,024 groups of 8 rows, 197 blocks of lanes
    left = record[hots]["seconds"] - without(hots, lane_reduce_seconds=0.0, lane_reduce_rank1_seconds=0.0)
    assert m.lane_reduce_rank1_seconds == pytest.approx(left / (1024 * 197), rel=0.005)


def test_tpu_estimates_within_fifteen_percent_of_the_v5e_record():
    # property: the TPU-program path estimates every recorded one-chip program that ran within 15% of
    # its measured median, from the program the chip's own compiler wrote
    TARGET = records.CALIBRATION_TARGET
    rows = records.calibration("v5e")
    assert len(rows) == 138, f"expected the 138 programs that ran on the v5e, got {len(rows)}"
    wrong = [
        f"{r.program}: measured {r.measured * 1e3:.3f} ms, estimated {r.estimated * 1e3:.3f} ms "
        f"({r.error:+.1%}; matmuls {r.matmul * 1e3:.3f}, memory {r.memory * 1e3:.3f} ms)"
        for r in rows
        if abs(r.error) > TARGET
    ]
    assert not wrong, f"estimates more than {TARGET:.0%} from the v5e's times:\n" + "\n".join(wrong)


def _copy_beside(other: str) -> str:
    """A TPU program that copies p to VMEM while it negates q (of shape ``other``), then adds the two."""
    big = "f32[4096,4096]{1,0:T(8,128)}"
    return (
        "HloModule m, is_scheduled=true\n"
        f"ENTRY %e (p: f32[4096,4096], q: f32{other.split('{')[0][3:]}) -> f32[4096,4096] {{\n"
        f"  %p = {big} parameter(0)\n"
        f"  %q = {other} parameter(1)\n"
        "  %cs = (f32[4096,4096]{1,0:T(8,128)S(1)}, f32[4096,4096]{1,0:T(8,128)}, u32[]{:S(2)})"
        " copy-start(%p)\n"
        f"  %n = {other} negate(%q)\n"
        "  %cd = f32[4096,4096]{1,0:T(8,128)S(1)} copy-done(%cs)\n"
        f"  ROOT %a = {big} add(%cd, %n)\n"
        "}\n"
    )


def test_an_asynchronous_copy_moves_beside_the_kernels_in_the_hbm_time_they_leave():
    # property: a copy-start moves its bytes on a stream of its own; the kernels go on, and what reads
    # the copy waits for it. The copy moves in the HBM time the kernels beside it leave: beside a
    # negate that keeps the HBM busy it ends after the negate, beside a kernel that leaves the HBM
    # idle it hides, and where there is no kernel it is exposed
    m = cost.V5E_MEASURED
    assert m.hbm_read_bandwidth and m.hbm_write_bandwidth
    copy = 2**26 / m.hbm_read_bandwidth  # 64 MiB read from HBM into VMEM
    negate = 2**26 / m.hbm_read_bandwidth + 2**26 / m.hbm_write_bandwidth
    add = 2**26 / m.hbm_read_bandwidth + 2**26 / m.hbm_write_bandwidth  # reads n (p's copy is in VMEM)
    shared = cost.estimate(comms.analyze_text(_copy_beside("f32[4096,4096]{1,0:T(8,128)}")), "v5e")
    assert shared.device_seconds == pytest.approx(negate + copy + add)
    assert [e.label.split()[0] for e in shared.events] == ["negate", "add"]
    exposed = cost.estimate(comms.analyze_text(_copy_beside("f32[8,128]{1,0:T(8,128)}")), "v5e")
    small_add = 2**26 / m.hbm_write_bandwidth + 4096 / m.hbm_read_bandwidth
    assert exposed.device_seconds == pytest.approx(copy + small_add, rel=1e-3)
    # the stream alone: copies with 1 s left beside a 2 s kernel busy with the HBM for none, half and
    # all of its time end after 1, 2 and 3 s; a copy that ended before the kernel is dropped
    sim = cost._Simulator(comms.analyze_text(_copy_beside("f32[8,128]{1,0:T(8,128)}")), cost.CHIPS["v5e"])
    for busy, end in ((0.0, 1.0), (1.0, 2.0), (2.0, 3.0)):
        sim.copy_free, sim.copies = 1.0, {"cs": 1.0, "done": -1.0}
        sim._share_hbm(0.0, 2.0, busy)
        assert sim.copy_free == sim.copies["cs"] == pytest.approx(end)
        assert "done" not in sim.copies
    # read off round 11's bf16 layer norm (its kernels, disclosed): its 67 MB input copied into VMEM
    # beside a sum reading the same 67 MB from HBM was waited for about as long again as the sum took;
    # the model had the copy hide behind the sum and was 29% short, and is now within 3%
    name = "layer norm bfloat16 16384 x 2048"
    pending = records.RECORDS.parent.parent / "benchmarks" / "pending"
    kernels = json.loads((pending / "held_out_tpu_v5e_kernels.json").read_text())["programs"][name]["kernels"]
    assert kernels["copy-done"][1] == pytest.approx(kernels["convert_reduce_fusion.1"][1], rel=0.05)
    row = next(r for r in records.held_out("v5e") if r.program == name)
    assert abs(row.error) < 0.03
    # the GPT steps' copies: the fitted ones within 3% of the chip with them beside the kernels (2%
    # before attention's scores beside their running max wrote at a product's rate, 0.6-2.0 points shorter)
    rows = {r.program: r for r in records.calibration("v5e")}
    assert all(abs(rows[f"GPT {size} Adam step"].error) < 0.03 for size in ("0.16B", "0.41B", "0.61B"))


def test_a_sum_into_enough_registers_runs_its_ops_side_by_side():
    # property: a sum that does not cross the lanes and keeps at least four vector registers of partial
    # sums at each step of its kernel's grid runs its ops (its additions included) at the side-by-side
    # rate; with fewer its additions form a chain, and its longest chain at the plain rate bounds it.
    # Read off kernel_sweeps_sixth (recorded with round 12, before the rule): the sum over 26,000 keeps
    # 4 registers and the sum over 20,000 (fitted) keeps 2
    from shardbook.vector import partial_sum_registers, reduces_lanes

    texts = {}
    for stem in ("tpu_v5e", "tpu_v5e_held_out"):
        with gzip.open(records.RECORDS / f"{stem}_programs.json.gz", "rt") as f:
            texts.update(json.load(f))
    registers, across = {}, {}
    for name in (n for n in texts if n.startswith("one-hot sums")):
        m = comms.analyze_text(texts[name]).module
        kernel = m.entry.root
        reduce = m.computations[dict(kernel.called())["calls"]].root
        registers[name], across[name] = partial_sum_registers(m, kernel, reduce), reduces_lanes(m, reduce)
    named = {n: registers[f"one-hot sums over {n} into one dimension"] for n in (8000, 20000)}
    assert named == {8000: 1, 20000: 2}
    assert registers["one-hot sums over 26000 into one dimension, a sweep"] == 4
    rows = {r.program: r for r in records.calibration("v5e")}
    v = cost.V5E_MEASURED
    chain = 4 * v.vector_op_seconds * 8192 * 20000  # iota, compare, select, add: one chain
    assert rows["one-hot sums over 20000 into one dimension"].estimated == pytest.approx(chain, rel=0.01)
    apart = 4 * v.vector_op_side_by_side_seconds * 8192 * 26000
    swept = rows["one-hot sums over 26000 into one dimension, a sweep"]
    assert swept.estimated == pytest.approx(apart, rel=0.01)
    # every one-hot sum that keeps the rows on the lanes and four registers or more is within the
    # model's stated accuracy (11%), held-out ones included (up to 22% over before)
    held = {r.program: r for r in records.held_out("v5e")}
    side = [{**rows, **held}[n] for n in texts if n in registers and not across[n] and registers[n] >= 4]
    assert len(side) >= 10 and all(abs(r.error) <= records.OUT_OF_SAMPLE_ERROR for r in side), side


def test_the_kernel_rules_read_off_the_kernel_sweeps():
    # property: a plain product that reads under a tenth of what it writes writes at the rate measured
    # for one, whatever its contraction; a matmul kernel pays for each result after its first at every
    # grid step (SGD's one result nothing, momentum's two, Adam's three); a sum across the lanes pays
    # per group of 8 rows and block of lanes, and an iota is vector work
    rows = {r.program: r for r in records.calibration("v5e")}
    for k in (128, 384, 512):
        assert abs(rows[f"mostly writing bf16, 16384 x {k} x 16384"].error) < 0.03
    for k in (128, 512):
        assert abs(rows[f"mostly writing f32 from bf16, 8192 x {k} x 16384"].error) < 0.07
    steps = {
        u: rows[f"{u} inside its gradient's matmul f32, 1024 x 16384"] for u in ("SGD", "momentum", "Adam")
    }
    assert all(abs(r.error) < 0.09 for r in steps.values())
    assert steps["SGD"].estimated < steps["momentum"].estimated < steps["Adam"].estimated
    for hots in ("one-hot sums over 50304, 8 x 1024 rows", "one-hot sums over 65536, 8192 rows"):
        assert abs(rows[hots].error) < 0.09  # 65,536 into one dimension: +8.5%
    from shardbook.hlo import parse_module

    with gzip.open(records.RECORDS / "tpu_v5e_programs.json.gz", "rt") as f:
        m = parse_module(json.load(f)["one-hot sums over 65536, 8192 rows"])
    fusion = next(i for i in m.entry.instructions if i.opcode == "fusion")
    total, _, _ = vector.vector_seconds(m, fusion, cost.V5E_MEASURED)
    ops = 4 * 8192 * 65536 * cost.V5E_MEASURED.vector_op_seconds  # iota, compare, select, the sum's add
    # 1,024 groups of 8 rows, 8 blocks of lanes, summed into one dimension
    sums = 1024 * 8 * cost.V5E_MEASURED.lane_reduce_rank1_seconds
    assert total == pytest.approx(ops + sums, rel=0.01)
    # one-dimensional sums over widths that are not a power of two, in 125 to 197 blocks of lanes of
    # 4,096 rows each: the chip took a third longer than the rate of sums into two dimensions gives
    for width in (32000, 50304, 50432):
        assert abs(rows[f"one-hot sums over {width}, 8192 rows"].error) < 0.05


def test_tpu_loops_run_every_trip_without_known_trip_count():
    # regression: the TPU compiler drops known_trip_count from a scan over layers; the analyzer reads
    # the count (12 layers) from the loop's condition, so the GPT step's FLOPs are not counted once
    with gzip.open(records.RECORDS / "tpu_v5e_programs.json.gz", "rt") as f:
        text = json.load(f)["GPT 0.16B Adam step"]
    report = comms.analyze_text(text)
    body_once = records.tpu_record("v5e")["programs"]["GPT 0.16B Adam step"]["flops"]
    assert "no known trip count" not in " ".join(report.notes)
    # 6 × 124M non-embedding parameters × 8192 tokens, plus the recomputed forward and attention
    assert 7.5e12 < report.flops < 9e12, f"expected about 8.2 TFLOP, got {report.flops:.3g}"
    assert report.flops > 3 * body_once


def test_precision_of_a_compiled_dot_sets_its_rate():
    # property: an f32 matmul at HIGH or HIGHEST (JAX's levels or the BF16_BF16_F32_X3/_X6 presets, as
    # the TPU compiler writes them) is charged at the rate measured for it: each is within 3% of the
    # chip's back-to-back time at 2048, 4096 and 8192, where one rate for every f32 dot was 57-83% short
    rows = {r.program: r for r in records.calibration("v5e") if r.family == "precision"}
    assert len(rows) == 12, sorted(rows)
    for name, r in rows.items():
        limit = 0.13 if name.endswith("8192 at BF16_BF16_F32") else 0.03  # the f32 8192 default: -12%
        assert abs(r.error) <= limit, f"{name}: {r.error:+.1%}"
    with gzip.open(records.RECORDS / "tpu_v5e_programs.json.gz", "rt") as f:
        texts = json.load(f)
    highest = cost.estimate(comms.analyze_text(texts["matmul float32 4096 at highest"]), "v5e")
    default = cost.estimate(comms.analyze_text(texts["matmul float32 4096"]), "v5e")
    assert highest.seconds > 5.5 * default.seconds
    assert any("precision 'highest'" in n for n in highest.notes) and not default.notes


def test_dot_precision_reads_operand_precision_and_algorithm():
    # property: both ways a compiled dot names its precision are read, the higher operand's level wins
    from shardbook.hlo import parse_module

    def dot(attrs):
        text = (
            "HloModule m\nENTRY %e (a: f32[8,8]) -> f32[8,8] {\n  %a = f32[8,8] parameter(0)\n"
            "  ROOT %d = f32[8,8] dot(%a, %a), lhs_contracting_dims={1}, "
            f"rhs_contracting_dims={{0}}{attrs}\n}}\n"
        )
        return parse_module(text).entry.root

    assert cost.dot_precision(dot("")) == "default"
    assert cost.dot_precision(dot(", operand_precision={high,default}")) == "high"
    assert cost.dot_precision(dot(", operand_precision={highest,highest}")) == "highest"
    assert cost.dot_precision(dot(", algorithm=dot_bf16_bf16_f32_x3")) == "high"
    assert cost.dot_precision(dot(", algorithm=dot_bf16_bf16_f32_x6")) == "highest"
    assert cost.dot_precision(dot(", algorithm=dot_bf16_bf16_f32")) == "default"


def test_out_of_sample_error_is_the_held_out_programs():
    # property: every program recorded on the v5e and held out of the fit is within the model's stated
    # out-of-sample error, except those its estimate flags and the named misses (each of which really is
    # beyond it); the stated error is the measured worst, not a loose bound (within one point of it)
    rows = records.held_out("v5e")
    assert len(rows) == 241 and {r.round for r in rows} == set(range(1, 20))
    families = {r.family for r in rows}
    assert {"matmul", "mlp", "memory", "vector", "attention", "training"} <= families
    inside = [r for r in rows if not r.outside and r.program not in records.MISSED]
    worst = max(abs(r.error) for r in inside)
    assert worst <= records.OUT_OF_SAMPLE_ERROR < worst + 0.01, f"worst held-out error {worst:.1%}"
    assert not [r.program for r in rows if r.outside]
    # round 4, recorded before the rules it tests: 13 of its 14 within 5% (all 14 since the rule for
    # attention's second product in small steps)
    fourth = [r for r in inside if r.round == 4]
    assert len(fourth) == 14 and sum(abs(r.error) < 0.05 for r in fourth) == 14
    # rounds 6 to 8, each recorded before rules and opened after them (9, 6 and 8 of 12 within 10%
    # then), and round 9, recorded before any rule and opened against round 8's model: within 10%, with
    # their weight updates recorded again (the recorder had timed another program for those); round 16,
    # recorded after the rule it tests was committed: all 12; round 17, recorded with a sweep and opened
    # against the model unchanged: 11; round 18, sealed with a sweep and opened after the rule read off
    # it: all 12; round 19, written and recorded after that rule was committed: all 12
    within = {n: sum(abs(r.error) <= 0.10 for r in rows if r.round == n) for n in range(6, 20)}
    assert within == {
        **{6: 12, 7: 11, 8: 11, 9: 12, 10: 12, 11: 12, 12: 11, 13: 10, 14: 9, 15: 9, 16: 12, 17: 11, 18: 12},
        19: 12,
    }
    updates = [r for r in rows if r.program.startswith("SGD inside") and r.round < 10]
    assert len(updates) == 4 and all(abs(r.error) < 0.05 for r in updates)
    missed = {r.program: r for r in rows if r.program in records.MISSED}
    assert set(missed) == set(records.MISSED), "a named miss is not in the held-out record"
    assert all(abs(r.error) > records.OUT_OF_SAMPLE_ERROR for r in missed.values()), "a named miss is not one"
    fitted = set(records.tpu_record("v5e")["programs"])
    assert not fitted & {r.program for r in rows}, "a held-out program is also in the fitted record"
    # non-default precision, a bf16 training step and GPT steps of other shapes are among them
    names = " ".join(r.program for r in inside)
    assert "at highest" in names and "at high" in names and "bfloat16" in names
    assert sum(r.family == "training" for r in inside) >= 3


def test_tiled_rereads_count_the_windows_a_matmul_fetches():
    # property: the f32 8192 matmul at the default precision (8 × 8 output blocks, the contraction in 22
    # steps of 384, padded to 8448) reads each operand once per block of the other's axis, padding
    # included; a matmul whose left operand sits in VMEM reads only the right one again (none here)
    from shardbook.hbm import tiled_rereads
    from shardbook.hlo import parse_module

    with gzip.open(records.RECORDS / "tpu_v5e_programs.json.gz", "rt") as f:
        texts = json.load(f)
    m = parse_module(texts["matmul float32 8192"])
    operand = 8192 * 8192 * 4
    assert tiled_rereads(m, m.entry, m.entry.root) == 2 * (8 * 8448 * 8192 * 4 - operand)
    m = parse_module(texts["matmul float32 4096"])  # A prefetched into VMEM, the contraction in one step
    assert tiled_rereads(m, m.entry, m.entry.root) == 0


def test_an_operand_a_matmul_kernel_computes_rereads_what_it_is_computed_from():
    # property: in the f32 MLP step 8192 wide, two weight-gradient kernels of one tiling (8 x 16 x 6)
    # read an f32 activation 8 times over, one as it is, one through a ReLU and a convert to bf16
    # computed in the kernel; the chip took the same time for both (4.09 ms), and the model charges
    # both the same re-reads (before, the computed one none, and it was a quarter short)
    from shardbook.hbm import tiled_rereads

    name = "MLP SGD step float32, width 8192"
    with gzip.open(records.RECORDS / "tpu_v5e_held_out_programs.json.gz", "rt") as f:
        report = comms.analyze_text(json.load(f)[name])
    m = report.module
    pending = records.RECORDS.parent.parent / "benchmarks" / "pending"
    kernel_record = json.loads((pending / "held_out_tpu_v5e_kernels.json").read_text())
    kernels = kernel_record["programs"][name]["kernels"]
    computed, plain = m.entry.by_name["fusion"], m.entry.by_name["fusion.1"]
    assert hbm.grid_bounds(computed) == hbm.grid_bounds(plain) == [8, 16, 6]
    assert kernels["fusion"][1] == pytest.approx(kernels["fusion.1"][1], rel=0.01)
    f32_rereads = 4096 * 8192 * 4 * (8 * 16 * 6 * 86 * 8 * 4 * 128 / (4096 * 8192) - 1)
    bf16_rereads = 4096 * 8192 * 2 * (8 * 16 * 6 * 86 * 8 * 8 * 128 / (4096 * 8192) - 1)
    assert tiled_rereads(m, m.entry, computed) == pytest.approx(f32_rereads + bf16_rereads, rel=0.01)
    assert tiled_rereads(m, m.entry, plain) == pytest.approx(f32_rereads + bf16_rereads, rel=0.01)
    sim = cost._Simulator(report, cost.CHIPS["v5e"])
    seconds = [sim._kernel_seconds(m.entry, k)[0] for k in (computed, plain)]
    assert seconds[0] == pytest.approx(seconds[1], rel=0.03)


def test_element_wise_ops_side_by_side_go_faster_than_a_chain():
    # property: a kernel takes the longer of its element-wise ops at the rate of ops side by side and
    # its longest chain of dependent ops at the rate read off a polynomial (one chain): the polynomial
    # keeps its time, compares and selects beside arithmetic go at the side-by-side rate, and an exact
    # GELU (erfc's two polynomials side by side), 10% over at one rate, is within 3%
    m = cost.V5E_MEASURED
    rows = {r.program: r for r in records.calibration("v5e")}
    held = [r for r in records.held_out("v5e") if r.program.startswith("exact GELU f32")]
    picked = rows["compare and select over add and subtract x32 f32"]
    elements = 16384 * 8192
    assert picked.estimated == pytest.approx(128 * elements * m.vector_op_side_by_side_seconds, rel=0.01)
    assert rows["polynomial x4 f32"].error == pytest.approx(0.0, abs=0.01)
    gelus = [r for r in rows.values() if r.program.startswith("exact GELU")] + held
    assert len(gelus) >= 8 and all(abs(r.error) < 0.03 for r in gelus), [f"{r.error:+.1%}" for r in gelus]
    one_rate = dataclasses.replace(
        cost.CHIPS["v5e"], measured=dataclasses.replace(m, vector_op_side_by_side_seconds=0.0)
    )
    with gzip.open(records.RECORDS / "tpu_v5e_programs.json.gz", "rt") as f:
        text = json.load(f)["exact GELU f32, 8192 x 16384"]
    gelu = rows["exact GELU f32, 8192 x 16384"]
    assert cost.estimate(comms.analyze_text(text), one_rate).seconds > 1.08 * gelu.measured


def test_vector_unit_work_sets_a_kernel_longer_than_its_traffic():
    # property: four sines a element take four times one sine's vector time, far over the HBM time; a
    # kernel of exp, tanh or log stays at its HBM time; a slice that strides the lanes of an f32 or bf16
    # array is charged its dtype's lane-gather rate (bf16 about half of f32, per element), and one of
    # another dtype is flagged as outside the model
    rows = {r.program: r for r in records.calibration("v5e")}
    assert rows["sin x4 f32"].estimated > 3.9 * rows["sin f32"].estimated
    assert rows["exp x16 f32"].estimated == pytest.approx(rows["add f32"].estimated * 0.7, rel=0.01)
    assert rows["every other lane f32"].estimated > 6 * rows["join 64-lane halves f32"].estimated / 2
    assert 0.45 < rows["every other lane bf16"].estimated / rows["every other lane f32"].estimated < 0.6
    held = {r.program: r for r in records.held_out("v5e")}
    assert not held["rotary embedding bf16"].outside and not held["rotary embedding f32"].outside
    text = _LANE_SLICE.replace("bf16", "f16")
    assert cost.OUTSIDE_THE_MODEL in cost.estimate(comms.analyze_text(text), chip="v5e").notes
    assert cost.OUTSIDE_THE_MODEL not in cost.estimate(comms.analyze_text(_LANE_SLICE), chip="v5e").notes


# every other lane of a bf16 array, as a TPU program writes it
_LANE_SLICE = (
    "HloModule m, is_scheduled=true\n"
    "ENTRY %e (p: bf16[64,128]) -> bf16[64,64] {\n"
    "  %p = bf16[64,128]{1,0:T(8,128)(2,1)} parameter(0)\n"
    "  ROOT %s = bf16[64,64]{1,0:T(8,128)(2,1)} slice(%p), slice={[0:64], [0:128:2]}\n"
    "}\n"
)


def test_a_kernel_shares_a_sine_and_a_cosine_and_repeats_work_on_a_matmul_operand():
    # property: the sine and the cosine of one array cost about one sine (the pair was timed at 3.52 ms,
    # one sine at 3.38); a sine inside a matmul's kernel is computed at each of the tiling's fetches of
    # its operand (3 here) and partly exposed beside the matmul: hidden behind it the estimate would be
    # 35% short, and charged once 46% short
    rows = {r.program: r for r in records.calibration("v5e")}
    assert rows["sine and cosine of one array f32"].estimated < 1.1 * rows["sin f32"].estimated
    held = {r.program: r for r in records.held_out("v5e")}
    assert held["sin times cos f32"].estimated > 1.9 * rows["sin f32"].estimated  # two arrays: no pair
    from shardbook.hlo import parse_module

    path = records.RECORDS / "tpu_v5e_programs.json.gz"
    with gzip.open(path, "rt") as f:
        m = parse_module(json.load(f)["sine into a matmul f32"])
    fusion = next(i for i in m.entry.instructions if i.opcode == "fusion")
    fetched = hbm.operand_fetches(m, fusion)  # x's values 3.02 times, w's 5.16 times
    assert sorted({round(f, 2) for f in fetched.values()}) == [3.02, 5.16]
    measured = cost.V5E_MEASURED
    total, on_operands, outside = vector.vector_seconds(m, fusion, measured)
    sines = 3.02 * 4096 * 16384 * dict(measured.vector_seconds)["sine"]
    assert total == on_operands == pytest.approx(sines, rel=0.01) and not outside
    row = rows["sine into a matmul f32"]
    assert abs(row.error) < 0.07 and row.estimated > row.measured * 0.9


def test_the_kernel_record_is_the_fitted_programs_kernel_by_kernel():
    # benchmarks/tpu_kernels.py's record (JAX's profiler on the chip) belongs to the programs of the
    # fitted record: every program that ran there (and the 0.52B step not donated, which ran in the
    # profiler's process, as in the memory record, but not in the recorder's), every kernel an
    # instruction of that program's TPU text; a call's kernels (loops left out, their kernels in) add
    # up to the profiler's time for the call, which is the fitted record's time less the gaps between
    # calls, up to 3.5% (two records of one chip agree).
    kernels = json.loads((records.RECORDS / "tpu_v5e_kernels.json").read_text())["programs"]
    fitted = records.tpu_record("v5e")["programs"]
    with gzip.open(records.RECORDS / "tpu_v5e_programs.json.gz", "rt") as f:
        texts = json.load(f)
    ran = {name for name, entry in fitted.items() if "seconds" in entry}
    assert set(kernels) - ran == {"GPT 0.52B Adam step, not donated"} and ran <= set(kernels)
    for name, entry in kernels.items():
        module = comms.analyze_text(texts[name]).module
        names = {i.name for c in module.computations.values() for i in c.instructions}
        assert set(entry["kernels"]) <= names, (name, set(entry["kernels"]) - names)
        if name in ran and fitted[name]["seconds"] > 1e-3:
            assert -0.035 < entry["module_seconds"] / fitted[name]["seconds"] - 1 < 0.005, name
    rows = records.kernel_calibration("v5e")
    per_call: dict[str, float] = {}
    for r in rows:
        per_call[r.program] = per_call.get(r.program, 0.0) + r.measured
    for name in per_call:  # and the waits for asynchronous copies, which no kernel row holds
        waits = [
            s for k, (_, s) in kernels[name]["kernels"].items() if k.startswith(("copy-done", "slice-done"))
        ]
        per_call[name] += sum(waits)
    for name, kernel_sum in per_call.items():  # two records of one trace, not this test's clock
        share = kernel_sum / kernels[name]["module_seconds"]
        assert 0.95 < share < 1.02, name


def test_per_kernel_the_model_is_rougher_than_per_program():
    # What appendix A says of the kernels: most of the chip's time lies in kernels the model gets
    # within 15%, but single kernels miss by far more, and in a program their errors partly cancel.
    rows = records.kernel_calibration("v5e")
    got = records.kernel_summary(rows)
    assert got["kernels"] > 250 and 0.8 < got["time within 15%"] < 0.98
    assert min(r.error for r in rows if r.measured > 5e-3) < -0.1  # a 5 ms kernel, a tenth short
    # the asynchronous copies run beside the kernels: none is charged as one
    assert not [r for r in rows if r.opcode in cost.ASYNC_STARTS]
    gpt = [r for r in rows if r.program == "GPT 0.16B Adam step"]
    off = sum(abs(r.estimated - r.measured) for r in gpt)
    net = abs(sum(r.estimated - r.measured for r in gpt))
    assert off > 2 * net


def test_the_records_rows_follow_the_chips_model(monkeypatch):
    # property: the rows are worked out once a process for each model of the chip, so a chip whose
    # measured rates were replaced (as the book does to show a rule's "before") gets rows of its own
    first = records.held_out("v5e")
    assert records.held_out("v5e") == first and records.held_out("v5e") is not first
    m = dataclasses.replace(cost.V5E_MEASURED, window_rows_set_write_rate=False)
    monkeypatch.setitem(cost.CHIPS, "v5e", dataclasses.replace(cost.CHIPS["v5e"], measured=m))
    assert [r.error for r in records.held_out("v5e")] != [r.error for r in first]
