"""Runs `make test`'s steps in lanes side by side, then prints where the time went.

Usage: ``python tools/run_steps.py [--ray-cluster] "unit" "notebooks book" "lint"`` (lanes as in the
Makefile).

``--ray-cluster`` first starts the Ray cluster the grading engine's tests use (grading/local_ray.py),
while the machine is quiet, and stops it when the lanes are done: its row in the table is its start.

Each argument is a lane: its steps (make targets) run one after another, and a step that fails stops
its lane; the lanes run at the same time (on 2 cores, the unit tests beside the book's execution).
Each step's output goes to ``_build/test-logs/<step>.log`` and is printed whole when the step ends.
The table gives each step's wall and CPU seconds (user + system of the step's processes: the figure a
busy machine changes least), and the run's, and how fast the machine's cores are (:func:`core_seconds`,
before the lanes start and after they end): a slower core takes more CPU for every step, so two
machines' tables compare only beside it. A process whose parent ended before it (a sandboxed kernel's
bwrap, Chromium's renderers, a Ray node's raylet) is adopted (:func:`adopt_orphans`) and waited for at
the end: its CPU is in the row ``orphans`` and in the run's, no step's. Exits non-zero if any step
failed.
"""

from __future__ import annotations

import ctypes
import os
import resource
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LOGS = ROOT / "_build" / "test-logs"
RAY_STATE = ROOT / "_build" / "test-ray" / "cluster.json"
RAY_START_LIMIT = 600  # seconds; local_cluster itself gives up sooner, after its tries
PR_SET_CHILD_SUBREAPER = 36  # linux/prctl.h
ORPHANS_GRACE = 30  # seconds the orphans left running at the end get to end before they are killed


def core_seconds(additions: int = 10_000_000) -> float:
    """CPU seconds this process takes for a fixed piece of pure-Python work (``additions`` additions of
    squares): how fast one of this machine's cores ran it just then. It drifts with what shares the
    machine's caches and memory (0.73 s before one make test's lanes and 1.07 s after, 2026-12-07), so it
    tells a slow machine from a fast one, not one run from the next."""
    start = time.process_time()
    total = 0
    for i in range(additions):
        total += i * i
    return time.process_time() - start


def start_ray_cluster() -> tuple[subprocess.Popen | None, float]:
    """Starts the tests' Ray cluster and waits until it is up: (its process, seconds it took). If it
    cannot start (after local_cluster's own tries), (None, seconds): the engine's tests then start a
    cluster of their own when they run, and fail if that cannot start either."""
    from grading.local_ray import TEST_CLUSTER_ENV

    start = time.monotonic()
    RAY_STATE.parent.mkdir(parents=True, exist_ok=True)
    RAY_STATE.unlink(missing_ok=True)
    with open(LOGS / "ray-cluster.log", "w") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "grading.local_ray", str(RAY_STATE)],
            cwd=ROOT,
            stdin=subprocess.PIPE,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    while not RAY_STATE.exists():
        if proc.poll() is not None or time.monotonic() - start > RAY_START_LIMIT:
            proc.terminate()  # it stops the nodes it started
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            print((LOGS / "ray-cluster.log").read_text()[-3000:], flush=True)
            return None, time.monotonic() - start
        time.sleep(0.5)
    os.environ[TEST_CLUSTER_ENV] = str(RAY_STATE)
    return proc, time.monotonic() - start


def stop_ray_cluster(proc: subprocess.Popen) -> float:
    """Stops the cluster; the CPU seconds its processes used."""
    assert proc.stdin is not None
    proc.stdin.close()
    try:
        _, _, usage = os.wait4(proc.pid, 0)
    except ChildProcessError:
        return 0.0
    proc.returncode = 0
    return usage.ru_utime + usage.ru_stime


def machine_cpu() -> tuple[float, float]:
    """(busy, idle) CPU seconds of the whole machine since it booted, summed over its cores, from
    /proc/stat ((0, 0) where there is none). Every process counts, including those no step waited
    for (a Ray worker, a browser's helpers), so the difference over a run is what it really cost."""
    try:
        fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    except (OSError, ValueError):
        return 0.0, 0.0
    tick = os.sysconf("SC_CLK_TCK")
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
    return (sum(fields[:8]) - idle) / tick, idle / tick


def adopt_orphans() -> bool:
    """Makes this process the one that every orphan among its descendants is handed to (Linux's child
    subreaper), so that their CPU time is counted when :func:`reap_orphans` waits for them: a process
    whose parent ended first (a sandboxed kernel's bwrap after its grader, a Ray node's raylet and the
    notebooks its workers graded after ``ray start``) otherwise goes to init, and no step's figure
    had it (about 200 s of CPU in tests/test_grading_engines.py alone, 2026-12-07). False where the
    system has no such call."""
    try:
        return ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def _children(ended: bool = False) -> dict[int, str]:
    """This process's children (from /proc), pid -> command name: those still running, or with
    ``ended`` those that ended and were not waited for yet."""
    found = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:
            continue
        name, rest = text[text.index("(") + 1 : text.rindex(")")], text[text.rindex(")") + 2 :].split()
        if int(rest[1]) == os.getpid() and (rest[0] == "Z") == ended:
            found[int(stat.parent.name)] = name
    return found


