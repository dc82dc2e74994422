"""Moves the weight: matmul_split_contraction asks only for out_sharding=P('X', 'Y') and leaves x whole
along D. The values and the type are right, but XLA makes w fit x with an all-to-all of w, 32 times the
reduce-scatter budget on the visible 4 x 2 case; the self-check and the hidden test both fail on the
kind of collective: "expected only reduce-scatter, got all-to-all".
"""

EXPECTED = {'lost': ['test_matmul_split_contraction_visible', 'test_matmul_split_contraction_hidden'],
 'feedback': ['expected only reduce-scatter, got all-to-all', 'which reshard of x is free?',
              'w is D/B times larger than the partial sums']}


def matmul_split_contraction(x: jax.Array, w: jax.Array) -> jax.Array:
    """x[B_X, D] @ w[D_Y, F] -> out[B_X, F_Y]."""
    return jnp.matmul(x, w, out_sharding=P("X", "Y"))
