"""A TPU cost model for a compiled program: how long one step would take on a real chip.

``estimate(report, chip="v5e")`` walks the compiled program read by :func:`shardbook.comms.analyze`
in schedule order and plays it on two streams per chip: the chip's kernels (matmuls first of all) and
the inter-chip links (collectives). An op starts when the values it reads are ready and its stream is
free, so

* a collective whose result feeds a matmul blocks that matmul (the all-gather before ``A @ W``);
* a collective that nothing running needs yet overlaps with the matmul in flight (the ring of
  ``ppermute``\\ s in a collective matmul).

A collective runs on the inter-chip links, which carry data both ways at once: the communication
stream is two streams, one per direction (:mod:`shardbook.links`). An all-gather, reduce-scatter or
all-reduce over mesh axes whose groups have ``n`` devices and move ``b`` bytes per device
(:func:`shardbook.comms.ring_bytes`) may use both directions and takes ``b / (links × W) + hops ×
latency``, where ``W`` is the one-way bandwidth of one ICI link, ``links`` is 2 on an axis that closes
into a ring (wraparound: data flows both ways round it) and 1 on an axis that is a line (a ring
algorithm on a line is limited by its busiest link, which carries ``n-1`` blocks one way), summed over
the axes the group spans; ``hops`` is ``n-1`` ring steps (``2(n-1)`` for all-reduce). A
collective-permute is timed from its source–target pairs: the blocks on its busiest link direction,
and it holds only the directions its pairs use, so two permutes going opposite ways round a ring
overlap.

What the compute stream runs depends on which compiler wrote the program (``report.platform``):

* **a CPU program** (the 8 simulated devices): matmuls only, each ``max(flops / peak, bytes / HBM
  bandwidth)`` at the chip's published peaks; every other op is free — on a TPU XLA fuses most of them
  into the matmuls around them, and the CPU program's separate fusions say nothing about that.
* **a TPU program** (:func:`shardbook.compile_for_tpu`, or a real chip's ``compiled.as_text()``):
  every top-level op, in the entry and in loop bodies (their trip counts read from the loop's
  condition when XLA leaves none), is a kernel. It takes the longest of three times: its matmul's FLOPs
  at the measured matmul rate; its HBM traffic, reads and writes each at its measured bandwidth
  (:func:`tpu_hbm_traffic`: slices and in-place updates, arrays in VMEM, and a matmul's operands read
  again as often as its tiling fetches them, :func:`tiled_rereads`; a plain product that mostly writes
  writes at the rate measured for one, and so does a batched one that keeps its other results in VMEM,
  part of its writes after its products); and its vector unit's work, each element-wise op at the
  rate measured for it (a sine costs 132 additions), a slice that strides the lanes at the lane-gather
  rate, a sum across the lanes at a cost per block of lanes. A plain product contracting in several
  steps takes more than the longer of its MXU and HBM times where they are close
  (:attr:`Measured.balance_exponent`). Attention's second product in the [batch, tokens, heads,
  width] form, in steps of few of its weights, adds part of the shorter of its MXU and read times
  (:attr:`Measured.stepped_reads_exposed`). A matmul kernel with several results in
  HBM pays a fixed time per step of its grid for each after the first. An asynchronous copy
  (:data:`ASYNC_STARTS`) moves its bytes on a stream of its own beside the kernels, in the HBM time
  they leave it, and what reads it waits for it. A collective the compiler runs as an asynchronous
  fusion in parts (a start, continuations that compute beside it, a done) is on the links from its
  start to its done, and the done waits for it; one fused whole into a single kernel, with no start
  and done of its own, is on the links while that kernel runs, which ends when both have. A call takes
  at least the measured fixed cost of one call (what the smallest program takes, which overlaps the
  device's work).

Chip figures are the public ones; each is cited next to it in :data:`CHIPS`. A chip that was measured
also carries the rates its TPU programs are estimated with (:class:`Measured`): on the v5e, from
one-chip programs timed on a real one (``shardbook/data/tpu_v5e.json``). :mod:`shardbook.records` sets
the estimates beside those times: all 138 programs of the record that ran within 15%, and 229 of 241
programs held out of the fit in nineteen rounds within its stated accuracy (twelve named misses). An f32
matmul is charged at the rate measured for the precision its compiled dot asks for
(``operand_precision`` or ``algorithm``: one, three or six bf16 passes). Two constants are fitted,
not measured: the throughput of **int32** matmuls (:data:`INT32_MATMUL_SLOWDOWN`), and how much of the
work on a matmul's operands inside its kernel the matrix unit leaves exposed
(:attr:`Measured.vector_matmul_exposed`, fitted to four programs of the record).

Example: the sharded matmul of :func:`shardbook.comms.analyze`'s example, whose all-gather of A over
'Y' blocks the matmul (8 simulated CPU devices, as ``shardbook.setup()`` gives):

  >>> import jax, jax.numpy as jnp
  >>> from jax.sharding import AxisType, NamedSharding, PartitionSpec as P
  >>> from shardbook.comms import analyze
  >>> mesh = jax.make_mesh((2, 4), ("X", "Y"), axis_types=(AxisType.Auto,) * 2)
  >>> a = jax.device_put(jnp.ones((1024, 2048), jnp.bfloat16), NamedSharding(mesh, P("X", "Y")))
  >>> w = jax.device_put(jnp.ones((2048, 8192), jnp.bfloat16), NamedSharding(mesh, P(None, "Y")))
  >>> f = jax.jit(lambda a, w: a @ w, out_shardings=NamedSharding(mesh, P("X", "Y")))
  >>> est = estimate(analyze(f, a, w), chip="v5e")
  >>> print(est)
  estimated step on TPU v5e: 59.8 µs (model · XLA:CPU program)
    matmuls 21.8 µs, collectives 38.0 µs, exposed communication 38.0 µs
  >>> [(e.kind, e.blocked) for e in est.events]
  [('all-gather', False), ('matmul', True)]
  >>> from shardbook.viz import draw_timeline
  >>> ax = draw_timeline(est)  # one bar per event, the blocked matmul hatched
  >>> [bar.get_hatch() is not None for bar in ax.patches]
  [False, True]
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from .comms import Collective, Report, collective_kind, dot_flops, trip_count
from .comms.analysis import collective_fusion_parts, collectives_fused_whole
from .hbm import (
    PRECISION_PASSES,
    _dot_setting,
    _matmul_tiling,
    dot_precision,
    grid_bounds,
    hbm_bytes,
    hbm_results,
    stepped_weight_tile,
    tiled_rereads,
    tpu_hbm_bytes,
    tpu_hbm_traffic,
    window_spans_lanes,
)
from .hlo import Computation, Instruction, Module
from .links import DIRECTIONS, collective_links, collective_seconds
from .measured import V5E_MEASURED, Measured
from .vector import UNMEASURED_VECTOR_OPS, vector_seconds

# Sources:
#   [GC]  Google Cloud TPU documentation, "TPU v4", "TPU v5e", "TPU v6e" system architecture pages
#         (cloud.google.com/tpu/docs/v4, /v5e, /v6e): peak bf16 / int8 compute and HBM bandwidth.
#   [HTS] J. Austin et al., "How To Scale Your Model", 2025, chapter "How to Think About TPUs",
#         table of chip specifications: HBM bandwidth, ICI one-way bandwidth per link, topology;
#         the same chapter gives ~1 µs per ICI hop and says that only full-axis slices (16 on v5e and
#         v6e, multiples of 4 on v4) have wraparound links.
#   [REC] shardbook/data/tpu_v5e.json: median times of one-chip programs measured on a TPU v5e, and
#         the rates read off them (:mod:`shardbook.measured`).


@dataclass(frozen=True)
class Chip:
    """Public figures of one TPU chip (per chip, per second), and what was measured on one."""

    name: str
    bf16_flops: float  # peak bf16 matmul FLOP/s [GC]
    int8_flops: float  # peak int8 matmul OP/s [GC]
    hbm_bandwidth: float  # bytes/s [GC], [HTS]
    ici_link_bandwidth: float  # one-way bytes/s of one ICI link [HTS]
    hop_latency: float  # seconds per ICI hop [HTS]
    wraparound_size: int  # an axis this long (or a multiple of it) closes into a ring [HTS]
    source: str
    measured: Measured | None = None  # [REC]; None: a TPU program is estimated at the published peaks


CHIPS: dict[str, Chip] = {
    # v4: 275 TFLOP/s bf16, 1.2 TB/s HBM [GC]; ICI 4.5e10 B/s one way per link, 3D torus [HTS]
    "v4": Chip("v4", 2.75e14, 2.75e14, 1.2e12, 4.5e10, 1e-6, 4, "[GC] TPU v4; [HTS] table of chips"),
    # v5e: 197 TFLOP/s bf16, 394 TOP/s int8, 819 GB/s HBM [GC]; ICI 4.5e10 B/s one way, 2D [HTS]
    "v5e": Chip("v5e", 1.97e14, 3.94e14, 8.1e11, 4.5e10, 1e-6, 16, "[GC] TPU v5e; [HTS]", V5E_MEASURED),
    # v5p: 459 TFLOP/s bf16, 918 TOP/s int8, 2.76 TB/s HBM [GC]; ICI 9e10 B/s one way, 3D torus [HTS]
    "v5p": Chip("v5p", 4.59e14, 9.18e14, 2.76e12, 9e10, 1e-6, 4, "[GC] TPU v5p; [HTS] table of chips"),
    # v6e (Trillium): 918 TFLOP/s bf16, 1836 TOP/s int8, 1.64 TB/s HBM [GC]; ICI 9e10 B/s one way [HTS]
    "v6e": Chip("v6e", 9.18e14, 1.836e15, 1.64e12, 9e10, 1e-6, 16, "[GC] TPU v6e; [HTS] table of chips"),
}

# The one calibrated constant. The MXU has no int32 mode: XLA runs an s32 dot as several narrower
# passes, at a rate no public table gives. It is fitted to one published measurement — the v5e-8
# matmul s32[512,2048] @ s32[2048,2048] per device with no communication, 224 µs (How To Scale Your
# Model, "Programming TPUs in JAX") — so that case is not an independent check of the model; the two
# other cases of benchmarks/collective_matmul.py are.
INT32_MATMUL_SLOWDOWN = 10.3  # int32 matmul throughput = bf16 peak / this

# How far an estimate may be from a real chip: benchmarks/collective_matmul.py (``make bench``) keeps
# every modelled case within this fraction of the published v5e-8 measurements. A grader or self-check
# that compares two estimates allows this margin (shardbook.checks.expect_estimate_within), so that a
# correct program is never refused on a difference the model cannot resolve.
MODEL_MARGIN = 0.10


def matmul_rate(chip: Chip, dtype: str, precision: str = "default") -> float:
    """FLOP/s of a matmul with operands of ``dtype`` on ``chip``.

    bf16 and f32 (JAX's default precision runs f32 matmuls as one bf16 pass on TPU) use the bf16 peak;
    f32 at precision "high" or "highest" makes three or six bf16 passes (:data:`PRECISION_PASSES`), so
    the peak is divided by that; 8-bit types use the int8 peak, 32/64-bit integers the calibrated int32
    rate, f64 1/8 of bf16 (emulated; a rough guess, flagged in the notes).
    """
    if dtype == "f32":
        return chip.bf16_flops / PRECISION_PASSES.get(precision, 1)
    if dtype in ("s8", "u8", "s4", "u4") or dtype.startswith("f8"):
        return chip.int8_flops
    if dtype in ("s32", "u32", "s64", "u64", "s16", "u16"):
        return chip.bf16_flops / INT32_MATMUL_SLOWDOWN
    if dtype == "f64":
        return chip.bf16_flops / 8
    return chip.bf16_flops


def measured_matmul_rate(chip: Chip, dtype: str, precision: str = "default") -> float:
    """FLOP/s of a TPU program's matmul with ``dtype`` operands at ``precision`` ("default", "high",
    "highest": what the compiled dot's ``operand_precision`` or ``algorithm`` says): the chip's
    :class:`Measured` rates for bf16 and for f32 at each precision; other types at :func:`matmul_rate`
    scaled by the measured bf16 rate's share of its peak (a chip measured on nothing, or a precision
    measured on nothing: :func:`matmul_rate`)."""
    m = chip.measured
    if m is None:
        return matmul_rate(chip, dtype, precision)
    if dtype == "f32":
        rate = {"high": m.f32_high_matmul_flops, "highest": m.f32_highest_matmul_flops}.get(
            precision, m.f32_matmul_flops
        )
        if rate is not None:
            return rate
        return matmul_rate(chip, dtype, precision) * m.f32_matmul_flops / chip.bf16_flops
    return matmul_rate(chip, dtype) * m.bf16_matmul_flops / chip.bf16_flops


@dataclass
class Event:
    """One op on one stream of the timeline."""

    stream: str  # "compute" or "communication"
    label: str
    start: float  # seconds from the start of the step
    end: float
    kind: str  # "matmul", "memory" (a TPU program's other kernels) or a collective kind
    blocked: bool = False  # a matmul that waited for a collective's result

    @property
    def seconds(self) -> float:
        return self.end - self.start


@dataclass
class Estimate:
    """The modelled time of one step on a chip, with the timeline that produced it."""

    chip: Chip
    seconds: float
    compute_seconds: float  # sum of matmul times
    communication_seconds: float  # sum of collective times
    events: list[Event] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    memory_seconds: float = 0.0  # a TPU program: sum of its other kernels' times (their HBM traffic)
    fixed_seconds: float = 0.0  # a TPU program: the least one call takes (Measured.call_seconds)
    device_seconds: float | None = None  # a TPU program: the timeline's end, before the fixed floor
    platform: str = "cpu"  # which compiler wrote the program: "tpu" or "cpu" (shardbook.sources)

    @property
    def exposed_communication_seconds(self) -> float:
        """Communication that is not hidden behind kernels: the timeline's end minus kernel time."""
        end = self.seconds if self.device_seconds is None else self.device_seconds
        return max(end - self.compute_seconds - self.memory_seconds, 0.0)

    @property
    def microseconds(self) -> float:
        return self.seconds * 1e6

    @property
    def source(self) -> str:
        """The tag of this figure's source: ``model · TPU program`` or ``model · XLA:CPU program``."""
        from .sources import tag

        return tag(self)

    def __repr__(self) -> str:
        us = 1e6
        kernels = f"matmuls {self.compute_seconds * us:.1f} µs, "
        if self.device_seconds is not None:  # a TPU program
            kernels += f"other kernels {self.memory_seconds * us:.1f} µs, "
        lines = [
            f"estimated step on TPU {self.chip.name}: {self.seconds * us:.1f} µs ({self.source})",
            f"  {kernels}collectives {self.communication_seconds * us:.1f} µs, "
            f"exposed communication {self.exposed_communication_seconds * us:.1f} µs",
        ]
        if self.device_seconds is not None:
            lines.append(
                f"  a call takes at least {self.fixed_seconds * us:.1f} µs (the smallest program's time)"
            )
        lines += [f"  * {n}" for n in self.notes]
        return "\n".join(lines)


