"""All forward first: one_f_one_b runs every microbatch's forward before any backward, ignoring in_flight.
Gradients are right, but the visible and hidden tests check peak memory: "expected peak_bytes ..." —
"that is what running every forward first holds".
"""

EXPECTED = {'lost': ['test_one_f_one_b_visible', 'test_one_f_one_b_hidden'],
 'feedback': ['expected peak_bytes', 'that is what running every forward first holds']}


def one_f_one_b(ws, x, n_micro, in_flight):
    """Gradients as in pipeline_grads with at most in_flight microbatches in flight; (grads, peak_bytes)."""
    grads = [jnp.zeros_like(w) for w in ws]
    held = []
    peak = 0
    for x_m in jnp.split(x, n_micro):  # every forward first, whatever in_flight says
        states = []
        for w in ws:
            x_m, f_vjp = _light_fwd(w, x_m)
            states.append(f_vjp)
            peak = max(peak, sum(leaf.nbytes for leaf in jax.tree.leaves([[s for s, _ in held], states])))
        held.append((states, x_m))
    for states, y in held:
        ct = 2 * y
        for i in reversed(range(len(ws))):
            ct_w, ct = _light_bwd(states[i], ws[i], ct)
            grads[i] = grads[i] + ct_w
    return grads, int(peak)


@jax.jit
def _light_fwd(w, x):
    return jax.vjp(layer, w, x, saveable_args=(False, True))


@jax.jit
def _light_bwd(f_vjp, w, ct):
    return f_vjp.replace(args_res=[w, *f_vjp.args_res[1:]])(ct)
