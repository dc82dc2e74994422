"""The cost model's rules for kinds of TPU kernel, each read off a sweep recorded on a real v5e (the
fitted record's kernel sweeps, or one kept in benchmarks/pending): the chip's time against the rule's."""

from __future__ import annotations

import dataclasses
import gzip
import json

import pytest

from shardbook import comms, cost, hbm, records, vector


def pending_sweep(name: str) -> tuple[dict, dict]:
    """(each program's kernels as the chip timed them, each program's compiled text) of a sweep kept in
    benchmarks/pending (``kernel_sweeps_seventh`` and so on)."""
    stem = records.RECORDS.parents[1] / "benchmarks" / "pending" / f"{name}_tpu_v5e"
    kernels = json.loads(stem.with_name(stem.name + "_kernels.json").read_text())["programs"]
    with gzip.open(stem.with_name(stem.name + "_programs.json.gz"), "rt") as f:
        return kernels, json.load(f)


def test_attentions_scores_beside_their_running_max_write_at_the_rate_of_a_product_that_mostly_writes():
    # read off benchmarks.tpu_attention_sweeps.kernel_sweeps_seventh's kernels (benchmarks/pending):
    # attention's first kernel, the scores with the softmax's running max kept in VMEM, its contraction
    # in one step: with heads of 64, 128 and 192 within 8% of the chip; at the general write rate 12%
    # over or more. With heads of 192 its MXU time plus Measured.vmem_results_writes_exposed of its
    # writes is its time
    chip_kernels, texts = pending_sweep("kernel_sweeps_seventh")
    m = cost.V5E_MEASURED
    general = dataclasses.replace(
        cost.CHIPS["v5e"], measured=dataclasses.replace(m, hbm_matmul_write_bandwidth=None)
    )
    for heads, first in ((64, "fusion.6"), (128, "fusion.11"), (192, "fusion.6")):
        name = f"attention sweep bf16, 16 heads of {heads}, batch 3"
        chip = chip_kernels[name]["kernels"][first][1]
        seconds = {}
        for label, at in (("rule", cost.CHIPS["v5e"]), ("general", general)):
            sim = cost._Simulator(comms.analyze_text(texts[name]), at)
            comp, inst = next(
                (c, i) for c in sim.module.computations.values() for i in c.instructions if i.name == first
            )
            assert len(inst.arrays) == 2 and hbm.hbm_results(inst.type_text) == 1  # the max in VMEM
            seconds[label] = sim._kernel_seconds(comp, inst)[0]
        assert seconds["rule"] == pytest.approx(chip, rel=0.08), (name, seconds, chip)
        assert seconds["general"] > 1.12 * chip, (name, seconds, chip)
    flops, _ = sim._flops(comp, inst)
    mxu = flops / cost.measured_matmul_rate(cost.CHIPS["v5e"], "bf16")
    writes = 3 * 16 * 2048 * 2048 * 2 / m.hbm_matmul_write_bandwidth
    assert m.vmem_results_writes_exposed == pytest.approx((chip - mxu) / writes, abs=0.01)


def test_a_batched_product_that_contracts_in_steps_writes_after_its_products():
    # property: attention's scores whose contraction takes two or three steps of their kernel's grid
    # (heads of 256 and 384) take their MXU time plus their writes at the rate of a product that mostly
    # writes; with heads of 128 (one step) the writes overlap the products, as in a plain product
    rows = {r.program: r for r in records.calibration("v5e")}
    split = [
        "attention scores bf16, 8 heads of 256, batch 4",  # read off this one (kernel_sweeps_third)
        "attention scores bf16, 4 heads of 384, batch 8",
        "attention scores bf16, 8 heads of 256",
        "attention scores bf16, 8 heads of 256, 1024 long",
    ]
    assert all(abs(rows[n].error) < 0.05 for n in split), [f"{rows[n].error:+.1%}" for n in split]
    m = cost.V5E_MEASURED
    assert m.hbm_matmul_write_bandwidth
    scores = rows["attention scores bf16, 8 heads of 256, batch 4"]
    writes = 4 * 8 * 2048 * 2048 * 2 / m.hbm_matmul_write_bandwidth  # bf16 scores, 268 MB
    mxu = 2 * 4 * 8 * 2048 * 2048 * 256 / cost.measured_matmul_rate(cost.CHIPS["v5e"], "bf16")
    assert scores.estimated == pytest.approx(mxu + writes, rel=0.02)
    one_step = rows["attention scores bf16, 16 heads of 128"]
    assert one_step.estimated < 0.75 * (one_step.matmul + 2**29 / m.hbm_matmul_write_bandwidth)


