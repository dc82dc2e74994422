"""How close a bf16 attention laid out heads last and heads first comes to float64, on the backend at hand.

Run on a machine with an accelerator: ``python -m benchmarks.tpu_attention_precision --out FILE``. It
needs only JAX and NumPy (not shardbook), so it runs on a bare TPU image.

Laid out heads first ([batch, heads, tokens, width]), the TPU compiler replaces the softmax of
:func:`benchmarks.tpu_attention_sweeps._attention_heads_first` and its second product with one kernel
it names ``online-softmax`` (``kernel_sweeps_thirteenth``), which takes the running maximum, the
exponentials, their sum and the division by it in bf16, although the source asks for the softmax in
f32. Heads last ([batch, tokens, heads, width], :func:`benchmarks.tpu_programs.attention`) the compiled
program takes its exponentials in f32. This records what that does to the result: for each shape of
sweep 13 and two spreads of the scores, both layouts run on the same bf16 inputs (q, k and v drawn
N(0, 1), q scaled so the scores q kᵀ / √d have the given standard deviation), and each result's
distance to the float64 attention of those same inputs (its first sequence: the reference is computed
in NumPy):

* ``relative_error``: ‖out − ref‖ / ‖ref‖ (Frobenius);
* ``max_abs_error``: the largest |out − ref|;
* ``online_softmax`` (per layout): whether the compiled program has a kernel named ``online-softmax``;
* ``bf16_rounding``: the reference rounded to bf16 and measured the same way, the floor any bf16
  result has;
* ``between_layouts``: the heads-first result measured the same way against the heads-last one.

CI never runs this script; the record it writes is kept in ``benchmarks/pending/``.
"""

from __future__ import annotations

import argparse
import json

import jax
import jax.numpy as jnp
import numpy as np

from benchmarks.provenance import chip_provenance
from benchmarks.tpu_attention_sweeps import _attention_heads_first
from benchmarks.tpu_programs import attention

#: (batch, tokens, heads, width): sweep 13's shapes
SHAPES = ((16, 1024, 8, 256), (8, 1024, 16, 256), (4, 1024, 32, 256))
#: the scores' standard deviation
SPREADS = (1.0, 4.0)


def reference(q: np.ndarray, k: np.ndarray, v: np.ndarray) -> np.ndarray:
    """The causal attention of one sequence in float64: [tokens, heads, width] in and out."""
    t, _, d = q.shape
    scores = np.einsum("qhd,khd->hqk", q, k) / np.sqrt(d)
    scores = np.where(np.tril(np.ones((t, t), bool)), scores, -np.inf)
    weights = np.exp(scores - scores.max(-1, keepdims=True))
    weights /= weights.sum(-1, keepdims=True)
    return np.einsum("hqk,khd->qhd", weights, v)


def errors(out: np.ndarray, ref: np.ndarray) -> dict:
    diff = out.astype(np.float64) - ref
    return {
        "relative_error": float(np.linalg.norm(diff) / np.linalg.norm(ref)),
        "max_abs_error": float(np.abs(diff).max()),
    }


def record_shape(shape: tuple[int, int, int, int], spread: float, seed: int) -> dict:
    b, t, h, d = shape
    rng = np.random.default_rng(seed)
    q, k, v = (rng.standard_normal((b, t, h, d), np.float32) for _ in range(3))
    q *= spread  # q kᵀ / √d of N(0, 1) entries has a standard deviation of 1
    q, k, v = (jnp.asarray(x, jnp.bfloat16) for x in (q, k, v))
    exact = [np.asarray(x[0], np.float64) for x in (q, k, v)]  # the bf16 inputs, exactly
    ref = reference(*exact)
    last_fn = jax.jit(attention)
    first_fn = jax.jit(_attention_heads_first)
    swap = (0, 2, 1, 3)
    first_args = [jnp.transpose(x, swap) for x in (q, k, v)]
    last = np.asarray(last_fn(q, k, v)[0], np.float32)
    first = np.asarray(jnp.transpose(first_fn(*first_args), swap)[0], np.float32)
    rounded = np.asarray(jnp.asarray(ref, jnp.bfloat16), np.float32)
    names = {
        way: "online-softmax" in fn.lower(*args).compile().as_text()
        for way, fn, args in (("heads_last", last_fn, (q, k, v)), ("heads_first", first_fn, first_args))
    }
    return {
        "shape": list(shape),
        "scores_std": spread,
        "seed": seed,
        "heads_last": {**errors(last, ref), "online_softmax": names["heads_last"]},
        "heads_first": {**errors(first, ref), "online_softmax": names["heads_first"]},
        "bf16_rounding": errors(rounded, ref),
        "between_layouts": errors(first, last.astype(np.float64)),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="a JSON file")
    args = parser.parse_args()
    record = {
        **chip_provenance("python -m benchmarks.tpu_attention_precision --out FILE"),
        "runs": [],
    }
    for n, shape in enumerate(SHAPES):
        for spread in SPREADS:
            row = record_shape(shape, spread, seed=n)
            record["runs"].append(row)
            print(json.dumps(row), flush=True)
            with open(args.out, "w") as f:  # written after each run, so a run cut short keeps what it did
                json.dump(record, f, indent=1)


if __name__ == "__main__":
    main()
