"""How fast `make grade` is: a batch of N submissions of one assignment in a scratch course.

Run: ``python -m benchmarks.grading_throughput [--assignment 01_meshes] [--count 30]`` (``make
bench-grading``). The batch cycles through the reference solution and the committed wrong and mangled
submissions that grade normally (the deliberately slow ones — infinite loops, killed kernels — are
left out: they measure the timeouts, not the grader). Prints the median and total seconds.
``--unsandboxed`` grades without the sandbox, to measure what it costs.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from grading import grade

ROOT = Path(__file__).resolve().parents[1]
SLOW = ("broken_infinite_loop", "broken_kills_kernel")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--assignment", default="01_meshes")
    parser.add_argument("--count", type=int, default=30)
    parser.add_argument("--unsandboxed", action="store_true", help="grade without the sandbox (its cost)")
    args = parser.parse_args()

    corpus = ROOT / "tests" / "submissions" / args.assignment
    sources = [next((ROOT / "solutions" / args.assignment).glob("*.ipynb"))]
    sources += sorted(p for p in corpus.glob("*.ipynb") if p.stem not in SLOW)
    with tempfile.TemporaryDirectory() as scratch:
        course = grade.copy_course(Path(scratch))
        batch = Path(scratch) / "downloads"
        batch.mkdir()
        for k in range(args.count):
            source = sources[k % len(sources)]
            shutil.copy(source, batch / f"learner{k:03d}_{source.stem}.ipynb")
        start = time.monotonic()
        grade.main(
            [args.assignment, str(batch), "--root", str(course)] + ["--unsandboxed"] * args.unsandboxed
        )
        total = time.monotonic() - start
        records = [
            json.loads(p.read_text())
            for p in (course / "grading/reports" / args.assignment / "learners").glob("*.json")
        ]
    seconds = sorted(r["seconds"] for r in records)
    print(f"\n{args.assignment}: {len(records)} notebooks in {total:.0f} s")
    median = statistics.median(seconds)
    print(f"seconds per notebook: median {median:.1f}, min {seconds[0]:.1f}, max {seconds[-1]:.1f}")


if __name__ == "__main__":
    main()
