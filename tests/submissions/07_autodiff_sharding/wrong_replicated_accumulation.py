"""Replicated accumulation: sgd_step_accumulated differentiates w.r.t. replicated ws in the scan.
Right values, but every layer of every microbatch all-reduces its gradient; the visible and hidden tests
fail: "expected exactly one all-reduce, ... got 1 collective(s) executed 12 time(s)".
"""

EXPECTED = {'lost': ['test_sgd_step_accumulated_visible', 'test_sgd_step_accumulated_hidden'],
 'feedback': ['expected exactly one all-reduce, executed once per call, got 1 collective(s) '
              'executed 12 time(s)',
              'every layer of every microbatch all-reduces its gradient']}


def sgd_step_accumulated(ws: jax.Array, xs: jax.Array, lr: float) -> jax.Array:
    """ws - lr * (sum over microbatches of the gradient), with one all-reduce per call."""

    def add_microbatch(g_sum, x):
        return g_sum + jax.grad(microbatch_loss)(ws, x), None

    g_sum, _ = jax.lax.scan(add_microbatch, jnp.zeros_like(ws), xs)
    return ws - lr * g_sum
