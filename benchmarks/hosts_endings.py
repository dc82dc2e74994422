"""How often a multi-process run of ``shardbook.hosts`` fails to end, with the workers' old ending and
with today's: ``python -m benchmarks.hosts_endings --runs 40``.

Each run starts 2 JAX processes × 4 CPU devices and calls a function that lays out an array over both
and leaves one resharding ``jit`` call unawaited: the pattern that hung a CI run (a device's share of a
program the function never waited for, still connecting to a peer that had left). With ``--old-ending``
the workers end as they did before 2026-12-04, through Python's clean-up after the job's leaving
barrier; by default they leave with ``os._exit(0)`` after it.

It prints one line per run (seconds, how each process ended) and, for every run the launcher had to
stop, the stopped process's Python stacks, then the count. The hangs are a race that comes with load:
on 2 cores beside a CI run under load (2026-12-04), 5 of 20 runs hung with the old ending and 0 of 20
with today's, taken one after the other. CI never runs this script; ``tests/test_hosts.py`` checks the
ending deterministically (``make bench-hosts`` runs it here).
"""

from __future__ import annotations

import argparse
import time

from grading.assignment import run_cell
from shardbook import hosts, workers

#: The function, as a notebook cell defines it (so it travels to the workers as source).
UNAWAITED = """
import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P


def unawaited_reshard():
    mesh = Mesh(np.array(jax.devices()).reshape(2, 4), ("X", "Y"))
    rows = np.ones((4, 3), np.float32)
    x = jax.make_array_from_process_local_data(NamedSharding(mesh, P("X")), rows)
    jax.jit(lambda a: a * 2, out_shardings=NamedSharding(mesh, P("Y")))(x)  # never waited for
    return 0
"""

#: The line that ends a worker today; without it a worker ends through Python's clean-up.
TODAYS_ENDING = "os._exit(0)\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=40)
    parser.add_argument("--timeout", type=float, default=15.0, help="seconds a run gets once joined")
    parser.add_argument("--old-ending", action="store_true", help="end workers through Python's clean-up")
    args = parser.parse_args()
    if args.old_ending:
        assert TODAYS_ENDING in workers._BOOT, "the workers' ending changed: update this script"
        workers._BOOT = workers._BOOT.replace(TODAYS_ENDING, "")
        # Python's clean-up ends only a Python of its own: a forked worker leaves with os._exit either way
        workers.FORK = False
    namespace: dict = {"__name__": "__main__"}
    run_cell(UNAWAITED, "<cell 1>", namespace)
    hung = 0
    for run in range(args.runs):
        start = time.monotonic()
        results = hosts.run_workers(namespace["unawaited_reshard"], check=False, timeout=args.timeout)
        print(f"run {run}: {time.monotonic() - start:5.1f} s;", "; ".join(r.describe() for r in results))
        stopped = [r for r in results if r.stopped_by_launcher]
        hung += bool(stopped)
        for r in stopped:
            print(f"  process {r.process_id}'s stacks when stopped:\n{r.stacks}")
    ending = "Python's clean-up (the old ending)" if args.old_ending else "os._exit after the barrier"
    print(f"{hung} of {args.runs} runs had to be stopped; workers ended by {ending}")


if __name__ == "__main__":
    main()
