"""Out sharding: matmul_reduce_scatter differs from the reference solution.

Converted from wrong_out_sharding.ipynb by `python -m tests.submissions convert 03_explicit_sharding`.
"""

EXPECTED = {'lost': ['test_matmul_reduce_scatter_visible', 'test_matmul_reduce_scatter_hidden'],
 'feedback': ["expected 'float32[16@X,24@Y]', got 'float32[16@X,24]'",
              'expected the type float32[16@X,24@Y], got float32[16@X,24]']}


def matmul_reduce_scatter(x: jax.Array, w: jax.Array) -> jax.Array:
    """x[B_X, D_Y] @ w[D_Y, F] -> out[B_X, F_Y], combining the partial sums with a reduce-scatter."""
    # The error asked for an out_sharding, so give it the layout of x's rows.
    return jnp.matmul(x, w, out_sharding=P("X", None))
