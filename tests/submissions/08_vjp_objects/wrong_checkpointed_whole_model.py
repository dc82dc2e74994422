"""One program over the whole model: checkpointed_grads takes jax.grad of the whole model in one jitted
program and reports the peak the contract names, computed from the sizes. Right gradients and peak, but
no schedule runs; the self-check and the hidden test look at the compiled programs' inputs: "expected
every compiled program to take at most one layer's weights" (self-check: "expected each to take at
most one layer's weights").
"""

EXPECTED = {'lost': ['test_checkpointed_grads_visible', 'test_checkpointed_grads_hidden'],
 'feedback': ["expected each to take at most one layer's weights",
              "expected every compiled program to take at most one layer's weights"]}


def checkpointed_grads(ws, x, every):
    """Gradients of sum(predict(ws, x) ** 2); (grads, peak_bytes)."""
    grads = list(_whole_model_grads(ws, x))
    _, state = jax.vjp(layer, ws[0], x, saveable_args=(False, True))
    per_state = sum(leaf.nbytes for leaf in jax.tree.leaves(state))
    return grads, (len(ws) // every) * x.nbytes + every * per_state


@jax.jit
def _whole_model_grads(ws, x):
    return jax.grad(lambda ws: jnp.sum(predict(ws, x) ** 2))(ws)
