"""Fixtures shared by the grading tests."""

import copy
import csv
import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import nbformat
import pytest

from tests import llvm_level, submissions

#: One assignment's in-process grading (tests/submissions): a fresh process, so a fresh JAX.
INPROCESS_TIMEOUT = 900


def pytest_sessionfinish(session):
    """Closes this test process's shared Chromium (tests/pages.py), if a test launched one."""
    if (pages := sys.modules.get("tests.pages")) is not None:
        pages.close_chromium()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    """A test that failed on a multi-process check its workers were stopped in (a timeout, a death)
    shows their Python stacks at that moment (``shardbook.hosts.run_check``'s ``worker_stacks``)
    under its failure: a hang in CI then says where it hung."""
    report = yield
    seen = call.excinfo.value if call.excinfo else None
    while seen is not None:
        if stacks := getattr(seen, "worker_stacks", ""):
            report.sections.append(("the workers' stacks when they were stopped", stacks))
            break
        seen = seen.__cause__ or seen.__context__
    return report


@pytest.fixture
def ipython_shell():
    """IPython's shell in this process (``InteractiveShell.instance()``, as a notebook's kernel has one),
    its history in memory; cleared after the test and closed then. A shell left to the process's exit
    is reset there (IPython's ``atexit_operations``), which collects the garbage of the whole worker:
    0.4-0.6 s of CPU apiece, six or seven shells a worker (2026-12-06)."""
    import atexit

    from IPython.core.interactiveshell import InteractiveShell
    from traitlets.config import Config

    config = Config()
    config.HistoryManager.hist_file = ":memory:"
    InteractiveShell.clear_instance()
    shell = InteractiveShell.instance(config=config)
    try:
        yield shell
    finally:
        shell.set_custom_exc((), None)
        InteractiveShell.clear_instance()
        atexit.unregister(shell.atexit_operations)
        if shell.history_manager is not None:
            shell.history_manager.close()


#: LLVM's optimisation level for the in-process grading's compiles (see in_process_env).
LLVM_LEVEL_FLAG = "--xla_backend_optimization_level=0"


