"""The cost model against one-chip programs timed on a real TPU v5e: the table, printed.

Run: ``python -m benchmarks.tpu_calibration``. Nothing here runs on a TPU, nor compiles anything:
:func:`shardbook.cost.calibration` reads the committed record (``shardbook/data/tpu_v5e.json``, written by
``benchmarks/tpu_record.py`` on the chip, and ``tpu_v5e_programs.json.gz``, the program the chip's
compiler wrote for each), estimates every program that ran from its own TPU program and gives the
estimate next to the measurement, split into the model's parts:

* matmuls: the kernels that hold a matmul, each ``max(FLOPs / rate, HBM bytes / bandwidth)``;
* memory: every other kernel, its HBM bytes at the measured bandwidth;
* fixed: the least one call takes (what the smallest program takes); the estimate is the larger of it and the
  kernels' timeline.

Appendix A prints the same rows; ``tests/test_cost.py`` keeps every one within
:data:`shardbook.cost.CALIBRATION_TARGET`.
"""

from __future__ import annotations

from shardbook import CALIBRATION_TARGET, Calibrated, Table, calibration, tpu_record

MS_COLUMNS = ("measured ms", "estimate ms", "matmul ms", "memory ms", "fixed ms")


def main(chip: str = "v5e") -> list[Calibrated]:
    rows = calibration(chip)
    meta = tpu_record(chip)
    table = Table(
        ["program", "family", "measured ms", "estimate ms", "error", "matmul ms", "memory ms", "fixed ms"],
        [(r.program, r.family, r.measured, r.estimated, r.error, r.matmul, r.memory, r.fixed) for r in rows],
        formats={"error": "+.1%"} | {c: lambda s: f"{s * 1e3:.3f}" for c in MS_COLUMNS},
        align={c: "right" for c in MS_COLUMNS},
        caption=f"{meta['device_kind']}, one chip, JAX {meta['jax']}, {meta['date']}: {meta['timing']}",
    )
    print(table)
    worst = max(rows, key=lambda r: abs(r.error))
    print(f"\nlargest error: {worst.error:+.1%} ({worst.program}); target: within {CALIBRATION_TARGET:.0%}")
    return rows


if __name__ == "__main__":
    main()
