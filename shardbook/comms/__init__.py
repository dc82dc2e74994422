"""See the communication: every collective in a compiled, SPMD-partitioned program.

``analyze(fn, *args)`` compiles ``fn`` for the given (already placed) arguments and reads the compiled
program — the one XLA actually runs on each device — and reports every collective: its kind, dtype,
per-device shapes, group size, the mesh axes its groups span, how many times it runs (loop trip counts
multiplied), the bytes each device moves (:func:`ring_bytes`), and the Python line it came from. It also
reports the per-device matmul FLOPs (loop-aware) and the program's temporary memory.

One module per concern (each readable in one sitting; the names below are re-exported here):

  report       -- the records: :class:`Collective`, :class:`Report`, :func:`ring_bytes`,
                  :func:`format_bytes`, :func:`source_text`.
  queries      -- questions asked of a parsed program (:mod:`shardbook.hlo`): loop trip counts,
                  matmul FLOPs, which ops are collectives, the mesh axes of a device group.
  cpu          -- what the CPU backend (the simulated devices) does differently and the corrections:
                  bf16 collectives widened to f32, all-reduces combined, a reduce-scatter written as
                  all-reduce + dynamic-slice. A correction that cannot be applied (an XLA that no
                  longer knows a pass name) is said in ``Report.notes``, never silently skipped.
  compiling    -- lowering and compiling a function; the platform and mesh of a compiled program.
  analysis     -- :func:`analyze` and :func:`analyze_text`, which put these together.
  compiled     -- what a compiler says of a program: :class:`Footprint` (memory per device) and
                  :class:`TpuProgram` (a program compiled for a TPU, or the compiler's refusal).
  memory       -- :func:`footprint`: a compiled program's memory per device at its peak, read on CPU
                  from a copy scheduled for memory (XLA:CPU's default keeps every all-gather alive).

``compiled.cost_analysis()`` counts a while-loop body once; the FLOPs here are multiplied by the trip
counts XLA records in each loop's ``backend_config`` (``known_trip_count``). The TPU compiler drops that
record from the loops it rewrites: in a TPU program the count is read from the loop's condition
(:func:`trip_count`). A loop with neither is counted once and flagged (``Collective.unknown_trip_count``,
``Report.notes``).
"""

from __future__ import annotations

from .analysis import analyze, analyze_text, collectives_fused_whole, collectives_in
from .compiled import SUM_OVERCOUNT, DoesNotFit, Footprint, HbmVerdict, TpuProgram, hbm_verdict, parse_hbm_oom
from .compiling import compile_texts, lower
from .memory import footprint
from .queries import (
    collective_kind,
    dot_flops,
    executions_per_computation,
    flops_per_computation,
    largest_intermediates,
    total_flops,
    trip_count,
)
from .report import COLLECTIVE_KINDS, Collective, Report, format_bytes, ring_bytes, source_text

__all__ = [
    "COLLECTIVE_KINDS",
    "Collective",
    "DoesNotFit",
    "Footprint",
    "HbmVerdict",
    "SUM_OVERCOUNT",
    "hbm_verdict",
    "Report",
    "TpuProgram",
    "analyze",
    "collectives_fused_whole",
    "analyze_text",
    "collective_kind",
    "collectives_in",
    "compile_texts",
    "dot_flops",
    "executions_per_computation",
    "footprint",
    "flops_per_computation",
    "format_bytes",
    "largest_intermediates",
    "lower",
    "parse_hbm_oom",
    "ring_bytes",
    "source_text",
    "total_flops",
    "trip_count",
]
