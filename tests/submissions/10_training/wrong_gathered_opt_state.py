"""Gathered opt state: fsdp_train_step gathers the Adam moments to P() before optimizer.update.
Right values, but extra bytes (1.15× the ideal); the visible and hidden tests fail: "one all-gather and one
reduce-scatter per sharded parameter" ... "never gather the optimizer state".
"""

EXPECTED = {'lost': ['test_fsdp_train_step_visible', 'test_fsdp_train_step_hidden'],
 'feedback': ['(1.15× the ideal 12.24 KiB: one all-gather and one reduce-scatter per sharded '
              'parameter',
              'never gather the optimizer state']}


def fsdp_train_step(params, opt_state, batch, mesh):
    """One Optax step with parameters gathered for the computation and gradients reduce-scattered."""
    def loss_of_shards(shards):
        gathered = jax.tree.map(lambda w: jax.reshard(w, P()), shards)
        return loss_fn(gathered, batch)

    loss, grads = jax.value_and_grad(loss_of_shards)(params)
    whole_state = jax.tree.map(lambda s: jax.reshard(s, P()), opt_state)  # Adam sees whole moments
    updates, whole_state = optimizer.update(grads, whole_state, params)
    return optax.apply_updates(params, updates), whole_state, loss
