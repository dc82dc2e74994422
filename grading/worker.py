"""The worker: grades one learner's notebook in a scratch course of its own and returns an Outcome.

Grading a notebook (``grade_one``): the file is checked to be a readable notebook, repaired
(grading/repair.py) and put into the scratch course's ``grading/submitted/<learner>/<assignment>/``;
``nbgrader autograde`` runs it (in a process forked from the nbgrader server,
grading/nbgrader_process.py; the kernel in the sandbox, grading/sandbox.py); a cell that kills the
kernel is recorded (``grading.protocol.Death``), replaced and the notebook graded again; the scores,
plain-words notes (timeouts, memory, tampering: ``grading.protocol.Tampering``, output cut) and the
feedback page come back as data. What this process tells nbgrader and the kernel, and what they tell
it back, is defined in grading/protocol.py and nowhere else.

Also here: the scratch template a batch's workers copy (``build_template``, ``pack``), and the facts
of an assignment every part reads (``release_notebook``, ``graded_cells``). A learner's id comes from
grading/handin.py (``learner_id``).
"""

from __future__ import annotations

import io
import os
import shutil
import sys
import tarfile
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

from grading import nbgrader_process, protocol, sandbox
from grading.assignment import Assignment, grade_id, reads_download
from grading.handin import learner_id
from grading.pagesafe import printable
from grading.repair import repair

ROOT = Path(__file__).resolve().parents[1]
MAX_KERNEL_DEATHS = 6
#: The largest file a worker hands back (the graded notebook, its feedback page); a larger one is not
#: kept and the learner's notes say so (``make grade --max-file-mb``).
MAX_FILE_BYTES = 64 * 2**20


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
    env[protocol.COURSE_ROOT_ENV] = str(root)
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
    max_file_bytes: int = MAX_FILE_BYTES,
) -> Outcome:
    """Autogrades one learner's notebook in a scratch course of its own; never raises: whatever goes
    wrong while one notebook is graded becomes a note of that learner's, scored 0.

    ``data`` is the file as handed in, named ``source``; ``template`` is build_template's folder, or
    its pack() when the worker runs elsewhere. ``slot`` (0 .. jobs-1) is unique among the notebooks
    graded at the same time (the kernel's uid in the sandbox, see grading/sandbox.py).
    ``sandboxed=False`` runs the learner's code without the sandbox. Everything is written under a
    temporary folder and returned as data: only the files grading reads (:func:`results`), each at
    most ``max_file_bytes``.
    """
    start = time.monotonic()
    outcome = Outcome(learner=learner_id(Path(source).name), source=Path(source))
    if not sandboxed:
        outcome.notes.append(UNSANDBOXED_NOTE)
    try:
        with tempfile.TemporaryDirectory(prefix="shardbook-grade-", ignore_cleanup_errors=True) as scratch:
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
            outcome.files, dropped = results(course, assignment, outcome.learner, max_file_bytes)
            outcome.notes += dropped
    except (Exception, SystemExit) as e:  # the grader's fault or not, never the batch's end
        outcome.scores, outcome.files, outcome.graded = {}, {}, False
        outcome.notes.append(failure_note(e))
    # Notes quote the learner's code (a file it wrote, a hook's name): no escape sequence of theirs
    # reaches report.txt, an LMS comment or the instructor's terminal.
    outcome.notes = [printable(note) for note in outcome.notes]
    outcome.seconds = time.monotonic() - start
    return outcome


def failure_note(error: BaseException) -> str:
    """The note of a notebook whose grading stopped on an error in the grading code."""
    said = str(error).strip().splitlines()
    return (
        f"grading stopped on an error in the grading code ({type(error).__name__}"
        + (f": {said[0][:300]}" if said else "")
        + "); scored 0: grade this learner again, and tell the course's maintainers if it happens again."
    )


#: Cap on the entries of the learner's folder listed in the note on files its code wrote.
_LISTED = 5


def _size(n: int) -> str:
    return f"{n / 2**20:.1f} MiB" if n >= 2**20 else f"{n / 2**10:.1f} KiB" if n >= 2**10 else f"{n} bytes"


