"""How fast `make grade` is, against the time to execute the same notebook with papermill.

Run: ``python -m benchmarks.grading_throughput [--assignment 01_meshes] [--rounds 5] [--count 30]
[--configs jobs1,jobs2,ray2] [--loud]`` (``make bench-grading``). Three parts:

1. **Paired, one notebook.** Each round executes the reference solution (as a learner downloads it)
   with ``papermill`` and grades it alone with ``python -m grading.grade`` in a fresh course, each as a
   whole process. Per round: the notebook's grading time (what grade.py measured for it), its ratio to
   papermill's time, and the batch's fixed cost (the command's wall time minus that notebook's).
   Then where one notebook's grading time went: the scratch course, nbgrader's autograde (the kernel's
   start, the imports cell, the answers, the test cells with their prologue), the results read back,
   the feedback page.
2. ``--loud``: the same, for the reference solution with one more cell that prints 80 MB in one line,
   30,000 lines, and displays 5 MB of HTML, against the reference solution graded alone.
3. **Throughput.** A batch of ``--count`` submissions in a scratch course, graded by the local engine
   with 1 and with 2 jobs, and by the Ray engine on a 2-node Ray cluster on this machine (a head and a
   worker node, one CPU each, as ``RAY_ADDRESS`` would name a real one). The batch cycles through the
   reference solution and the committed wrong and mangled submissions that grade normally (the
   deliberately slow ones — infinite loops, killed kernels — are left out: they measure the timeouts,
   not the grader). Per configuration: notebooks per minute over the whole command (start-up
   included) and the median seconds one notebook took. ``--configs ''`` skips it.

``--unsandboxed`` grades without the sandbox, to measure what it costs. Figures are medians; quote them
with the machine's core count, which the report prints.
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

from grading import worker
from grading.assignment import SETUP, grade_id, is_answer, is_test
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
    course = worker.copy_course(scratch / config)
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


LOUD_CELL = (
    "print('x' * 80_000_000)\n"
    "for i in range(30_000):\n"
    "    print(i, 'a line of a loop that prints too much')\n"
    "from IPython.display import HTML, display\n"
    "display(HTML('<p>' + 'y' * 5_000_000 + '</p>'))\n"
)


def _timed(cmd: list[str], env: dict[str, str] | None = None) -> float:
    start = time.monotonic()
    done = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(cmd[:4])} failed:\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}")
    return time.monotonic() - start


def _cell_seconds(autograded: Path) -> dict[str, float]:
    """Seconds of the cells of an autograded notebook by kind, from the kernel's own timestamps."""
    import datetime

    import nbformat

    kinds = dict.fromkeys(("setup cell (JAX's import)", "answers", "test cells", "other cells"), 0.0)
    for cell in nbformat.read(autograded, as_version=4).cells:
        times = cell.get("metadata", {}).get("execution", {})
        if "iopub.status.busy" not in times:
            continue
        busy, idle = (
            datetime.datetime.fromisoformat(times[k]) for k in ("iopub.status.busy", "iopub.status.idle")
        )
        kind = (
            "setup cell (JAX's import)"
            if grade_id(cell) == SETUP
            else "answers"
            if is_answer(cell)
            else "test cells"
            if is_test(cell)
            else "other cells"
        )
        kinds[kind] += (idle - busy).total_seconds()
    return kinds


def paired(assignment: str, notebook: bytes, scratch: Path, rounds: int, unsandboxed: bool) -> list[dict]:
    """``rounds`` pairs of (papermill, grade.py alone) on ``notebook``: one dict of figures per round."""
    folder = scratch / "paired"
    results = []
    for k in range(rounds):
        here = folder / f"round{k}"
        (here / "downloads").mkdir(parents=True)
        path = here / "downloads" / "learner.ipynb"
        path.write_bytes(notebook)
        papermill = _timed(
            [
                sys.executable,
                "-m",
                "papermill",
                str(path),
                str(here / "executed.ipynb"),
                "--log-level",
                "ERROR",
            ]
            + ["--cwd", str(here)],
            env=dict(os.environ, PYTHONPATH=str(ROOT)),
        )
        course = worker.copy_course(here)
        cmd = [
            sys.executable,
            "-m",
            "grading.grade",
            assignment,
            str(here / "downloads"),
            "--root",
            str(course),
        ]
        wall = _timed(cmd + ["--unsandboxed"] * unsandboxed, env=dict(os.environ, PYTHONPATH=str(ROOT)))
        kept = json.loads((course / "grading/reports" / assignment / "learners" / "learner.json").read_text())
        graded = next((course / "grading/autograded/learner" / assignment).glob("*.ipynb"))
        cells = _cell_seconds(graded)
        phases = kept["phases"]
        kernel = phases["autograde"] - sum(cells.values())
        results.append(
            {
                "papermill": papermill,
                "grading": kept["seconds"],
                "ratio": kept["seconds"] / papermill,
                "fixed": wall - kept["seconds"],
                "score": sum(kept["scores"].values()),
                "notes": kept["notes"],
                "scratch course": phases["copy"],
                "kernel start and nbgrader": kernel,
                **cells,
                "results read back": phases.get("results", 0.0),
                "feedback page": phases.get("feedback", 0.0),
            }
        )
    return results


