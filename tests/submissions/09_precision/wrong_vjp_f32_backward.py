"""f32 backward: bf16x3_matmul_vjp's custom_vjp keeps the three-pass forward but computes the cotangents
as f32 matmuls g @ b.T and a.T @ g. Accurate, but not bf16 × bf16; the visible and hidden tests read the
VJP's program: "a dot_general of its VJP", "split G, A and B into bf16 high and low parts".
"""

EXPECTED = {'lost': ['test_bf16x3_matmul_vjp_visible', 'test_bf16x3_matmul_vjp_hidden'],
 'feedback': ['a dot_general of its VJP', 'split G, A and B into bf16 high and low parts']}


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
    return g @ b.T, a.T @ g  # f32 × f32


_product.defvjp(_forward, _backward)
