"""Gathers hidden: mlp_block reshards the hidden activation to P('X', None) before the second matmul.
That makes the contraction type-check, but gathers h; the visible and hidden tests fail with "at most 128 B
sent per device" ... "instead of gathering the hidden activation".
"""

EXPECTED = {'lost': ['test_mlp_block_visible', 'test_mlp_block_hidden'],
 'feedback': ['at most 128 B sent per device', 'instead of gathering the hidden activation']}


def mlp_block(x: jax.Array, w_in: jax.Array, w_out: jax.Array) -> jax.Array:
    """relu(x @ w_in) @ w_out for x[B_X, D], w_in[D, H_Y], w_out[H_Y, D]; returns out[B_X, D]."""
    h = jax.nn.relu(x @ w_in)
    h = jax.reshard(h, P("X", None))  # make the contracting dimension whole, then it types
    return h @ w_out
