"""No gather: fsdp_train_step differentiates loss_fn on the shards as they are, gathering nothing.
On a mesh with Explicit axes the first matmul contracts a dimension sharded in w and not in x, and JAX
refuses to guess the result's sharding (ShardingTypeError). The visible test's feedback shows it as on
Colab, in words with its hint, not as JAX's raw message; the hidden test says the same.
"""

EXPECTED = {
    "lost": ["test_fsdp_train_step_visible", "test_fsdp_train_step_hidden"],
    "feedback": [
        "ShardingTypeError: on a mesh with Explicit axes JAX must know each result's sharding while "
        "tracing, and here it is ambiguous.\nHint: say which one you want",
        "got ShardingTypeError: on a mesh with Explicit axes",
    ],
}


def fsdp_train_step(params, opt_state, batch, mesh):
    """One Optax step with parameters gathered for the computation and gradients reduce-scattered."""
    loss, grads = jax.value_and_grad(loss_fn)(params, batch)  # the shards as they are: nothing gathered
    # Given: the Optax step of chapter 0, unchanged by any layout.
    updates, opt_state = optimizer.update(grads, opt_state, params)
    return optax.apply_updates(params, updates), opt_state, loss
