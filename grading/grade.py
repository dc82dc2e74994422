"""Grade a folder of learners' notebooks: ``make grade ASSIGNMENT=01_meshes SUBMISSIONS=path/to/folder``.

Input: the notebooks as learners downloaded them from Colab (or saved them anywhere else). Each file's
name without ``.ipynb`` (in any case) is the learner id, made safe by grading/handin.py:
``ada_lovelace.ipynb`` is graded as learner ``ada_lovelace``, ``José Núñez.ipynb`` as ``José_Núñez``.
Entries of the folder that are not notebooks are named and not graded; a notebook of another
assignment is named as such and not graded; a learner graded before keeps the earlier file and results
in ``history/<learner>/`` and the change is printed. Errors that stop the command before anything is
graded (no such assignment or folder, two files of one learner, an unreadable course file) print one
line and exit 2.

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
  * ``history/<learner>/<n>.ipynb``, ``<n>.json``, ``<n>.html`` — a learner's earlier file, kept
    results and page, kept when a different file of theirs is graded (grading/handin.py);
  * ``class.html`` and ``class_*.csv`` — the class report (grading/classreport.py), from ``learners/``;
    with a course file (grading/course.py), scores.csv ends with the late penalty's columns.

This module is the driver: the command line, the batch, and the engine that runs the workers
(grading/engines.py). The worker is grading/worker.py, what is written grading/reports.py, and what
crosses a process boundary grading/protocol.py.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import os
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from grading import handin, nbgrader_process, protocol, sandbox
from grading.course import DEFAULT_COURSE_FILE, Course, read_course, submission_times
from grading.engines import ENGINES
from grading.record import ReportFolder
from grading.reports import record, score_changes, scores_before, store_submission, write_reports
from grading.worker import (
    MAX_FILE_BYTES,
    ROOT,
    Outcome,
    build_template,
    graded_cells,
    prepare_gradebook,
)

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


class Refused(Exception):
    """Why the command grades nothing, in one line: main prints it on stderr and returns 2."""


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
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
        "--max-file-mb",
        type=float,
        default=MAX_FILE_BYTES / 2**20,
        help="largest graded notebook or feedback page kept, MiB (a larger one is dropped with a note)",
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
    return parser


@dataclass
class Batch:
    """What a run grades, once every check that can refuse it has passed."""

    root: Path
    reports: ReportFolder
    files: list[Path]  # the notebooks, by name
    ids: list[str]  # their learner ids
    skipped: list[str]  # entries of the folder that are not notebooks
    course: Course
    times: tuple[dict, str] = ({}, "")
    sources: dict[str, str] = field(default_factory=dict)  # learner -> the file name a regrade reports


def _batch(args: argparse.Namespace, parser: argparse.ArgumentParser) -> Batch:
    """Reads the command line's folder, course file and times; raises Refused (one line) when the
    command cannot grade, before anything is written or started."""
    root = args.root.resolve()
    if not (root / "solutions" / args.assignment).is_dir():
        solutions = root / "solutions"
        known = sorted(p.name for p in solutions.iterdir() if p.is_dir()) if solutions.is_dir() else []
        raise Refused(
            f"no assignment {args.assignment!r} in {solutions}; known: {', '.join(known) or 'none'}"
        )
    reports = ReportFolder(root, args.assignment)
    sources: dict[str, str] = {}  # learner -> the file name a regrade reports (the original one)
    if args.regrade:
        if args.submissions:
            raise Refused("--regrade grades the stored submissions: give no folder")
        args.submissions = reports.submissions
        if not args.submissions.is_dir():
            raise Refused(f"nothing to regrade: no stored submissions in {args.submissions}")
        sources = {kept.learner: kept.source for kept in reports.records()}
    elif args.submissions is None:
        parser.error("the folder of submissions is needed (or --regrade)")
    if not args.submissions.exists():
        raise Refused(f"no folder {args.submissions}: give the folder of the learners' .ipynb files")
    if not args.submissions.is_dir():
        raise Refused(
            f"{args.submissions} is a file, not a folder: give the folder that holds the .ipynb files"
        )
    files, skipped = handin.folder_contents(args.submissions)
    if not files:
        held = f" (it holds {', '.join(repr(s) for s in skipped[:10])})" if skipped else ""
        raise Refused(f"no .ipynb files in {args.submissions}{held}")
    if clashes := handin.clashes(files):
        raise Refused(f"files that would be one learner: {'; '.join(clashes)}: rename all but one")
    ids = [handin.learner_id(p.name) for p in files]
    try:
        course = read_course(args.course or root / DEFAULT_COURSE_FILE)
        if args.course and not args.course.exists():
            raise ValueError(f"no course file {args.course}")
        if args.times and not args.times.is_file():
            raise ValueError(f"no times file {args.times}")
        times: tuple[dict, str] = ({}, "")
        if args.times or not args.regrade:  # a regrade keeps the times kept with each learner
            times = submission_times(dict(zip(ids, files, strict=True)), args.times)
    except (ValueError, OSError) as e:
        raise Refused(f"cannot read the course file or submission times: {e}") from e
    if not args.unsandboxed and (problem := sandbox.missing(str(root))):
        raise Refused(
            f"make grade runs learners' code in a sandbox, but {problem}. "
            "To grade without it (trusted notebooks only): make grade ... UNSANDBOXED=1 "
            "(python -m grading.grade ... --unsandboxed)."
        )
    return Batch(root, reports, files, ids, skipped, course, times, sources)


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    try:
        batch = _batch(args, parser)
    except Refused as e:
        print(e, file=sys.stderr, flush=True)
        return 2
    if args.unsandboxed:
        print(UNSANDBOXED_WARNING, file=sys.stderr, flush=True)
    # nbgrader's server imports nbgrader (seconds) while this process reads the submissions.
    threading.Thread(target=_warm_up, daemon=True).start()
    root, reports, ids = batch.root, batch.reports, batch.ids
    if batch.skipped:
        print(handin.skipped_line(batch.skipped), flush=True)
    submitted = {learner: when.isoformat() for learner, when in batch.times[0].items()}
    before = scores_before(reports)
    assignments = handin.Assignments(root)
    ahead: list[Outcome] = []  # files not graded: another assignment's notebook, a file over the cap
    tasks = []
    earlier: dict[str, Path | None] = {}  # learner graded before -> the earlier file kept, if it differed
    max_file_bytes = int(args.max_file_mb * 2**20)
    for learner, path in zip(ids, batch.files, strict=True):
        source = batch.sources.get(learner, path.name)
        if not args.regrade and (learner in before or handin.stored(reports, learner).exists()):
            earlier[learner] = handin.keep_history(reports, learner, path)
        if (size := path.stat().st_size) > max_file_bytes:  # not read: it would sit in this process
            if not args.regrade:  # kept as handed in all the same (copied, not read), for a regrade
                handin.stored(reports, learner).parent.mkdir(parents=True, exist_ok=True)
                with contextlib.suppress(shutil.SameFileError):
                    shutil.copyfile(path, handin.stored(reports, learner))
            ahead.append(
                Outcome(learner=learner, source=Path(source), notes=[_too_large(size, max_file_bytes)])
            )
            continue
        data = path.read_bytes()
        if not args.regrade:
            store_submission(args.assignment, learner, data, root)
        if note := assignments.other(data, args.assignment):
            ahead.append(Outcome(learner=learner, source=Path(source), notes=[note]))
        else:
            tasks.append((source, data))

    jobs = max(1, args.jobs or ((os.cpu_count() or 1) if args.engine == "ray" else 1))
    options = dict(
        notebook_timeout=args.notebook_timeout,
        cell_timeout=args.cell_timeout,
        memory_gb=args.memory_gb,
        sandboxed=not args.unsandboxed,
        max_file_bytes=max_file_bytes,
    )
    outcomes = []
    total_count = len(ahead) + len(tasks)
    with (
        tempfile.TemporaryDirectory(prefix="shardbook-template-") as scratch,
        ThreadPoolExecutor(max_workers=1) as pool,
    ):
        course_ready = pool.submit(prepare_gradebook, args.assignment, root)  # while the template's is made
        template = build_template(args.assignment, root, Path(scratch))
        course_ready.result()
        print(f"grading {total_count} notebook(s) of {args.assignment}, engine {args.engine}", flush=True)
        start = time.monotonic()
        graded = ENGINES[args.engine](args.assignment, tasks, template, options, jobs) if tasks else iter(())
        for outcome in itertools.chain(ahead, graded):
            record(outcome, args.assignment, root)
            outcomes.append(outcome)
            total = sum(outcome.scores.values())
            flag = "" if not outcome.notes else f"  ({len(outcome.notes)} note(s))"
            print(
                f"{outcome.learner:>24}: {total:g} points in {outcome.seconds:.1f} s{flag}  "
                + progress(len(outcomes), total_count, time.monotonic() - start),
                flush=True,
            )
    cells = graded_cells(args.assignment, root)
    if args.regrade:
        changes = score_changes(before, outcomes, cells)
        print(f"regrade of {args.assignment}: {len(changes)} of {len(outcomes)} learner(s) changed")
        for line in changes:
            print("  " + line)
    elif earlier:
        print(
            f"graded again: {len(earlier)} learner(s) handed in before; earlier files and results are kept "
            f"in {reports.history}"
        )
        for line in _again(before, [o for o in outcomes if o.learner in earlier], cells, earlier):
            print("  " + line)
    folder = write_reports(args.assignment, outcomes, root, submitted, batch.times[1], batch.course)
    print(f"scores: {folder / 'scores.csv'}\nfeedback: {folder / 'feedback'}\nnotes: {folder / 'report.txt'}")
    print(f"class report: {folder / 'class.html'}")
    return 0


def _too_large(size: int, cap: int) -> str:
    """The note of a file handed in that is larger than any notebook graded may be."""
    mib = 2**20
    return (
        f"the file is not a readable notebook here: {size / mib:.1f} MiB, over the {cap / mib:.1f} MiB a "
        "graded file may be (--max-file-mb); not read, scored 0."
    )


def _again(
    before: dict[str, dict[str, float]],
    outcomes: list[Outcome],
    cells: list[tuple[str, float]],
    earlier: dict[str, Path | None],
) -> list[str]:
    """One line per learner graded before: the change of score (as --regrade says it), and where the
    earlier file went."""
    lines = []
    for o in sorted(outcomes, key=lambda o: o.learner):
        said = score_changes({o.learner: before[o.learner]}, [o], cells) if o.learner in before else []
        line = said[0] if said else f"{o.learner}: {sum(o.scores.values()):g} points, as before"
        kept = earlier.get(o.learner)
        where = f"earlier file kept as history/{o.learner}/{kept.name}" if kept else "the same file as before"
        lines.append(f"{line}; {where}")
    return lines


def _exit_code(run: Callable[[], int]) -> int:
    """``run()``'s exit code; a SystemExit's message (argparse's, a Ray cluster out of reach) is
    printed as Python would print it."""
    try:
        return run()
    except SystemExit as e:
        if e.code is None or isinstance(e.code, int):
            return e.code or 0
        print(e.code, file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(
            "interrupted: what was graded so far is recorded, the reports were not written", file=sys.stderr
        )
        return 130


if __name__ == "__main__":
    code = _exit_code(main)
    # Everything is written: stop nbgrader's server (so that its CPU time is counted where make test
    # reads it, and its folder is removed) and leave without tearing down the modules of a batch (over
    # half a second).
    nbgrader_process.stop()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (BrokenPipeError, OSError):  # a reader that stopped reading (| head) is no error of ours
            pass
    os._exit(code)
