"""A small Ray cluster on this machine, for the tests and the grading benchmark: a head node and
worker nodes, each a ``ray start --block`` process of its own, stopped by process group on exit.

    with local_cluster(nodes=2, logs=Path("ray-logs")) as (address, env):
        subprocess.run([..., "--engine", "ray"], env=dict(env, RAY_ADDRESS=address))

``env`` is the environment the nodes run with (token authentication with a token of this cluster's
own, usage stats off); a driver connecting to ``address`` needs its RAY_AUTH_MODE and RAY_AUTH_TOKEN.

``python -m grading.local_ray STATE`` starts such a cluster, writes its address and those settings
to the JSON file STATE, and keeps it up until its standard input closes. ``make test`` does that
before the checks begin (tools/run_steps.py), so the nodes start on a quiet machine: a raylet gives
its agents a fixed 15 s to start, which a loaded machine can exceed. The tests then use that cluster
(``$SHARDBOOK_TEST_RAY`` names STATE) instead of starting their own.
With a token of its own the cluster starts on a machine that never made one (``~/.ray/auth_token``):
without it ``ray start`` refuses to start. Stopping never uses ``ray stop``, which would stop
every Ray on the machine, only this cluster's process groups.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

RAY = Path(sys.executable).parent / "ray"
ATTEMPTS = 3
STARTUP_NICE = -15  # the nice value of a node while it starts; once up, it gets the caller's


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _nodes_up(address: str, env: dict[str, str]) -> int:
    try:
        done = subprocess.run(
            [str(RAY), "status", "--address", address], env=env, capture_output=True, text=True, timeout=60
        )
    except subprocess.TimeoutExpired:
        return 0
    return len(re.findall(r"^\s*1 node_", done.stdout, re.M)) if done.returncode == 0 else 0


def raylet_abort(ray_temp: Path | None = None) -> str:
    """Why the newest Ray session's raylet aborted, if it did (Ray logs it in the session, not to us)."""
    session = (ray_temp or Path(tempfile.gettempdir()) / "ray") / "session_latest"
    for err in sorted((session / "logs").glob("raylet*.err")):
        for line in err.read_text(errors="replace").splitlines():
            for sign in ("Check failed", "exited immediately"):
                if sign in line:
                    return f"; {err}: {line[line.index(sign) :][:300]}"
    return ""


@contextlib.contextmanager
def local_cluster(
    logs: Path, nodes: int = 2, cpus_per_node: int = 1, timeout: float = 180
) -> Iterator[tuple[str, dict[str, str]]]:
    """Starts a head and ``nodes - 1`` worker nodes; yields (address, env); stops them all."""
    import ray._private.services

    logs.mkdir(parents=True, exist_ok=True)
    port = _free_port()
    address = f"{ray._private.services.get_node_ip_address()}:{port}"
    token = secrets.token_hex(32)  # as `ray get-auth-token --generate` makes one
    env = dict(os.environ, RAY_AUTH_MODE="token", RAY_AUTH_TOKEN=token, RAY_USAGE_STATS_ENABLED="0")
    started: list[subprocess.Popen] = []

    def start(name: str, *args: str) -> None:
        cmd = [str(RAY), "start", *args, "--num-cpus", str(cpus_per_node), "--block", "--disable-usage-stats"]
        cmd += ["--object-store-memory", str(200 * 2**20), "--metrics-export-port", str(_free_port())]
        # No log monitor: it only streams the workers' output to drivers, and the grading engine's
        # driver asks for none (log_to_driver=False, grading/engines.py). Polling the nodes' logs, the
        # two monitors of make test's cluster took about 100 s of CPU in a 13-minute run (2026-12-07).
        cmd += ["--include-log-monitor", "false"]
        # A new raylet waits a fixed 15 s for its agents to write the ports they listen on to files,
        # then aborts. Ports given here are not waited for (the agent's HTTP port always is).
        for agent in ("dashboard-agent-listen", "dashboard-agent-grpc", "runtime-env-agent"):
            cmd += [f"--{agent}-port", str(_free_port())]
        # On a busy machine the Python agents start too slowly for that 15 s: as root, the node starts at a
        # higher priority (nice, so that every process it starts has it from its first instruction)
        # and goes back to this process's once up. Others cannot raise it, and rely on the retries.
        if os.geteuid() == 0:
            cmd = ["nice", "-n", str(STARTUP_NICE - os.nice(0)), *cmd]
        with open(logs / f"{name}.log", "w") as log:
            node = subprocess.Popen(
                cmd, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
        started.append(node)

    def wait_for(count: int) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if _nodes_up(address, env) >= count:
                return
            if any(p.poll() is not None for p in started):
                break
            time.sleep(2)
        raise RuntimeError(
            f"the local Ray cluster did not come up with {count} node(s); logs in {logs}{raylet_abort()}"
        )

    def stop() -> None:
        for p in started:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, signal.SIGTERM)
        for p in started:
            with contextlib.suppress(subprocess.TimeoutExpired):
                p.wait(timeout=10)  # a node would drain for up to 30 s; a test cluster need not
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, signal.SIGKILL)  # whatever of the group is left (raylet, workers)
            p.wait()
        started.clear()

    # A node gives up after Ray's fixed waits (30 s for its raylet, 15 s for an agent's port), which
    # a busy machine can exceed: more tries before the cluster is reported as not starting.
    for attempt in range(ATTEMPTS):
        try:
            head = ["--head", "--port", str(port), "--include-dashboard", "false"]
            start(f"head-{attempt}", *head, "--dashboard-port", str(_free_port()))
            wait_for(1)
            for k in range(1, nodes):
                start(f"worker{k}-{attempt}", "--address", address)
            wait_for(nodes)
            usual = os.getpriority(os.PRIO_PROCESS, 0)
            for p in started:  # every process of a node is in its process group
                with contextlib.suppress(OSError):
                    os.setpriority(os.PRIO_PGRP, p.pid, usual)
            break
        except RuntimeError:
            stop()
            if attempt == ATTEMPTS - 1:
                raise
            port = _free_port()
            address = f"{ray._private.services.get_node_ip_address()}:{port}"
    try:
        yield address, env
    finally:
        stop()


#: The environment variable naming the state file of a cluster started for the tests.
TEST_CLUSTER_ENV = "SHARDBOOK_TEST_RAY"
_CLIENT_SETTINGS = ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_USAGE_STATS_ENABLED")


def read_state(path: Path) -> tuple[str, dict[str, str]]:
    """(address, env) of the cluster whose state file is ``path``; env is this process's environment
    with the cluster's client settings."""
    import json

    state = json.loads(path.read_text())
    return state["address"], dict(os.environ, **state["settings"])


def main(argv: list[str]) -> int:
    """Starts a 2-node cluster, writes its state file, and stops it when standard input closes."""
    import json

    state = Path(argv[0])
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))  # stop the nodes on the way out
    with local_cluster(state.parent / "ray-logs", nodes=2) as (address, env):
        settings = {k: env[k] for k in _CLIENT_SETTINGS}
        scratch = state.with_suffix(".part")
        scratch.write_text(json.dumps({"address": address, "settings": settings}))
        scratch.rename(state)  # whole or absent: a reader never sees half of it
        print(f"Ray cluster at {address}: up", flush=True)
        sys.stdin.read()  # until the caller closes it (or exits)
        state.unlink(missing_ok=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