def test_a_sum_across_the_lanes_of_a_16_bit_operand_takes_16_rows_a_register():
    # property: a vector register holds 16 rows of bf16 (two to a sublane), so a sum across the lanes of
    # a bf16 array makes half the groups an f32 one of the same shape makes
    def reduce_of(dtype: str) -> str:
        window = '{"window_config":{"iteration_bounds":["8","393"],"output_window_bounds":["128","1"]}}'
        return (
            "HloModule m, is_scheduled=true\n"
            "%add (a: f32[], b: f32[]) -> f32[] {\n  %a = f32[] parameter(0)\n  %b = f32[] parameter(1)\n"
            "  ROOT %s = f32[] add(%a, %b)\n}\n"
            f"ENTRY %e (x: {dtype}[8192,50304]) -> {dtype}[8192] {{\n"
            f"  %x = {dtype}[8192,50304]{{1,0:T(8,128)}} parameter(0)\n"
            f"  %z = {dtype}[] constant(0)\n"
            f"  ROOT %r = {dtype}[8192]{{0:T(1024)}} reduce(%x, %z), dimensions={{1}}, to_apply=%add, "
            f"backend_config={window}\n}}\n"
        )

    from shardbook.hlo import parse_module

    m = cost.V5E_MEASURED
    seconds = {}
    for dtype in ("f32", "bf16"):
        module = parse_module(reduce_of(dtype))
        seconds[dtype] = vector.vector_seconds(module, module.entry.root, m)[0]
    elements = 8192 * 50304 * m.vector_op_seconds
    assert seconds["f32"] == pytest.approx(elements + 1024 * 393 * m.lane_reduce_rank1_seconds)
    assert seconds["bf16"] == pytest.approx(elements + 512 * 393 * m.lane_reduce_rank1_seconds)


def test_the_scores_alone_write_at_the_rate_their_window_sets():
    # read off benchmarks.tpu_attention_sweeps.kernel_sweeps_eighth's kernels (benchmarks/pending): the scores
    # alone, their contraction in 2 or 3 steps, in windows of 512 of 2,048 keys write at the general
    # rate (within 2% of the chip; at a product's write rate 8% short or more); in a window of whole
    # rows (4 heads of 256: all 2,048 keys) at a product's rate. Measured.window_rows_set_write_rate
    # off, each is charged at a product's rate.
    chip_kernels, texts = pending_sweep("kernel_sweeps_eighth")
    m = cost.V5E_MEASURED
    off = dataclasses.replace(
        cost.CHIPS["v5e"], measured=dataclasses.replace(m, window_rows_set_write_rate=False)
    )
    cases = {
        "16 heads of 256, 2048 long, batch 2": False,
        "16 heads of 384, 2048 long, batch 2": False,
        "16 heads of 256, 1024 long, batch 8": False,
        "4 heads of 256, 2048 long, batch 8": True,
    }
    for shape, whole_rows in cases.items():
        name = f"attention scores window sweep bf16, {shape}"
        chip = chip_kernels[name]["kernels"]["fusion"][1]
        seconds = {}
        for label, at in (("rule", cost.CHIPS["v5e"]), ("off", off)):
            sim = cost._Simulator(comms.analyze_text(texts[name]), at)
            inst = sim.module.entry.by_name["fusion"]
            assert hbm.grid_bounds(inst)[-1] > 1 and hbm.window_spans_lanes(inst) is whole_rows
            seconds[label] = sim._kernel_seconds(sim.module.entry, inst)[0]
        if whole_rows:
            assert seconds["rule"] == seconds["off"] == pytest.approx(chip, rel=0.06), (name, seconds, chip)
        else:
            assert seconds["rule"] == pytest.approx(chip, rel=0.02), (name, seconds, chip)
            assert seconds["off"] < 0.93 * chip, (name, seconds, chip)
    # in one step, a window of whole rows: the MXU time and Measured.vmem_results_writes_exposed of the
    # writes at a product's rate (kernel_sweeps_seventh's scores alone with heads of 64); off, the
    # general rate beside the products is 19% over
    chip_kernels, texts = pending_sweep("kernel_sweeps_seventh")
    text = texts["attention scores sweep bf16, 16 heads of 64, batch 3"]
    chip = chip_kernels["attention scores sweep bf16, 16 heads of 64, batch 3"]["kernels"]["fusion"][1]
    seconds = {}
    for label, at in (("rule", cost.CHIPS["v5e"]), ("off", off)):
        sim = cost._Simulator(comms.analyze_text(text), at)
        inst = sim.module.entry.by_name["fusion"]
        assert hbm.grid_bounds(inst)[-1] == 1 and hbm.window_spans_lanes(inst) is True
        seconds[label] = sim._kernel_seconds(sim.module.entry, inst)[0]
    assert seconds["rule"] == pytest.approx(chip, rel=0.03) and seconds["off"] > 1.15 * chip, seconds


