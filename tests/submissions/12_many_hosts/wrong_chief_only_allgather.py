"""Chief-only allgather: global_batch gathers every process's rows in process 0 only.
process_allgather is a collective: process 0 waits in it for a process that never comes (process 1 builds
its array from its own rows alone), until JAX gives up after 30 s. The visible and hidden tests fail with
one sentence and the hint that every process must run the same collectives. Which sentence depends on the
moment process 1 leaves (the collective never joined, a peer that left, Gloo's other words: issue 41), so
only the hint is expected.
"""

EXPECTED = {
    "lost": ["test_global_batch_visible", "test_global_batch_hidden"],
    "waits": 60,  # JAX's 30 s, in the visible and in the hidden test
    "feedback": ["every process must run the same collectives in the same order"],
}


def global_batch(local_rows: np.ndarray, mesh: Mesh) -> jax.Array:
    """The dataset's rows, loaded in process order, as one array laid out P('X', None) on mesh."""
    sharding = NamedSharding(mesh, P("X", None))
    if jax.process_index() == 0:  # the chief gathers everything; the other process never joins it
        rows = multihost_utils.process_allgather(local_rows, tiled=True)
        return jax.make_array_from_callback(rows.shape, sharding, lambda index: rows[index])
    return jax.make_array_from_process_local_data(sharding, local_rows)
