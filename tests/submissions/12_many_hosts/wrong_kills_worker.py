"""Kills worker: global_batch SIGKILLs process 1, as an out-of-memory kill would.
Checks that the grader survives a dead worker; the visible and hidden tests score 0 with "got: worker
process 1 of 2 died (killed by SIGKILL)".
"""

EXPECTED = {'lost': ['test_global_batch_visible', 'test_global_batch_hidden'],
 'feedback': ['got: worker process 1 of 2 died (killed by SIGKILL)',
              'global_batch in 2 processes: expected all 2 worker processes to finish, got: worker '
              'process 1 of 2 died (killed by SIGKILL)']}


def global_batch(local_rows: np.ndarray, mesh: Mesh) -> jax.Array:
    """The dataset's rows, loaded in process order, as one array laid out P('X', None) on mesh."""
    import os
    import signal

    if jax.process_index() == 1:  # a process that dies, as an out-of-memory kill would end it
        os.kill(os.getpid(), signal.SIGKILL)
    return jax.make_array_from_process_local_data(NamedSharding(mesh, P("X", None)), local_rows)
