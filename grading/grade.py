"""Grade a folder of learners' notebooks: ``make grade ASSIGNMENT=01_meshes SUBMISSIONS=path/to/folder``.

Input: the notebooks as learners downloaded them from Colab (or saved them anywhere else). Each file's
name without ``.ipynb`` is the learner id: ``ada_lovelace.ipynb`` is graded as learner
``ada_lovelace``. Characters other than letters, digits, ``_``, ``-`` and ``.`` become ``_``.

What happens, per learner, each in its own process so one bad notebook never stops the batch:
  1. the notebook is checked to be a readable notebook and copied into nbgrader's layout,
     ``grading/submitted/<learner>/<assignment>/<assignment notebook name>``;
  2. ``nbgrader autograde`` runs it: test cells are restored from the instructor's copy, hidden tests
     included; a cell that runs longer than the cell timeout is interrupted and scores 0; the kernel
     that runs the learner's code is sandboxed (``grading/sandbox.py``; ``--unsandboxed`` turns it off);
  3. if a cell kills the kernel (``os._exit``, a crash), that cell is replaced by one that raises a
     clear error and the notebook is graded again, so only what depends on it loses points;
  4. feedback HTML without hidden-test source is written.
Output, in ``grading/reports/<assignment>/``:
  * ``scores.csv`` — learner, total, max, then one column per graded test cell (its grade_id);
  * ``feedback/<learner>.html`` — scores, the learner's code and each test's message;
  * ``report.txt`` — for each learner, anything unusual: unreadable notebook, skipped cells, timeouts.
The gradebook (``grading/gradebook.db``) is nbgrader's own and can be inspected with its tools.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import queue
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

from grading import sandbox
from grading.repair import repair

ROOT = Path(__file__).resolve().parents[1]
MAX_KERNEL_DEATHS = 6


@dataclass
class Outcome:
    """What happened to one learner's notebook."""

    learner: str
    source: Path
    scores: dict[str, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    graded: bool = False
    seconds: float = 0.0


def copy_course(into: Path, root: Path = ROOT) -> Path:
    """A fresh course in ``into/course``: solutions, exercises and grading code, no grading state.

    For dry runs and tests, so that nothing touches the real gradebook.
    """
    course = into / "course"
    course.mkdir(parents=True)
    for name in ("solutions", "exercises"):
        shutil.copytree(root / name, course / name)
    state = ("gradebook.db", "submitted", "autograded", "feedback", "reports", "__pycache__")
    shutil.copytree(root / "grading", course / "grading", ignore=shutil.ignore_patterns(*state))
    shutil.copy(root / "nbgrader_config.py", course)
    return course


def learner_id(path: Path) -> str:
    """The learner id of a submitted file: its name without .ipynb, made safe for a folder name."""
    stem = path.name[: -len(".ipynb")] if path.name.endswith(".ipynb") else path.stem
    safe = re.sub(r"[^A-Za-z0-9_.-]", "_", stem).strip(".") or "learner"
    return safe


def release_notebook(assignment: str, root: Path = ROOT) -> Path:
    """The one notebook of an assignment in exercises/ (its name is what nbgrader expects)."""
    notebooks = sorted((root / "exercises" / assignment).glob("*.ipynb"))
    if len(notebooks) != 1:
        raise SystemExit(
            f"expected exactly one notebook in exercises/{assignment}/, found {[p.name for p in notebooks]}"
        )
    return notebooks[0]


def graded_cells(assignment: str, root: Path = ROOT) -> list[tuple[str, float]]:
    """(grade_id, points) of every graded test cell, in notebook order, from the instructor's copy."""
    source = root / "solutions" / assignment / release_notebook(assignment, root).name
    nb = nbformat.read(source, as_version=4)
    cells = []
    for cell in nb.cells:
        meta = cell.get("metadata", {}).get("nbgrader", {})
        if meta.get("grade") and not meta.get("solution"):
            cells.append((meta["grade_id"], float(meta.get("points", 0))))
    return cells


def _env(root: Path, extra: dict[str, str] | None = None) -> dict[str, str]:
    env = dict(os.environ)
    bin_dir = str(Path(sys.executable).parent)  # nbgrader shells out to alembic, which lives here
    env["PATH"] = bin_dir + os.pathsep + env.get("PATH", "")
    env["PYTHONPATH"] = str(root) + os.pathsep + env.get("PYTHONPATH", "")
    env["SHARDBOOK_COURSE_ROOT"] = str(root)
    env.setdefault("SHARDBOOK_DEVICES", "cpu")
    env.update(extra or {})
    return env


# Caps the address space, then becomes the real command: the kernel nbgrader starts inherits the cap.
# (A trampoline rather than preexec_fn, which forks a process that may have JAX's threads running.)
_WITH_MEMORY_CAP = (
    "import os, resource, sys; cap = int(sys.argv[1]); "
    "resource.setrlimit(resource.RLIMIT_AS, (cap, cap)); os.execv(sys.argv[2], sys.argv[2:])"
)


def _nbgrader(
    args: list[str],
    root: Path,
    timeout: float,
    extra_env: dict[str, str] | None = None,
    memory_bytes: int | None = None,
):
    """Runs one nbgrader command in its own process group; returns (returncode or None on timeout, log)."""
    cmd = [sys.executable, "-m", "nbgrader", *args]
    if memory_bytes:
        cmd = [sys.executable, "-c", _WITH_MEMORY_CAP, str(memory_bytes), *cmd]
    proc = subprocess.Popen(
        cmd,
        cwd=root,
        env=_env(root, extra_env),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        out, _ = proc.communicate(timeout=timeout)
        return proc.returncode, out
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)  # the kernel is in the same group
        out, _ = proc.communicate()
        return None, out


def prepare_gradebook(assignment: str, root: Path) -> None:
    """Records the assignment's cells in the gradebook (needed once per fresh clone; idempotent)."""
    with tempfile.TemporaryDirectory() as scratch:
        code, log = _nbgrader(
            ["generate_assignment", assignment, "--force", f"--CourseDirectory.release_directory={scratch}"],
            root,
            timeout=300,
        )
    if code != 0:
        raise SystemExit(f"nbgrader could not read solutions/{assignment}:\n{log}")


def _read_submission(path: Path) -> tuple[nbformat.NotebookNode | None, str | None]:
    try:
        nb = nbformat.read(path, as_version=4)
    except Exception as e:
        return None, f"the file is not a readable notebook ({type(e).__name__}: {str(e)[:200]})"
    return nb, None


def grade_one(
    assignment: str,
    path: Path,
    root: Path,
    *,
    notebook_timeout: float,
    cell_timeout: int,
    memory_gb: float = 6.0,
    sandbox_slot: int | None = 0,
) -> Outcome:
    """Autogrades one learner's notebook; never raises for anything the learner did.

    ``sandbox_slot``: which of the notebooks graded at the same time this is (its kernel's uid in the
    sandbox, see grading/sandbox.py); None grades without the sandbox.
    """
    start = time.monotonic()
    outcome = Outcome(learner=learner_id(path), source=path)
    if sandbox_slot is None:
        outcome.notes.append(UNSANDBOXED_NOTE)
    nb, problem = _read_submission(path)
    if problem:
        outcome.notes.append(problem + "; scored 0.")
        return outcome
    try:
        repaired = repair(nb, nbformat.read(release_notebook(assignment, root), as_version=4))
    except Exception as e:  # a notebook too strange to map: say so, grade nothing
        outcome.notes.append(
            f"the notebook could not be matched to the assignment ({type(e).__name__}: {e}); scored 0."
        )
        return outcome
    nb = repaired.notebook
    outcome.notes += ["repaired: " + r for r in repaired.repairs]
    target_dir = root / "grading" / "submitted" / outcome.learner / assignment
    if target_dir.exists():
        shutil.rmtree(target_dir)
    target_dir.mkdir(parents=True)
    nbformat.write(nb, target_dir / release_notebook(assignment, root).name)
    (target_dir / "timestamp.txt").write_text(time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()))

    skipped: list[int] = []
    lock_retries = 0
    with tempfile.TemporaryDirectory() as scratch:
        death_file = Path(scratch) / "death.json"
        for _attempt in range(MAX_KERNEL_DEATHS + 4):  # deaths, plus a few retries on a busy gradebook
            death_file.unlink(missing_ok=True)
            code, log = _nbgrader(
                ["autograde", assignment, "--student", outcome.learner, "--force"],
                root,
                timeout=notebook_timeout,
                extra_env={
                    "SHARDBOOK_SKIP_CELLS": ",".join(map(str, skipped)),
                    "SHARDBOOK_DEATH_FILE": str(death_file),
                    "SHARDBOOK_CELL_TIMEOUT": str(cell_timeout),
                    "TMPDIR": scratch,  # the kernel's runtime folder too: removed even if nbgrader is killed
                    **(sandbox.kernel_env(sandbox_slot) if sandbox_slot is not None else {}),
                },
                memory_bytes=int(memory_gb * 2**30),
            )
            if code is None:
                outcome.notes.append(
                    f"grading stopped after the {notebook_timeout:.0f} s limit for one notebook; scored 0."
                )
                break
            if code == 0:
                outcome.graded = True
                break
            if "database is locked" in log and lock_retries < 3:  # another learner's grading was writing
                lock_retries += 1
                time.sleep(1 + lock_retries)
                continue
            if death_file.exists():
                death = json.loads(death_file.read_text())
                skipped.append(int(death["index"]))
                where = f"cell {death['index']}" + (
                    f" ({death['grade_id']})" if death.get("grade_id") else ""
                )
                outcome.notes.append(f"{where} stopped the Python kernel; it was skipped and graded again.")
                continue
            outcome.notes.append(
                "nbgrader could not grade this notebook; scored 0. Its log ends:\n" + log[-1500:]
            )
            break
        else:
            outcome.notes.append("the kernel died too many times; scored 0.")

    if outcome.graded:
        outcome.scores = read_scores(assignment, outcome.learner, root)
        outcome.notes += _error_notes(root, assignment, outcome.learner, cell_timeout, memory_gb)
        code, log = _nbgrader(
            ["generate_feedback", assignment, "--student", outcome.learner, "--force"], root, timeout=300
        )
        if code != 0:
            outcome.notes.append("feedback could not be generated:\n" + log[-800:])
    outcome.seconds = time.monotonic() - start
    return outcome


