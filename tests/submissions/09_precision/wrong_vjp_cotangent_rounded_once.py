"""Cotangent rounded once: bf16x3_matmul_vjp's custom_vjp splits A and B into high and low bf16 pieces in
the backward but rounds the cotangent G to bf16 once, so G·Bᵀ = G_bf16·(B_high + B_low)ᵀ misses G's low
part and keeps about one pass's error (1.4× better). Every dot is bf16; the visible and hidden tests
measure dA: "dA = G·Bᵀ", "split the cotangent G into high and low bf16 parts too".
"""

EXPECTED = {'lost': ['test_bf16x3_matmul_vjp_visible', 'test_bf16x3_matmul_vjp_hidden'],
 'feedback': ['dA = G·Bᵀ', 'split the cotangent G into high and low bf16 parts too']}


def bf16x3_matmul_vjp(a: jax.Array, b: jax.Array) -> jax.Array:
    """f32[M, K] · f32[K, N] → f32[M, N] from three bf16 passes, differentiable."""
    return _product(a, b)


def _pieces(x):
    high = x.astype(jnp.bfloat16)
    return high, (x - high.astype(jnp.float32)).astype(jnp.bfloat16)


def _dot(x, y):
    return jnp.dot(x, y, preferred_element_type=jnp.float32)


@jax.custom_vjp
def _product(a, b):
    return bf16x3_matmul(a, b)


def _forward(a, b):
    return bf16x3_matmul(a, b), (a, b)


def _backward(operands, g):
    a, b = operands
    g_bf16 = g.astype(jnp.bfloat16)  # one rounding of the cotangent
    bt_high, bt_low = _pieces(b.T)
    at_high, at_low = _pieces(a.T)
    return _dot(g_bf16, bt_high) + _dot(g_bf16, bt_low), _dot(at_high, g_bf16) + _dot(at_low, g_bf16)


_product.defvjp(_forward, _backward)
