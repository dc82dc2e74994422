"""The cost model against one-chip programs timed on a real TPU v5e: the table, printed.

Run: ``python -m benchmarks.tpu_calibration``. Nothing here runs on a TPU, nor compiles anything:
:func:`shardbook.records.calibration` reads the committed record (``shardbook/data/tpu_v5e.json``, written by
``benchmarks/tpu_record.py`` on the chip, and ``tpu_v5e_programs.json.gz``, the program the chip's
compiler wrote for each), estimates every program that ran from its own TPU program and gives the
estimate next to the measurement, split into the model's parts:

* matmuls: the kernels that hold a matmul, each the longest of its FLOPs at the measured rate, its HBM
  reads (as often as its tiling fetches them) and writes at their measured bandwidths, and its vector
  unit's work;
* memory: every other kernel, the longer of its HBM traffic and its vector unit's work;
* fixed: the least one call takes (what the smallest program takes); the estimate is the larger of it and the
  kernels' timeline.

Then the same for the programs held out of the fit in nineteen rounds (:func:`shardbook.held_out`), whose
largest error among those the model neither flags nor names as a miss (:data:`shardbook.records.MISSED`) is
:data:`shardbook.OUT_OF_SAMPLE_ERROR`, the model's stated accuracy. Appendix A prints the same rows;
``tests/test_cost.py`` keeps every fitted one within :data:`shardbook.records.CALIBRATION_TARGET` and every
other held-out one within the stated accuracy.
"""

from __future__ import annotations

import json

from shardbook import (
    CALIBRATION_TARGET,
    OUT_OF_SAMPLE_ERROR,
    Calibrated,
    Table,
    calibration,
    held_out,
    tpu_record,
)
from shardbook.records import MISSED, RECORDS

MS_COLUMNS = ("measured ms", "estimate ms", "matmul ms", "memory ms", "fixed ms")


def main(chip: str = "v5e") -> list[Calibrated]:
    rows = calibration(chip)
    show(rows, tpu_record(chip), "fitted and checked")
    worst = max(rows, key=lambda r: abs(r.error))
    print(f"\nlargest error: {worst.error:+.1%} ({worst.program}); target: within {CALIBRATION_TARGET:.0%}")
    held = held_out(chip)
    held_meta = json.loads((RECORDS / f"tpu_{chip}_held_out.json").read_text())
    show(held, held_meta, "held out of the fit")
    inside = [r for r in held if not r.outside and r.program not in MISSED]
    worst = max(inside, key=lambda r: abs(r.error))
    flagged = ", ".join(f"{r.program} {r.error:+.1%}" for r in held if r.outside)
    missed = ", ".join(f"{r.program} {r.error:+.1%}" for r in held if r.program in MISSED)
    print(f"\nlargest error the model neither flags nor names: {worst.error:+.1%} ({worst.program})")
    print(f"stated: within {OUT_OF_SAMPLE_ERROR:.0%}; flagged as outside the model: {flagged or 'none'}")
    print(f"named misses (shardbook.records.MISSED): {missed or 'none'}")
    return rows


def show(rows: list[Calibrated], meta: dict, which: str) -> None:
    table = Table(
        [
            "program",
            "family",
            "round",
            "measured ms",
            "estimate ms",
            "error",
            "matmul ms",
            "memory ms",
            "fixed ms",
        ],
        [
            (r.program, r.family, r.round, r.measured, r.estimated, r.error, r.matmul, r.memory, r.fixed)
            for r in rows
        ],
        formats={"error": "+.1%"} | {c: lambda s: f"{s * 1e3:.3f}" for c in MS_COLUMNS},
        align={c: "right" for c in MS_COLUMNS},
        caption=f"{which}: {meta['device_kind']}, one chip, JAX {meta['jax']}: {meta['timing']}",
    )
    print(table)


if __name__ == "__main__":
    main()
