"""X3 preset in f32: bf16x3_matmul differs from the reference solution.

Converted from wrong_x3_preset_in_f32.ipynb by `python -m tests.submissions convert 09_precision`.
"""

EXPECTED = {'lost': ['test_bf16x3_matmul_visible', 'test_bf16x3_matmul_hidden'],
 'feedback': ['precision=BF16_BF16_F32_X3', 'a precision= preset leaves the operands f32']}


def bf16x3_matmul(a: jax.Array, b: jax.Array) -> jax.Array:
    """f32[M, K] · f32[K, N] → f32[M, N] from three bf16 × bf16 matmuls accumulated in f32."""
    # let the preset do it: accurate here, but the matmul still multiplies f32 by f32 on a CPU
    return jnp.dot(a, b, precision="BF16_BF16_F32_X3")
