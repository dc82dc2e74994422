"""Reduce per microbatch: sgd_step_accumulated reshards each microbatch's gradient inside the scan.
Right values, but the reduction runs once per microbatch; the visible and hidden tests fail: "got 1
collective(s) executed 4 time(s)" ... "inside the microbatch loop all-reduces once per microbatch".
"""

EXPECTED = {'lost': ['test_sgd_step_accumulated_visible', 'test_sgd_step_accumulated_hidden'],
 'feedback': ['got 1 collective(s) executed 4 time(s)',
              'inside the microbatch loop all-reduces once per microbatch']}


def sgd_step_accumulated(ws: jax.Array, xs: jax.Array, lr: float) -> jax.Array:
    """ws - lr * (sum over microbatches of the gradient), with one all-reduce per call."""
    ws_reduced = jax.reshard(ws, P(None, None, None, reduced={"X"}))

    def add_microbatch(g_sum, x):
        g = jax.grad(microbatch_loss)(ws_reduced, x)
        return g_sum + jax.reshard(g, P(None, None, None)), None

    g_sum, _ = jax.lax.scan(add_microbatch, jnp.zeros_like(ws), xs)
    return ws - lr * g_sum
