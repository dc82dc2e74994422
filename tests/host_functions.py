"""Functions the tests of shardbook.hosts and shardbook.workers send to the worker processes.

The workers import them by module and name (tests/ is importable), so this module imports nothing at its
top: a worker that imported tests/test_hosts.py for its function would also import pytest and the
helpers the tests use, a tenth of a second of CPU in each of some thirty workers.
"""


def global_sum() -> tuple[int, int, int, int, float]:
    import jax
    import jax.numpy as jnp
    import numpy as np
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    mesh = jax.make_mesh((jax.device_count(),), ("X",))
    local = np.full(jax.local_device_count(), jax.process_index() + 1, np.float32)
    x = jax.make_array_from_process_local_data(NamedSharding(mesh, P("X")), local, (jax.device_count(),))
    total = float(jax.jit(jnp.sum)(x))
    print(f"process {jax.process_index()} sees {jax.local_device_count()} of {jax.device_count()} devices")
    return jax.process_index(), jax.process_count(), jax.local_device_count(), jax.device_count(), total


def one_dies_in_a_collective() -> None:
    import os

    import jax
    import jax.numpy as jnp
    import numpy as np
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    mesh = jax.make_mesh((jax.device_count(),), ("X",))
    for step in range(1000):
        x = jax.make_array_from_process_local_data(NamedSharding(mesh, P("X")), np.ones(4, np.float32))
        print("step", step, float(jax.jit(jnp.sum)(x)), flush=True)
        if jax.process_index() == 1 and step == 1:
            os._exit(7)


def sleep_forever() -> None:
    import time

    while True:
        time.sleep(1)


def quick() -> int:
    import jax

    return jax.process_index()


def leaves_a_thread_running() -> int:
    import threading
    import time

    threading.Thread(target=time.sleep, args=(3600,)).start()  # not a daemon: Python's exit waits for it
    return 7


def fails_a_check() -> None:
    import jax

    from shardbook.checks import CheckFailed

    raise CheckFailed(f"f(x): expected 1, got {jax.process_index() + 2}. Hint: add one.")


def raises_value_error() -> None:
    raise ValueError("bad rows\nsecond line")


def not_written_yet() -> None:
    raise NotImplementedError("write global_batch")


# Mistakes of 12.1 (one batch from every process), run as its self-check runs them: the learner's
# function called through shardbook.checks.call in both processes, then a collective of the check's own.


def checked(global_batch) -> None:
    import jax
    import numpy as np
    from jax.experimental import multihost_utils
    from jax.sharding import Mesh

    from shardbook.checks import call, expect_allclose

    mesh = Mesh(np.array(jax.devices()[::-1]).reshape(2, 4), ("X", "Y"))
    data = np.arange(8 * 3, dtype=np.float32).reshape(8, 3)
    me = jax.process_index()
    got = call(global_batch, data[4 * me : 4 * me + 4], mesh, what=f"global_batch(process {me})")
    expect_allclose(multihost_utils.process_allgather(got, tiled=True), data, "global_batch", hint="order.")


def device_put_of_local_rows() -> None:
    import jax
    from jax.experimental import multihost_utils
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    def global_batch(local_rows, mesh):  # process 0 gathers first; both device_put their own rows
        if jax.process_index() == 0:
            local_rows = multihost_utils.process_allgather(local_rows, tiled=True)[:4]
        return jax.device_put(local_rows, NamedSharding(mesh, P("X", None)))

    checked(global_batch)


def returns_none() -> None:
    import jax
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    def global_batch(local_rows, mesh):
        jax.make_array_from_process_local_data(NamedSharding(mesh, P("X", None)), local_rows)

    checked(global_batch)


def shapes_differ() -> None:
    import jax
    import numpy as np
    from jax.experimental import multihost_utils

    def global_batch(local_rows, mesh):  # process 1 gathers half its rows: the shapes differ
        rows = local_rows if jax.process_index() == 0 else local_rows[:2]
        return multihost_utils.process_allgather(rows, tiled=True)

    global_batch(np.ones((4, 3), np.float32), None)


# shardbook.workers: each worker a process of its own; the zygote's death.


def identity() -> tuple[int, int, int, int, int]:
    import os

    import jax
    import numpy as np

    draw = int(np.random.randint(2**31))  # NumPy's global state, never seeded here
    return jax.process_index(), jax.local_device_count(), os.getpid(), os.getsid(0), draw


def kills_the_zygote() -> None:
    import os
    import signal
    import time

    import jax

    if jax.process_index() == 1:
        os.kill(os.getppid(), signal.SIGKILL)  # the zygote, as an out-of-memory kill would end it
    time.sleep(60)
