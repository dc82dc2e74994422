"""device_put of local rows: global_batch hands each process's own rows to device_put on the global mesh.
device_put onto a mesh that spans processes takes the same whole array in every process, and JAX checks
it; the visible and hidden tests fail with one sentence (JAX's own message prints both arrays) and the
hint to use jax.make_array_from_process_local_data.
"""

EXPECTED = {
    "lost": ["test_global_batch_visible", "test_global_batch_hidden"],
    "feedback": [
        "device_put got different data in each process",
        "use jax.make_array_from_process_local_data",
    ],
}


def global_batch(local_rows: np.ndarray, mesh: Mesh) -> jax.Array:
    """The dataset's rows, loaded in process order, as one array laid out P('X', None) on mesh."""
    return jax.device_put(local_rows, NamedSharding(mesh, P("X", None)))
