"""Gathers hidden: mlp_block differs from the reference solution.

Converted from wrong_gathers_hidden.ipynb by `python -m tests.submissions convert 03_explicit_sharding`.
"""

EXPECTED = {'lost': ['test_mlp_block_visible', 'test_mlp_block_hidden'],
 'feedback': ['at most 128 B sent per device', 'instead of gathering the hidden activation']}


def mlp_block(x: jax.Array, w_in: jax.Array, w_out: jax.Array) -> jax.Array:
    """relu(x @ w_in) @ w_out for x[B_X, D], w_in[D, H_Y], w_out[H_Y, D]; returns out[B_X, D]."""
    h = jax.nn.relu(x @ w_in)
    h = jax.reshard(h, P("X", None))  # make the contracting dimension whole, then it types
    return h @ w_out
