"""Returns None: global_batch builds the array but never returns it.
The visible and hidden tests say "got None (did the function forget to return?)" with the hint for that
mistake, not one about layouts or local rows.
"""

EXPECTED = {
    "lost": ["test_global_batch_visible", "test_global_batch_hidden"],
    "feedback": [
        "got None (did the function forget to return?)",
        "Hint: a Python function that ends without a return statement returns None",
    ],
}


def global_batch(local_rows: np.ndarray, mesh: Mesh) -> jax.Array:
    """The dataset's rows, loaded in process order, as one array laid out P('X', None) on mesh."""
    by_process = sorted(mesh.devices.flat, key=lambda d: (d.process_index, d.id))
    grid = np.array(by_process).reshape(jax.process_count(), -1)
    staging = NamedSharding(Mesh(grid, ("processes", "local")), P("processes"))
    staged = jax.make_array_from_process_local_data(staging, local_rows)
    result = jax.device_put(staged, NamedSharding(mesh, P("X", None)))  # noqa: F841 (never returned)