UNSANDBOXED_NOTE = "graded without the sandbox (--unsandboxed): its code could read and change the course."


def _error_notes(root: Path, assignment: str, learner: str, cell_timeout: int, memory_gb: float) -> list[str]:
    """Plain-words notes for errors an instructor should know about: timeouts, memory, tampering."""
    folder = root / "grading" / "autograded" / learner / assignment
    notes = []
    tampered = None
    for path in folder.glob("*.ipynb"):
        for cell in nbformat.read(path, as_version=4).cells:
            gid = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id", "a cell")
            for output in cell.get("outputs", []):
                if output.get("output_type") != "error":
                    continue
                name, value = output.get("ename"), output.get("evalue", "")
                if name == "CellTimeoutError":
                    notes.append(f"{gid} ran past the {cell_timeout} s cell limit and was interrupted.")
                elif name == "MemoryError":
                    notes.append(f"{gid} ran out of memory (the cap is {memory_gb:g} GiB per notebook).")
                elif "replaced tools the tests rely on" in value and tampered is None:
                    tampered = value.split(": ", 1)[-1].split(". Tests cannot pass")[0]
    if tampered:
        notes.append(f"the notebook replaced checking tools ({tampered}); every test after that failed.")
    return notes


def read_scores(assignment: str, learner: str, root: Path) -> dict[str, float]:
    """grade_id -> score of each graded cell, from nbgrader's gradebook."""
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{root / 'grading' / 'gradebook.db'}") as gb:
        submission = gb.find_submission(assignment, learner)
        scores = {}
        for notebook in submission.notebooks:
            for grade in notebook.grades:
                scores[grade.name] = float(grade.score)
        return scores


