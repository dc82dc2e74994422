"""Attention's second product p v written as a Pallas TPU kernel with chosen blocks, beside XLA's own
kernel for the same einsum: what a step of a contraction split over the keys costs when the blocks
are ours, not the compiler's (recorded 2026-12-07 with sweep 10, before any rule read off either;
the record is ``benchmarks/pending/pallas_values_tpu_v5e.json``).

Run on a machine with one TPU chip: ``python -m benchmarks.tpu_pallas_values OUT.json``. JAX (with
its Pallas) and NumPy only, like the other recorders. Each time is the mean of 20 back-to-back
calls after one warm-up call (``back_to_back``) beside the median of 20 calls each waited for
(``median``, which carries the host's dispatch).
"""

from __future__ import annotations

import json
import statistics
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

#: (batch x heads, queries, keys, head width) of the two products timed.
SHAPES = [(32, 2048, 2048, 256), (16, 2048, 2048, 512)]
QUERY_BLOCKS = (512, 1024, 2048)
KEY_BLOCKS = (128, 256, 512, 1024, 2048)


def values_kernel(bh: int, q: int, k: int, d: int, qb: int, kb: int):
    """p [bh, q, k] times v [bh, k, d] in blocks of qb queries and kb keys, an f32 accumulator in
    VMEM across the key steps (the last grid axis)."""
    params = getattr(pltpu, "CompilerParams", None) or pltpu.TPUCompilerParams

    def kernel(p_ref, v_ref, o_ref, acc_ref):
        step = pl.program_id(2)

        @pl.when(step == 0)
        def _():
            acc_ref[...] = jnp.zeros_like(acc_ref)

        acc_ref[...] += jnp.dot(p_ref[0], v_ref[0], preferred_element_type=jnp.float32)

        @pl.when(step == pl.num_programs(2) - 1)
        def _():
            o_ref[0] = acc_ref[...].astype(o_ref.dtype)

    return pl.pallas_call(
        kernel,
        out_shape=jax.ShapeDtypeStruct((bh, q, d), jnp.bfloat16),
        grid=(bh, q // qb, k // kb),
        in_specs=[
            pl.BlockSpec((1, qb, kb), lambda b, i, s: (b, i, s)),
            pl.BlockSpec((1, kb, d), lambda b, i, s: (b, s, 0)),
        ],
        out_specs=pl.BlockSpec((1, qb, d), lambda b, i, s: (b, i, 0)),
        scratch_shapes=[pltpu.VMEM((qb, d), jnp.float32)],
        compiler_params=params(dimension_semantics=("parallel", "parallel", "arbitrary")),
    )


def timed(f, *args, runs: int = 20) -> tuple[float, float]:
    """(median of ``runs`` calls each waited for, mean of ``runs`` back-to-back calls), in seconds."""
    f(*args).block_until_ready()
    each = []
    for _ in range(runs):
        start = time.perf_counter()
        f(*args).block_until_ready()
        each.append(time.perf_counter() - start)
    start = time.perf_counter()
    for _ in range(runs):
        out = f(*args)
    out.block_until_ready()
    return statistics.median(each), (time.perf_counter() - start) / runs


def main(out: str) -> int:
    rng = np.random.default_rng(0)
    rows = []
    for bh, q, k, d in SHAPES:
        p = jnp.asarray(rng.standard_normal((bh, q, k)), jnp.bfloat16)
        v = jnp.asarray(rng.standard_normal((bh, k, d)), jnp.bfloat16)
        xla = jax.jit(lambda p, v: jnp.einsum("bqk,bkd->bqd", p, v))
        median, back_to_back = timed(xla, p, v)
        rows.append(dict(kind="xla", BH=bh, Q=q, K=k, D=d, median=median, back_to_back=back_to_back))
        expected = np.asarray(xla(p, v), np.float32)
        for qb in QUERY_BLOCKS:
            for kb in KEY_BLOCKS:
                row = dict(kind="pallas", BH=bh, Q=q, K=k, D=d, qb=qb, kb=kb)
                try:
                    f = jax.jit(values_kernel(bh, q, k, d, qb, kb))
                    row["median"], row["back_to_back"] = timed(f, p, v)
                    row["max_err"] = float(np.max(np.abs(np.asarray(f(p, v), np.float32) - expected)))
                except Exception as e:  # a block too large for VMEM is refused at compile time
                    row["error"] = f"{type(e).__name__}: {str(e)[:300]}"
                rows.append(row)
                print(row, flush=True)
    meta = dict(jax=jax.__version__, device=jax.devices()[0].device_kind, date=time.strftime("%Y-%m-%d"))
    meta["command"] = "python -m benchmarks.tpu_pallas_values OUT.json"
    with open(out, "w") as f:
        json.dump(dict(meta=meta, rows=rows), f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
