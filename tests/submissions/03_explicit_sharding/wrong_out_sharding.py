"""Out sharding: matmul_reduce_scatter asks for out_sharding=P('X', None) instead of P('X', 'Y').
The type error asks for an out_sharding and x's row layout is the obvious pick, but that is an all-reduce;
the visible and hidden tests fail: "expected 'float32[16@X,24@Y]', got 'float32[16@X,24]'".
"""

EXPECTED = {'lost': ['test_matmul_reduce_scatter_visible', 'test_matmul_reduce_scatter_hidden'],
 'feedback': ["expected 'float32[16@X,24@Y]', got 'float32[16@X,24]'",
              'expected the type float32[16@X,24@Y], got float32[16@X,24]']}


def matmul_reduce_scatter(x: jax.Array, w: jax.Array) -> jax.Array:
    """x[B_X, D_Y] @ w[D_Y, F] -> out[B_X, F_Y], combining the partial sums with a reduce-scatter."""
    # The error asked for an out_sharding, so give it the layout of x's rows.
    return jnp.matmul(x, w, out_sharding=P("X", None))
