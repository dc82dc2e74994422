"""Split weights differentiated as they come: sgd_step_sharded takes each microbatch's gradient with
respect to the split ws. Right values and layout, but every layer of every microbatch gathers the weights
and reduce-scatters their gradient; the self-check and the hidden test count the executions: "expected
one all-gather and one reduce-scatter", "a collective inside a loop runs once per iteration".
"""

EXPECTED = {'lost': ['test_sgd_step_sharded_visible', 'test_sgd_step_sharded_hidden'],
 'feedback': ['expected one all-gather and one reduce-scatter',
              'a collective inside a loop runs once per iteration']}


def sgd_step_sharded(ws, xs, lr):
    """ws - lr * (sum over microbatches of the gradient), ws split P(None, 'X', None)."""

    def add_microbatch(g_sum, x):
        return g_sum + jax.grad(microbatch_loss)(ws, x), None

    g_sum, _ = jax.lax.scan(add_microbatch, jnp.zeros_like(ws), xs)
    return ws - lr * g_sum
