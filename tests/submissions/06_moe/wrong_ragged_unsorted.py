"""Ragged unsorted: moe_local calls jax.lax.ragged_dot on the tokens in their own order.
ragged_dot reads its rows group after group (expert 0's tokens, then expert 1's, ...), so each token is
multiplied by the expert of its position, not its own; the visible and hidden tests fail with the hint
"ragged_dot takes the rows grouped by expert".
"""

EXPECTED = {
    "lost": ["test_moe_local_visible", "test_moe_local_hidden"],
    "feedback": ["entries differ", "jax.lax.ragged_dot takes the rows grouped by expert"],
}


def moe_local(w: jax.Array, a: jax.Array, b: jax.Array) -> jax.Array:
    """Out[i] = A[i] @ W[B[i]] on one device, without an [S, D, F] intermediate."""
    sizes = jnp.bincount(b, length=w.shape[0]).astype(jnp.int32)
    return jax.lax.ragged_dot(a, w, sizes)  # the tokens were never grouped by expert