def results(
    course: Path, assignment: str, learner: str, max_bytes: int
) -> tuple[dict[str, dict[str, bytes]], list[str]]:
    """The files of nbgrader's folders that grading reads, per NBGRADER_FOLDERS entry, and notes on what
    was not kept.

    Only the notebook (as submitted, as graded), its ``timestamp.txt`` and the feedback page come back:
    files the learner's code wrote beside the graded notebook are named in a note, never read. A file
    over ``max_bytes`` is not read either; a note says what it was and how large.
    """
    notebook = release_notebook(assignment, course).name
    wanted = {
        "submitted": {notebook: "the notebook as handed in", "timestamp.txt": "the submission's timestamp"},
        "autograded": {notebook: "the graded notebook", "timestamp.txt": "the graded timestamp"},
        "feedback": {
            Path(notebook).stem + ".html": "the feedback page",
            "timestamp.txt": "the feedback's timestamp",
        },
    }
    files: dict[str, dict[str, bytes]] = {}
    notes = []
    for folder in NBGRADER_FOLDERS:
        where = course / "grading" / folder / learner / assignment
        if not where.is_dir():
            continue
        files[folder] = {}
        for name, what in wanted[folder].items():
            path = where / name
            if path.is_symlink() or not path.is_file():
                continue
            size = path.stat().st_size
            if size > max_bytes:
                notes.append(
                    f"{what} ({_size(size)}) is larger than the {_size(max_bytes)} "
                    "a graded file may be: not kept."
                )
                continue
            files[folder][name] = path.read_bytes()
    graded = course / "grading" / "autograded" / learner / assignment
    written = []
    for top, dirs, names in os.walk(graded) if graded.is_dir() else []:
        dirs.sort()
        for name in sorted(names):
            path = Path(top, name)
            relative = path.relative_to(graded).as_posix()
            if relative not in wanted["autograded"]:
                written.append((relative, path.lstat().st_size))
        if len(written) > 1000:
            break
    if written:
        listed = ", ".join(
            f"{printable(name, newlines=False)} ({_size(size)})" for name, size in written[:_LISTED]
        )
        more = f" and {len(written) - _LISTED} more" if len(written) > _LISTED else ""
        notes.append(f"files the notebook's code wrote beside it were not kept: {listed}{more}.")
    return files, notes


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
    endless: list[int] = []  # cells that never stopped, even when interrupted
    death_file = root.parent / protocol.DEATH_FILE_NAME  # beside the scratch course, not in it
    clock = time.monotonic()
    for _attempt in range(MAX_KERNEL_DEATHS + 1):
        death_file.unlink(missing_ok=True)
        code, log = _nbgrader(
            [
                "autograde",
                f"--assignment={assignment}",
                f"--student={outcome.learner}",  # one value, never read as an option (grading/handin.py)
                "--force",
                *protocol.autograde_options(skipped, death_file, cell_timeout, endless),
            ],
            root,
            timeout=notebook_timeout,
            extra_env={
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
        death = protocol.Death.read(death_file)
        if death is not None and death.endless:
            endless.append(death.index)
            outcome.notes.append(
                f"{death.where()} ran past the {cell_timeout} s cell limit and never stopped, even when "
                "interrupted (a bare except: in a loop catches the interrupt too); its kernel was stopped, "
                "the cell skipped and the notebook graded again."
            )
            continue
        if death is not None:
            skipped.append(death.index)
            outcome.notes.append(
                f"{death.where()} stopped the Python kernel; it was skipped and graded again."
            )
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
            ["generate_feedback", f"--assignment={assignment}", f"--student={outcome.learner}", "--force"],
            root,
            timeout=300,
        )
        outcome.phases["feedback"] = time.monotonic() - clock - outcome.phases["results"]
        if code != 0:
            outcome.notes.append("feedback could not be generated:\n" + log[-800:])


UNSANDBOXED_NOTE = "graded without the sandbox (--unsandboxed): its code could read and change the course."


def _error_notes(root: Path, assignment: str, learner: str, cell_timeout: int, memory_gb: float) -> list[str]:
    """Plain-words notes for errors an instructor should know about: timeouts, memory, tampering, output
    cut."""
    from grading import preprocessors  # imports nbgrader: not before the first notebook is graded

    folder = root / "grading" / "autograded" / learner / assignment
    notes = []
    tampered = None
    undone: list[str] = []
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
            if output.get("output_type") == "stream" and text.startswith(protocol.UNDONE_PREFIX):
                undone.append(text.splitlines()[0][len(protocol.UNDONE_PREFIX) :].strip().rstrip("]"))
            if output.get("output_type") != "error":
                continue
            name, value = output.get("ename"), output.get("evalue", "")
            if name == protocol.NO_PROOF_ENAME:
                notes.append(
                    f"{gid} {protocol.NO_PROOF_NOTE} (an earlier cell changed how cells run); scored 0."
                )
            elif name == "CellTimeoutError":
                notes.append(f"{gid} ran past the {cell_timeout} s cell limit and was interrupted.")
            elif name == "MemoryError":
                notes.append(f"{gid} ran out of memory (the cap is {memory_gb:g} GiB per notebook).")
            elif tampered is None:
                tampered = protocol.Tampering.parse(value)
    if undone:
        notes.insert(
            0,
            f"{protocol.UNDONE_NOTE} ({'; '.join(undone)}); undone before each test.",
        )
    if tampered:
        notes.append(f"{protocol.TAMPERED_NOTE} ({tampered.summary()}); every test after that failed.")
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
