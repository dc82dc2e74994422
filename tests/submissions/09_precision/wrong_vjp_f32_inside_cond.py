"""f32 backward inside a cond: bf16x3_matmul_vjp's custom_vjp keeps the three-pass forward and computes
dA and dB as f32 matmuls in the branches of jax.lax.cond. A walker of the program that skips cond's
branches sees only bf16 dots; the visible and hidden tests read every branch: "operand dtypes and
accumulation of a dot_general of its VJP", "split G, A and B into bf16 high and low parts".
"""

EXPECTED = {'lost': ['test_bf16x3_matmul_vjp_visible', 'test_bf16x3_matmul_vjp_hidden'],
 'feedback': ['operand dtypes and accumulation of a dot_general of its VJP',
              'split G, A and B into bf16 high and low parts']}


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
    take = g[0, 0] == g[0, 0]

    def d_a():
        return jnp.dot(g, b.T, out_sharding=jax.typeof(a).sharding)  # f32 × f32

    def d_b():
        return jnp.dot(a.T, g, out_sharding=jax.typeof(b).sharding)

    return jax.lax.cond(take, d_a, d_a), jax.lax.cond(take, d_b, d_b)


_product.defvjp(_forward, _backward)
