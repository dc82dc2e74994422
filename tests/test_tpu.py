"""Tests for shardbook.tpu: compiling for a TPU topology on this machine, its cache and its verdicts."""

import importlib.util
import json
from importlib.resources import files

import jax
import jax.numpy as jnp
import pytest
from jax.sharding import AxisType, NamedSharding, SingleDeviceSharding
from jax.sharding import PartitionSpec as P

from benchmarks import tpu_programs
from shardbook import comms, tpu

# A program compiled for a TPU topology goes into the tests' compilation cache too (tests/conftest.py),
# but without a TPU to load it on it cannot be read back: JAX says so and compiles it again.
pytestmark = pytest.mark.filterwarnings("ignore:Error reading persistent compilation cache entry")


def _matmul(rows):
    """A builder: A[B_X, D_Y] @ W[D, F_Y] on a (2, 4) mesh of the devices it is given."""

    def build(devices):
        mesh = jax.make_mesh((2, 4), ("X", "Y"), (AxisType.Auto,) * 2, devices=devices)
        a = jax.ShapeDtypeStruct((rows, 2048), jnp.bfloat16, sharding=NamedSharding(mesh, P("X", "Y")))
        w = jax.ShapeDtypeStruct((2048, 8192), jnp.bfloat16, sharding=NamedSharding(mesh, P(None, "Y")))
        return jax.jit(lambda a, w: a @ w, out_shardings=NamedSharding(mesh, P("X", "Y"))), (a, w)

    return build


def _too_big(devices):
    """A builder: 32 GiB replicated on every device, twice a v5e's HBM."""
    mesh = jax.make_mesh((8,), ("X",), (AxisType.Auto,), devices=devices)
    x = jax.ShapeDtypeStruct((8, 2**30), jnp.float32, sharding=NamedSharding(mesh, P()))
    return jax.jit(lambda x: x * 2), (x,)


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("SHARDBOOK_TPU_CACHE", str(tmp_path))
    return tmp_path


def test_compile_for_tpu_gives_the_tpu_program(cache):
    # property: the TPU compiler's own program: it splits the all-gather matmul into collective-permutes
    # (XLA:CPU all-gathers), its memory, and the usable HBM of a v5e
    program = tpu.compile_for_tpu(_matmul(1024), "v5e-8")
    assert program.fits and not program.from_cache
    assert program.mesh_axes == {"X": 2, "Y": 4}
    report = comms.analyze(program)
    assert report.platform == "tpu"
    assert report.count("collective-permute") == 3 and report.count("all-gather") == 0
    assert {c.axes for c in report.collectives} == {("Y",)}
    assert report.flops == 2 * 512 * 2048 * 2048
    assert comms.footprint(program) == program.memory
    assert program.memory.arguments == (512 * 512 + 2048 * 2048) * 2
    assert program.hbm_bytes == int(15.75 * 2**30)
    assert program.verdict().startswith("fits a TPU v5e chip: peak ")


def _partial_sums(devices):
    """A builder: the contracted dimension split over 'Y', the result split over both axes."""
    mesh = jax.make_mesh((2, 4), ("X", "Y"), (AxisType.Auto,) * 2, devices=devices)
    a = jax.ShapeDtypeStruct((256, 1024), jnp.float32, sharding=NamedSharding(mesh, P("X", "Y")))
    w = jax.ShapeDtypeStruct((1024, 2048), jnp.float32, sharding=NamedSharding(mesh, P("Y", None)))
    return jax.jit(jnp.matmul, out_shardings=NamedSharding(mesh, P("X", "Y"))), (a, w)


def test_a_tpu_programs_reduce_scatter_is_said_as_the_tpu_runs_it(cache):
    # regression: the TPU compiler fuses the all-reduce and its slice into a fusion calling
    # %all-reduce-scatter; the report's note names that, not the CPU backend's all-reduce + slice
    report = comms.analyze(tpu.compile_for_tpu(_partial_sums, "v5e-8"))
    assert report.count("reduce-scatter") == 1 and report.count("all-reduce") == 0
    assert "calls=%all-reduce-scatter" in report.text
    assert any("TPU compiler fuses" in n for n in report.notes), report.notes
    assert not any("CPU backend" in n for n in report.notes), report.notes


def test_compile_for_tpu_reads_back_what_did_not_change(cache):
    # property: the same program is read from the cache (no compile), a changed one is compiled
    first = tpu.compile_for_tpu(_matmul(1024), "v5e-8")
    again = tpu.compile_for_tpu(_matmul(1024), "v5e-8")
    assert again.from_cache and again.fingerprint == first.fingerprint
    assert again.text == first.text and again.memory == first.memory
    # the program lowered for 8 CPU devices to fingerprint it is XLA:CPU's program of the same step
    step, args = _matmul(1024)(jax.devices("cpu")[:8])
    fields = ("argument_size_in_bytes", "temp_size_in_bytes")
    on_cpu = [c.compile().memory_analysis() for c in (again.cpu_lowered, step.lower(*args))]
    assert [getattr(on_cpu[0], f) for f in fields] == [getattr(on_cpu[1], f) for f in fields]
    changed = tpu.compile_for_tpu(_matmul(2048), "v5e-8")
    assert not changed.from_cache and changed.fingerprint != first.fingerprint
    assert tpu.fingerprint(_matmul(1024), "v6e-8")[0] != first.fingerprint  # another topology
    assert len(list(cache.glob("*.json.gz"))) == 3  # two programs and the HBM probe


