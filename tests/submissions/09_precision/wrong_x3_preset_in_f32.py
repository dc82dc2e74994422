"""Preset in f32: bf16x3_matmul passes precision="BF16_BF16_F32_X3" to an f32 jnp.dot.
Accurate, but on a CPU the matmul still multiplies f32 by f32; the visible and hidden tests fail on
"precision=BF16_BF16_F32_X3": "a precision= preset leaves the operands f32".
"""

EXPECTED = {'lost': ['test_bf16x3_matmul_visible', 'test_bf16x3_matmul_hidden'],
 'feedback': ['precision=BF16_BF16_F32_X3', 'a precision= preset leaves the operands f32']}


def bf16x3_matmul(a: jax.Array, b: jax.Array) -> jax.Array:
    """f32[M, K] · f32[K, N] → f32[M, N] from three bf16 × bf16 matmuls accumulated in f32."""
    # let the preset do it: accurate here, but the matmul still multiplies f32 by f32 on a CPU
    return jnp.dot(a, b, precision="BF16_BF16_F32_X3")
