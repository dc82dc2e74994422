"""The cost model against one-chip programs timed on a real TPU v5e: the table, printed.

Run: ``python -m benchmarks.tpu_calibration``. Nothing here runs on a TPU, nor compiles anything:
:func:`shardbook.cost.calibration` reads the committed record (``shardbook/data/tpu_v5e.json``, written by
``benchmarks/tpu_record.py`` on the chip, and ``tpu_v5e_programs.json.gz``, the program the chip's
compiler wrote for each), estimates every program that ran from its own TPU program and gives the
estimate next to the measurement, split into the model's parts:

* matmuls: the kernels that hold a matmul, each ``max(FLOPs / rate, HBM bytes / bandwidth)``;
* memory: every other kernel, its HBM bytes at the measured bandwidth;
* fixed: the least one call takes (the host's dispatch); the estimate is the larger of it and the
  kernels' timeline.

Appendix A prints the same rows; ``tests/test_cost.py`` keeps every one within
:data:`shardbook.cost.CALIBRATION_TARGET`.
"""

from __future__ import annotations

from shardbook.cost import CALIBRATION_TARGET, Calibrated, calibration, tpu_record


def main(chip: str = "v5e") -> list[Calibrated]:
    rows = calibration(chip)
    meta = tpu_record(chip)
    header = f"{'program':24} {'family':9} {'measured ms':>11} {'estimate ms':>11} {'error':>7} "
    header += f"{'matmul ms':>9} {'memory ms':>9} {'fixed ms':>8}"
    print(f"{meta['device_kind']}, one chip, JAX {meta['jax']}, {meta['date']}: {meta['timing']}")
    print(header)
    print("-" * len(header))
    for r in rows:
        print(
            f"{r.program:24} {r.family:9} {r.measured * 1e3:11.3f} {r.estimated * 1e3:11.3f} "
            f"{r.error:+7.1%} {r.matmul * 1e3:9.3f} {r.memory * 1e3:9.3f} {r.fixed * 1e3:8.3f}"
        )
    worst = max(rows, key=lambda r: abs(r.error))
    print(f"\nlargest error: {worst.error:+.1%} ({worst.program}); target: within {CALIBRATION_TARGET:.0%}")
    return rows


if __name__ == "__main__":
    main()