def estimate(report: Report, chip: str | Chip = "v5e") -> Estimate:
    """Models one step of the analysed program on a TPU ``chip`` ("v4", "v5e", "v5p", "v6e").

    A program the TPU compiler wrote (``report.platform == "tpu"``) has every kernel charged, at the
    chip's measured rates; a CPU program has its matmuls alone charged, at the published peaks (the
    module docstring says why).

    Args:
      report: the result of :func:`shardbook.comms.analyze` (or :func:`shardbook.comms.analyze_text`).
      chip: a name from :data:`CHIPS` or a :class:`Chip`.

    Returns:
      An :class:`Estimate`: ``.seconds`` per step (a TPU program: at least the fixed cost of a call),
      the matmul, other-kernel (a TPU program) and collective totals, the ``.events`` of the timeline
      (draw them with :func:`shardbook.viz.draw_timeline`) and ``.notes`` on what was assumed.

    Raises:
      ValueError: an unknown chip name, or a report without its program.
    """
    if isinstance(chip, str):
        if chip not in CHIPS:
            raise ValueError(f"unknown chip {chip!r}: expected one of {sorted(CHIPS)}")
        chip = CHIPS[chip]
    if report.module is None:
        raise ValueError("the report has no program: expected the result of shardbook.comms.analyze")
    sim = _Simulator(report, chip)
    ready = sim.run(report.module.entry, [0.0] * _num_params(report.module.entry))
    end = max([_latest(ready), sim.compute_free, sim.comm_free])
    compute = sum(e.seconds for e in sim.events if e.kind == "matmul") + sim.extra_compute
    comm = sum(e.seconds for e in sim.events if e.stream == "communication") + sim.extra_comm
    notes = list(dict.fromkeys(sim.notes))
    if any(c.unknown_trip_count for c in report.collectives):
        notes.append("a loop with an unknown trip count was modelled as running once")
    if not sim.tpu:
        return Estimate(chip, end, compute, comm, sim.events, notes, platform="cpu")
    memory = sum(e.seconds for e in sim.events if e.kind == "memory") + sim.extra_memory
    fixed = chip.measured.call_seconds if chip.measured else 0.0
    if chip.measured is None:
        notes.append(f"no rates measured on a TPU {chip.name}: its published peaks, and no fixed cost")
    return Estimate(chip, max(end, fixed), compute, comm, sim.events, notes, memory, fixed, end, "tpu")


