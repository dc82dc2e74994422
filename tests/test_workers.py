"""Tests for shardbook.workers: forked from one Python or started one by one, each worker is a process of
its own; the zygote's death takes every worker with it; a start that fails leaves no process. (How runs
end, fail and time out is tests/test_hosts.py's, through shardbook.hosts.run_workers.)"""

import signal
import subprocess
import sys

import pytest

from shardbook import hosts, workers
from tests import host_functions as sent
from tests.test_hosts import _own_scratch, _workers_alive  # noqa: F401 (a fixture, used by name)

LINUX = sys.platform.startswith("linux")
FORKED = pytest.param(True, marks=pytest.mark.skipif(not LINUX, reason="workers are forked on Linux only"))


@pytest.mark.parametrize("fork", [FORKED, False])
def test_each_worker_is_a_process_of_its_own(fork, monkeypatch):
    # Property: whether forked from one Python that imported JAX (Linux) or started one by one (macOS),
    # each worker has its own devices (XLA_FLAGS read after the fork), its own session (the process
    # group the launcher kills) and NumPy's global random state seeded afresh, as a new Python has.
    monkeypatch.setattr(workers, "FORK", fork)
    results = hosts.run_workers(sent.identity, devices_per_process=[2, 4], timeout=120)
    (p0, n0, pid0, sid0, draw0), (p1, n1, pid1, sid1, draw1) = (r.value for r in results)
    assert (p0, n0, p1, n1) == (0, 2, 1, 4)
    assert sid0 == pid0 and sid1 == pid1 and pid0 != pid1
    assert draw0 != draw1
    assert _workers_alive() == []


@pytest.mark.skipif(not LINUX, reason="workers are forked on Linux only")
def test_the_zygotes_death_takes_every_worker_with_it():
    # Property: a zygote that dies (killed from outside) leaves no worker running: each is killed with
    # it (PR_SET_PDEATHSIG), and the launcher names a death at once instead of waiting for the timeout.
    results = hosts.run_workers(sent.kills_the_zygote, timeout=60, check=False)
    assert [r.returncode for r in results] == [-signal.SIGKILL] * 2
    assert not any(r.stopped_by_launcher for r in results)
    assert _workers_alive() == []


def test_a_start_that_fails_half_way_leaves_no_process(monkeypatch):
    # Property: when the second Python cannot be started (the process limit, no memory), the first one
    # is killed before the error reaches the caller.
    monkeypatch.setattr(workers, "FORK", False)
    popen, started = subprocess.Popen, []

    def second_fails(*args, **kwargs):
        if started:
            raise BlockingIOError("Resource temporarily unavailable")
        started.append(popen(*args, **kwargs))
        return started[-1]

    monkeypatch.setattr(subprocess, "Popen", second_fails)
    with pytest.raises(BlockingIOError):
        hosts.run_workers(sent.sleep_forever)
    assert started[0].returncode == -signal.SIGKILL
    assert _workers_alive() == []
