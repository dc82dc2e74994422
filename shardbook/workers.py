"""The worker processes of :mod:`shardbook.hosts`: the program each runs, and how they are started.

Importing JAX is most of what a worker costs before its function runs (about 0.6 s of CPU, against
about 0.1 s to join the job and run a small function). So on Linux one Python process, the *zygote*,
imports JAX once, before any backend or device exists, and forks the workers from it. Each worker
then makes itself what a Python process of its own would be: its own session (its process group, which
the launcher kills), its own output, its own devices (``XLA_FLAGS``, read when its backend starts,
after the fork), NumPy's global random state seeded afresh. What it still shares with the others is
Python's string hash seed, so a ``set`` of strings iterates in the same order in every worker (on real
hosts it may not). The zygote notes each worker's pid and how it ended in files the launcher reads, and
ends them all when the launcher asks (:meth:`Workers.end`).

Elsewhere (macOS, where a fork after system libraries started is unsafe) and for a single process,
each worker is a Python process of its own, which imports JAX itself.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import Sequence
from typing import Any

#: Whether the workers are forked from one Python that imported JAX (Linux) or each started as a
#: Python of its own (elsewhere: a fork after macOS's system libraries started is unsafe).
FORK = sys.platform.startswith("linux")

#: Seconds the zygote gets to end its workers and leave once asked, before it is killed.
END_WAIT = 10.0

# Gloo binds to the address this machine's host name resolves to, unless told one. Every worker is on
# localhost, so 127.0.0.1 it is: nothing listens on outside interfaces, and it works where the host name
# resolves to nothing (the grading sandbox's network namespace has only a loopback). The factory is
# private to JAX and has moved (xla_client._xla before JAX 0.6, _jax since): where neither holds it,
# Gloo keeps its own address, which works wherever the host name resolves (Colab, a laptop).
_GLOO_LOOPBACK = r"""
_homes = (getattr(xla_bridge, "_jax", None), getattr(getattr(xla_bridge, "xla_client", None), "_xla", None))
_home = next((m for m in _homes if callable(getattr(m, "make_gloo_tcp_collectives", None))), None)
if _home is not None:
    _gloo = _home.make_gloo_tcp_collectives
    _home.make_gloo_tcp_collectives = lambda **kw: _gloo(**{"hostname": "127.0.0.1", **kw})
"""

# What every Python of a run does first: import JAX (no backend starts) and choose Gloo on localhost.
_PRELUDE = (
    r"""
import contextlib, faulthandler, json, os, pickle, signal, sys, time, traceback, warnings
# Before stopping a worker, the launcher asks where it is: every thread's Python stack, into its log.
faulthandler.register(signal.SIGUSR1, all_threads=True)
plan = json.load(open(sys.argv[1]))
import jax
import jax.numpy
import numpy
from jax._src import xla_bridge
jax.config.update("jax_cpu_collectives_implementation", "gloo")
"""
    + _GLOO_LOOPBACK
)

# What one worker does: read its orders, join the others, call the function, write the value.
_BOOT = r"""
def run(orders_path):
    orders = json.load(open(orders_path))
    os.environ["XLA_FLAGS"] = orders["xla_flags"]  # this process's devices: read when its backend starts
    for name, value in orders["config"].items():
        jax.config.update(name, value)
    jax.distributed.initialize(
        orders["coordinator"], orders["num_processes"], orders["process_id"],
        initialization_timeout=orders["init_timeout"], heartbeat_timeout_seconds=orders["heartbeat"],
    )
    open(orders["joined"], "w").close()  # tells the launcher the function's time starts now
    namespace = {"__name__": "__worker__"}
    exec(compile(orders["source"], "<function sent to the workers>", "exec"), namespace)
    with open(orders["args"], "rb") as f:
        args = pickle.load(f)
    try:
        value = namespace["__entry__"](*args)
    except BaseException as error:  # noted for the launcher (a check's message), then shown as usual
        source, lines, seen = orders["source"].splitlines(), [], error
        while seen is not None:  # the lines of the function sent that led to it, the error it came from too
            for frame in traceback.extract_tb(seen.__traceback__):
                line = frame.lineno or 0
                if frame.filename == "<function sent to the workers>" and 0 < line <= len(source):
                    lines.append((frame.name, source[line - 1].strip()))
            seen = seen.__cause__ or (None if seen.__suppress_context__ else seen.__context__)
        with open(orders["value"] + ".error", "wb") as f:
            pickle.dump((type(error).__name__, str(error)), f)
        with open(orders["value"] + ".lines", "wb") as f:
            pickle.dump(lines, f)
        traceback.print_exc()
        sys.stdout.flush(); sys.stderr.flush()
        os._exit(1)
    def _host(x):
        if isinstance(x, jax.Array):
            return numpy.asarray(x) if x.is_fully_addressable else repr(x)
        return x
    value = jax.tree.map(_host, value)
    with open(orders["value"] + ".part", "wb") as f:
        pickle.dump(value, f)
    os.replace(orders["value"] + ".part", orders["value"])
    sys.stdout.flush(); sys.stderr.flush()
    jax.distributed.shutdown()  # a barrier: process 0 hosts the coordinator, so it must leave last
    # Leave without Python's clean-up. A device's share of a program whose result the function never waited
    # for may still be running (on a busy machine, it may not even have started), and its collective needs
    # the coordinator that shutdown() just closed: in the other process it fails unseen, in this one it may
    # wait for its peer to connect. Python's clean-up would then wait on that device's thread for ever
    # (seen on a loaded machine: the value written, process 0 stuck in the JAX client's destructor).
    os._exit(0)
