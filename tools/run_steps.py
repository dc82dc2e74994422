"""Runs `make test`'s steps in lanes side by side, then prints where the time went.

Usage: ``python tools/run_steps.py "lint unit" "notebooks book"`` (lanes as in the Makefile).

Each argument is a lane: its steps (make targets) run one after another, and a step that fails stops
its lane; the lanes run at the same time (on 2 cores, the unit tests beside the book's execution).
Each step's output goes to ``_build/test-logs/<step>.log`` and is printed whole when the step ends.
The table gives each step's seconds, and the run's wall time and CPU time (user + system of every
process it started: the figure that a busy machine changes least). Exits non-zero if any step failed.
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LOGS = ROOT / "_build" / "test-logs"


def run_lane(steps: list[str], lane: int, results: list, lock: threading.Lock) -> None:
    for step in steps:
        log = LOGS / f"{step}.log"
        start = time.monotonic()
        with open(log, "w") as out:
            code = subprocess.call(
                ["make", "--no-print-directory", step], cwd=ROOT, stdout=out, stderr=subprocess.STDOUT
            )
        seconds = time.monotonic() - start
        with lock:
            results.append((step, lane, seconds, code))
            state = "ok" if code == 0 else f"FAILED (exit {code})"
            print(f"\n==> make {step}: {state} in {seconds:.0f} s (lane {lane})", flush=True)
            sys.stdout.write(log.read_text())
            sys.stdout.flush()
        if code != 0:
            return


def main(argv: list[str]) -> int:
    lanes = [lane.split() for lane in argv if lane.split()]
    if not lanes:
        print(__doc__)
        return 2
    LOGS.mkdir(parents=True, exist_ok=True)
    results: list[tuple[str, int, float, int]] = []
    lock = threading.Lock()
    start = time.monotonic()
    threads = [
        threading.Thread(target=run_lane, args=(steps, k, results, lock)) for k, steps in enumerate(lanes, 1)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.monotonic() - start
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = usage.ru_utime + usage.ru_stime
    done = {(lane, step): (seconds, code) for step, lane, seconds, code in results}
    print(f"\nmake test: where the time went ({len(lanes)} lane(s) side by side, {os.cpu_count()} cores)")
    for k, steps in enumerate(lanes, 1):
        for step in steps:
            if (k, step) in done:
                seconds, code = done[k, step]
                print(f"  {step:<16} {seconds:6.0f} s  lane {k}" + ("" if code == 0 else "  FAILED"))
            else:
                print(f"  {step:<16}      -    lane {k}  (not run: an earlier step of its lane failed)")
    print(f"  {'wall':<16} {wall:6.0f} s")
    print(f"  {'cpu':<16} {cpu:6.0f} s  (user + system, all processes)")
    failed = [step for step, _, _, code in results if code != 0]
    if failed or len(done) < sum(map(len, lanes)):
        print(f"make test: FAILED ({' '.join(failed)})")
        return 1
    print(f"make test: all checks passed in {wall:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