#: The ops that start an asynchronous copy: a copy engine moves its bytes beside the kernels
#: (:meth:`_Simulator._kernel`); the matching ``copy-done`` or ``slice-done`` is where a reader waits.
ASYNC_STARTS = ("copy-start", "slice-start")
ASYNC_DONES = ("copy-done", "slice-done")

#: Work no chip was timed on, and the note an estimate carries where a kernel does it: three functions
#: that are long polynomials whose cost was never measured (other ops never timed alone, such as power
#: or floor, are charged the plain rate unflagged), and a slice that strides the last axis of an array
#: that is neither f32 nor bf16 (the two lane-gather rates were read off one of each).
OUTSIDE_THE_MODEL = (
    "a kernel computes tan, atan2 or cbrt, or strides the last axis of an array neither f32 nor "
    "bf16: work whose cost was never measured"
)


def _num_params(comp: Computation) -> int:
    return sum(1 for i in comp.instructions if i.opcode == "parameter")


def _latest(value: Any) -> float:
    if isinstance(value, list):
        return max(map(_latest, value), default=0.0)
    return float(value)


class _Simulator:
    """Plays a program on a compute stream and two communication streams (one per link direction), in
    schedule order."""

    MAX_SIMULATED_ITERATIONS = 16

    def __init__(self, report: Report, chip: Chip) -> None:
        self.report = report
        assert report.module is not None  # estimate() has checked
        self.module: Module = report.module
        self.chip = chip
        self.compute_free = 0.0
        self.link_free = dict.fromkeys(DIRECTIONS, 0.0)  # a chip's links, one stream per direction
        self.copy_free = 0.0  # asynchronous copies, on a stream of their own beside the kernels
        self.copies: dict[str, float] = {}  # when each asynchronous copy issued so far ends
        self._hbm_memo: dict[int, float] = {}  # a kernel's HBM time, beside its _kernel_memo entry
        self.events: list[Event] = []
        self.notes: list[str] = []
        self.extra_compute = 0.0  # time of loop iterations not simulated one by one
        self.extra_memory = 0.0
        self.extra_comm = 0.0
        self.collectives = {(c.computation, c.name): c for c in report.collectives}
        # an asynchronous collective fusion's parts (start, continuations, done), and when the links end
        # the collective each started
        self.fused_parts = collective_fusion_parts(self.module) if report.platform == "tpu" else {}
        self.fused_links: dict[tuple[str, str, str], float] = {}
        self.produced_by_collective: set[str] = set()
        self.tpu = report.platform == "tpu"  # a TPU program: every kernel is charged
        # a collective a fusion holds whole, with no parts (the compiler's all-reduce-scatter fusions)
        self.fused_whole = collectives_fused_whole(self.module, report.collectives) if self.tpu else {}
        measured = chip.measured
        self.hbm_bandwidth = measured.hbm_bandwidth if measured and self.tpu else chip.hbm_bandwidth
        # an op's kernel time and flops, worked out once per op (a loop's body is played many times)
        self._kernel_memo: dict[int, tuple[tuple[float, str], list[str]]] = {}
        self._flops_memo: dict[int, tuple[int, str]] = {}

    @property
    def comm_free(self) -> float:
        """When the last collective ends, on either direction of the links."""
        return max(self.link_free.values())

    def _trips(self, loop: Instruction) -> int | None:
        return trip_count(loop, self.module, infer=self.tpu)

    def run(self, comp: Computation, params: list[Any]) -> Any:
        ready: dict[str, Any] = {}
        from_collective: dict[str, bool] = {}
        for inst in comp.instructions:
            ins = [ready.get(op, 0.0) for op in inst.operands]
            after = max(map(_latest, ins), default=0.0)
            waited_on_collective = any(map(from_collective.get, inst.operands))  # None: not one
            kind, phase = collective_kind(inst.opcode)
            if inst.opcode == "parameter":
                index = int(inst.operand_text) if inst.operand_text.isdigit() else 0
                ready[inst.name] = params[index] if index < len(params) else 0.0
            elif inst.opcode == "get-tuple-element":
                src = ins[0] if ins else 0.0
                index = int(inst.attr("index") or 0)
                ready[inst.name] = src[index] if isinstance(src, list) and index < len(src) else _latest(src)
                from_collective[inst.name] = waited_on_collective
            elif inst.opcode == "tuple":
                ready[inst.name] = ins
                from_collective[inst.name] = waited_on_collective
            elif inst.opcode == "while":
                ready[inst.name] = self._loop(inst, ins[0] if ins else 0.0)
            elif kind is not None and phase != "done":
                ready[inst.name] = self._collective(comp, inst, after)
                from_collective[inst.name] = True
            elif phase == "done":
                ready[inst.name] = after
                from_collective[inst.name] = True
            elif self.tpu and inst.opcode in ("call", "conditional"):
                ready[inst.name] = self._branch(inst, ins)
            elif self.tpu and (comp.name, inst.name) in self.fused_parts:
                role, pairs = self.fused_parts[comp.name, inst.name]
                ready[inst.name] = self._collective_part(comp, inst, after, waited_on_collective, role, pairs)
                from_collective[inst.name] = role == "done"
            elif self.tpu and (whole := self.fused_whole.get((comp.name, inst.name))) is not None:
                ready[inst.name] = self._collective_kernel(comp, inst, after, waited_on_collective, whole)
                from_collective[inst.name] = True
            elif self.tpu:
                ready[inst.name] = self._kernel(comp, inst, after, waited_on_collective)
                from_collective[inst.name] = waited_on_collective and ready[inst.name] == after
            else:
                flops, dtype = self._flops(comp, inst)
                if flops:
                    precision = _dot_setting(self.module, comp, inst)[1] if dtype == "f32" else "default"
                    ready[inst.name] = self._matmul(
                        comp, inst, after, flops, dtype, waited_on_collective, precision
                    )
                else:
                    ready[inst.name] = after  # fused into the matmuls on a TPU: free
                    from_collective[inst.name] = waited_on_collective
        return ready.get(comp.root.name, 0.0)

    def _kernel(self, comp: Computation, inst: Instruction, after: float, blocked: bool) -> float:
        """A TPU program's op: a kernel on the compute stream, at its roofline time (or free); an
        asynchronous copy moves its bytes beside the kernels, issued in program order, and what reads
        it waits for it (its ``copy-done``)."""
        seconds, kind = self._kernel_seconds(comp, inst)
        if inst.opcode in ASYNC_DONES and inst.operands:
            after = max(after, self.copies.get(inst.operands[0], 0.0))
        if kind == "":
            return after
        if inst.opcode in ASYNC_STARTS:
            self.copy_free = max(after, self.compute_free, self.copy_free) + seconds
            self.copies[inst.name] = self.copy_free
            return self.copy_free
        start = max(after, self.compute_free)
        blocked = blocked and after > self.compute_free
        self._share_hbm(start, seconds, self._hbm_memo.get(id(inst), 0.0))
        self.compute_free = start + seconds
        self.events.append(
            Event("compute", f"{inst.opcode} {inst.name}", start, start + seconds, kind, blocked)
        )
        return start + seconds

    def _share_hbm(self, start: float, seconds: float, hbm: float) -> None:
        """The copies in flight while a kernel runs move their bytes in the HBM time the kernel leaves
        them: a kernel busy with HBM traffic for the fraction ``hbm / seconds`` of its time leaves the
        rest. Read off round 11's bf16 layer norm (its kernels, recorded 2026-12-07): its 67 MB input
        copied into VMEM beside a sum that reads the same 67 MB from HBM took 88 µs more after the
        sum's 90 µs, not beside it."""
        if seconds <= 0.0 or self.copy_free <= start:
            return
        busy = min(hbm / seconds, 1.0)
        room = (1.0 - busy) * seconds  # HBM time the kernel leaves the copies

        def moved(end: float) -> float:
            left = end - start
            if left <= 0.0:
                return end
            return start + left / (1.0 - busy) if left <= room else start + seconds + left - room

        self.copies = {name: moved(end) for name, end in self.copies.items() if end > start}
        self.copy_free = moved(self.copy_free)

    def _branch(self, inst: Instruction, ins: list[Any]) -> Any:
        """A call, or a conditional's costliest branch (as in :meth:`_flops`), played op by op."""
        calls = [(k, c) for k, (_, n) in enumerate(inst.called()) if (c := self.module.computations.get(n))]
        if not calls:
            return _latest(ins)
        if inst.opcode == "call":
            return self.run(calls[0][1], ins)
        k, branch = max(calls, key=lambda kc: self._serial_seconds(kc[1]))
        return self.run(branch, ins[k + 1 : k + 2])  # branch k reads operand k + 1

    def _kernel_seconds(self, comp: Computation, inst: Instruction) -> tuple[float, str]:
        """(seconds, "matmul" or "memory") of one op of a TPU program; (0, "") for one that is free.

        Worked out once per op; a later call adds the notes the first one added, in the same order."""
        known = self._kernel_memo.get(id(inst))
        if known is not None:
            self.notes += known[1]
            return known[0]
        mark = len(self.notes)
        result = self._kernel_seconds_of(comp, inst)
        self._kernel_memo[id(inst)] = (result, self.notes[mark:])
        return result

    def _kernel_seconds_of(self, comp: Computation, inst: Instruction) -> tuple[float, str]:
        if inst.opcode in ("conditional", "call", "while"):  # weighing branches: what this one runs
            per_callee = [self._serial_seconds(c) for r, n in inst.called() if r != "condition"
                          if (c := self.module.computations.get(n)) is not None]  # fmt: skip
            if inst.opcode == "conditional":
                return max(per_callee, default=0.0), "memory"
            trips = self._trips(inst) if inst.opcode == "while" else 1
            return sum(per_callee) * (1 if trips is None else trips), "memory"
        traffic = tpu_hbm_traffic(self.module, comp, inst)
        if traffic is None:
            return 0.0, ""
        read, written = traffic
        flops, _ = self._flops(comp, inst)
        if flops:
            read += tiled_rereads(self.module, comp, inst)
        m = self.chip.measured
        vector, on_operands, outside = vector_seconds(self.module, inst, m) if m else (0.0, 0.0, False)
        if outside:
            self.notes.append(OUTSIDE_THE_MODEL)
        if not flops:
            alone = inst.opcode != "copy-start"
            hbm = self._hbm_memo[id(inst)] = self._hbm_seconds(read, written, alone=alone)
            return max(hbm, vector), "memory"
        # a plain product that mostly writes writes at the rate measured for one; so does a batched one
        # whose contraction takes one step of its grid and whose other results stay in VMEM (attention's
        # scores beside the softmax's running max), part of its writes after its products
        # (Measured.vmem_results_writes_exposed); and, where its window sets the rate
        # (Measured.window_rows_set_write_rate), one with one result whose window holds whole rows of it
        # (the scores alone, the keys on the lanes: benchmarks.tpu_attention_sweeps.kernel_sweeps_eighth)
        bounds = grid_bounds(inst)
        rows: bool | None = None  # whether its window holds whole rows; None: not asked
        writes_after = False
        if m is not None and len(bounds) > 3:  # a batched product
            rows = window_spans_lanes(inst) if m.window_rows_set_write_rate else None
            writes_after = (
                m.vmem_results_writes_exposed is not None
                and bounds[-1] == 1
                and (len(inst.arrays) > hbm_results(inst.type_text) or (len(inst.arrays) == 1 and bool(rows)))
            )
        mostly_writes = read < written / 10 and (
            _matmul_tiling(self.module, inst) is not None or writes_after
        )
        hbm = self._hbm_memo[id(inst)] = self._hbm_seconds(read, written, matmul_writes=mostly_writes)
        dtype, precision = _dot_setting(self.module, comp, inst)
        if precision != "default":
            self.notes.append(f"f32 matmuls at precision {precision!r} at the rate measured for it")
        mxu = flops / measured_matmul_rate(self.chip, dtype, precision)
        # work on an operand inside a plain product's kernel, at each fetch: the matrix unit and the
        # vector unit overlap, but not wholly, and the shorter of the two is partly exposed
        exposed = m.vector_matmul_exposed * min(mxu, on_operands) if m is not None else 0.0
        # each result after the first costs a fixed time at every step of the kernel's grid
        results = hbm_results(inst.type_text) - 1
        if m is not None and results > 0:
            exposed += m.result_step_seconds * math.prod(bounds) * results
        if m is not None and m.hbm_matmul_write_bandwidth and len(bounds) > 3 and bounds[-1] > 1:
            # a batched product whose contraction takes several steps of its grid writes each block of
            # its result after the block's last step, not beside the products. Read off
            # benchmarks.tpu_programs.kernel_sweeps_third (recorded 2026-12-06 with the eighth
            # held-out set, before this rule): "attention scores bf16, 8 heads of 256, batch 4", its
            # contraction in 2 steps, took 0.79 ms in its kernel: its MXU time (0.375) plus its 268 MB
            # written at the rate of a product that mostly writes (0.40), within 2%; with heads of 384
            # (3 steps) within 3%, of 128 (1 step) the writes overlap as in a plain product. Where its
            # window holds part of its result's rows (Measured.window_rows_set_write_rate), it writes at
            # the general rate (kernel_sweeps_eighth: the scores alone with 16 heads of 256 and 384 in
            # windows of 512 keys of 2,048, 2 and 3 steps, within 2%; at this rate 12% and 8% short)
            rate = m.hbm_matmul_write_bandwidth
            if rows is False and m.hbm_write_bandwidth:
                rate = m.hbm_write_bandwidth
            seconds = max(max(mxu, vector) + exposed + written / rate, hbm)
        else:
            if writes_after and mostly_writes and m is not None and m.hbm_matmul_write_bandwidth:
                exposed += (m.vmem_results_writes_exposed or 0.0) * written / m.hbm_matmul_write_bandwidth
            seconds = max(busy := max(mxu, vector) + exposed, hbm)
            if m is not None and (p := m.balance_exponent) and len(bounds) == 3 and bounds[-1] > 1:
                seconds = (busy**p + hbm**p) ** (1 / p)  # in several steps: MXU and HBM overlap imperfectly
        return seconds + self._stepped_reads_exposed(inst, mxu, read), "matmul"

    def _stepped_reads_exposed(self, inst: Instruction, mxu: float, read: int) -> float:
        """What a product laid out with its output's batch in the sublanes, that batch a head's width, in
        small steps of its weights, leaves exposed of the shorter of its MXU time and its reads' time
        (:attr:`Measured.stepped_reads_exposed`; :func:`shardbook.hbm.stepped_weight_tile`)."""
        m = self.chip.measured
        if m is None or m.stepped_reads_exposed is None or not m.hbm_read_bandwidth:
            return 0.0
        tile = stepped_weight_tile(self.module, inst)
        if tile is None or tile[0] >= m.stepped_tile_elements or not 256 <= tile[1] <= 512:
            return 0.0
        share = m.stepped_reads_exposed[0] if tile[1] == 256 else m.stepped_reads_exposed[1]
        return share * min(mxu, read / m.hbm_read_bandwidth)

    def _hbm_seconds(
        self, read: int, written: int, alone: bool = False, matmul_writes: bool = False
    ) -> float:
        """A kernel's HBM time: its reads and its writes at the rates measured for each, where they were
        (:class:`Measured`), else both at one bandwidth; with ``alone``, a kernel that reads nothing
        writes at the rate measured for that; with ``matmul_writes``, at the rate measured for a
        product's kernel that mostly writes."""
        m = self.chip.measured
        if self.tpu and m is not None and m.hbm_read_bandwidth and m.hbm_write_bandwidth:
            if alone and not read and m.hbm_write_alone_bandwidth:
                return written / m.hbm_write_alone_bandwidth
            if matmul_writes and m.hbm_matmul_write_bandwidth:
                return read / m.hbm_read_bandwidth + written / m.hbm_matmul_write_bandwidth
            return read / m.hbm_read_bandwidth + written / m.hbm_write_bandwidth
        return (read + written) / self.hbm_bandwidth

    def _serial_seconds(self, comp: Computation) -> float:
        """Kernel time of a computation of a TPU program, its kernels run one after another."""
        return sum(self._kernel_seconds(comp, sub)[0] for sub in comp.instructions)

    def _loop(self, inst: Instruction, state: Any) -> Any:
        calls = dict(inst.called())
        body = self.module.computations.get(calls.get("body", ""))
        if body is None:
            return state
        n = self._trips(inst)
        trips = n if n is not None else 1
        simulated = min(trips, self.MAX_SIMULATED_ITERATIONS)
        marks = []
        for _ in range(simulated):
            marks.append((self.compute_free, self.comm_free, _latest(state), len(self.events)))
            state = self.run(body, [state])
        if trips > simulated and simulated >= 2:
            # later iterations repeat the last one: shift by its duration
            c0, m0, s0, e0 = marks[-1]
            step = max(self.compute_free - c0, self.comm_free - m0, _latest(state) - s0)
            last = self.events[e0:]
            rest = trips - simulated
            self.extra_compute += rest * sum(e.seconds for e in last if e.kind == "matmul")
            self.extra_memory += rest * sum(e.seconds for e in last if e.kind == "memory")
            self.extra_comm += rest * sum(e.seconds for e in last if e.stream == "communication")
            self.compute_free += rest * step
            self.copy_free += rest * step
            self.copies = {name: end + rest * step for name, end in self.copies.items()}
            self.link_free = {d: t + rest * step for d, t in self.link_free.items()}
            state = _shift(state, rest * step)
            self.notes.append(
                f"loop {inst.name}: {simulated} of {trips} iterations drawn, the rest extrapolated"
            )
        return state

    def _collective_part(
        self, comp: Computation, inst: Instruction, after: float, blocked: bool, role: str, pairs: list
    ) -> float:
        """A part of an asynchronous collective fusion: a kernel on the compute stream; the start puts
        the collective on the links once it has run, the continuations run beside it, and the done
        waits for the links (:func:`shardbook.comms.analysis.collective_fusion_parts`)."""
        key = (comp.name, *pairs[0])
        if role == "done":
            links_end = self.fused_links.get(key, after)
            blocked = blocked or links_end > max(after, self.compute_free)
            after = max(after, links_end)
        end = self._kernel(comp, inst, after, blocked)
        if role == "start":
            record = next((c for p in pairs if (c := self.collectives.get(p)) is not None), None)
            self.fused_links[key] = self._on_links(record, end) if record is not None else end
        return end

    def _collective_kernel(
        self, comp: Computation, inst: Instruction, after: float, blocked: bool, c: Collective
    ) -> float:
        """A collective fused whole into one kernel (the TPU compiler's all-reduce-scatter fusions):
        the collective goes on the links when the kernel starts (later if they are busy), and the
        kernel ends when both have, the compute stream waiting for the links."""
        start = max(after, self.compute_free)
        links_end = self._on_links(c, start)
        end = self._kernel(comp, inst, after, blocked)
        if links_end > end:
            self.compute_free = end = links_end
        return end

    def _collective(self, comp: Computation, inst: Instruction, after: float) -> float:
        c = self.collectives.get((comp.name, inst.name))
        if c is None:
            return after
        return self._on_links(c, after)

    def _on_links(self, c: Collective, after: float) -> float:
        """Plays collective ``c`` on the links it uses from ``after``; returns when it ends."""
        seconds, directions = collective_links(c, self.chip, self.report.mesh_axes)
        start = max([after] + [self.link_free[d] for d in directions])
        for d in directions:
            self.link_free[d] = start + seconds
        axes = ",".join(c.axes)
        self.events.append(Event("communication", f"{c.kind} {axes}", start, start + seconds, c.kind))
        return start + seconds

    def _flops(self, comp: Computation, inst: Instruction) -> tuple[int, str]:
        known = self._flops_memo.get(id(inst))
        if known is None:
            known = self._flops_memo[id(inst)] = self._flops_of(comp, inst)
        return known

    def _flops_of(self, comp: Computation, inst: Instruction) -> tuple[int, str]:
        own = dot_flops(inst, comp)
        if own:
            return own, _operand_dtype(comp, inst)
        if inst.opcode == "while":  # a loop inside a called computation: its body, once per trip
            calls = dict(inst.called())
            body = self.module.computations.get(calls.get("body", ""))
            if body is None:
                return 0, ""
            n = self._trips(inst)
            total, dtype = 0, ""
            for sub in body.instructions:
                f, d = self._flops(body, sub)
                if f:
                    total, dtype = total + f, d
            return total * (n if n is not None else 1), dtype
        if inst.opcode in ("fusion", "call", "custom-call", "conditional"):
            # A conditional runs one of its branches: it is charged its costliest one (in an SPMD
            # program whose devices meet after it, the device on that branch sets the pace).
            per_callee = []
            for _, name in inst.called():
                callee = self.module.computations.get(name)
                if callee is None:
                    continue
                total, dtype = 0, "bf16"
                for sub in callee.instructions:
                    f, d = self._flops(callee, sub)
                    if f:
                        total, dtype = total + f, d
                per_callee.append((total, dtype))
            if not per_callee:
                return 0, ""
            if inst.opcode == "conditional":
                return max(per_callee)
            return sum(f for f, _ in per_callee), next((d for f, d in reversed(per_callee) if f), "bf16")
        return 0, ""

    def _matmul(
        self,
        comp: Computation,
        inst: Instruction,
        after: float,
        flops: int,
        dtype: str,
        blocked: bool,
        precision: str = "default",
    ) -> float:
        compute = flops / matmul_rate(self.chip, dtype, precision)
        if precision != "default":
            passes = PRECISION_PASSES[precision]
            self.notes.append(f"f32 matmuls at precision {precision!r}: {passes} bf16 passes at the peak")
        nbytes = inst.nbytes + sum(comp.by_name[o].nbytes for o in inst.operands if o in comp.by_name)
        seconds = max(compute, nbytes / self.chip.hbm_bandwidth)
        start = max(after, self.compute_free)
        blocked = blocked and after > self.compute_free
        self.compute_free = start + seconds
        self.events.append(Event("compute", f"matmul {dtype}", start, start + seconds, "matmul", blocked))
        if dtype == "f64":
            self.notes.append("f64 matmuls are modelled at 1/8 of the bf16 peak (a rough guess)")
        if dtype in ("s32", "u32", "s64", "u64"):
            self.notes.append(
                f"integer matmuls use the calibrated int32 rate (bf16 peak / {INT32_MATMUL_SLOWDOWN})"
            )
        return start + seconds


