"""Autodiff through 9.1: bf16x3_matmul_vjp returns bf16x3_matmul(a, b) and lets jax.vjp differentiate the
bf16 pieces. The forward is right; the backward multiplies the f32 cotangent by bf16 pieces (about one
bf16 pass's accuracy), and the visible and hidden tests read it in the VJP's program: "autodiff through
bf16 pieces multiplies the f32 cotangent", "what autodiff through the bf16 pieces gives".
"""

EXPECTED = {'lost': ['test_bf16x3_matmul_vjp_visible', 'test_bf16x3_matmul_vjp_hidden'],
 'feedback': ['autodiff through bf16 pieces multiplies the f32 cotangent',
              'what autodiff through the bf16 pieces gives']}


def bf16x3_matmul_vjp(a: jax.Array, b: jax.Array) -> jax.Array:
    """f32[M, K] · f32[K, N] → f32[M, N] from three bf16 passes, differentiable."""
    return bf16x3_matmul(a, b)  # autodiff writes the backward
