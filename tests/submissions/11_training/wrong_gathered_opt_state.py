"""Gathered opt state: fsdp_train_step re-gathers each layer as FSDP does, but gathers the Adam moments to P()
before optimizer.update. Right values, but extra bytes (over 1.15× the ideal); the visible and hidden tests
fail: "two all-gathers (forward and backward) and one reduce-scatter per sharded parameter" ... "never gather
the optimizer state".
"""

EXPECTED = {'lost': ['test_fsdp_train_step_visible', 'test_fsdp_train_step_hidden'],
 'feedback': ['(1.15× the ideal 18.33 KiB: two all-gathers (forward and backward) and one reduce-scatter per '
              'sharded parameter',
              'never gather the optimizer state']}


def fsdp_train_step(params, opt_state, batch, mesh):
    """One Optax step with parameters gathered for the computation and gradients reduce-scattered."""
    def gathered_layer(shards, h, last):
        whole = jax.tree.map(lambda w: jax.reshard(w, P()), shards)
        return layer_fn(whole, h, last)

    layer = jax.checkpoint(gathered_layer, policy=jax.checkpoint_policies.nothing_saveable, static_argnums=2)
    loss, grads = jax.value_and_grad(loss_fn)(params, batch, layer)
    whole_state = jax.tree.map(lambda s: jax.reshard(s, P()), opt_state)  # Adam sees whole moments
    updates, whole_state = optimizer.update(grads, whole_state, params)
    return optax.apply_updates(params, updates), whole_state, loss
