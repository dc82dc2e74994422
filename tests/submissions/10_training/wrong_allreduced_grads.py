"""Allreduced grads: fsdp_train_step differs from the reference solution.

Converted from wrong_allreduced_grads.ipynb by `python -m tests.submissions convert 10_training`.
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
