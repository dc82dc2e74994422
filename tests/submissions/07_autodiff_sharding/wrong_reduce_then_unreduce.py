"""Reduce then unreduce: grad_unreduced takes the (all-reduced) gradient, then reshards it unreduced.
The type comes out right, but the all-reduce already happened; the visible and hidden tests fail: "expected
no collectives ..., got all-reduce": "differentiate with respect to reduced weights instead".
"""

EXPECTED = {'lost': ['test_grad_unreduced_visible', 'test_grad_unreduced_hidden'],
 'feedback': ['expected no collectives (each device keeps its partial sum), got all-reduce',
              'differentiate with respect to reduced weights instead']}


def grad_unreduced(ws: jax.Array, x: jax.Array) -> jax.Array:
    """d microbatch_loss / d ws as f32[L, H, H]{U:X}: each device's partial sum, not yet reduced."""
    g = jax.grad(microbatch_loss)(ws, x)
    return jax.reshard(g, P(None, None, None, unreduced={"X"}))
