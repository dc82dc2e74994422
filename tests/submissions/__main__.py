"""python -m tests.submissions convert <assignment> [--keep-all]   wrong_*.ipynb -> answer-only .py
python -m tests.submissions grade <assignment> [--out results.json] [--no-reference] [--parity] [names...]
    grades the reference solution and the answer-only submissions in this (fresh) process
python -m tests.submissions build <assignment> <name> <out.ipynb>   the notebook, as Colab downloads it
"""

import argparse
import json
import os
import resource
import sys
from pathlib import Path

from grading.protocol import COURSE_ROOT_ENV
from tests import llvm_level, submissions

#: `make grade`'s default cap for one notebook's kernel (grading/grade.py --memory-gb). Here one
#: process grades every submission of an assignment, and must still fit.
MEMORY_GB = 6.0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.submissions", description=__doc__.split("\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    c = commands.add_parser("convert", help="turn an assignment's wrong_*.ipynb into answer-only .py files")
    c.add_argument("assignment")
    c.add_argument("--keep-all", action="store_true", help="keep every answer that differs from the solution")
    g = commands.add_parser("grade", help="grade the answer-only submissions in this process")
    g.add_argument("assignment")
    g.add_argument("names", nargs="*")
    g.add_argument("--out", type=Path)
    g.add_argument("--all-tests", action="store_true", help="run every test cell for every submission")
    g.add_argument(
        "--no-reference",
        action="store_true",
        help="grade only the submissions named, each result holding only the test cells that ran",
    )
    g.add_argument(
        "--parity",
        action="store_true",
        help="record, while the reference solution is graded, what tests/test_parity.py checks",
    )
    g.add_argument(
        "--memory-gb",
        type=float,
        default=MEMORY_GB,
        help="address-space cap, as `make grade` sets for a kernel",
    )
    b = commands.add_parser("build", help="write a submission's notebook as Colab downloads it")
    b.add_argument("assignment")
    b.add_argument("name", help="a submission's name, or reference_solution")
    b.add_argument("out", type=Path)
    args = parser.parse_args(argv)
    if args.command == "convert":
        for line in submissions.convert(args.assignment, keep_all=args.keep_all):
            print(line)
        print(f"now check them: pytest tests/test_submissions.py -k {args.assignment}")
        return 0
    if args.command == "build":
        sub = None if args.name == "reference_solution" else submissions.load(args.assignment)[args.name]
        args.out.write_bytes(submissions.colab_bytes(sub, args.assignment))
        return 0
    # grade: as a kernel of `make grade` is set up (its memory cap too), minus nbgrader and the sandbox.
    cap = int(args.memory_gb * 2**30)
    resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
    os.environ.setdefault("SHARDBOOK_DEVICES", "cpu")
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    os.environ.setdefault(COURSE_ROOT_ENV, str(submissions.ROOT))
    os.chdir(submissions.ROOT / "exercises" / args.assignment)
    llvm_level.key_without_the_level_flag()  # the pytest workers' programs at -O0 are read back here
    results = submissions.grade_assignment(
        args.assignment,
        args.names or None,
        all_tests=args.all_tests,
        reference=not args.no_reference,
        parity=args.parity,
    )
    text = json.dumps(results, indent=1)
    if args.out:
        args.out.write_text(text)
    else:
        print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
