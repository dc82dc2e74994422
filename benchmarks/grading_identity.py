"""Does a change to grading keep its results? Grade every committed submission in two trees, compare.

    python -m benchmarks.grading_identity grade <tree> <out> [--assignments 01_meshes ...] [--jobs 2]
    python -m benchmarks.grading_identity compare <before> <after>

``grade`` builds each submission of ``tests/submissions/<assignment>/`` (and the reference solution) as
Colab downloads it, runs ``<tree>/grading/grade.py`` on them the way ``make grade`` does (driver, forked
nbgrader, sandboxed kernel, reports), and copies the report files into ``<out>/<assignment>/``:
scores.csv, report.txt, feedback/*.html, learners/*.json, class_*.csv. ``<tree>`` must be a fresh
clone (grading writes its gradebook and folders into the tree it grades with, and a second run there
would re-grade into the first one's records), e.g. ``git clone -q . /tmp/before``.

``compare`` says, file by file, whether two such folders are byte-identical once the values named in
``NORMALISED`` are replaced; it exits 1 on any difference and prints the first differing lines.
"""

import argparse
import difflib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

#: The report files kept and compared, as globs under grading/reports/<assignment>/.
KEPT = ("scores.csv", "report.txt", "feedback/*.html", "learners/*.json", "class_*.csv")

#: Every submission gets this modification time, so the submission times the reports keep (from the
#: files' times, as ``make grade`` reads them without --times) are the same in every run.
FIXED_MTIME = 1_767_225_600  # 2026-01-01T00:00:00Z

#: What legitimately differs between two runs of the same code, and how it is replaced before
#: comparing: (file glob, pattern, replacement). Nothing else is normalised.
NORMALISED = (
    # how long grading took: report.txt's "in 12.3 s" and learners/*.json's "seconds" and "phases"
    ("report.txt", re.compile(r" in [0-9.]+ s$", re.M), " in <seconds> s"),
    ("learners/*.json", re.compile(r'"seconds": [0-9.e+-]+'), '"seconds": <seconds>'),
    ("learners/*.json", re.compile(r'"phases": \{[^}]*\}', re.S), '"phases": <phases>'),
    # the scratch folders grading made, named by tempfile (in notes and tracebacks, if any)
    ("*", re.compile(r"/tmp/(?:shardbook-[a-z-]+-|identity-)[A-Za-z0-9_]+"), "<tmp>"),
    # (the tree graded in, kept in <out>/tree.txt, is replaced by "<tree>" before these: compare())
    # nbgrader's feedback page stamps the time it was made
    (
        "feedback/*.html",
        re.compile(r"\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:\.\d+)?(?:[+-]\d\d:?\d\d|Z)?"),
        "<time>",
    ),
)


def assignments(tree: Path) -> list[str]:
    folder = tree / "tests" / "submissions"
    return sorted(p.name for p in folder.iterdir() if p.is_dir() and not p.name.startswith("_"))


def grade(tree: Path, out: Path, names: list[str] | None, jobs: int) -> int:
    tree, out = tree.resolve(), out.resolve()
    if (tree / "grading" / "reports").exists() or (tree / "grading" / "gradebook.db").exists():
        print(f"{tree} holds grading state already: grade in a fresh clone", file=sys.stderr)
        return 2
    env = {**os.environ, "PYTHONPATH": str(tree)}
    out.mkdir(parents=True, exist_ok=True)
    (out / "tree.txt").write_text(str(tree))  # where it shows in a note or a traceback: compare() drops it
    failed = []
    for assignment in names or assignments(tree):
        started = time.monotonic()
        with tempfile.TemporaryDirectory(prefix="identity-") as tmp:
            folder = Path(tmp) / assignment
            folder.mkdir()
            build = subprocess.run(
                [sys.executable, "-c", _BUILD, assignment, str(folder)],
                cwd=tree,
                env=env,
                capture_output=True,
                text=True,
            )
            if build.returncode:
                print(build.stderr, file=sys.stderr)
                failed.append(assignment)
                continue
            for path in folder.iterdir():
                os.utime(path, (FIXED_MTIME, FIXED_MTIME))
            command = [sys.executable, "-m", "grading.grade", assignment, str(folder), "--root", str(tree)]
            run = subprocess.run(
                [*command, "--jobs", str(jobs)], cwd=tree, env=env, capture_output=True, text=True
            )
        (out / "logs").mkdir(parents=True, exist_ok=True)
        (out / "logs" / f"{assignment}.log").write_text(run.stdout + run.stderr)
        reports = tree / "grading" / "reports" / assignment
        for pattern in KEPT:
            for path in reports.glob(pattern):
                target = out / assignment / path.relative_to(reports)
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(path, target)
        print(f"{assignment}: exit {run.returncode}, {time.monotonic() - started:.0f} s", flush=True)
        if run.returncode:
            failed.append(assignment)
    return 1 if failed else 0


