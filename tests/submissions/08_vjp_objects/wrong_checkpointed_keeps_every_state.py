"""No recomputation: checkpointed_grads keeps every layer's light VJP object from the first pass (and the
segment inputs besides) and runs the backward from them, never rebuilding a segment. Gradients are right,
but the peak holds every layer's state at once; the self-check and the hidden test say so: "expected
peak_bytes", "that is every layer's VJP object at once".
"""

EXPECTED = {'lost': ['test_checkpointed_grads_visible', 'test_checkpointed_grads_hidden'],
 'feedback': ['expected peak_bytes', "that is every layer's VJP object at once"]}


def checkpointed_grads(ws, x, every):
    """Gradients of sum(predict(ws, x) ** 2); (grads, peak_bytes)."""
    inputs, states, peak = [], [], 0
    h = x
    for i, w in enumerate(ws):
        if i % every == 0:
            inputs.append(h)
        h, f_vjp = _keep_fwd(w, h)  # every layer's state kept from the first pass
        states.append(f_vjp)
        peak = max(peak, sum(leaf.nbytes for leaf in jax.tree.leaves([inputs, states])))
    grads = [None] * len(ws)
    ct = 2 * h
    for i in reversed(range(len(ws))):
        grads[i], ct = _keep_bwd(states[i], ws[i], ct)
    return grads, int(peak)


@jax.jit
def _keep_fwd(w, x):
    return jax.vjp(layer, w, x, saveable_args=(False, True))


@jax.jit
def _keep_bwd(f_vjp, w, ct):
    return f_vjp.replace(args_res=[w, f_vjp.args_res[1]])(ct)
