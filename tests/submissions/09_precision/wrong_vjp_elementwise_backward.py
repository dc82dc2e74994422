"""Elementwise backward: bf16x3_matmul_vjp's custom_vjp keeps the three-pass forward but computes dA and
dB as f32 elementwise multiply-and-sums: no matmul in the backward, so every dot_general of the VJP's
program is the forward's bf16 one, and dA is exact to f32. The visible and hidden tests find no matmul
that dA depends on: "its VJP: expected the dot_generals that dA = G·Bᵀ depends on", "the backward's
products must be matmuls too".
"""

EXPECTED = {'lost': ['test_bf16x3_matmul_vjp_visible', 'test_bf16x3_matmul_vjp_hidden'],
 'feedback': ['its VJP: expected the dot_generals that dA = G·Bᵀ depends on',
              "the backward's products must be matmuls too"]}


def bf16x3_matmul_vjp(a: jax.Array, b: jax.Array) -> jax.Array:
    """f32[M, K] · f32[K, N] → f32[M, N] from three bf16 passes, differentiable."""
    return _product(a, b)


@jax.custom_vjp
def _product(a, b):
    return bf16x3_matmul(a, b)


def _forward(a, b):
    return bf16x3_matmul(a, b), (a, b)


def _backward(operands, g):
    a, b = operands
    d_a = (g[:, None, :] * b[None, :, :]).sum(-1)  # G·Bᵀ, elementwise in f32
    d_b = (a[:, :, None] * g[:, None, :]).sum(0)  # Aᵀ·G
    return d_a, d_b


_product.defvjp(_forward, _backward)