def write_reports(assignment: str, outcomes: list[Outcome], root: Path) -> Path:
    """Records this batch's outcomes, then writes the class files from every learner graded so far.

    Each learner's outcome is kept in ``learners/<learner>.json``, so re-grading one learner rewrites
    only that file and that learner's row: scores.csv and report.txt always cover the whole class.
    Feedback pages are copied to ``feedback/<learner>.html``. Returns the report folder.
    """
    cells = graded_cells(assignment, root)
    folder = root / "grading" / "reports" / assignment
    (folder / "feedback").mkdir(parents=True, exist_ok=True)
    (folder / "learners").mkdir(parents=True, exist_ok=True)
    for o in outcomes:
        record = {"learner": o.learner, "source": o.source.name, "scores": o.scores, "notes": o.notes}
        record["seconds"] = round(o.seconds, 1)
        (folder / "learners" / f"{o.learner}.json").write_text(json.dumps(record, indent=1))
        page = folder / "feedback" / f"{o.learner}.html"
        page.unlink(missing_ok=True)
        for html in (root / "grading" / "feedback" / o.learner / assignment).glob("*.html"):
            shutil.copyfile(html, page)
    records = [json.loads(p.read_text()) for p in sorted((folder / "learners").glob("*.json"))]
    max_score = sum(points for _, points in cells)
    with open(folder / "scores.csv", "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["learner", "total", "max", *[gid for gid, _ in cells]])
        for r in records:
            row = [r["scores"].get(gid, 0.0) for gid, _ in cells]
            writer.writerow([r["learner"], _fmt(sum(row)), _fmt(max_score), *map(_fmt, row)])
    with open(folder / "report.txt", "w") as f:
        for r in records:
            total = sum(r["scores"].get(gid, 0.0) for gid, _ in cells)
            f.write(
                f"{r['learner']}: {_fmt(total)}/{_fmt(max_score)} from {r['source']} in {r['seconds']} s\n"
            )
            for note in r["notes"]:
                f.write("  - " + note.replace("\n", "\n    ") + "\n")
    return folder


def _fmt(x: float) -> str:
    return f"{x:g}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("assignment", help="assignment id, a folder of solutions/, e.g. 01_meshes")
    parser.add_argument("submissions", type=Path, help="folder of learners' .ipynb files")
    parser.add_argument("--root", type=Path, default=ROOT, help="course root (the repository)")
    parser.add_argument("--notebook-timeout", type=float, default=1200, help="seconds for one notebook")
    parser.add_argument("--cell-timeout", type=int, default=120, help="seconds for one cell")
    parser.add_argument(
        "--jobs", type=int, default=1, help="notebooks graded at the same time (one per core)"
    )
    parser.add_argument(
        "--memory-gb", type=float, default=6.0, help="address-space cap for one notebook's kernel, GiB"
    )
    parser.add_argument(
        "--unsandboxed",
        action="store_true",
        help="run learners' code without the sandbox (only for notebooks you trust; see the README)",
    )
    args = parser.parse_args(argv)

    root = args.root.resolve()
    if not (root / "solutions" / args.assignment).is_dir():
        known = sorted(p.name for p in (root / "solutions").iterdir() if p.is_dir())
        print(f"no assignment {args.assignment!r} in solutions/; known: {known}", file=sys.stderr)
        return 2
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
        print(
            f"WARNING: {UNSANDBOXED_NOTE.split(':')[0]}: learners' code can read and change the course, "
            "other learners' files and the gradebook.",
            file=sys.stderr,
            flush=True,
        )
    elif problem := sandbox.missing(str(root)):
        print(
            f"make grade runs learners' code in a sandbox, but {problem}.\n"
            "To grade without it (trusted notebooks only): make grade ... UNSANDBOXED=1 "
            "(python -m grading.grade ... --unsandboxed).",
            file=sys.stderr,
        )
        return 2

    prepare_gradebook(args.assignment, root)
    slots: queue.Queue[int] = queue.Queue()
    for slot in range(max(1, args.jobs)):  # one sandbox uid per notebook graded at the same time
        slots.put(slot)

    def grade_file(path: Path) -> Outcome:
        slot = slots.get()
        try:
            return grade_one(
                args.assignment,
                path,
                root,
                notebook_timeout=args.notebook_timeout,
                cell_timeout=args.cell_timeout,
                memory_gb=args.memory_gb,
                sandbox_slot=None if args.unsandboxed else slot,
            )
        finally:
            slots.put(slot)

    outcomes = []
    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:  # each notebook is its own process
        for outcome in pool.map(grade_file, files):
            total = sum(outcome.scores.values())
            flag = "" if not outcome.notes else f"  ({len(outcome.notes)} note(s))"
            print(f"{outcome.learner:>24}: {total:g} points in {outcome.seconds:.1f} s{flag}", flush=True)
            outcomes.append(outcome)
    folder = write_reports(args.assignment, outcomes, root)
    print(f"scores: {folder / 'scores.csv'}\nfeedback: {folder / 'feedback'}\nnotes: {folder / 'report.txt'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
