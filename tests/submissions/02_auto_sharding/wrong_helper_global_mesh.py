"""The chapter's helper with its default mesh: constrained_mlp calls a copy of the chapter's
mlp_steered, whose default `on_mesh` is the notebook's 4 × 2 mesh, so the constraint is always on that
mesh, whatever mesh the call gives. Right on the 4 × 2 mesh only; the self-check's second mesh and the
hidden tests fail, naming the mesh of the call and the mesh the constraint was on.
"""

EXPECTED = {'lost': ['test_constrained_mlp_visible', 'test_constrained_mlp_hidden'],
 'feedback': ["a sharding_constraint on another mesh, {'X': 4, 'Y': 2}", 'on the mesh argument']}


def constrained_mlp(x: jax.Array, w_in: jax.Array, w_out: jax.Array, mesh: Mesh) -> jax.Array:
    """relu(x @ w_in) @ w_out, steered so that the compiler sums activations instead of moving weights."""
    return _mlp_steered(P("X", None))(x, w_in, w_out)


def _mlp_steered(hidden_spec, on_mesh=jax.make_mesh((4, 2), ("X", "Y"), axis_types=(AxisType.Auto,) * 2)):
    """The chapter's helper: the MLP with its hidden activation pinned to hidden_spec on on_mesh."""

    def steered(x, w_in, w_out):
        hidden = jax.lax.with_sharding_constraint(x @ w_in, NamedSharding(on_mesh, hidden_spec))
        return jax.nn.relu(hidden) @ w_out

    return steered
