"""High·high + low·low: bf16x3_matmul adds low·low instead of the two cross terms high·low, low·high.
Three terms are three terms; the visible and hidden tests find its error is not "below one bf16 pass":
"low·low is the one that is too small to matter".
"""

EXPECTED = {'lost': ['test_bf16x3_matmul_visible', 'test_bf16x3_matmul_hidden'],
 'feedback': ['below one bf16 pass', 'low·low is the one that is too small to matter']}


def bf16x3_matmul(a: jax.Array, b: jax.Array) -> jax.Array:
    """f32[M, K] · f32[K, N] → f32[M, N] from three bf16 × bf16 matmuls accumulated in f32."""
    a_high = a.astype(jnp.bfloat16)
    a_low = (a - a_high.astype(jnp.float32)).astype(jnp.bfloat16)
    b_high = b.astype(jnp.bfloat16)
    b_low = (b - b_high.astype(jnp.float32)).astype(jnp.bfloat16)
    # high·high plus low·low: the two cross terms, which carry the correction, are missing
    return (jnp.dot(a_high, b_high, preferred_element_type=jnp.float32)
            + jnp.dot(a_low, b_low, preferred_element_type=jnp.float32))
