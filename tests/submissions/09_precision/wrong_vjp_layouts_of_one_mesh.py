"""Layouts written for one mesh: bf16x3_matmul_vjp's custom_vjp gives dA out_sharding=P('X', None) and
dB out_sharding=P(), the layouts of A and B on the self-check's mesh, instead of reading A's and B's
types. Right there; on the hidden tests' 2 × 4 mesh B is split P(None, 'Y'), dB comes back replicated,
and JAX refuses a cotangent of another type than its argument: "dA laid out like A, dB like B",
"float32[1024,96@Y]".
"""

EXPECTED = {'lost': ['test_bf16x3_matmul_vjp_hidden'],
 'feedback': ['dA laid out like A, dB like B', 'float32[1024,96@Y]']}


def bf16x3_matmul_vjp(a: jax.Array, b: jax.Array) -> jax.Array:
    """f32[M, K] · f32[K, N] → f32[M, N] from three bf16 passes, differentiable."""
    return _product(a, b)


def _x3(x, y, layout):
    x_hi, y_hi = x.astype(jnp.bfloat16), y.astype(jnp.bfloat16)
    x_lo = (x - x_hi.astype(jnp.float32)).astype(jnp.bfloat16)
    y_lo = (y - y_hi.astype(jnp.float32)).astype(jnp.bfloat16)
    pairs = ((x_hi, y_lo), (x_lo, y_hi), (x_hi, y_hi))
    dots = [jnp.dot(p, q, preferred_element_type=jnp.float32, out_sharding=layout) for p, q in pairs]
    return (dots[0] + dots[1]) + dots[2]


@jax.custom_vjp
def _product(a, b):
    return bf16x3_matmul(a, b)


def _forward(a, b):
    return bf16x3_matmul(a, b), (a, b)


def _backward(operands, g):
    a, b = operands
    if not jax.typeof(a).sharding.mesh.axis_names:  # no mesh: nothing to say
        return _x3(g, b.T, None), _x3(a.T, g, None)
    spec = jax.sharding.PartitionSpec
    return _x3(g, b.T, spec("X", None)), _x3(a.T, g, spec())  # the self-check's layouts


_product.defvjp(_forward, _backward)
