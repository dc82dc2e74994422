"""The cost model against a real TPU v5e kernel by kernel: the fitted programs' kernels, printed.

Run: ``python -m benchmarks.tpu_kernel_calibration``. Nothing here runs on a TPU, nor compiles anything:
:func:`shardbook.records.kernel_calibration` reads the per-kernel record
(``shardbook/data/tpu_v5e_kernels.json``, written on the chip by ``benchmarks/tpu_kernels.py`` from JAX's
profiler) and charges each kernel as :func:`shardbook.estimate` does. A program's estimate can be close
while its kernels are not: this prints how far each kernel is, how much of the chip's time lies in
kernels the model gets within 10%, 15% and 25%, and per program how much of its kernels' errors cancel.
"""

from __future__ import annotations

import collections

from shardbook import Table
from shardbook.records import SHORTEST_KERNEL as SHORTEST
from shardbook.records import KernelTime, kernel_calibration, kernel_summary, long_kernels


def main(worst: int = 30) -> list[KernelTime]:
    rows = kernel_calibration("v5e")
    long = sorted(long_kernels(rows), key=lambda r: -abs(r.error))
    print(
        Table(
            ["program", "kernel", "kind", "runs", "chip ms", "model ms", "error"],
            [(r.program, r.kernel, r.kind, r.runs, r.measured, r.estimated, r.error) for r in long[:worst]],
            formats={"error": "+.0%", "runs": "g"}
            | {c: lambda s: f"{s * 1e3:.3f}" for c in ("chip ms", "model ms")},
            caption=f"the {worst} kernels of at least {SHORTEST * 1e3:g} ms (chip or model) the model "
            "misses most (measured on a v5e: JAX's profiler; model · TPU program)",
        )
    )
    for key, value in kernel_summary(rows).items():
        print(f"{key}: {value:.0f}" if key == "kernels" else f"{key}: {value:.0%}")
    per = collections.defaultdict(lambda: [0.0, 0.0, 0.0])
    for r in rows:
        per[r.program][0] += r.measured
        per[r.program][1] += r.estimated
        per[r.program][2] += abs(r.estimated - r.measured)
    print(
        Table(
            ["program", "chip ms", "model ms", "error", "kernels' |errors| ms"],
            [(p, m, e, e / m - 1, a) for p, (m, e, a) in per.items() if a > 0.1 * m and m >= SHORTEST],
            formats={"error": "+.1%"}
            | {c: lambda s: f"{s * 1e3:.3f}" for c in ("chip ms", "model ms", "kernels' |errors| ms")},
            caption="programs whose kernels' errors add up to over 10% of their time, with the error that is "
            "left once they cancel (the kernels the model charges; loops are counted by their kernels)",
        )
    )
    return rows


if __name__ == "__main__":
    main()