def reap_orphans(grace: float = ORPHANS_GRACE) -> tuple[dict[str, list[float]], list[str]]:
    """Waits for every child left once the steps and the cluster have ended (the orphans adopted by
    :func:`adopt_orphans`), killing those still running after ``grace`` seconds: (command name ->
    [how many, their CPU seconds with their own descendants'], the names of those that were killed)."""
    reaped: dict[str, list[float]] = {}
    killed: list[str] = []

    def count(name: str, usage: resource.struct_rusage) -> None:
        row = reaped.setdefault(name, [0, 0.0])
        row[0] += 1
        row[1] += usage.ru_utime + usage.ru_stime

    deadline = time.monotonic() + grace
    while True:
        for pid, name in _children(ended=True).items():  # named while /proc still has them
            try:
                done, _, usage = os.wait4(pid, os.WNOHANG)
            except ChildProcessError:
                continue
            if done:
                count(name, usage)
        try:
            pid, _, usage = os.wait4(-1, os.WNOHANG)
        except ChildProcessError:
            return reaped, killed  # none left
        if pid:
            count("?", usage)  # ended between the scan and now
            continue
        if time.monotonic() > deadline and not killed:
            for child, name in _children().items():
                killed.append(name)
                try:
                    os.kill(child, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            deadline = time.monotonic() + grace  # SIGKILL ends them at once; this only bounds the wait
        elif time.monotonic() > deadline:
            return reaped, killed
        time.sleep(0.5)  # each round reads /proc (about 10 ms with 70 processes)


def run_lane(steps: list[str], lane: int, results: list, lock: threading.Lock) -> None:
    for step in steps:
        log = LOGS / f"{step}.log"
        start = time.monotonic()
        with open(log, "w") as out:
            proc = subprocess.Popen(
                ["make", "--no-print-directory", step], cwd=ROOT, stdout=out, stderr=subprocess.STDOUT
            )
            # wait4: the step's own CPU time (its process and every descendant it waited for).
            _, status, usage = os.wait4(proc.pid, 0)
            code = proc.returncode = os.waitstatus_to_exitcode(status)
        seconds = time.monotonic() - start
        cpu = usage.ru_utime + usage.ru_stime
        with lock:
            results.append((step, lane, seconds, cpu, code))
            state = "ok" if code == 0 else f"FAILED (exit {code})"
            print(f"\n==> make {step}: {state} in {seconds:.0f} s (lane {lane})", flush=True)
            sys.stdout.write(log.read_text())
            sys.stdout.flush()
        if code != 0:
            return


def main(argv: list[str]) -> int:
    ray = "--ray-cluster" in argv
    lanes = [lane.split() for lane in argv if lane.split() and lane != "--ray-cluster"]
    if not lanes:
        print(__doc__)
        return 2
    LOGS.mkdir(parents=True, exist_ok=True)
    results: list[tuple[str, int, float, float, int]] = []
    lock = threading.Lock()
    start = time.monotonic()
    busy_before, idle_before = machine_cpu()
    core_before = core_seconds()
    adopting = adopt_orphans()
    cluster = None
    if ray:
        cluster, ray_seconds = start_ray_cluster()
        state = "up" if cluster else "did not start (above); the engine's tests will start their own"
        print(f"==> the tests' Ray cluster: {state} in {ray_seconds:.0f} s", flush=True)
    threads = [
        threading.Thread(target=run_lane, args=(steps, k, results, lock)) for k, steps in enumerate(lanes, 1)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    ray_cpu = stop_ray_cluster(cluster) if cluster else 0.0
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    orphans, killed = reap_orphans()
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    orphans_cpu = usage.ru_utime + usage.ru_stime - before.ru_utime - before.ru_stime
    core_after = core_seconds()
    wall = time.monotonic() - start
    cpu = usage.ru_utime + usage.ru_stime
    done = {(lane, step): (seconds, step_cpu, code) for step, lane, seconds, step_cpu, code in results}
    print(f"\nmake test: where the time went ({len(lanes)} lane(s) side by side, {os.cpu_count()} cores)")
    print(f"  {'step':<16} {'wall':>8} {'cpu':>8}")
    if ray:
        print(f"  {'ray-cluster':<16} {ray_seconds:6.0f} s {ray_cpu:6.0f} s  (its start; cpu: the whole run)")
    for k, steps in enumerate(lanes, 1):
        for step in steps:
            if (k, step) in done:
                seconds, step_cpu, code = done[k, step]
                print(
                    f"  {step:<16} {seconds:6.0f} s {step_cpu:6.0f} s  lane {k}"
                    + ("" if code == 0 else "  FAILED")
                )
            else:
                print(f"  {step:<16}      -         -    lane {k}  (not run: an earlier step failed)")
    if adopting:
        most = sorted(orphans.items(), key=lambda item: -item[1][1])[:3]
        named = ", ".join(f"{name} {cpu:.0f} s" for name, (_, cpu) in most)
        print(
            f"  {'orphans':<16} {'-':>6}   {orphans_cpu:6.0f} s  ({sum(n for n, _ in orphans.values()):.0f}"
            f" processes whose parent ended before them, counted here, not in a step; most: {named})"
        )
    if killed:
        print(f"  left running at the end, killed: {', '.join(sorted(killed))}")
    counted = "every process started" if adopting else "every process a step or its descendants waited for"
    print(f"  {'all':<16} {wall:6.0f} s {cpu:6.0f} s  (cpu: user + system of {counted})")
    busy, idle = (now - then for now, then in zip(machine_cpu(), (busy_before, idle_before), strict=True))
    if busy + idle > 0:
        print(
            f"  machine: {busy:.0f} s of CPU busy, {idle:.0f} s idle ({busy / (busy + idle):.0%} busy; every"
            " process, those no step waited for too)"
        )
    print(
        f"  cores: 10 million Python additions took {core_before:.2f} s of CPU before the lanes and"
        f" {core_after:.2f} s after (the same work on every machine: compare tables beside it)"
    )
    failed = [step for step, _, _, _, code in results if code != 0]
    if failed or len(done) < sum(map(len, lanes)):
        print(f"make test: FAILED ({' '.join(failed)})")
        return 1
    print(f"make test: all checks passed in {wall:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
