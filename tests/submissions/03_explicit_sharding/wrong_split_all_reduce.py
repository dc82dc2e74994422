"""All-reduce: matmul_split_contraction splits x along D correctly but asks for out_sharding=P('X', None),
x's own layout. The partial sums are all-reduced and F is never split; the self-check and the hidden test
fail on the type: "expected 'float32[16@X,32@Y]', got 'float32[16@X,32]'".
"""

EXPECTED = {'lost': ['test_matmul_split_contraction_visible', 'test_matmul_split_contraction_hidden'],
 'feedback': ["expected 'float32[16@X,32@Y]', got 'float32[16@X,32]'",
              'expected the type float32[8@X,16@Y], got float32[8@X,16]']}


def matmul_split_contraction(x: jax.Array, w: jax.Array) -> jax.Array:
    """x[B_X, D] @ w[D_Y, F] -> out[B_X, F_Y]."""
    return jnp.matmul(jax.reshard(x, P("X", "Y")), w, out_sharding=P("X", None))
