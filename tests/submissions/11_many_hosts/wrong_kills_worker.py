"""Kills worker: global_batch differs from the reference solution.

Converted from wrong_kills_worker.ipynb by `python -m tests.submissions convert 11_many_hosts`.
Dropped as copies of an older solution (their tests keep full marks): restore_on.
"""

EXPECTED = {'lost': ['test_global_batch_visible', 'test_global_batch_hidden'],
 'feedback': ['got: worker process 1 of 2 died (killed by SIGKILL)']}


def global_batch(local_rows: np.ndarray, mesh: Mesh) -> jax.Array:
    """The dataset's rows, loaded in process order, as one array laid out P('X', None) on mesh."""
    import os
    import signal

    if jax.process_index() == 1:  # a process that dies, as an out-of-memory kill would end it
        os.kill(os.getpid(), signal.SIGKILL)
    return jax.make_array_from_process_local_data(NamedSharding(mesh, P("X", None)), local_rows)