def _computes(module: Module, inst: Instruction, opcodes: tuple[str, ...]) -> bool:
    """Whether ``inst`` or a computation it calls (fused ones included) runs one of ``opcodes``."""
    stack, seen = [inst], set()
    while stack:
        i = stack.pop()
        if i.opcode in opcodes:
            return True
        for _, name in i.called():
            if name not in seen and (callee := module.computations.get(name)) is not None:
                seen.add(name)
                stack += callee.instructions
    return False


def _shift(value: Any, dt: float) -> Any:
    if isinstance(value, list):
        return [_shift(v, dt) for v in value]
    return float(value) + dt


def _operand_dtype(comp: Computation, inst: Instruction) -> str:
    for op in inst.operands:
        src = comp.by_name.get(op)
        if src is not None and src.arrays:
            return src.arrays[0].dtype
    return inst.arrays[0].dtype if inst.arrays else "bf16"


__all__ = [
    "ASYNC_STARTS",
    "CHIPS",
    "INT32_MATMUL_SLOWDOWN",
    "OUTSIDE_THE_MODEL",
    "UNMEASURED_VECTOR_OPS",
    "V5E_MEASURED",
    "Chip",
    "Estimate",
    "Event",
    "Measured",
    "collective_seconds",
    "dot_precision",
    "estimate",
    "hbm_bytes",
    "matmul_rate",
    "measured_matmul_rate",
    "tpu_hbm_bytes",
]
