"""Re-gather with custom_vjp: fsdp_train_step differs from the reference solution.
Each layer is a jax.custom_vjp whose forward pass gathers the shards and saves only the shards and the layer's
input; its backward pass gathers them again (jax.vjp through the gather, whose transpose is the gradient's
reduce-scatter), behind jax.lax.optimization_barrier (as jax.checkpoint does), since XLA would otherwise merge
the two identical gathers into one kept alive from forward to backward. FSDP as it is run, written without
jax.checkpoint: full marks.
"""

EXPECTED = {'lost': [], 'feedback': []}


def fsdp_train_step(params, opt_state, batch, mesh):
    """One Optax step with parameters gathered for the computation and gradients reduce-scattered."""
    def run(shards, h, last):
        return layer_fn(jax.tree.map(lambda w: jax.reshard(w, P()), shards), h, last)

    layer = jax.custom_vjp(run, nondiff_argnums=(2,))

    def layer_forward(shards, h, last):
        return run(shards, h, last), (shards, h)  # the shards, never the gathered weights

    def layer_backward(last, saved, g):
        # gathers again; the barrier keeps XLA from merging this gather with the forward one (the same
        # all-gather of the same shards), which would keep the forward's gathered weights alive until here
        saved = jax.lax.optimization_barrier(saved)
        _, pullback = jax.vjp(lambda s, x: run(s, x, last), *saved)
        return pullback(g)

    layer.defvjp(layer_forward, layer_backward)
    loss, grads = jax.value_and_grad(loss_fn)(params, batch, layer)
    updates, opt_state = optimizer.update(grads, opt_state, params)
    return optax.apply_updates(params, updates), opt_state, loss