def test_cached_programs_need_no_tpu_compiler(cache, monkeypatch):
    # property: where libtpu is missing a cached program is read back; an uncached one says what to install
    tpu.compile_for_tpu(_matmul(1024), "v5e-8")
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda n, *a: None if n == "libtpu" else real(n, *a))
    tpu.tpu_devices.cache_clear()
    try:
        assert tpu.compile_for_tpu(_matmul(1024), "v5e-8").from_cache
        with pytest.raises(tpu.TpuCompilerUnavailable, match=r"pip install 'jax\[tpu\]==0.12.0.1'"):
            tpu.compile_for_tpu(_matmul(2048), "v5e-8")
    finally:
        tpu.tpu_devices.cache_clear()


def test_a_program_too_big_is_a_verdict(cache):
    # property: the compiler's CompileTimeHbmOom becomes "does not fit" with its figures, cached too;
    # analyze and footprint refuse it with the verdict
    for _ in range(2):
        program = tpu.compile_for_tpu(_too_big, "v5e-8")
        assert not program.fits and program.needs_bytes == 64 * 2**30
        assert (
            program.verdict()
            == "does not fit a TPU v5e chip: needs 64 GiB of 15.75 GiB (TPU compiler, v5e-8)"
        )
    assert program.from_cache
    with pytest.raises(comms.DoesNotFit, match="needs 64 GiB of 15.75 GiB"):
        comms.analyze(program)
    with pytest.raises(comms.DoesNotFit, match="CompileTimeHbmOom"):
        comms.footprint(program)


def test_unknown_topology_and_bad_builder():
    # property: mistakes are named with what was expected
    with pytest.raises(ValueError, match=r"unknown TPU topology 'v5e-3': expected one of \['v5e-1'"):
        tpu.compile_for_tpu(_matmul(1024), "v5e-3")
    with pytest.raises(
        TypeError, match=r"must return \(fn, args\) or \(fn, args, kwargs\), got builtin_function_or_method"
    ):
        tpu.compile_for_tpu(lambda devices: abs, "v5e-1")


def test_a_program_for_other_devices_is_refused_not_cached(cache):
    # property: arguments with no sharding on the topology's devices lower for the default backend
    # (XLA:CPU): compile_for_tpu refuses that program and caches nothing
    def unplaced(devices):
        x = jax.ShapeDtypeStruct((1024, 1024), jnp.float32)
        return jax.jit(lambda x: x @ x), (x,)

    with pytest.raises(ValueError, match=r"gave a program for cpu devices, not the TPU topology's"):
        tpu.compile_for_tpu(unplaced, "v5e-1")
    assert not list(cache.iterdir())


def _one_chip(name):
    """A builder of the recorded one-chip program called ``name``."""
    program = next(p for p in tpu_programs.all_programs() if p.name == name)

    def build(devices):
        place = SingleDeviceSharding(devices[0])
        shapes = jax.tree.map(
            lambda s: jax.ShapeDtypeStruct(s.shape, s.dtype, sharding=place), program.shapes
        )
        return program.fn, shapes

    return build


RECORD = json.loads((files("shardbook") / "data" / "tpu_v5e.json").read_text())


@pytest.mark.parametrize("name", ["attention bfloat16 2048", "GPT 0.16B Adam step", "GPT 0.61B Adam step"])
def test_a_one_chip_compile_here_matches_the_chips(name):
    # property: compiled here (the book's JAX and libtpu, committed cache) the program's memory is what a
    # real v5e's own compile said (its JAX 0.10.2) within 0.2%
    chip = RECORD["programs"][name]
    memory = tpu.compile_for_tpu(_one_chip(name), "v5e-1").memory
    for field in ("arguments", "outputs", "aliased", "temporaries"):
        assert getattr(memory, field) == pytest.approx(chip[field], rel=0.002, abs=4096), field


@pytest.mark.parametrize("name", ["GPT 0.84B Adam step", "GPT 1.42B Adam step"])
def test_a_one_chip_refusal_here_matches_the_chips(name):
    # property: a program the real chip's compiler refused is refused here with the same figures
    program = tpu.compile_for_tpu(_one_chip(name), "v5e-1")
    assert not program.compiled and not program.fits
    assert (program.needs_bytes, program.hbm_bytes) == comms.parse_hbm_oom(RECORD["programs"][name]["raises"])