@pytest.mark.parametrize(
    "program, kernel, stated",
    [
        # a product's time over its MXU time: attention's second product (round 15), its scores (round 13)
        ("attention bfloat16 896, 16 heads of 256, batch 8", "fusion.8", "82%"),
        ("attention bfloat16 1024, 4 heads of 512, batch 8", "fusion.9", "21%"),
        # the scores alone in one step: what they read of what they write, and the part of their writes
        # at a product's rate beyond their MXU time
        ("attention scores bfloat16 1536, 8 heads of 256, batch 8", "fusion", "a sixth, 0.79"),
        ("attention scores bfloat16 3072, 4 heads of 384, batch 4", "fusion", "an eighth, 0.42"),
        ("attention scores bfloat16 2048, 12 heads of 256, batch 3", "fusion", "an eighth, 0.23"),
        ("attention scores bfloat16 2560, 4 heads of 256, batch 4", "fusion", "a tenth, 0.52"),
    ],
)
def test_what_shardbook_missed_says_of_a_kernel_is_the_chips_record(program, kernel, stated):
    # property: the kernel figures a named miss states (records.MISSED, printed in appendix A) are
    # what the chip's per-kernel record of that held-out program (benchmarks/pending) and the model's
    # reading of its compiled program give
    pending = records.RECORDS.parents[1] / "benchmarks" / "pending" / "held_out_tpu_v5e_kernels.json"
    runs, seconds = json.loads(pending.read_text())["programs"][program]["kernels"][kernel]
    with gzip.open(records.RECORDS / "tpu_v5e_held_out_programs.json.gz", "rt") as f:
        sim = cost._Simulator(comms.analyze_text(json.load(f)[program]), cost.CHIPS["v5e"])
    inst = sim.module.entry.by_name[kernel]
    flops, _ = sim._flops(sim.module.entry, inst)
    mxu = flops / cost.measured_matmul_rate(cost.CHIPS["v5e"], "bf16")
    chip = seconds / runs
    if stated.endswith("%"):
        assert f"{chip / mxu - 1:.0%}" == stated and stated in records.MISSED[program]
        assert hbm.grid_bounds(inst)[-1] > 1  # its contraction over the keys in steps
    else:
        share, exposed = stated.split(", ")
        read, written = hbm.tpu_hbm_traffic(sim.module, sim.module.entry, inst)
        fraction = {"a sixth": 6, "an eighth": 8, "a tenth": 10}[share]
        assert round(written / read) == fraction and hbm.grid_bounds(inst)[-1] == 1
        writes = written / cost.V5E_MEASURED.hbm_matmul_write_bandwidth
        assert f"{(chip - mxu) / writes:.2f}" == exposed
        assert share in records.MISSED[program] and exposed in records.MISSED[program]


def _second_products(kernels: dict, texts: dict):
    """(program, exposed share, whether its steps hold fewer than Measured.stepped_tile_elements of the
    weights, whether its heads are 256 wide) of each kernel of attention's second product in the
    [batch, tokens, heads, width] form, heads of 256 to 512, whose reads take a tenth of its MXU time or
    more: what it took beyond the model without the rule, over the shorter of its MXU and read times."""
    m = cost.V5E_MEASURED
    off = dataclasses.replace(cost.CHIPS["v5e"], measured=dataclasses.replace(m, stepped_reads_exposed=None))
    for name, entry in kernels.items():
        if name not in texts or "kernels" not in entry:
            continue
        sim = cost._Simulator(comms.analyze_text(texts[name]), off)
        ops = {i.name: (c, i) for c in sim.module.computations.values() for i in c.instructions}
        for kernel, (runs, seconds) in entry["kernels"].items():
            if kernel not in ops or (tile := hbm.stepped_weight_tile(sim.module, ops[kernel][1])) is None:
                continue
            if not 256 <= tile[1] <= 512:
                continue
            comp, inst = ops[kernel]
            flops, _ = sim._flops(comp, inst)
            mxu = flops / cost.measured_matmul_rate(off, *hbm._dot_setting(sim.module, comp, inst))
            read = hbm.tpu_hbm_traffic(sim.module, comp, inst)[0] + hbm.tiled_rereads(sim.module, comp, inst)
            reads = read / m.hbm_read_bandwidth
            if reads < mxu / 10:
                continue
            exposed = (seconds / runs - sim._kernel_seconds(comp, inst)[0]) / min(mxu, reads)
            yield name, exposed, tile[0] < m.stepped_tile_elements, tile[1] == 256