"""

# The zygote: forks one worker per process and notes, in files of the run's folder, each one's pid
# ("pid<p>") and, once it ended, its exit code as subprocess gives it ("status<p>"). It reaps them only
# when all have ended, so a pid the launcher reads without a status is never another process's. Once
# the launcher has written "stop", it forks no more and kills every worker still running.
_ZYGOTE = r"""
folder, zygote = plan["folder"], os.getpid()

def note(name, text):
    with open(os.path.join(folder, name + ".part"), "w") as f:
        f.write(text)
    os.replace(os.path.join(folder, name + ".part"), os.path.join(folder, name))

def stop_asked():
    return os.path.exists(os.path.join(folder, "stop"))

def become(log):
    # What a Python of its own would be: its own session, output and random state; gone with the zygote.
    os.setsid()
    if libc is not None:
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG: killed when the zygote dies
    if os.getppid() != zygote:  # it died already
        os._exit(1)
    os.dup2(log, 1)
    os.dup2(log, 2)
    for fd in plan["logs"]:
        os.close(fd)
    faulthandler.register(signal.SIGUSR1, all_threads=True)
    if "numpy.random" in sys.modules:
        numpy.random.seed()  # its legacy global state, seeded afresh as in a new process

try:
    import ctypes
    libc = ctypes.CDLL(None)
except Exception:
    libc = None
note("forking", "")
children, ended = {}, {}
for p, (orders_path, log) in enumerate(zip(plan["orders"], plan["logs"])):
    if stop_asked():
        break
    sys.stdout.flush(); sys.stderr.flush()
    with warnings.catch_warnings():  # a fork with threads running: NumPy's BLAS ends its own for a fork
        warnings.simplefilter("ignore", DeprecationWarning)
        pid = os.fork()
    if pid == 0:
        try:
            become(log)
            run(orders_path)
        except BaseException:
            traceback.print_exc()
        finally:
            os._exit(1)
    children[pid] = p
    note(f"pid{p}", str(pid))
killed = False
while len(ended) < len(children):
    if stop_asked() and not killed:
        for pid in children:
            for kill in (os.killpg, os.kill):
                with contextlib.suppress(OSError):
                    kill(pid, signal.SIGKILL)
        killed = True
    for pid, p in children.items():
        if pid not in ended:
            found = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
            if found is not None:
                ended[pid] = found.si_status if found.si_code == os.CLD_EXITED else -found.si_status
                note(f"status{p}", str(ended[pid]))
    if len(ended) < len(children):
        time.sleep(0.05)
for pid in children:
    os.waitpid(pid, 0)
