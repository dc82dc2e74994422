"""Jit per layer: pipeline_grads wraps a new jax.jit closure over each layer's weights.
Right gradients, but it compiles again for every layer; the visible and hidden tests fail: "expected at most
2 compilations" ... "a new jax.jit".
"""

EXPECTED = {'lost': ['test_pipeline_grads_visible', 'test_pipeline_grads_hidden'],
 'feedback': ['expected at most 2 compilations', 'a new jax.jit']}


def pipeline_grads(ws, x, n_micro):
    """Gradients of sum_m sum(predict(ws, x_m) ** 2), one compiled forward and backward, layer by layer."""
    grads = [jnp.zeros_like(w) for w in ws]
    for x_m in jnp.split(x, n_micro):
        states = []
        for w in ws:
            # a fresh jit of a closure over this layer's weights: it compiles again every layer
            fwd = jax.jit(lambda x, w=w: jax.vjp(layer, w, x))
            x_m, f_vjp = fwd(x_m)
            states.append(f_vjp)
        ct = 2 * x_m
        for i in reversed(range(len(ws))):
            ct_w, ct = jax.jit(lambda v, c: v(c))(states[i], ct)
            grads[i] = grads[i] + ct_w
    return grads
