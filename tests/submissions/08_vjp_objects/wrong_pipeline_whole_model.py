"""Pipeline whole model: pipeline_grads differs from the reference solution.

Converted from wrong_pipeline_whole_model.ipynb by `python -m tests.submissions convert 08_vjp_objects`.
"""

EXPECTED = {'lost': ['test_pipeline_grads_visible', 'test_pipeline_grads_hidden'],
 'feedback': ['expected every compiled program to take at most one layer',
              'once per layer and microbatch']}


def pipeline_grads(ws, x, n_micro):
    """Gradients of sum_m sum(predict(ws, x_m) ** 2), one compiled forward and backward, layer by layer."""
    return list(_whole_grad(ws, x, n_micro))


@jax.jit(static_argnums=2)
def _whole_grad(ws, x, n_micro):
    def loss(ws):
        return sum(jnp.sum(predict(ws, x_m) ** 2) for x_m in jnp.split(x, n_micro))

    return jax.grad(loss)(ws)
