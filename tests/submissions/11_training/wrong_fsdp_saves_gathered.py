"""Saves every gathered layer: fsdp_train_step gathers all parameters inside the loss and differentiates.
Plausible: values, layouts, gathers and reduce-scatters are all right, and it sends less than FSDP as it is
run; but autodiff saves each layer's gathered weights for the backward pass, so the step's peak holds every
layer whole, as data parallelism does. The visible and hidden tests fail on the memory budget: "keeps every
layer's gathered weights" ... "gather each layer again in the backward pass".
"""

EXPECTED = {'lost': ['test_fsdp_train_step_visible', 'test_fsdp_train_step_hidden'],
 'feedback': ["It keeps every layer's gathered weights (1.295 MiB in all) for the backward pass",
              "It keeps every layer's gathered weights (2.004 MiB in all) for the backward pass, as data "
              'parallelism does',
              'expected a peak of at most',
              'gather each layer again in the backward pass']}


def fsdp_train_step(params, opt_state, batch, mesh):
    """One Optax step with parameters gathered for the computation and gradients reduce-scattered."""
    def loss_of_shards(shards):
        gathered = jax.tree.map(lambda w: jax.reshard(w, P()), shards)  # every layer, kept for the backward
        return loss_fn(gathered, batch)

    loss, grads = jax.value_and_grad(loss_of_shards)(params)
    updates, opt_state = optimizer.update(grads, opt_state, params)
    return optax.apply_updates(params, updates), opt_state, loss