#: Run in the graded tree (its own tests.submissions): writes every submission, and the reference
#: solution, into the folder given.
_BUILD = """
import sys
from pathlib import Path
from tests import submissions
assignment, folder = sys.argv[1], Path(sys.argv[2])
folder.joinpath("reference_solution.ipynb").write_bytes(submissions.colab_bytes(None, assignment))
for name, sub in submissions.load(assignment).items():
    folder.joinpath(name + ".ipynb").write_bytes(submissions.colab_bytes(sub, assignment))
"""


def normalised(relative: str, text: str, tree: str = "") -> str:
    text = text.replace(tree, "<tree>") if tree else text
    for pattern, regex, replacement in NORMALISED:
        if Path(relative).match(pattern):  # "*" matches every file's name
            text = regex.sub(replacement, text)
    return text


def compare(before: Path, after: Path) -> int:
    def files(root: Path) -> set[str]:
        return {
            str(p.relative_to(root))
            for p in root.rglob("*")
            if p.is_file() and p.relative_to(root).parts[0] != "logs" and p.name != "tree.txt"
        }

    def tree(root: Path) -> str:
        return (root / "tree.txt").read_text() if (root / "tree.txt").exists() else ""

    a, b = files(before), files(after)
    differ = 0
    for missing in sorted(a ^ b):
        print(f"only in {'before' if missing in a else 'after'}: {missing}")
        differ += 1
    same_bytes = 0
    for relative in sorted(a & b):
        x, y = (before / relative).read_bytes(), (after / relative).read_bytes()
        if x == y:
            same_bytes += 1
            continue
        nx, ny = normalised(relative, x.decode(), tree(before)), normalised(relative, y.decode(), tree(after))
        if nx == ny:
            continue
        differ += 1
        print(f"differs: {relative}")
        diff = difflib.unified_diff(nx.splitlines(), ny.splitlines(), "before", "after", lineterm="", n=1)
        print("\n".join(list(diff)[:20]))
    total, only_one = len(a & b), len(a ^ b)
    print(
        f"{total} files compared: {same_bytes} byte-identical as written, "
        f"{total - same_bytes - (differ - only_one)} identical after normalisation, "
        f"{differ - only_one} differ; {only_one} in one folder only"
    )
    return 1 if differ else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.grading_identity", description=__doc__.split("\n")[0]
    )
    commands = parser.add_subparsers(dest="command", required=True)
    g = commands.add_parser("grade", help="grade every committed submission with a tree's grading/grade.py")
    g.add_argument("tree", type=Path)
    g.add_argument("out", type=Path)
    g.add_argument("--assignments", nargs="*", help="only these (default: every one with submissions)")
    g.add_argument("--jobs", type=int, default=2)
    c = commands.add_parser("compare", help="compare two folders `grade` wrote")
    c.add_argument("before", type=Path)
    c.add_argument("after", type=Path)
    args = parser.parse_args(argv)
    if args.command == "grade":
        return grade(args.tree, args.out, args.assignments, args.jobs)
    return compare(args.before, args.after)


if __name__ == "__main__":
    sys.exit(main())
