"""Elementwise with a decoy: bf16x3_matmul computes the product as an f32 elementwise multiply-and-sum
(forbidden) and adds one small bf16 dot multiplied by zero, so that the program has a dot_general and
every one of them is bf16 × bf16. Exact to f32, about 8000× one pass; the visible and hidden tests run
the program with each matmul's result doubled and find none that C depends on: "the dot_generals that
C depends on", "three bf16 passes of C = A·B".
"""

EXPECTED = {'lost': ['test_bf16x3_matmul_visible', 'test_bf16x3_matmul_hidden'],
 'feedback': ['the dot_generals that C depends on', 'three bf16 passes of C = A·B']}


def bf16x3_matmul(a: jax.Array, b: jax.Array) -> jax.Array:
    """f32[M, K] · f32[K, N] → f32[M, N] from three bf16 × bf16 matmuls accumulated in f32."""
    exact = (a[:, :, None] * b[None, :, :]).sum(axis=1)  # every product in f32
    decoy = jnp.dot(
        a[:1].astype(jnp.bfloat16), b[:, :1].astype(jnp.bfloat16), preferred_element_type=jnp.float32
    )
    return exact + 0.0 * decoy.sum()
