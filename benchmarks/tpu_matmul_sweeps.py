"""Fitted sweeps of f32 matmuls on one chip (recorded with ``python -m benchmarks.tpu_record --set
sweeps_14``): each a set that varies one thing, recorded before any rule is read off it."""

from __future__ import annotations

from benchmarks.tpu_programs import Program, program


def _matmul(a, b):
    return a @ b


def kernel_sweeps_fourteenth() -> list[Program]:
    """f32 matmuls at JAX's default precision whose kernel's HBM time (its operands fetched again at
    each block of the result) and MXU time come close, as in held-out round 13's 5632 x 8192 x 5632,
    which took 1.10 times the larger of the two where the fitted 6144- and 8192-wide ones took 1.03
    (as the model reads their compiled programs):
    square results from 4608 to 7168 wide over 8192, the 5632 one over 4096 and 16384, two oblong
    ones, and the same products in bf16 (half the bytes, the HBM time far under the MXU's)."""
    f32, bf16 = "float32", "bfloat16"
    shapes = [(f32, n, 8192, n) for n in (4608, 5120, 5632, 6144, 6656, 7168)] + [
        (f32, 5632, 4096, 5632), (f32, 5632, 16384, 5632), (f32, 5632, 8192, 6144),
        (f32, 6144, 8192, 5632), (bf16, 5632, 8192, 5632), (bf16, 6144, 8192, 6144)]  # fmt: skip
    return [program(f"matmul sweep {dt}, {m} x {k} x {n}", "matmul", _matmul, ((m, k), dt), ((k, n), dt))
            for dt, m, k, n in shapes]  # fmt: skip