def compilation_cache(tmp_path_factory) -> Path:
    """The folder of JAX's persistent compilation cache, one per test session: every pytest-xdist
    worker compiles through it (the fixture compile_through_the_cache), and so does every in-process
    grading (in_process_env)."""
    base = tmp_path_factory.getbasetemp()
    return (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "jax-cache"


@pytest.fixture(scope="session", autouse=True)
def compile_through_the_cache(tmp_path_factory):
    """This test process reads a program it or the other worker compiled before from the session's
    compilation cache instead of compiling it again: a grader's oracle or a reference answer on the
    same shapes in several tests, a mutant that compiles to the program of the solution: about 630
    of the 1,700 compiles of the tests that compile most (test_graders*, test_mutants, test_viz,
    test_cost, test_comms, test_tpu, test_chips, the doctests; two workers), whose CPU went from
    182 to 164 s (means of five runs each, taken in turns on a shared 2-core machine, 2026-12-06).

    A program read back is the same program, its debug information aside: the tables of source
    locations come back renumbered, and (JAX's key leaves debug information out) the metadata is that
    of the call that compiled it first, so a test that checks a report's source line compiles a
    program no other test does. Tests compare program texts through
    ``shardbook.hlo.without_debug_info``. Plain CPU compiles (no compiler options of their own) are at
    LLVM -O0, keyed as the in-process gradings' are (tests/llvm_level.py), so the two share programs:
    a grader's oracle, a reference answer on the shapes of its test cells.
    """
    import jax

    jax.config.update("jax_compilation_cache_dir", str(compilation_cache(tmp_path_factory)))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
    llvm_level.plain_cpu_compiles_at_o0()


@pytest.fixture
def llvm_at_its_default_level():
    """This test's plain CPU compiles at LLVM's default level (tests/llvm_level.py: the others' are at
    -O0), for a test that compares the two."""
    llvm_level.STATE["on"] = False
    try:
        yield
    finally:
        llvm_level.STATE["on"] = True


def in_process_env(tmp_path_factory) -> dict[str, str]:
    """The environment of an assignment's in-process grading: the session's compilation cache
    (:func:`compilation_cache`), and LLVM at -O0.

    The graders compile the same oracles and the same reference answers for the reference solution
    and again for every wrong answer of an assignment: with the cache, each distinct program compiles
    once (assignment 5's in-process grading: 41 s of CPU without it, 29 s with it). A cached program
    is the very executable (its memory_analysis() and its text, debug information aside, are the
    same), so no result changes.

    ``--xla_backend_optimization_level=0`` makes XLA:CPU's machine code without LLVM's optimisations,
    after every HLO pass has run and every buffer is assigned: the program text and memory_analysis()
    the graders read are the same (test_submissions checks it on a sharded, scanned, rematerialised
    step). Computed values may differ in their last bits: when this was introduced
    (2026-12-03) every assignment's scores, errors and feedback were the same, but for one printed
    value of one wrong answer of assignment 11 (-0.2593665 against -0.2593664); the graders' compiles
    took 17% less CPU (163 s -> 135 s, assignments 1-11). Kernels of `make grade`, in the tests too,
    compile as an instructor's do (test_grading compares the two on assignment 1).
    """
    return {
        "JAX_COMPILATION_CACHE_DIR": str(compilation_cache(tmp_path_factory)),
        "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0",
        "JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES": "0",
        "XLA_FLAGS": " ".join([*os.environ.get("XLA_FLAGS", "").split(), LLVM_LEVEL_FLAG]),
    }


def in_process_group(assignment: str) -> str:
    """The pytest-xdist group of every test that reads ``assignment``'s in-process grading.

    An assignment is graded in-process once per pytest-xdist worker (the session fixture
    graded_in_process), so the tests that read it (tests/test_submissions.py, tests/test_parity.py) share
    a group, hence a worker: spread over two workers, five assignments were graded twice (12_many_hosts
    alone 120 s). Assignment 1's results are also compared with its `make grade` batch
    (tests/test_grading.py), so it joins that group."""
    return f"in-process-{assignment}" if assignment != GRADED_ASSIGNMENT else "grading"


@pytest.fixture(scope="session")
def grading_zygote(tmp_path_factory):
    """A function returning this test process's zygote (tests/zygote.py), started on first use with
    the in-process gradings' environment; ended, and waited for, with the session."""
    from tests.zygote import Zygote

    zygotes: list[Zygote] = []

    def zygote() -> Zygote:
        if not zygotes:
            env = dict(os.environ, PYTHONPATH=str(submissions.ROOT), **in_process_env(tmp_path_factory))
            env.pop("PYTEST_CURRENT_TEST", None)
            zygotes.append(Zygote(env))
        return zygotes[0]

    try:
        yield zygote
    finally:
        for started in zygotes:
            started.close()


@pytest.fixture(scope="session")
def graded_in_process(tmp_path_factory, grading_zygote):
    """A function: assignment -> {learner: in-process result}, each assignment graded once a session,
    each grading a process forked from the session's zygote (:func:`grading_zygote`)."""
    done: dict[str, dict] = {}

    def grade(assignment: str) -> dict:
        if assignment not in done:
            zygote = grading_zygote()
            folder = tmp_path_factory.mktemp(f"inprocess-{assignment}")
            # A submission whose grading mostly waits (EXPECTED "waits") is graded in a process of its
            # own at the same time as the others, and completed with their reference solution's result.
            subs = submissions.answer_only(assignment)
            waiting = sorted(name for name, sub in subs.items() if sub.expected.get("waits"))
            rest = sorted(set(subs) - set(waiting)) or ["reference_solution"]  # the reference always
            # The reference solution's one run also records what tests/test_parity.py checks.
            runs = {
                "rest": (rest if waiting else [], ["--parity"]),
                **{n: ([n], ["--no-reference"]) for n in waiting},
            }
            pids = {}
            results: dict[str, dict] = {}
            for key, (names, flags) in runs.items():
                out = folder / f"{key}.json"
                argv = ["grade", assignment, *names, "--out", str(out), *flags]
                pids[key] = zygote.start(argv, folder / f"{key}.stdout", folder / f"{key}.stderr"), out
            for key, (pid, out) in pids.items():
                code = zygote.wait(pid, timeout=INPROCESS_TIMEOUT)
                stderr = (folder / f"{key}.stderr").read_text()
                assert code == 0, f"{assignment} ({key}): {stderr[-3000:]}"
                results[key] = json.loads(out.read_text())
            graded = results.pop("rest")
            for key, alone in results.items():
                graded[key] = submissions.merged(graded["reference_solution"], alone[key])
            done[assignment] = graded
        return done[assignment]

    return grade


# ---------------------------------------------------------------------------------------------------
# The one end-to-end `make grade` batch (tests/test_grading.py); the Ray engine's batch
# (tests/test_grading_engines.py) is a slice of the same files, compared with this one's results.

GRADED_ASSIGNMENT = "01_meshes"
#: Each assignment with committed submissions, as a test parameter in its in_process_group.
IN_PROCESS_ASSIGNMENTS = [
    pytest.param(a, marks=pytest.mark.xdist_group(in_process_group(a)))
    for a in submissions.assignments_with_submissions()
]

CELL_TIMEOUT = 30  # generous: two notebooks are graded at once on a 2-core machine
#: The solution as a Colab learner hands it in (no cell metadata, a `colab` block, nbformat 4.0,
#: outputs), with a helper cell of their own for each answer placed as said: full marks, one note.
COLAB_LEARNERS = {"colab_learner_after": "after", "colab_learner_before": "before"}
REFERENCE = "reference solution.ipynb"  # learner id reference_solution (a file name with a space)
#: The solution with one more cell that prints what a learner prints by accident (a 600,000-character
#: line, 3,000 lines) and displays 3 MB of HTML: full marks, its output cut, a note saying so.
LOUD_LEARNER = "loud_learner"
LOUD_CELL = (
    "print('x' * 600_000)\n"
    "for i in range(3_000):\n"
    "    print(i, 'one line of a loop that prints too much')\n"
    "from IPython.display import HTML, display\n"
    "display(HTML('<p>' + 'y' * 3_000_000 + '</p>'))\n"
)


#: Two learners for the class report (tests/test_classreport.py): "original" hands in an answer of
#: their own to per_device_shape, "copier" the same answer renamed and re-commented; the rest of each
#: notebook is the reference solution.
CLASS_LEARNERS = ("original", "copier")
#: The course file of the graded batch: a due date, a grace period, a late penalty and an extension.
COURSE_TOML = (
    "[late]\nper_day = 10\ngrace_minutes = 60\n"
    "[assignments.01_meshes]\ndue = 2026-10-01T23:59:00Z\n"
    "[extensions.01_meshes]\ncopier = 3\n"
)
#: The LMS's submission times of the graded batch (a learner it does not list has no time: not late).
TIMES_CSV = (
    "learner,submitted\n"
    "reference solution.ipynb,2026-10-01T20:00:00Z\n"  # on time (by the file name handed in)
    "original,2026-10-02T00:30:00Z\n"  # 31 minutes late: within the grace period
    "wrong_axis_order,2026-10-03T08:00:00Z\n"  # 1 day 8 h late: 2 started days
    "copier,2026-10-03T08:00:00Z\n"  # the same, within a 3-day extension
)


def write_course_file(course: Path, into: Path) -> Path:
    """Writes :data:`COURSE_TOML` into ``course``, and :data:`TIMES_CSV` as ``into/times.csv``, which it
    returns (for `make grade`'s ``--times``)."""
    (course / "grading" / "course.toml").write_text(COURSE_TOML)
    times = into / "times.csv"
    times.write_text(TIMES_CSV)
    return times


def write_downloads(into: Path, names: list[str] | None = None) -> Path:
    """A folder of downloads of assignment 1: the reference solution, the Colab learners (both as
    Colab saves them), the class report's learners (:data:`CLASS_LEARNERS`) and every committed
    submission (answer-only ones built as Colab downloads), or only the submissions in ``names`` (with
    the reference solution)."""
    from tests.test_similarity import PER_DEVICE_SHAPE_A, PER_DEVICE_SHAPE_A_COPIED
    from tools import handed_in

    downloads = into / "downloads"
    downloads.mkdir()
    assignment = GRADED_ASSIGNMENT
    (downloads / REFERENCE).write_bytes(submissions.colab_bytes(None, assignment))
    if names is None:
        solved = handed_in.solved_notebook(assignment)
        for learner, placement in COLAB_LEARNERS.items():
            helped = handed_in.add_helper_cells(solved, placement)
            handed_in.write_colab_download(helped, downloads / f"{learner}.ipynb")
        loud = copy.deepcopy(solved)
        loud.cells.insert(len(loud.cells) // 2, nbformat.v4.new_code_cell(LOUD_CELL))
        handed_in.write_colab_download(loud, downloads / f"{LOUD_LEARNER}.ipynb")
        own = dict(zip(CLASS_LEARNERS, (PER_DEVICE_SHAPE_A, PER_DEVICE_SHAPE_A_COPIED), strict=True))
        for learner, answer in own.items():
            sub = submissions.Submission(
                assignment, learner, into / f"{learner}.py", {}, answers={"per_device_shape": answer}
            )
            (downloads / f"{learner}.ipynb").write_bytes(submissions.colab_bytes(sub, assignment))
    for name, sub in submissions.load(assignment).items():
        if names is None or name in names:
            (downloads / f"{name}.ipynb").write_bytes(submissions.colab_bytes(sub, assignment))
    return downloads


@pytest.fixture(scope="session")
def graded_batch(tmp_path_factory):
    """Assignment 1's whole batch graded by `make grade` (local engine, 2 jobs, sandboxed), with a course
    file and the LMS's submission times (:func:`write_course_file`; ``times``: that CSV)."""
    from grading import grade, worker

    tmp = tmp_path_factory.mktemp("batch")
    course = worker.copy_course(tmp)
    downloads = write_downloads(tmp)
    times = write_course_file(course, tmp)
    args = [GRADED_ASSIGNMENT, str(downloads), "--root", str(course), "--cell-timeout", str(CELL_TIMEOUT)]
    assert grade.main([*args, "--jobs", "2", "--times", str(times)]) == 0
    reports = course / "grading" / "reports" / GRADED_ASSIGNMENT
    return SimpleNamespace(
        assignment=GRADED_ASSIGNMENT,
        course=course,
        reports=reports,
        rows=scores_csv(reports),
        downloads=downloads,
        times=times,
        submissions=submissions.load(GRADED_ASSIGNMENT),
    )


# ---------------------------------------------------------------------------------------------------
# One batch of hostile hand-ins of assignment 1, graded by `python -m grading.grade` as a process once a
# session, beside the reference solution and a wrong answer: each module of HOSTILE_MODULES writes its
# own notebooks into the batch's folder with a function hand_in(folder). A batch costs a course, a
# start of nbgrader and the kernels of its neighbours (about 30 s of CPU); these three were three.

#: tests/test_grading_hostile.py (names, files and caps), tests/test_grading_hostile_kernel.py (attacks
#: on how the cells run), tests/test_feedback.py (script in a feedback page).
HOSTILE_MODULES = ("tests.test_grading_hostile", "tests.test_grading_hostile_kernel", "tests.test_feedback")
#: The neighbours: whatever the others do, these score what they score alone.
HOSTILE_WRONG = "wrong_axis_order"
#: The batch's file cap: the graded notebook of test_grading_hostile's huge_pages (three displays of
#: 1.5 MB each) passes it, every other graded notebook and page is far below it.
HOSTILE_CAP_MB = 4


def grade_process(course: Path, folder: Path, tmp: Path) -> subprocess.CompletedProcess:
    """`python -m grading.grade` of assignment 1 on ``folder`` as a process (2 jobs, the hostile
    batch's file cap, sandboxed where bubblewrap is), which must succeed and leave nothing in its
    temporary folder."""
    from grading import sandbox

    scratch = tmp / f"tmp-{folder.name}"
    scratch.mkdir()
    args = [GRADED_ASSIGNMENT, str(folder), "--root", str(course), "--cell-timeout", str(CELL_TIMEOUT)]
    args += ["--unsandboxed"] if sandbox.missing(str(course)) else []  # as tests/test_classreport.py
    done = subprocess.run(
        [sys.executable, "-m", "grading.grade", *args, "--jobs", "2", "--max-file-mb", str(HOSTILE_CAP_MB)],
        capture_output=True,
        text=True,
        env=dict(os.environ, TMPDIR=str(scratch), PYTHONPATH=str(submissions.ROOT)),
        timeout=1800,
    )
    left = [p.name for p in scratch.iterdir()]
    assert done.returncode == 0 and not left, (
        done.returncode,
        left,
        done.stdout[-3000:],
        done.stderr[-3000:],
    )
    return done


def scores_csv(reports: Path) -> dict[str, dict[str, str]]:
    """Learner -> their row of a report folder's scores.csv."""
    with open(reports / "scores.csv") as f:
        return {row["learner"]: row for row in csv.DictReader(f)}


@pytest.fixture(scope="session")
def hostile_batch(tmp_path_factory):
    """The hostile batch, graded: ``tmp`` (its folder), ``course``, ``folder`` (what was handed in),
    ``run`` (the finished process), ``rows`` (scores.csv), ``kept`` (each learner's kept JSON, without
    the note of a machine that grades unsandboxed) and ``first``, a ReportFolder of the reports as the
    batch left them: tests/test_grading_hostile.py grades a later batch into the same course, so the
    others read ``first``."""
    import importlib
    import shutil

    from grading import worker
    from grading.record import ReportFolder

    tmp = tmp_path_factory.mktemp("hostile")
    course = worker.copy_course(tmp)
    folder = tmp / "downloads"
    folder.mkdir()
    (folder / REFERENCE).write_bytes(submissions.colab_bytes(None, GRADED_ASSIGNMENT))
    wrong = submissions.load(GRADED_ASSIGNMENT)[HOSTILE_WRONG]
    (folder / f"{HOSTILE_WRONG}.ipynb").write_bytes(submissions.colab_bytes(wrong, GRADED_ASSIGNMENT))
    for module in HOSTILE_MODULES:
        importlib.import_module(module).hand_in(folder)
    run = grade_process(course, folder, tmp)
    reports = course / "grading" / "reports" / GRADED_ASSIGNMENT
    first = ReportFolder(tmp / "first", GRADED_ASSIGNMENT)
    shutil.copytree(reports, first.path)
    kept = {p.stem: json.loads(p.read_text()) for p in first.learners.glob("*.json")}
    for record in kept.values():  # a machine without bubblewrap grades unsandboxed, each with a note
        record["notes"] = [n for n in record["notes"] if n != worker.UNSANDBOXED_NOTE]
    rows = scores_csv(first.path)
    return SimpleNamespace(tmp=tmp, course=course, folder=folder, run=run, rows=rows, kept=kept, first=first)
