"""All-reduced grads: fsdp_train_step reshards everything to P() and runs a data-parallel step.
Right loss and params, and the layout is restored at the end; the visible and hidden tests fail: "expected
all-reduces of at most 24 B" ... "a sharded parameter's gradient was all-reduced".
"""

EXPECTED = {'lost': ['test_fsdp_train_step_visible', 'test_fsdp_train_step_hidden'],
 'feedback': ['expected all-reduces of at most 24 B (the loss and the gradients of the replicated '
              'parameters)',
              "a sharded parameter's gradient was all-reduced"]}


def fsdp_train_step(params, opt_state, batch, mesh):
    """One Optax step with parameters gathered for the computation and gradients reduce-scattered."""
    specs = jax.tree.map(lambda a: jax.typeof(a).sharding.spec, (params, opt_state))
    # data parallel: every device holds everything for the step, and the layout is restored at the end
    whole_params, whole_state = jax.tree.map(lambda a: jax.reshard(a, P()), (params, opt_state))
    loss, grads = jax.value_and_grad(loss_fn)(whole_params, batch)
    updates, whole_state = optimizer.update(grads, whole_state, whole_params)
    whole_params = optax.apply_updates(whole_params, updates)
    new_params, new_state = jax.tree.map(jax.reshard, (whole_params, whole_state), specs)
    return new_params, new_state, loss
