"""Gathers weights: constrained_mlp replicates w_in and w_out, so the compiler all-gathers the weights.
"Give every device everything" gives right values, but the visible and hidden communication checks fail:
"expected at most 6 KiB sent per device", an all-gather that "moves a weight".
"""

EXPECTED = {'lost': ['test_constrained_mlp_visible', 'test_constrained_mlp_hidden'],
 'feedback': ['expected at most 6 KiB sent per device', 'all-gather', 'moves a weight']}


def constrained_mlp(x: jax.Array, w_in: jax.Array, w_out: jax.Array, mesh: Mesh) -> jax.Array:
    """relu(x @ w_in) @ w_out, steered so that the compiler sums activations instead of moving weights."""
    # replicate the weights so that every device has everything it needs
    everywhere = NamedSharding(mesh, P())
    w_in = jax.lax.with_sharding_constraint(w_in, everywhere)
    w_out = jax.lax.with_sharding_constraint(w_out, everywhere)
    return jax.nn.relu(x @ w_in) @ w_out
