"""Six passes: bf16x3_matmul splits each operand into three bf16 pieces (high, middle, low) and adds the
six largest products, as the BF16_BF16_F32_X6 preset does. Every matmul is bf16 × bf16 and does work,
but the result has f32's accuracy, thousands of times one pass, where the contract asks for three
passes (about 500×, at most 2000×): "at most 2000x below one bf16 pass", "at most 2000× below one bf16
pass".
"""

EXPECTED = {'lost': ['test_bf16x3_matmul_visible', 'test_bf16x3_matmul_hidden'],
 'feedback': ['at most 2000x below one bf16 pass', 'at most 2000× below one bf16 pass']}


def bf16x3_matmul(a: jax.Array, b: jax.Array) -> jax.Array:
    """f32[M, K] · f32[K, N] → f32[M, N] from bf16 × bf16 matmuls accumulated in f32."""

    def pieces(x):
        high = x.astype(jnp.bfloat16)
        rest = x - high.astype(jnp.float32)
        middle = rest.astype(jnp.bfloat16)
        return high, middle, (rest - middle.astype(jnp.float32)).astype(jnp.bfloat16)

    def dot(x, y):
        return jnp.dot(x, y, preferred_element_type=jnp.float32)

    (ah, am, al), (bh, bm, bl) = pieces(a), pieces(b)
    small = dot(am, bm) + dot(ah, bl) + dot(al, bh)
    return small + (dot(ah, bm) + dot(am, bh)) + dot(ah, bh)
