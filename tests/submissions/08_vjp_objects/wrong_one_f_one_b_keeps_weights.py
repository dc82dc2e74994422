"""Keeps the weights: one_f_one_b runs the right schedule, but each layer's VJP object comes from a plain
jax.vjp and holds a copy of w. Gradients are right; peak_bytes counts one weight matrix per VJP object
too, and both the self-check and the hidden test name the weights as the cause, not the microbatches in
flight: "the saved state keeps the weights", "that counts the weights too".
"""

EXPECTED = {'lost': ['test_one_f_one_b_visible', 'test_one_f_one_b_hidden'],
 'feedback': ['the saved state keeps the weights', 'that counts the weights too']}


def one_f_one_b(ws, x, n_micro, in_flight):
    """Gradients as in pipeline_grads with at most in_flight microbatches in flight; (grads, peak_bytes)."""
    grads = [jnp.zeros_like(w) for w in ws]
    waiting = []
    peak = 0

    def backward(states, y):
        ct = 2 * y
        for i in reversed(range(len(ws))):
            ct_w, ct = _heavy_bwd(states[i], ct)
            grads[i] = grads[i] + ct_w

    for x_m in jnp.split(x, n_micro):
        states = []
        for w in ws:
            x_m, f_vjp = _heavy_fwd(w, x_m)  # saves w in every VJP object
            states.append(f_vjp)
            held = [[s for s, _ in waiting], states]
            peak = max(peak, sum(leaf.nbytes for leaf in jax.tree.leaves(held)))
        waiting.append((states, x_m))
        if len(waiting) == in_flight:
            backward(*waiting.pop(0))
    while waiting:
        backward(*waiting.pop(0))
    return grads, int(peak)


@jax.jit
def _heavy_fwd(w, x):
    return jax.vjp(layer, w, x)


@jax.jit
def _heavy_bwd(f_vjp, ct):
    return f_vjp(ct)