def _report_paired(title: str, results: list[dict]) -> None:
    med = {key: statistics.median(r[key] for r in results) for key in results[0] if key not in ("notes",)}
    print(f"\n{title} ({len(results)} rounds, medians; min-max in brackets)")
    for key, label in (
        ("papermill", "papermill, whole process"),
        ("grading", "grading the notebook"),
        ("ratio", "grading / papermill, paired"),
        ("fixed", "the batch's fixed cost"),
    ):
        low, high = min(r[key] for r in results), max(r[key] for r in results)
        unit = "x" if key == "ratio" else " s"
        print(f"  {label:<32} {med[key]:6.2f}{unit}   [{low:.2f}-{high:.2f}]")
    print("  where the notebook's grading time went:")
    for key in (
        "scratch course",
        "kernel start and nbgrader",
        "setup cell (JAX's import)",
        "answers",
        "test cells",
        "other cells",
        "results read back",
        "feedback page",
    ):
        print(f"    {key:<30} {med[key]:6.2f} s")
    print(f"  score {med['score']:g}; notes: {results[0]['notes']}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--assignment", default="01_meshes")
    parser.add_argument("--count", type=int, default=30)
    parser.add_argument("--rounds", type=int, default=5, help="pairs of papermill and grading runs")
    parser.add_argument("--configs", default=",".join(CONFIGS), help=f"comma-separated, of {list(CONFIGS)}")
    parser.add_argument("--loud", action="store_true", help="also a notebook with a cell that prints 80 MB")
    parser.add_argument("--unsandboxed", action="store_true", help="grade without the sandbox (its cost)")
    args = parser.parse_args()
    configs = [c for c in args.configs.split(",") if c]
    unknown = set(configs) - set(CONFIGS)
    if unknown:
        raise SystemExit(f"unknown configuration(s) {sorted(unknown)}; known: {list(CONFIGS)}")

    from tests import submissions

    corpus = submissions.load(args.assignment)
    sources = [("reference_solution", submissions.colab_bytes(None, args.assignment))]
    sources += [(n, submissions.colab_bytes(s, args.assignment)) for n, s in corpus.items() if n not in SLOW]
    rows = []
    print(f"{args.assignment}, {os.cpu_count()} cores", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        scratch = Path(tmp)
        reference = sources[0][1]
        alone = paired(args.assignment, reference, scratch / "reference", args.rounds, args.unsandboxed)
        _report_paired("The reference solution graded alone", alone)
        if args.loud:
            import copy

            import nbformat

            nb = nbformat.reads(reference.decode(), as_version=4)
            loud = copy.deepcopy(nb)
            loud.cells.insert(len(loud.cells) // 2, nbformat.v4.new_code_cell(LOUD_CELL))
            data = nbformat.writes(loud).encode()
            results = paired(args.assignment, data, scratch / "loud", args.rounds, args.unsandboxed)
            _report_paired("With a cell that prints 80 MB and 30,000 lines", results)
            ratios = [r["grading"] / a["grading"] for r, a in zip(results, alone, strict=True)]
            print(f"  grading it / grading the reference alone: {statistics.median(ratios):.2f}x (paired)")
        if not configs:
            return
        batch = scratch / "downloads"
        batch.mkdir()
        for k in range(args.count):
            name, data = sources[k % len(sources)]
            (batch / f"learner{k:03d}_{name}.ipynb").write_bytes(data)
        for config in configs:
            wall, seconds = run(args.assignment, batch, scratch, config, args.unsandboxed)
            rows.append((config, wall, seconds))
            print(f"{CONFIGS[config]}: {len(seconds)} notebooks in {wall:.0f} s", flush=True)
    print(f"\nThroughput: {args.assignment}, {args.count} notebooks, {os.cpu_count()} cores")
    print(f"{'configuration':<26} {'notebooks/min':>13} {'wall s':>7} {'median s/notebook':>18}")
    for config, wall, seconds in rows:
        rate = len(seconds) / wall * 60
        print(f"{CONFIGS[config]:<26} {rate:>13.1f} {wall:>7.0f} {statistics.median(seconds):>18.1f}")


if __name__ == "__main__":
    main()
