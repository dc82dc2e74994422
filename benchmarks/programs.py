"""Example programs measured by the benchmarks and analysed by the tests.

The ring collective matmul below is the book's running example of overlapping communication with
compute (How To Scale Your Model, Austin et al., 2025, "Programming TPUs in JAX"). It lives here, not
in ``shardbook``, because the helper package carries no solutions to exercises.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp


def ring_matmul(a_block: jax.Array, w_block: jax.Array, unroll: bool = True) -> jax.Array:
    """Per-device body of A[B_X, D_Y] @ W[D, F_Y]: multiply the A block in hand, pass it round 'Y', repeat.

    Args:
      a_block: this device's block of A, [B/nX, D/nY].
      w_block: this device's block of W, [D, F/nY].
      unroll: unroll the loop (one collective-permute op per step) or keep one rolled while loop.

    Returns:
      This device's block of the product, [B/nX, F/nY].
    """
    n = jax.lax.axis_size("Y")
    idx = jax.lax.axis_index("Y")
    chunk = a_block.shape[1]
    perm = [(j, (j - 1) % n) for j in range(n)]

    def step(i, carry):
        acc, a = carry
        w_chunk = jax.lax.dynamic_slice_in_dim(w_block, (idx + i) % n * chunk, chunk)
        return acc + a @ w_chunk, jax.lax.ppermute(a, "Y", perm)

    acc = jnp.zeros((a_block.shape[0], w_block.shape[1]), a_block.dtype)
    acc = jax.lax.pcast(acc, ("X", "Y"), to="varying")
    acc, a = jax.lax.fori_loop(0, n - 1, step, (acc, a_block), unroll=unroll)
    w_chunk = jax.lax.dynamic_slice_in_dim(w_block, (idx + n - 1) % n * chunk, chunk)
    return acc + a @ w_chunk
