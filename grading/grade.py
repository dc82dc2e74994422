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
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import os
import re
import shutil
import sys
import tarfile
import tempfile
import threading
import time
import warnings
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

from grading import classreport, nbgrader_process, sandbox
from grading.assignment import Assignment, grade_id, reads_download
from grading.course import DEFAULT_COURSE_FILE, Course, late, read_course, submission_times
from grading.repair import repair

ROOT = Path(__file__).resolve().parents[1]
MAX_KERNEL_DEATHS = 6


#: The engines that grade a batch's notebooks (grading/engines.py).
ENGINE_NAMES = ("local", "ray")
#: nbgrader's per-learner folders under grading/, which a worker fills and the driver writes.
NBGRADER_FOLDERS = ("submitted", "autograded", "feedback")
#: What a course folder holds besides code: never copied into a scratch course (nor shipped to a Ray
#: worker): the gradebook, learners' files, reports, and the instructor's course file and roster (the
#: roster holds learners' names and emails).
GRADING_STATE = ("gradebook.db", *NBGRADER_FOLDERS, "reports", "__pycache__", "course.toml", "roster.csv")


@dataclass
class Outcome:
    """What happened to one learner's notebook, as data: a worker returns it, the driver records it."""

    learner: str
    source: Path
    scores: dict[str, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    graded: bool = False
    seconds: float = 0.0
    #: where those seconds went: copy (the scratch course), autograde (every attempt: kernel start and
    #: cells), results (scores and notes read back), feedback (the page)
    phases: dict[str, float] = field(default_factory=dict)
    #: the scratch course's grading/<folder>/<learner>/<assignment>/ files, per NBGRADER_FOLDERS entry
    files: dict[str, dict[str, bytes]] = field(default_factory=dict)


def copy_course(into: Path, root: Path = ROOT, assignment: str | None = None, name: str = "course") -> Path:
    """A fresh course in ``into/<name>``: solutions, exercises and grading code, no grading state.

    With ``assignment``, only that assignment's solutions/ and exercises/ folders. For dry runs and
    tests, so that nothing touches the real gradebook, and for build_template.
    """
    course = into / name
    course.mkdir(parents=True)
    for folder in ("solutions", "exercises"):
        if assignment is None:
            shutil.copytree(root / folder, course / folder)
        else:
            shutil.copytree(root / folder / assignment, course / folder / assignment)
    shutil.copytree(root / "grading", course / "grading", ignore=shutil.ignore_patterns(*GRADING_STATE))
    shutil.copy(root / "nbgrader_config.py", course)
    return course


def build_template(assignment: str, root: Path, into: Path) -> Path:
    """The scratch template of one assignment, ``into/template``: every file a worker needs, no more.

    copy_course of the assignment alone plus a fresh gradebook that knows this assignment and no
    learner. Each notebook is graded in a copy of it.
    """
    course = copy_course(into, root, assignment, name="template")
    prepare_gradebook(assignment, course)
    shutil.rmtree(course / "grading" / "__pycache__", ignore_errors=True)
    return course


def pack(folder: Path) -> bytes:
    """A folder as gzipped tar bytes (how the template travels to a Ray worker)."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        tar.add(folder, arcname=".", filter=lambda info: None if "__pycache__" in info.name else info)
    return buffer.getvalue()


def _unpack(data: bytes, into: Path) -> None:
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        tar.extractall(into, filter="data")


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
    return Assignment.read(source).graded_cells()


def _env(root: Path, extra: dict[str, str] | None = None) -> dict[str, str]:
    env = dict(os.environ)
    # Under pytest, ipykernel stops capturing what C++ code writes to stderr (it checks this variable):
    # tests must grade as an instructor's run does.
    env.pop("PYTEST_CURRENT_TEST", None)
    bin_dir = str(Path(sys.executable).parent)  # the venv's commands (alembic, should nbgrader ask it)
    env["PATH"] = bin_dir + os.pathsep + env.get("PATH", "")
    env["PYTHONPATH"] = str(root) + os.pathsep + env.get("PYTHONPATH", "")
    env["SHARDBOOK_COURSE_ROOT"] = str(root)
    env.setdefault("SHARDBOOK_DEVICES", "cpu")
    # XLA's C++ warnings (a grader's own program can draw "Involuntary full rematerialization") would
    # reach the learner's feedback as noise under a hidden test; errors still show.
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    env.update(extra or {})
    return env


def _nbgrader(
    args: list[str],
    root: Path,
    timeout: float,
    extra_env: dict[str, str] | None = None,
    memory_bytes: int | None = None,
):
    """Runs ``nbgrader <args>`` in ``root`` in a process of its own (forked from a server that imported
    nbgrader once, see grading/nbgrader_process.py), the kernel it starts under the address-space cap
    ``memory_bytes``; returns (returncode or None on timeout, log)."""
    return nbgrader_process.run(args, root, _env(root, extra_env), timeout, memory_bytes)


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


def _read_submission(data: bytes) -> tuple[nbformat.NotebookNode | None, str | None]:
    try:
        nb = reads_download(data.decode("utf-8"))
    except Exception as e:
        return None, f"the file is not a readable notebook ({type(e).__name__}: {str(e)[:200]})"
    return nb, None


def grade_one(
    assignment: str,
    source: str,
    data: bytes,
    template: Path | bytes,
    *,
    notebook_timeout: float,
    cell_timeout: int,
    memory_gb: float = 6.0,
    slot: int = 0,
    sandboxed: bool = True,
) -> Outcome:
    """Autogrades one learner's notebook in a scratch course of its own; never raises for anything the
    learner did.

    ``data`` is the file as handed in, named ``source``; ``template`` is build_template's folder, or
    its pack() when the worker runs elsewhere. ``slot`` (0 .. jobs-1) is unique among the notebooks
    graded at the same time (the kernel's uid in the sandbox, see grading/sandbox.py).
    ``sandboxed=False`` runs the learner's code without the sandbox. Everything is written under a
    temporary folder and returned as data.
    """
    start = time.monotonic()
    outcome = Outcome(learner=learner_id(Path(source)), source=Path(source))
    if not sandboxed:
        outcome.notes.append(UNSANDBOXED_NOTE)
    with tempfile.TemporaryDirectory(prefix="shardbook-grade-") as scratch:
        course = Path(scratch) / "course"
        if isinstance(template, bytes):
            course.mkdir()
            _unpack(template, course)
        else:
            shutil.copytree(template, course)
        outcome.phases["copy"] = time.monotonic() - start
        _grade_in(
            course, assignment, data, outcome, notebook_timeout, cell_timeout, memory_gb, slot, sandboxed
        )
        for folder in NBGRADER_FOLDERS:
            where = course / "grading" / folder / outcome.learner / assignment
            if where.is_dir():
                outcome.files[folder] = {
                    p.name: p.read_bytes() for p in sorted(where.iterdir()) if p.is_file()
                }
    outcome.seconds = time.monotonic() - start
    return outcome


def _grade_in(
    root: Path,
    assignment: str,
    data: bytes,
    outcome: Outcome,
    notebook_timeout: float,
    cell_timeout: int,
    memory_gb: float,
    slot: int,
    sandboxed: bool,
) -> None:
    """Grades ``data`` in the scratch course ``root``, filling ``outcome``."""
    nb, problem = _read_submission(data)
    if nb is None:  # and problem says why
        outcome.notes.append(f"{problem}; scored 0.")
        return
    try:
        repaired = repair(nb, nbformat.read(release_notebook(assignment, root), as_version=4))
    except Exception as e:  # a notebook too strange to map: say so, grade nothing
        outcome.notes.append(
            f"the notebook could not be matched to the assignment ({type(e).__name__}: {e}); scored 0."
        )
        return
    nb = repaired.notebook
    outcome.notes += ["repaired: " + r for r in repaired.repairs]
    target_dir = root / "grading" / "submitted" / outcome.learner / assignment
    target_dir.mkdir(parents=True)
    nbformat.write(nb, target_dir / release_notebook(assignment, root).name)
    (target_dir / "timestamp.txt").write_text(time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()))

    skipped: list[int] = []
    death_file = root.parent / "death.json"  # beside the scratch course, not in it
    clock = time.monotonic()
    for _attempt in range(MAX_KERNEL_DEATHS + 1):
        death_file.unlink(missing_ok=True)
        code, log = _nbgrader(
            ["autograde", assignment, "--student", outcome.learner, "--force"],
            root,
            timeout=notebook_timeout,
            extra_env={
                "SHARDBOOK_SKIP_CELLS": ",".join(map(str, skipped)),
                "SHARDBOOK_DEATH_FILE": str(death_file),
                "SHARDBOOK_CELL_TIMEOUT": str(cell_timeout),
                "TMPDIR": str(root.parent),  # the runtime folder: gone with the scratch course
                **(sandbox.kernel_env(slot) if sandboxed else {}),
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
        if death_file.exists():
            death = json.loads(death_file.read_text())
            skipped.append(int(death["index"]))
            where = f"cell {death['index']}" + (f" ({death['grade_id']})" if death.get("grade_id") else "")
            outcome.notes.append(f"{where} stopped the Python kernel; it was skipped and graded again.")
            continue
        outcome.notes.append(
            "nbgrader could not grade this notebook; scored 0. Its log ends:\n" + log[-1500:]
        )
        break
    else:
        outcome.notes.append("the kernel died too many times; scored 0.")

    outcome.phases["autograde"] = time.monotonic() - clock
    if outcome.graded:
        clock = time.monotonic()
        outcome.scores = read_scores(assignment, outcome.learner, root)
        outcome.notes += _error_notes(root, assignment, outcome.learner, cell_timeout, memory_gb)
        outcome.phases["results"] = time.monotonic() - clock
        code, log = _nbgrader(
            ["generate_feedback", assignment, "--student", outcome.learner, "--force"], root, timeout=300
        )
        outcome.phases["feedback"] = time.monotonic() - clock - outcome.phases["results"]
        if code != 0:
            outcome.notes.append("feedback could not be generated:\n" + log[-800:])


UNSANDBOXED_NOTE = "graded without the sandbox (--unsandboxed): its code could read and change the course."
#: What main prints once for a batch graded with --unsandboxed.
UNSANDBOXED_WARNING = (
    "WARNING: grading without the sandbox (--unsandboxed): learners' code can read and change the course, "
    "other learners' files and the gradebook."
)


def _error_notes(root: Path, assignment: str, learner: str, cell_timeout: int, memory_gb: float) -> list[str]:
    """Plain-words notes for errors an instructor should know about: timeouts, memory, tampering, output
    cut."""
    from grading import preprocessors  # imports nbgrader: not before the first notebook is graded

    folder = root / "grading" / "autograded" / learner / assignment
    notes = []
    tampered = None
    # The graded notebook only: its folder also holds what the learner's code wrote there.
    path = folder / release_notebook(assignment, root).name
    graded = nbformat.read(path, as_version=4).cells if path.exists() else []
    for index, cell in enumerate(graded):
        # a cell of the learner's own has no grade_id: its place in the notebook as graded
        gid = grade_id(cell) or f"cell {index}"  # numbered as the note on a dead kernel numbers it
        for output in cell.get("outputs", []):
            text = output.get("text", "")
            if output.get("output_type") == "stream" and text.startswith(preprocessors.CUT_PREFIX):
                notes.append(f"{gid}: {text[1:].strip().rstrip(']')}")
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


def record(outcome: Outcome, assignment: str, root: Path) -> None:
    """Writes one worker's result into the course (the driver alone does this, one learner at a time).

    nbgrader's folders grading/{submitted,autograded,feedback}/<learner>/<assignment>/ get the files the
    worker produced (an earlier grading's are removed), and the gradebook gets this learner's scores:
    every learner graded, an unreadable notebook included (0 for each test), has one submission.
    """
    for folder in NBGRADER_FOLDERS:
        target = root / "grading" / folder / outcome.learner / assignment
        if target.exists():
            shutil.rmtree(target)
        files = outcome.files.get(folder)
        if files:
            target.mkdir(parents=True)
            for name, data in files.items():
                (target / Path(name).name).write_bytes(data)
    from nbgrader.api import Gradebook, MissingEntry

    stamp = outcome.files.get("submitted", {}).get("timestamp.txt")
    with Gradebook(f"sqlite:///{root / 'grading' / 'gradebook.db'}") as gb:
        gb.update_or_create_student(outcome.learner)
        try:
            gb.remove_submission(assignment, outcome.learner)
        except MissingEntry:
            pass
        with warnings.catch_warnings():  # nbgrader's add_submission trips SQLAlchemy's autoflush notes
            warnings.simplefilter("ignore")
            submission = gb.add_submission(
                assignment, outcome.learner, **({"timestamp": stamp.decode().strip()} if stamp else {})
            )
        for notebook in submission.notebooks:
            for grade in notebook.grades:
                grade.auto_score = outcome.scores.get(grade.name, 0.0)
                grade.needs_manual_grade = False
        gb.db.commit()


def store_submission(assignment: str, learner: str, data: bytes, root: Path) -> None:
    """Keeps the file as handed in, for --regrade: reports/<assignment>/submissions/<learner>.ipynb."""
    folder = root / "grading" / "reports" / assignment / "submissions"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{learner}.ipynb").write_bytes(data)


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


def read_scores_csv(path: Path) -> dict[str, dict[str, float]]:
    """learner -> {column: value} of a scores.csv (empty if there is none)."""
    if not path.exists():
        return {}
    with open(path, newline="") as f:
        return {row.pop("learner"): {k: float(v) for k, v in row.items()} for row in csv.DictReader(f)}


def score_changes(
    before: dict[str, dict[str, float]], outcomes: Iterable[Outcome], cells: list[tuple[str, float]]
) -> list[str]:
    """One line per learner whose score changed: total before -> after, then each test that changed."""
    lines = []
    for o in sorted(outcomes, key=lambda o: o.learner):
        after = {gid: o.scores.get(gid, 0.0) for gid, _ in cells}
        if o.learner not in before:
            lines.append(f"{o.learner}: new, {_fmt(sum(after.values()))} points")
            continue
        old = before[o.learner]
        tests = [
            f"{gid} {_fmt(old.get(gid, 0.0))} -> {_fmt(after[gid])}"
            for gid, _ in cells
            if old.get(gid, 0.0) != after[gid]
        ]
        if tests:
            old_total, new_total = old.get("total", 0.0), sum(after.values())
            verb = "gained" if new_total > old_total else "lost" if new_total < old_total else "kept"
            change = _fmt(abs(new_total - old_total))
            lines.append(
                f"{o.learner}: {verb} {change}, {_fmt(old_total)} -> {_fmt(new_total)} ({'; '.join(tests)})"
            )
    return lines


def write_reports(
    assignment: str,
    outcomes: list[Outcome],
    root: Path,
    submitted: dict[str, str] | None = None,
    times_from: str = "",
    course: Course | None = None,
) -> Path:
    """Records this batch's outcomes, then writes the class files from every learner graded so far.

    Each learner's outcome is kept in ``learners/<learner>.json``, so re-grading one learner rewrites
    only that file and that learner's row: scores.csv, report.txt and the class report
    (grading/classreport.py) always cover the whole class. Feedback pages are copied to
    ``feedback/<learner>.html``. ``submitted`` (learner -> ISO 8601 time, found as ``times_from``
    says) is kept with each learner (a learner without one keeps the time kept before); when
    ``course`` gives the assignment a due date, scores.csv ends with days_late, penalty and adjusted
    (the total after the late penalty). Returns the report folder.
    """
    cells = graded_cells(assignment, root)
    notebook_name = release_notebook(assignment, root).name
    folder = root / "grading" / "reports" / assignment
    (folder / "feedback").mkdir(parents=True, exist_ok=True)
    (folder / "learners").mkdir(parents=True, exist_ok=True)
    for o in outcomes:
        path = folder / "learners" / f"{o.learner}.json"
        before = json.loads(path.read_text()) if path.exists() else {}
        when = (submitted or {}).get(o.learner)
        kept = {
            "learner": o.learner,
            "source": o.source.name,
            "scores": o.scores,
            "notes": o.notes,
            "seconds": round(o.seconds, 1),
            "phases": {name: round(seconds, 2) for name, seconds in o.phases.items()},
            **classreport.kept_details(o.files.get("autograded", {}), o.scores, cells, notebook_name),
            "submitted": when or before.get("submitted"),
            "submitted_from": times_from if when else before.get("submitted_from"),
        }
        path.write_text(json.dumps(kept, indent=1))
        page = folder / "feedback" / f"{o.learner}.html"
        page.unlink(missing_ok=True)
        for html in (root / "grading" / "feedback" / o.learner / assignment).glob("*.html"):
            shutil.copyfile(html, page)
    records = [json.loads(p.read_text()) for p in sorted((folder / "learners").glob("*.json"))]
    max_score = sum(points for _, points in cells)
    course = course or Course()
    dated = course.has_due_date(assignment)
    lateness = {}
    with open(folder / "scores.csv", "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(
            ["learner", "total", "max", *[gid for gid, _ in cells], *(LATE_COLUMNS if dated else [])]
        )
        for r in records:
            row = [r["scores"].get(gid, 0.0) for gid, _ in cells]
            extra = []
            if dated:
                lateness[r["learner"]] = cost = late(
                    course, assignment, r["learner"], r.get("submitted"), sum(row), max_score
                )
                extra = [str(cost.days), _fmt(round(cost.penalty, 4)), _fmt(round(cost.adjusted, 4))]
            writer.writerow([r["learner"], _fmt(sum(row)), _fmt(max_score), *map(_fmt, row), *extra])
    with open(folder / "report.txt", "w") as f:
        for r in records:
            total = sum(r["scores"].get(gid, 0.0) for gid, _ in cells)
            f.write(
                f"{r['learner']}: {_fmt(total)}/{_fmt(max_score)} from {r['source']} in {r['seconds']} s\n"
            )
            for note in r["notes"]:
                f.write("  - " + note.replace("\n", "\n    ") + "\n")
    release = release_notebook(assignment, root)
    solution = nbformat.read(root / "solutions" / assignment / release.name, as_version=4)
    answers = Assignment(solution).answers()
    stubs = Assignment(nbformat.read(release, as_version=4)).answers()
    summary = classreport.summarise(
        assignment,
        records,
        cells,
        exercises=list(answers),
        excluded={e: [answers[e], *([stubs[e]] if e in stubs else [])] for e in answers},
        adjusted={k: v.adjusted for k, v in lateness.items()} if dated else None,
        late={k: (v.days, v.penalty) for k, v in lateness.items()},
        times_from=_times_from(records) if dated else "",
    )
    classreport.write_class_report(summary, folder)
    return folder


#: The columns scores.csv ends with when the course file gives the assignment a due date.
LATE_COLUMNS = ["days_late", "penalty", "adjusted"]


def _times_from(records: list[dict]) -> str:
    """Where the class's submission times came from, as the class report says it."""
    sources = sorted({r["submitted_from"] for r in records if r.get("submitted_from")})
    missing = [r["learner"] for r in records if not r.get("submitted")]
    said = " and ".join(sources) or "not known"
    return said + (f" ({len(missing)} learner(s) without a time are not penalised)" if missing else "")


def _fmt(x: float) -> str:
    return f"{x:g}"


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
    parser.add_argument("--cell-timeout", type=int, default=120, help="seconds for one cell")
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
        choices=sorted(ENGINE_NAMES),
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
    reports = root / "grading" / "reports" / args.assignment
    sources: dict[str, str] = {}  # learner -> the file name a regrade reports (the original one)
    if args.regrade:
        if args.submissions:
            print("--regrade grades the stored submissions: give no folder", file=sys.stderr)
            return 2
        args.submissions = reports / "submissions"
        if not args.submissions.is_dir():
            print(f"nothing to regrade: no stored submissions in {args.submissions}", file=sys.stderr)
            return 2
        for path in (reports / "learners").glob("*.json"):
            kept = json.loads(path.read_text())
            sources[kept["learner"]] = kept["source"]
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
    before = read_scores_csv(reports / "scores.csv") if args.regrade else {}
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
        from grading.engines import ENGINES

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
    # reads it) and leave without tearing down the modules of a batch (over half a second).
    nbgrader_process.stop()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
