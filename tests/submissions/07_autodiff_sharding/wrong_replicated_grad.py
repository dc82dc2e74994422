"""Replicated grad: grad_unreduced returns the plain gradient, reduced, without the {U:X} type.
The values are the summed gradient, but the visible and hidden tests check the type: "expected type
float32[3,16,16]{U:X}, got float32[3,16,16]" ("the cotangent's type follows the primal's").
"""

EXPECTED = {'lost': ['test_grad_unreduced_visible', 'test_grad_unreduced_hidden'],
 'feedback': ['expected type float32[3,16,16]{U:X}, got float32[3,16,16]',
              "the cotangent's type follows the primal's"]}


def grad_unreduced(ws: jax.Array, x: jax.Array) -> jax.Array:
    """d microbatch_loss / d ws as f32[L, H, H]{U:X}: each device's partial sum, not yet reduced."""
    return jax.grad(microbatch_loss)(ws, x)