def test_attentions_second_product_in_small_steps_leaves_part_of_its_reads_exposed():
    # read off the second product's kernels of kernel_sweeps_seventh, _ninth and _tenth, the unexplained
    # programs and the fitted 8 heads of 256 (Measured.stepped_reads_exposed): in steps of fewer than
    # 2^20 elements of p, the medians of what each took beyond the model without the rule, over the
    # shorter of its MXU and read times, are the rule's two shares (heads of 256; of 384 and 512); the
    # bound: the held-out rounds' kernels in larger steps took at most 0.11 of it in 14 of 15 (0.25)
    import statistics

    with gzip.open(records.RECORDS / "tpu_v5e_programs.json.gz", "rt") as f:
        fitted = json.load(f)
    sweeps = ("kernel_sweeps_seventh", "kernel_sweeps_ninth", "kernel_sweeps_tenth", "unexplained")
    sources = [pending_sweep(n) for n in sweeps]
    sources.append((json.loads((records.RECORDS / "tpu_v5e_kernels.json").read_text())["programs"], fitted))
    rows = [row for kernels, texts in sources for row in _second_products(kernels, texts)]
    narrow = [e for _, e, small, n in rows if small and n]
    wide = [e for _, e, small, n in rows if small and not n]
    assert (len(narrow), len(wide)) == (8, 10)
    assert (statistics.median(narrow), statistics.median(wide)) == pytest.approx(
        cost.V5E_MEASURED.stepped_reads_exposed, abs=0.006
    )
    pending = records.RECORDS.parents[1] / "benchmarks" / "pending" / "held_out_tpu_v5e_kernels.json"
    with gzip.open(records.RECORDS / "tpu_v5e_held_out_programs.json.gz", "rt") as f:
        held = json.load(f)
    rounds = {r.program: r.round for r in records.held_out("v5e")}
    kernels = {n: e for n, e in json.loads(pending.read_text())["programs"].items() if rounds.get(n, 0) <= 15}
    large = sorted(e for _, e, small, _ in _second_products(kernels, held) if not small)
    assert len(large) == 15 and large[-2] <= 0.11 and f"{large[-1]:.2f}" == "0.25", large


def test_a_plain_product_near_balance_overlaps_its_mxu_and_hbm_times_imperfectly():
    # read off benchmarks.tpu_matmul_sweeps.kernel_sweeps_fourteenth (Measured.balance_exponent): its
    # plain products contracting in several steps fit (a^9 + h^9)^(1/9) best of the exponents near
    # it, every kernel within 6% of the chip; with the longer of the two alone the balanced f32 ones
    # (HBM 0.98 to 1.01 of MXU) are 7% short or more
    import math

    chip_kernels, texts = pending_sweep("kernel_sweeps_fourteenth")
    m = cost.V5E_MEASURED
    assert m.balance_exponent == 9

    def errors(p: float) -> dict[str, float]:
        at = dataclasses.replace(cost.CHIPS["v5e"], measured=dataclasses.replace(m, balance_exponent=p))
        out = {}
        for name, entry in chip_kernels.items():
            sim = cost._Simulator(comms.analyze_text(texts[name]), at)
            inst = sim.module.entry.by_name["fusion"]
            if hbm.grid_bounds(inst)[-1] == 1:
                continue
            runs, seconds = entry["kernels"]["fusion"]
            out[name] = sim._kernel_seconds(sim.module.entry, inst)[0] / (seconds / runs) - 1
        return out

    def rms(p: float) -> float:
        e = errors(p)
        return math.sqrt(sum(math.log1p(x) ** 2 for x in e.values()) / len(e))

    rule = errors(9)
    assert len(rule) == 11 and max(abs(e) for e in rule.values()) < 0.06, rule
    assert rms(9) < min(rms(8), rms(10)) and rms(9) < 0.03 < 0.06 < rms(0)
    longer = errors(0)
    for shape in ("5632 x 8192 x 5632", "6656 x 8192 x 6656", "5632 x 8192 x 6144", "6144 x 8192 x 5632"):
        assert longer[f"matmul sweep float32, {shape}"] < -0.07, (shape, longer)