@pytest.mark.parametrize("name", [n for n, p in RECORD["programs"].items() if p["family"] == "training"])
def test_fits_is_whether_the_real_chip_ran_it(name):
    # property: the verdict here is what happened on the chip. The step whose state is not donated ran
    # its first step: when its second failed to allocate, the chip held two whole copies of its state
    # (peak_bytes_in_use), the first step's input, which the recorder still held, and its output
    chip = RECORD["programs"][name]
    program = tpu.compile_for_tpu(_one_chip(name), "v5e-1")
    assert program.compiled == ("raises" not in chip), program.verdict()
    if "run_raises" in chip:
        assert "RuntimeBufferAllocationFailure" in chip["run_raises"]
        assert chip["peak_bytes_in_use"] >= chip["arguments"] + chip["outputs"] - chip["aliased"]
    assert program.fits == ("raises" not in chip), program.verdict()


MEMORY = json.loads((files("shardbook") / "data" / "tpu_v5e_memory.json").read_text())


def _chip_ran(step: dict) -> bool:
    """Whether a step of the memory record ran on the chip (a first step that completed)."""
    return bool(step.get("steps"))


def _footprint(step: dict, with_peak: bool) -> comms.Footprint | None:
    ma = step.get("memory_analysis")
    if ma is None:
        return None
    return comms.Footprint(
        ma["argument_size_in_bytes"],
        ma["output_size_in_bytes"],
        ma["alias_size_in_bytes"],
        ma["temp_size_in_bytes"],
        ma["peak_memory_in_bytes"] if with_peak else None,
    )


def test_the_memory_record_straddles_the_line():
    # property: the record holds at least 12 steps, donated and not, large state and small, some that
    # ran and some the compiler refused, and some whose memory_analysis sum is over the chip's HBM
    steps = MEMORY["programs"]
    hbm = MEMORY["hbm_bytes_limit"]
    assert len(steps) >= 12 and MEMORY["device_kind"] == "TPU v5 lite"
    donated = {s["donated"] for s in steps.values()}
    assert donated == {True, False}
    ran = [s for s in steps.values() if _chip_ran(s)]
    refused = [s for s in steps.values() if not s["compiled"]]
    assert len(ran) >= 5 and len(refused) >= 3
    over = [s for s in ran if (f := _footprint(s, False)) is not None and f.peak > hbm]
    assert len(over) >= 3, "steps that ran with a memory_analysis sum over the HBM"
    for s in ran:  # bytes_reserved is recorded after each step
        assert all("bytes_reserved" in step["stats_after"] for step in s["steps"])


@pytest.mark.parametrize("name", list(MEMORY["programs"]))
def test_hbm_verdict_gives_the_chips_answer(name):
    # property: the rule gives the chip's answer for every recorded step: with the compiler's peak
    # (memory_analysis' peak_memory_in_bytes) it is the chip's answer; with the four fields only, the
    # chip's answer or "undecided" with a range that holds the compiler's peak; a refusal does not fit
    step = MEMORY["programs"][name]
    hbm = MEMORY["hbm_bytes_limit"]
    answer = "fits" if _chip_ran(step) else "does not fit"
    needs = step.get("compiler_needs_bytes")
    full = comms.hbm_verdict(_footprint(step, True), hbm, needs)
    assert full.answer == answer, (full, step.get("run_raises", step.get("raises")))
    sums = comms.hbm_verdict(_footprint(step, False), hbm, needs)
    assert sums.answer in (answer, "undecided"), sums
    if sums.answer == "undecided":
        peak = step["memory_analysis"]["peak_memory_in_bytes"]
        assert sums.low <= peak <= sums.high, (sums, peak)
    if not step["compiled"]:
        assert needs > hbm and full.low == needs


def test_sum_overcount_is_the_records():
    # property: the constant is the record's largest gap between the memory_analysis sum and the
    # compiler's peak, among the steps that ran (not a guess)
    gaps = [
        f.peak - (f.compiler_peak or 0)
        for s in MEMORY["programs"].values()
        if _chip_ran(s) and (f := _footprint(s, True)) is not None
    ]
    assert max(gaps) == comms.SUM_OVERCOUNT


def test_usable_hbm_is_the_chips():
    # property: the compiler's available HBM is a real v5e's bytes_limit (the compiler rounds to 0.01 GiB)
    assert tpu.usable_hbm("v5e-1") == pytest.approx(RECORD["hbm_bytes_limit"], abs=0.005 * 2**30)


def test_a_recorded_step_feeds_its_whole_result_back():
    # regression: a step whose result is one array fed back its first row (out[:1]), so every call
    # after the first ran another program (a row broadcast against the product, nothing donated)
    from benchmarks.tpu_record import SETS, caller

    shape = ((8, 4), "float32")
    step = tpu_programs.program("step", "training", lambda p, x: p - x, shape, shape, feeds_back=1)
    pair = tpu_programs.program("pair", "training", lambda p, x: (p - x, x), shape, shape, feeds_back=1)
    for program in (step, pair):
        args = program.arguments()
        out, args = caller(program)(args)
        assert [a.shape for a in args] == [(8, 4), (8, 4)], program.name
    assert tpu_programs.fed_back([step, pair]) == [step]
    names = [p.name for p in SETS["fed_back"]() + SETS["held_out_fed_back"]()]
    assert len(names) == 14 and all(n.startswith("SGD inside") for n in names)
