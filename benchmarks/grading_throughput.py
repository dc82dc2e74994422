"""How fast `make grade` is: a batch of N submissions of one assignment in a scratch course, graded
by the local engine with 1 and with 2 jobs, and by the Ray engine on a 2-node Ray cluster started on
this machine (a head and a worker node, one CPU each, as ``RAY_ADDRESS`` would name a real one).

Run: ``python -m benchmarks.grading_throughput [--assignment 01_meshes] [--count 30] [--configs
jobs1,jobs2,ray2]`` (``make bench-grading``). The batch cycles through the reference solution and the
committed wrong and mangled submissions that grade normally (the deliberately slow ones — infinite
loops, killed kernels — are left out: they measure the timeouts, not the grader). Prints, per
configuration, notebooks per minute over the whole command (start-up included) and the median
seconds one notebook took. ``--unsandboxed`` grades without the sandbox, to measure what it costs.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from grading import grade
from grading.local_ray import local_cluster

ROOT = Path(__file__).resolve().parents[1]
SLOW = ("broken_infinite_loop", "broken_kills_kernel")
CONFIGS = {
    "jobs1": "local engine, --jobs 1",
    "jobs2": "local engine, --jobs 2",
    "ray2": "Ray, 2-node cluster",
}


def run(
    assignment: str, batch: Path, scratch: Path, config: str, unsandboxed: bool = False
) -> tuple[float, list[float]]:
    """Grades ``batch`` in a fresh course with one configuration: (wall seconds, seconds per notebook).

    ``python -m grading.grade`` runs in a process of its own, as ``make grade`` runs it.
    """
    course = grade.copy_course(scratch / config)
    cmd = [sys.executable, "-m", "grading.grade", assignment, str(batch), "--root", str(course)]
    cmd += ["--unsandboxed"] * unsandboxed
    with contextlib.ExitStack() as stack:
        env = dict(os.environ, PYTHONPATH=str(ROOT))
        if config == "ray2":
            address, cluster_env = stack.enter_context(local_cluster(scratch / "ray-logs", nodes=2))
            env.update(cluster_env, RAY_ADDRESS=address, PYTHONPATH=str(ROOT))
            cmd += ["--engine", "ray"]
        else:
            cmd += ["--jobs", config.removeprefix("jobs")]
        start = time.monotonic()
        done = subprocess.run(cmd, env=env, capture_output=True, text=True)
        wall = time.monotonic() - start
    if done.returncode != 0:
        raise SystemExit(f"{config}: grading failed:\n{done.stdout}\n{done.stderr[-3000:]}")
    learners = (course / "grading/reports" / assignment / "learners").glob("*.json")
    return wall, sorted(json.loads(p.read_text())["seconds"] for p in learners)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--assignment", default="01_meshes")
    parser.add_argument("--count", type=int, default=30)
    parser.add_argument("--configs", default=",".join(CONFIGS), help=f"comma-separated, of {list(CONFIGS)}")
    parser.add_argument("--unsandboxed", action="store_true", help="grade without the sandbox (its cost)")
    args = parser.parse_args()
    configs = args.configs.split(",")
    unknown = set(configs) - set(CONFIGS)
    if unknown:
        raise SystemExit(f"unknown configuration(s) {sorted(unknown)}; known: {list(CONFIGS)}")

    from tests import submissions

    corpus = submissions.load(args.assignment)
    sources = [("reference_solution", submissions.colab_bytes(None, args.assignment))]
    sources += [(n, submissions.colab_bytes(s, args.assignment)) for n, s in corpus.items() if n not in SLOW]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        scratch = Path(tmp)
        batch = scratch / "downloads"
        batch.mkdir()
        for k in range(args.count):
            name, data = sources[k % len(sources)]
            (batch / f"learner{k:03d}_{name}.ipynb").write_bytes(data)
        for config in configs:
            wall, seconds = run(args.assignment, batch, scratch, config, args.unsandboxed)
            rows.append((config, wall, seconds))
            print(f"{CONFIGS[config]}: {len(seconds)} notebooks in {wall:.0f} s", flush=True)
    print(f"\n{args.assignment}, {args.count} notebooks, {os.cpu_count()} cores")
    print(f"{'configuration':<26} {'notebooks/min':>13} {'wall s':>7} {'median s/notebook':>18}")
    for config, wall, seconds in rows:
        rate = len(seconds) / wall * 60
        print(f"{CONFIGS[config]:<26} {rate:>13.1f} {wall:>7.0f} {statistics.median(seconds):>18.1f}")


if __name__ == "__main__":
    main()
