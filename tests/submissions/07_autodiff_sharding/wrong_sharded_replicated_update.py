"""Split weights gathered whole and updated whole: sgd_step_sharded reshards ws to P() (replicated),
differentiates with respect to those replicated weights and splits the new weights again at the end.
Right values and layout, but the replicated weights all-reduce their gradient in every layer of every
microbatch; the self-check and the hidden test count them: "expected one all-gather and one
reduce-scatter", and the hidden test's hint names the all-reduces.
"""

EXPECTED = {'lost': ['test_sgd_step_sharded_visible', 'test_sgd_step_sharded_hidden'],
 'feedback': ['expected one all-gather and one reduce-scatter',
              'every layer of every microbatch all-reduces its gradient']}


def sgd_step_sharded(ws, xs, lr):
    """ws - lr * (sum over microbatches of the gradient), ws split P(None, 'X', None)."""
    whole = jax.reshard(ws, P(None, None, None))

    def add_microbatch(g_sum, x):
        return g_sum + jax.grad(microbatch_loss)(whole, x), None

    g_sum, _ = jax.lax.scan(add_microbatch, jnp.zeros_like(whole), xs)
    return jax.reshard(whole - lr * g_sum, P(None, "X", None))