os._exit(0)
"""


def _program(fork: bool) -> str:
    """The program a run's Python processes execute (``python -c``; the plan's path as argument)."""
    return _PRELUDE + _BOOT + (_ZYGOTE if fork else '\nrun(plan["orders"][0])\n')


def _worker_env(devices: int, extra: dict[str, str] | None) -> dict[str, str]:
    env = dict(os.environ)
    flags = re.sub(r"--xla_force_host_platform_device_count=\S+", "", env.get("XLA_FLAGS", "")).split()
    env["XLA_FLAGS"] = " ".join([*flags, f"--xla_force_host_platform_device_count={devices}"])
    env["JAX_PLATFORMS"] = "cpu"
    env["PYTHONUNBUFFERED"] = "1"
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    # The caller's import path (a notebook's folder, the course root), so importable functions import.
    paths = [p for p in sys.path if p and os.path.isdir(p)]
    env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys([*env.get("PYTHONPATH", "").split(os.pathsep), *paths]))
    env.update(extra or {})
    return env


class _Forked:
    """A worker the zygote forked, as the launcher sees it: what :class:`subprocess.Popen` tells of a
    child (``pid``, ``poll()``, ``returncode``, ``send_signal()``), read from the zygote's notes."""

    def __init__(self, zygote: subprocess.Popen, folder: str, index: int):
        self.zygote, self.folder, self.index = zygote, folder, index
        self.pid: int | None = None
        self.returncode: int | None = None

    def _note(self, name: str) -> int | None:
        with contextlib.suppress(OSError, ValueError):
            with open(os.path.join(self.folder, f"{name}{self.index}")) as f:
                return int(f.read())
        return None

    def poll(self) -> int | None:
        """Its exit code once it ended (negative: the signal that killed it), else None."""
        if self.returncode is None:
            self.pid = self.pid or self._note("pid")
            gone = self.zygote.poll() is not None  # before reading the status: a zygote that left wrote it
            status = self._note("status")
            if status is None and gone:  # the zygote died: before forking it, or taking it along (SIGKILL)
                status = -signal.SIGKILL if self.pid or not self.zygote.returncode else self.zygote.returncode
            self.returncode = status
        return self.returncode

    def send_signal(self, sig: int) -> None:
        """Sends ``sig`` if it is running (unreaped until it has a status: its pid is its own)."""
        if self.poll() is None and self.pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, sig)


class Workers:
    """The worker processes of one run, started: ``handles[p]`` is process ``p`` as
    :class:`subprocess.Popen` shows a child (``pid``, ``poll()``, ``returncode``, ``send_signal()``);
    :meth:`end` ends every one of them.

    Args:
      folder: the run's folder (the zygote's notes go there).
      orders: each process's orders (what :data:`_BOOT` reads); written into ``folder``.
      counts: simulated CPU devices of each process.
      env: environment variables to add for the workers.
      cwd: their working directory.
      logs: each process's open log file (its stdout and stderr).
    """

    def __init__(
        self,
        folder: str,
        orders: Sequence[dict[str, Any]],
        counts: Sequence[int],
        env: dict[str, str] | None,
        cwd: str | None,
        logs: Sequence[Any],
    ):
        self.folder = folder
        self.fork = FORK and len(orders) > 1
        envs = [_worker_env(n, env) for n in counts]
        paths = []
        for pid, order in enumerate(orders):
            paths.append(os.path.join(folder, f"orders{pid}.json"))
            with open(paths[-1], "w") as f:
                json.dump({**order, "xla_flags": envs[pid]["XLA_FLAGS"]}, f)
        self.zygote: subprocess.Popen | None = None
        self.handles: list[Any] = []
        fds = [log.fileno() for log in logs]
        # One Python per process, or one zygote for all: its plan names each process's orders and log.
        for pid in [0] if self.fork else range(len(orders)):
            plan = os.path.join(folder, f"plan{pid}.json")
            with open(plan, "w") as f:
                json.dump({"folder": folder, "orders": paths if self.fork else [paths[pid]], "logs": fds}, f)
            try:
                started = subprocess.Popen(
                    [sys.executable, "-c", _program(self.fork), plan],
                    stdin=subprocess.DEVNULL,
                    stdout=logs[pid],
                    stderr=subprocess.STDOUT,
                    env=envs[pid],
                    cwd=cwd,
                    pass_fds=fds if self.fork else (),
                    start_new_session=True,  # its own process group: killed with everything it started
                )
            except BaseException:  # no process left behind: those already started end now
                self.end()
                raise
            self.handles.append(started)
        if self.fork:
            self.zygote = self.handles[0]
            self.handles = [_Forked(self.zygote, folder, pid) for pid in range(len(orders))]

    def end(self) -> None:
        """Kills every worker still running (its whole process group) and reaps it; returns once none is
        left. A zygote is first asked to (it reaps its workers), and killed if it has not within
        :data:`END_WAIT` seconds, or at once if it never began forking."""
        if self.zygote is not None:
            open(os.path.join(self.folder, "stop"), "w").close()  # from now on it forks no more
            if not os.path.exists(os.path.join(self.folder, "forking")):
                _kill_group(self.zygote)  # still starting: no worker exists, and none will
        for h in self.handles:  # a forked one's pid stays its own until the zygote reaps it
            if h.poll() is None and h.pid is not None:
                _kill_group(h)
        for p in [self.zygote] if self.zygote is not None else self.handles:
            try:
                p.wait(timeout=END_WAIT)
            except subprocess.TimeoutExpired:
                _kill_group(p)
                with contextlib.suppress(Exception):
                    p.wait(timeout=END_WAIT)
        for h in self.handles:
            h.poll()


def _kill_group(p: Any) -> None:
    """SIGKILL to the process group of ``p`` (a worker's session: whatever it started too)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(p.pid, signal.SIGKILL)
