"""Missing constraint: constrained_mlp adds no sharding constraint and lets the compiler choose.
The values are right, but the compiler moves a weight with an all-to-all; the visible and hidden tests fail:
"expected at most 6 KiB sent per device" ... "moves a weight".
"""

EXPECTED = {'lost': ['test_constrained_mlp_visible', 'test_constrained_mlp_hidden'],
 'feedback': ['expected at most 6 KiB sent per device', 'all-to-all', 'moves a weight']}


def constrained_mlp(x: jax.Array, w_in: jax.Array, w_out: jax.Array, mesh: Mesh) -> jax.Array:
    """relu(x @ w_in) @ w_out, steered so that the compiler sums activations instead of moving weights."""
    return jax.nn.relu(x @ w_in) @ w_out
