"""Grade a folder of learners' notebooks: ``make grade ASSIGNMENT=01_meshes SUBMISSIONS=path/to/folder``.

Input: the notebooks as learners downloaded them from Colab (or saved them anywhere else). Each file's
name without ``.ipynb`` is the learner id: ``ada_lovelace.ipynb`` is graded as learner
``ada_lovelace``. Characters other than letters, digits, ``_``, ``-`` and ``.`` become ``_``.

The driver (this process) first builds a *scratch template* of the course: the assignment's
``solutions/`` and ``exercises/`` folders, the grading code, ``nbgrader_config.py`` and a fresh
gradebook that knows only this assignment. Each notebook is then graded in its own copy of that
template (a scratch course holding nothing of any other learner), in its own process, so one bad
notebook never stops the batch:
  1. the notebook is checked to be a readable notebook, repaired, and put into the scratch course's
     ``grading/submitted/<learner>/<assignment>/``;
  2. ``nbgrader autograde`` runs it: test cells are restored from the instructor's copy, hidden tests
     included; a cell that runs longer than the cell timeout is interrupted and scores 0; what a cell
     outputs is cut as it arrives past a budget, with a note (``grading/preprocessors.py``); the kernel
     that runs the learner's code is sandboxed (``grading/sandbox.py``; ``--unsandboxed`` turns it off).
     Each nbgrader command runs in a process of its own, forked from a server that imported nbgrader
     once per batch (``grading/nbgrader_process.py``);
  3. if a cell kills the kernel (``os._exit``, a crash), that cell is replaced by one that raises a
     clear error and the notebook is graded again, so only what depends on it loses points;
  4. feedback HTML without hidden-test source is written.
The worker returns what came out as data (scores, notes, the autograded notebook, the feedback page);
the driver alone writes them into the course, one learner at a time: ``grading/submitted``,
``grading/autograded``, ``grading/feedback`` and the scores in the one gradebook
(``grading/gradebook.db``, nbgrader's own), so no two processes ever write the same SQLite file.
Workers are threads of this process (``--engine local``, ``--jobs N`` at a time) or Ray tasks
(``--engine ray``: a local Ray with N CPUs, or the cluster at ``$RAY_ADDRESS``); a Ray worker gets the
template and the notebook with the task and needs nothing of the driver's filesystem.
Output, in ``grading/reports/<assignment>/``:
  * ``scores.csv`` — learner, total, max, then one column per graded test cell (its grade_id);
  * ``feedback/<learner>.html`` — scores, the learner's code and each test's message;
  * ``report.txt`` — for each learner, anything unusual: unreadable notebook, skipped cells, timeouts;
  * ``submissions/<learner>.ipynb`` — the file as handed in, which ``--regrade`` grades again (after a
    grader changed) and reports who gained or lost points on which test before replacing the CSV;
  * ``class.html`` and ``class_*.csv`` — the class report (grading/classreport.py), from ``learners/``;
    with a course file (grading/course.py), scores.csv ends with the late penalty's columns.

This module is the driver: the command line, the batch, and the engine that runs the workers
(grading/engines.py). The worker is grading/worker.py, what is written grading/reports.py, and what
crosses a process boundary grading/protocol.py.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from grading import nbgrader_process, protocol, sandbox
from grading.course import DEFAULT_COURSE_FILE, read_course, submission_times
from grading.engines import ENGINES
from grading.record import ReportFolder
from grading.reports import record, score_changes, scores_before, store_submission, write_reports
from grading.worker import ROOT, build_template, graded_cells, learner_id, prepare_gradebook

#: What main prints once for a batch graded with --unsandboxed.
UNSANDBOXED_WARNING = (
    "WARNING: grading without the sandbox (--unsandboxed): learners' code can read and change the course, "
    "other learners' files and the gradebook."
)


def _duration(seconds: float) -> str:
    seconds = round(seconds)
    if seconds >= 3600:
        return f"{seconds // 3600} h {seconds % 3600 // 60:02d} min"
    if seconds >= 60:
        return f"{seconds // 60} min {seconds % 60:02d} s"
    return f"{seconds} s"


def progress(done: int, total: int, elapsed: float) -> str:
    """``[done/total, rate notebooks/min, time left]`` of a batch, from its elapsed wall time."""
    rate = done / max(elapsed, 1e-9)
    left = "done" if done == total else f"about {_duration((total - done) / rate)} left"
    return f"[{done}/{total}, {rate * 60:.1f} notebooks/min, {left}]"


def _warm_up() -> None:
    """What a batch needs, started at once beside the driver's work: nbgrader's server, and in this
    process nbgrader's gradebook and this course's preprocessors (record, _error_notes) and matplotlib
    (the class report's pictures)."""
    nbgrader_process.start()
    import nbgrader.api  # noqa: F401

    from grading import classreport, preprocessors  # noqa: F401

    classreport.import_matplotlib()  # its pictures are drawn when the batch ends


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("assignment", help="assignment id, a folder of solutions/, e.g. 01_meshes")
    parser.add_argument(
        "submissions", type=Path, nargs="?", help="folder of learners' .ipynb files (not with --regrade)"
    )
    parser.add_argument("--root", type=Path, default=ROOT, help="course root (the repository)")
    parser.add_argument("--notebook-timeout", type=float, default=1200, help="seconds for one notebook")
    parser.add_argument(
        "--cell-timeout", type=int, default=protocol.DEFAULT_CELL_TIMEOUT, help="seconds for one cell"
    )
    parser.add_argument(
        "--jobs",
        type=int,
        help="notebooks graded at the same time (one per core); default 1, with --engine ray every core",
    )
    parser.add_argument(
        "--memory-gb", type=float, default=6.0, help="address-space cap for one notebook's kernel, GiB"
    )
    parser.add_argument(
        "--unsandboxed",
        action="store_true",
        help="run learners' code without the sandbox (only for notebooks you trust; see the README)",
    )
    parser.add_argument(
        "--engine",
        choices=sorted(ENGINES),
        default="local",
        help="local: this machine's cores; ray: Ray tasks, on the cluster at $RAY_ADDRESS if set",
    )
    parser.add_argument(
        "--regrade",
        action="store_true",
        help="grade the stored submissions of the assignment again and print whose scores changed",
    )
    parser.add_argument(
        "--course",
        type=Path,
        help=f"course file with due dates and the late policy (default: {DEFAULT_COURSE_FILE} if it exists)",
    )
    parser.add_argument(
        "--times",
        type=Path,
        help="CSV of submission times from the LMS (learner,submitted); default: the files' times",
    )
    args = parser.parse_args(argv)
    # nbgrader's server imports nbgrader (seconds) while this process reads the submissions.
    threading.Thread(target=_warm_up, daemon=True).start()

    root = args.root.resolve()
    if not (root / "solutions" / args.assignment).is_dir():
        known = sorted(p.name for p in (root / "solutions").iterdir() if p.is_dir())
        print(f"no assignment {args.assignment!r} in solutions/; known: {known}", file=sys.stderr)
        return 2
    report_folder = ReportFolder(root, args.assignment)
    sources: dict[str, str] = {}  # learner -> the file name a regrade reports (the original one)
    if args.regrade:
        if args.submissions:
            print("--regrade grades the stored submissions: give no folder", file=sys.stderr)
            return 2
        args.submissions = report_folder.submissions
        if not args.submissions.is_dir():
            print(f"nothing to regrade: no stored submissions in {args.submissions}", file=sys.stderr)
            return 2
        sources = {kept.learner: kept.source for kept in report_folder.records()}
    elif args.submissions is None:
        parser.error("the folder of submissions is needed (or --regrade)")
    if not args.submissions.is_dir():
        print(f"{args.submissions} is not a folder of .ipynb files", file=sys.stderr)
        return 2
    files = sorted(p for p in args.submissions.iterdir() if p.suffix == ".ipynb" and p.is_file())
    if not files:
        print(f"no .ipynb files in {args.submissions}", file=sys.stderr)
        return 2
    ids = [learner_id(p) for p in files]
    clashes = {i for i in ids if ids.count(i) > 1}
    if clashes:
        print(f"two files give the same learner id {sorted(clashes)}: rename one", file=sys.stderr)
        return 2
    if args.unsandboxed:
        print(UNSANDBOXED_WARNING, file=sys.stderr, flush=True)
    elif problem := sandbox.missing(str(root)):
        print(
            f"make grade runs learners' code in a sandbox, but {problem}.\n"
            "To grade without it (trusted notebooks only): make grade ... UNSANDBOXED=1 "
            "(python -m grading.grade ... --unsandboxed).",
            file=sys.stderr,
        )
        return 2
    try:
        course = read_course(args.course or root / DEFAULT_COURSE_FILE)
        if args.course and not args.course.exists():
            raise ValueError(f"no course file {args.course}")
        times: tuple[dict, str] = ({}, "")
        if args.times or not args.regrade:  # a regrade keeps the times kept with each learner
            times = submission_times(dict(zip(ids, files, strict=True)), args.times)
    except (ValueError, OSError) as e:
        print(f"cannot read the course file or submission times: {e}", file=sys.stderr)
        return 2
    submitted = {learner: when.isoformat() for learner, when in times[0].items()}
    before = scores_before(report_folder) if args.regrade else {}
    tasks = [
        (sources.get(learner, path.name), path.read_bytes()) for learner, path in zip(ids, files, strict=True)
    ]
    if not args.regrade:
        for learner, (_, data) in zip(ids, tasks, strict=True):
            store_submission(args.assignment, learner, data, root)

    jobs = max(1, args.jobs or ((os.cpu_count() or 1) if args.engine == "ray" else 1))
    options = dict(
        notebook_timeout=args.notebook_timeout,
        cell_timeout=args.cell_timeout,
        memory_gb=args.memory_gb,
        sandboxed=not args.unsandboxed,
    )
    outcomes = []
    with (
        tempfile.TemporaryDirectory(prefix="shardbook-template-") as scratch,
        ThreadPoolExecutor(max_workers=1) as pool,
    ):
        course_ready = pool.submit(prepare_gradebook, args.assignment, root)  # while the template's is made
        template = build_template(args.assignment, root, Path(scratch))
        course_ready.result()
        print(f"grading {len(tasks)} notebook(s) of {args.assignment}, engine {args.engine}", flush=True)
        start = time.monotonic()
        for outcome in ENGINES[args.engine](args.assignment, tasks, template, options, jobs):
            record(outcome, args.assignment, root)
            outcomes.append(outcome)
            total = sum(outcome.scores.values())
            flag = "" if not outcome.notes else f"  ({len(outcome.notes)} note(s))"
            print(
                f"{outcome.learner:>24}: {total:g} points in {outcome.seconds:.1f} s{flag}  "
                + progress(len(outcomes), len(tasks), time.monotonic() - start),
                flush=True,
            )
    if args.regrade:
        changes = score_changes(before, outcomes, graded_cells(args.assignment, root))
        print(f"regrade of {args.assignment}: {len(changes)} of {len(outcomes)} learner(s) changed")
        for line in changes:
            print("  " + line)
    folder = write_reports(args.assignment, outcomes, root, submitted, times[1], course)
    print(f"scores: {folder / 'scores.csv'}\nfeedback: {folder / 'feedback'}\nnotes: {folder / 'report.txt'}")
    print(f"class report: {folder / 'class.html'}")
    return 0


if __name__ == "__main__":
    code = main()
    # Everything is written: stop nbgrader's server (so that its CPU time is counted where make test
