"""Sharding ignored: bf16x3_matmul_vjp's custom_vjp computes the right three-pass cotangents on one device,
but its backward never says where they go. On an Explicit mesh with A split P('X', None), Aᵀ·G sums over
rows that A and G both split over 'X', and JAX refuses it (ShardingTypeError); the visible and hidden
tests run that mesh: "each cotangent with its argument's type", "dA laid out like A, dB like B".
"""

EXPECTED = {'lost': ['test_bf16x3_matmul_vjp_visible', 'test_bf16x3_matmul_vjp_hidden'],
 'feedback': ["each cotangent with its argument's type", 'dA laid out like A, dB like B']}


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
    return bf16x3_matmul(g, b.T), bf16x3_matmul(a.T, g)  # no out_sharding


_product.defvjp(_forward, _backward)
