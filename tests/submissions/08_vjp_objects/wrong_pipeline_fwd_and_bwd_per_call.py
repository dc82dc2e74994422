"""Per-call fwd_and_bwd: pipeline_grads builds jax.fwd_and_bwd afresh on every call.
Right gradients, but each call compiles again; the visible and hidden tests call it twice: "called again
with the same arguments: expected no compilation".
"""

EXPECTED = {'lost': ['test_pipeline_grads_visible', 'test_pipeline_grads_hidden'],
 'feedback': ['programs compiled by pipeline_grads(ws, x, 2) called again',
              'called again with the same arguments: expected no compilation']}


def pipeline_grads(ws, x, n_micro):
    """Gradients of sum_m sum(predict(ws, x_m) ** 2), one compiled forward and backward, layer by layer."""
    # forward and backward built afresh on every call: right gradients, but each call compiles again
    fwd, bwd = jax.fwd_and_bwd(layer, argnums=(0, 1))
    grads = [jnp.zeros_like(w) for w in ws]
    for x_m in jnp.split(x, n_micro):
        saved = []
        for w in ws:
            x_m, residuals = fwd(w, x_m)
            saved.append(residuals)
        ct = 2 * x_m
        for i in reversed(range(len(ws))):
            ct_w, ct = bwd(saved[i], ct)
            grads[i] = grads[i] + ct_w
    return grads
