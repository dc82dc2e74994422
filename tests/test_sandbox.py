"""The learner's kernel in its sandbox (grading/sandbox.py): what it can and cannot reach.

Unit tests run a small Python program through ``sandbox.command`` in a scratch course, once outside
the sandbox (the attack works: the test can fail) and once inside (it is stopped). The end-to-end test
grades hostile notebooks with ``grade.main`` next to the reference solution and a plainly wrong one.
"""

from __future__ import annotations

import csv
import hashlib
import json
import os
import shutil
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import nbformat
import pytest

from grading import grade, protocol, sandbox, worker
from grading.assignment import is_answer
from tests import submissions as submissions_corpus
from tests.notebooks import ROOT

# Runs `make grade`: never at the same time as another module that does (see CONTRIBUTING.md).
pytestmark = pytest.mark.xdist_group("grading")

ASSIGNMENT = "01_meshes"
SECRET = "EARLIER-LEARNER-SECRET-4711"

# Probed once (it starts bwrap); only the tests that start a sandbox need it.
BWRAP_PROBLEM = sandbox.missing()
needs_bwrap = pytest.mark.skipif(BWRAP_PROBLEM is not None, reason=str(BWRAP_PROBLEM))

# Attacks a learner's code can try from its working directory. Each prints ATTACK-BLOCKED or
# ATTACK-SUCCEEDED with its name; run(names) runs some of them.
ATTACKS = r'''
import glob, os, socket, time

def _course_root():
    folder = os.getcwd()
    while folder != "/":
        if os.path.isdir(os.path.join(folder, "grading", "graders")):
            return folder
        folder = os.path.dirname(folder)
    raise FileNotFoundError("no grading/graders/ above " + os.getcwd())

def _others(pattern):
    own = os.path.realpath(os.getcwd())
    found = [p for p in glob.glob(os.path.join(_course_root(), pattern))
             if not os.path.realpath(p).startswith(own) and not own.startswith(os.path.realpath(p))]
    if not found:
        raise FileNotFoundError("nothing matches " + pattern)
    return found

NO_OP = """

# appended by a learner: every check passes
for _name in list(globals()):
    if _name.startswith(("check_", "expect_")) and callable(globals()[_name]):
        globals()[_name] = lambda *args, **kwargs: None
"""

def write_graders():
    done = []
    for path in glob.glob(os.path.join(_course_root(), "grading", "graders", "*.py")):
        with open(path, "a") as f:
            f.write(NO_OP)
        done.append(path)
    if not done:
        raise FileNotFoundError("no graders found")
    return done

def write_gradebook():
    with open(os.path.join(_course_root(), "grading", "gradebook.db"), "ab") as f:
        f.write(b"ATTACK-BYTES")

def write_other_learner():
    done = []
    for folder in _others("grading/*/*/*/"):
        with open(os.path.join(folder, "planted.txt"), "w") as f:
            f.write("ATTACK")
        done.append(folder)
    return done

def write_reports():
    folder = os.path.join(_course_root(), "grading", "reports", "01_meshes")
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "scores.csv"), "a") as f:
        f.write("mallory,999,14\n")

def read_other_submission():
    return [open(p).read()[:40] for p in _others("grading/submitted/*/*/*.ipynb")]

def read_solutions():
    paths = glob.glob(os.path.join(_course_root(), "solutions", "*", "*.ipynb"))
    if not paths:
        raise FileNotFoundError("no solutions/ visible")
    return open(paths[0]).read()[:40]

def open_socket():
    socket.create_connection(("127.0.0.1", PORT), timeout=3).close()
    return "connected to 127.0.0.1:%d" % PORT

def fork_bomb():
    kernel, forks = os.getpid(), 0
    while True:
        try:
            if os.fork() == 0:
                continue  # each child forks on as well
            forks += 1
        except OSError as e:
            if os.getpid() != kernel:
                while True:  # a child holds its place, as in a real fork bomb
                    time.sleep(60)
            raise RuntimeError("forking failed after %d forks from this process: %s" % (forks, e))

def run(names):
    for name in names:
        try:
            detail = globals()[name]()
        except Exception as e:
            print("ATTACK-BLOCKED %s: %s: %s" % (name, type(e).__name__, e))
        else:
            print("ATTACK-SUCCEEDED %s: %s" % (name, detail))
'''


def attack_program(names: list[str], port: int = 9) -> str:
    return ATTACKS.replace("PORT", str(port)) + f"\nrun({names!r})\n"


def digests(*folders: Path) -> dict[str, str]:
    """sha256 of every file under the folders (which must not change)."""
    return {
        str(p): hashlib.sha256(p.read_bytes()).hexdigest()
        for folder in folders
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


@pytest.fixture()
def course(tmp_path):
    """A scratch course with grading state of an earlier batch: a gradebook, a learner's submission
    and autograded folder, reports; and the folder of the learner whose code runs."""
    course = worker.copy_course(tmp_path)
    (course / "grading" / "gradebook.db").write_bytes(b"GRADEBOOK")
    for stage in ("submitted", "autograded"):
        earlier = course / "grading" / stage / "earlier" / ASSIGNMENT
        earlier.mkdir(parents=True)
        (earlier / f"{ASSIGNMENT}.ipynb").write_text(SECRET)
    (course / "grading" / "reports" / ASSIGNMENT).mkdir(parents=True)
    (course / "grading" / "reports" / ASSIGNMENT / "scores.csv").write_text("learner,total\n")
    own = course / "grading" / "autograded" / "mallory" / ASSIGNMENT
    own.mkdir(parents=True)
    return course, own


def run_program(course: Path, own: Path, program: str, *, sandboxed: bool, slot: int = 0):
    """Runs ``python -c program`` in ``own``, in the sandbox as a kernel would be, or plainly."""
    cmd = [sys.executable, "-c", program]
    env = sandbox.minimal_env(dict(os.environ), str(course))
    if sandboxed:
        uid = int(sandbox.kernel_env(slot)[sandbox.UID_ENV]) if os.geteuid() == 0 else None
        if uid is not None:
            sandbox._chown_tree(str(own), uid, uid)
        cmd = sandbox.command(
            cmd,
            cwd=str(own),
            course_root=str(course),
            assignment=ASSIGNMENT,
            runtime_dir=None,
            uid=uid,
            nproc=sandbox.nproc_limit(),
        )
    proc = subprocess.run(cmd, cwd=own, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout


def results(stdout: str) -> dict[str, str]:
    """attack name -> BLOCKED or SUCCEEDED."""
    found = {}
    for line in stdout.splitlines():
        if line.startswith("ATTACK-"):
            verdict, name = line[len("ATTACK-") :].split(":")[0].split()
            found[name] = verdict
    return found


FILE_ATTACKS = [
    "write_graders",
    "write_gradebook",
    "write_other_learner",
    "write_reports",
    "read_other_submission",
    "read_solutions",
]


@needs_bwrap
def test_attacks_on_course_files_work_outside_and_fail_inside(course):
    # Outside the sandbox every attack succeeds (so the check below can fail); inside, each fails and
    # the course's files are byte for byte what they were.
    course, own = course
    outside = course.parent / "outside"
    outside_course = worker.copy_course(outside)
    for path in course.rglob("*"):  # the same grading state in a second copy, to be attacked
        target = outside_course / path.relative_to(course)
        if path.is_dir():
            target.mkdir(parents=True, exist_ok=True)
        elif not target.exists():
            target.write_bytes(path.read_bytes())
    outside_own = outside_course / own.relative_to(course)
    found = results(run_program(outside_course, outside_own, attack_program(FILE_ATTACKS), sandboxed=False))
    assert found == dict.fromkeys(FILE_ATTACKS, "SUCCEEDED")

    grading = course / "grading"
    before = digests(grading / "graders", grading / "submitted", grading / "reports", course / "solutions")
    before |= digests(grading / "autograded" / "earlier")
    gradebook = (grading / "gradebook.db").read_bytes()
    stdout = run_program(course, own, attack_program(FILE_ATTACKS), sandboxed=True)
    assert results(stdout) == dict.fromkeys(FILE_ATTACKS, "BLOCKED"), stdout
    assert SECRET not in stdout
    after = digests(grading / "graders", grading / "submitted", grading / "reports", course / "solutions")
    assert after | digests(grading / "autograded" / "earlier") == before
    assert (grading / "gradebook.db").read_bytes() == gradebook


@needs_bwrap
def test_kernel_sees_only_what_it_must_and_writes_only_its_folder(course):
    course, own = course
    home = os.path.expanduser("~")
    program = (
        "import json, os\n"
        "open('answer.txt', 'w').write('mine')\n"
        "open('/tmp/home/scratch', 'w').write('tmp')\n"
        "import shardbook, grading.tamper, grading.graders.a01_meshes\n"  # what test cells import
        f"folders = ['/', {home!r}, {str(course)!r}, {str(course / 'grading')!r}]\n"
        "print(json.dumps({d: sorted(os.listdir(d)) if os.path.isdir(d) else None for d in folders}))\n"
    )
    seen = json.loads(run_program(course, own, program, sandboxed=True).splitlines()[-1])
    assert (own / "answer.txt").read_text() == "mine"
    assert set(seen[str(course)]) == {"shardbook", "grading", "exercises"} - (
        set() if (course / "shardbook").is_dir() else {"shardbook"}
    )
    assert set(seen[str(course / "grading")]) == {
        "__init__.py",
        "tamper.py",
        "protocol.py",
        "graders",
        "autograded",
    }
    # Of $HOME only the folders leading to Python or the virtual environment, if any, exist.
    on_the_way = {
        Path(p).relative_to(home).parts[0] for p in (sys.prefix, sys.base_prefix) if p.startswith(home)
    }
    assert seen[home] is None or set(seen[home]) <= on_the_way


@needs_bwrap
def test_socket_connect_works_outside_and_fails_inside(course):
    course, own = course
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        program = attack_program(["open_socket"], port)
        assert results(run_program(course, own, program, sandboxed=False)) == {"open_socket": "SUCCEEDED"}
        assert results(run_program(course, own, program, sandboxed=True)) == {"open_socket": "BLOCKED"}


@needs_bwrap
def test_fork_bomb_stops_at_the_limit_and_leaves_nothing_behind(course):
    course, own = course
    if os.geteuid() != 0:
        pytest.skip("as root the kernel has a uid of its own whose processes can be counted")
    uid = int(sandbox.kernel_env(3)[sandbox.UID_ENV])
    stdout = run_program(course, own, attack_program(["fork_bomb"]), sandboxed=True, slot=3)
    assert results(stdout) == {"fork_bomb": "BLOCKED"}, stdout
    # The sandbox ended with its program: no process of the kernel's uid is left, and this machine
    # can still start processes.
    for _ in range(50):
        if sandbox._user_tasks(uid) == 0:
            break
        time.sleep(0.1)
    assert sandbox._user_tasks(uid) == 0
    assert subprocess.run(["true"]).returncode == 0


def test_reclaim_removes_links_and_gives_the_folder_back(tmp_path):
    # nbgrader writes the executed notebook into the kernel's folder: a link planted there must not
    # lead it anywhere else.
    folder = tmp_path / "kernel"
    folder.mkdir()
    target = tmp_path / "graders.py"
    target.write_text("genuine")
    (folder / "notebook.ipynb").symlink_to(target)
    os.mkfifo(folder / "pipe")
    (folder / "sub").mkdir()
    (folder / "sub" / "ok.txt").write_text("kept")
    if os.geteuid() == 0:  # as the kernel's uid would have left it
        sandbox._chown_tree(str(folder), sandbox.UID_BASE, sandbox.UID_BASE)
    removed = sandbox._reclaim(str(folder), (os.getuid(), os.getgid()))
    assert sorted(Path(p).name for p in removed) == ["notebook.ipynb", "pipe"]
    assert (folder / "sub" / "ok.txt").read_text() == "kept"
    assert target.read_text() == "genuine"
    assert {p.stat().st_uid for p in [folder, *folder.rglob("*")]} == {os.getuid()}


def test_minimal_env_keeps_only_what_the_kernel_needs(tmp_path):
    env = sandbox.minimal_env(
        {
            "XLA_FLAGS": "--xla_force_host_platform_device_count=8",
            "SHARDBOOK_DEVICES": "cpu",
            protocol.SANDBOX_ENV: "1",
            protocol.UID_ENV: "2000000003",
            "AWS_SECRET_ACCESS_KEY": "s3cr3t",
            "HOME": "/root",
        },
        str(tmp_path),
    )
    assert env["XLA_FLAGS"] == "--xla_force_host_platform_device_count=8"
    assert env["SHARDBOOK_DEVICES"] == "cpu"
    assert env["HOME"] == "/tmp/home"
    assert env["PYTHONPATH"].split(os.pathsep)[0] == str(tmp_path)
    assert "AWS_SECRET_ACCESS_KEY" not in env
    assert protocol.SANDBOX_ENV not in env and protocol.UID_ENV not in env  # grading's own settings


def test_grade_refuses_without_bubblewrap_and_says_how_to_install(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(sandbox.shutil, "which", lambda name: None)
    assert "apt-get install bubblewrap" in sandbox.missing()
    submissions = tmp_path / "subs"
    submissions.mkdir()
    (submissions / "ada.ipynb").write_text("{}")
    assert grade.main([ASSIGNMENT, str(submissions), "--root", str(ROOT)]) == 2
    message = capsys.readouterr().err
    assert "apt-get install bubblewrap" in message and "UNSANDBOXED=1" in message


@needs_bwrap
def test_refuses_a_course_the_kernel_could_not_read(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("as root only: the kernel then runs as another uid")
    course = worker.copy_course(tmp_path)
    assert sandbox.missing(str(course)) is None
    (course / "grading" / "graders" / "common.py").chmod(0o600)
    assert "chmod -R o+rX" in sandbox.missing(str(course))


def test_unsandboxed_grading_warns_and_notes_it_for_each_learner(tmp_path, capsys):
    # (An unreadable notebook: no kernel starts, so this costs only nbgrader's start.)
    course = worker.copy_course(tmp_path)
    submissions = tmp_path / "subs"
    submissions.mkdir()
    (submissions / "ada.ipynb").write_text("not a notebook")
    assert grade.main([ASSIGNMENT, str(submissions), "--root", str(course), "--unsandboxed"]) == 0
    assert grade.UNSANDBOXED_WARNING in capsys.readouterr().err
    report = (course / "grading" / "reports" / ASSIGNMENT / "report.txt").read_text()
    assert worker.UNSANDBOXED_NOTE in report


@needs_bwrap
def test_a_notebook_stopped_at_its_time_limit_leaves_no_process_or_folder(tmp_path, monkeypatch):
    # grade.py kills nbgrader at the notebook limit; the sandbox dies with it (--die-with-parent).
    course = worker.copy_course(tmp_path)
    submissions = tmp_path / "subs"
    submissions.mkdir()
    # The solution with a first cell that sleeps past the limit (a loop would spin a core all along).
    sleeper = nbformat.read(next((ROOT / "solutions" / ASSIGNMENT).glob("*.ipynb")), as_version=4)
    sleeper.cells.insert(0, nbformat.v4.new_code_cell("import time\ntime.sleep(600)"))
    nbformat.write(sleeper, submissions / "sleeper.ipynb")
    # grade.py's scratch folders go to the system's temporary folder, as in real use: under pytest's
    # basetemp (make unit keeps it in _build/, inside the course) the sandbox mounts over them and the
    # kernel starts in a folder it cannot see (os.getcwd() fails).
    scratch = Path(tempfile.mkdtemp(prefix="shardbook-test-time-limit-"))
    system_tmp = Path(tempfile.gettempdir())
    before = set(system_tmp.glob("sbk-*"))
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))  # where grade.py's scratch folders go
    args = [ASSIGNMENT, str(submissions), "--root", str(course), "--notebook-timeout", "15"]
    assert grade.main([*args, "--cell-timeout", "100"]) == 0
    report = (course / "grading" / "reports" / ASSIGNMENT / "report.txt").read_text()
    assert "grading stopped after the 15 s limit" in report
    time.sleep(1)
    if os.geteuid() == 0:
        assert sandbox._user_tasks(int(sandbox.kernel_env(0)[sandbox.UID_ENV])) == 0
    left = list(scratch.rglob("sbk-*"))
    shutil.rmtree(scratch, ignore_errors=True)
    assert not left and set(system_tmp.glob("sbk-*")) == before


# ------------------------------------------------------------------------------------------------
# End to end: hostile notebooks in one batch with the reference solution and a wrong answer.
# ------------------------------------------------------------------------------------------------

HOSTILE = {  # two notebooks rather than one per attack: each graded notebook costs about 8 s
    "hostile_course_files": [*FILE_ATTACKS, "open_socket"],
    "hostile_fork_bomb": ["fork_bomb"],
}
# The hostile notebook also replaces its own notebook file by a link to a grader (nbgrader, outside
# the sandbox, writes the executed notebook there).
LINK_NOTEBOOK = (
    "import os as _os\n"
    "_os.remove(_os.path.basename(_os.getcwd()) + '.ipynb')\n"
    "_os.symlink(_os.path.join(_course_root(), 'grading', 'graders', 'common.py'), "
    "_os.path.basename(_os.getcwd()) + '.ipynb')\n"
)


def outputs(path: Path) -> str:
    """Every output text of a notebook."""
    texts = []
    for cell in nbformat.read(path, as_version=4).cells:
        for output in cell.get("outputs", []):
            texts.append(output.get("text", "") + output.get("evalue", ""))
            texts.append(json.dumps(output.get("data", {})))
    return "\n".join(texts)


def hostile_notebook(names: list[str], port: int) -> nbformat.NotebookNode:
    """The reference solution with an attack at the top of its first answer cell."""
    nb = nbformat.read(next((ROOT / "solutions" / ASSIGNMENT).glob("*.ipynb")), as_version=4)
    answer = next(c for c in nb.cells if is_answer(c))
    attack = attack_program(names, port)
    if "write_graders" in names:
        attack += LINK_NOTEBOOK
    answer.source = attack + "\n" + answer.source
    return nb


@needs_bwrap
def test_hostile_notebooks_change_nobody_elses_grade(tmp_path):
    course = worker.copy_course(tmp_path)
    earlier = course / "grading" / "submitted" / "earlier" / ASSIGNMENT
    earlier.mkdir(parents=True)
    (earlier / f"{ASSIGNMENT}.ipynb").write_text(SECRET)
    submissions = tmp_path / "downloads"
    submissions.mkdir()
    with socket.create_server(("127.0.0.1", 0)) as server:
        server.settimeout(0.1)
        port = server.getsockname()[1]
        for name, attacks in HOSTILE.items():
            nbformat.write(hostile_notebook(attacks, port), submissions / f"{name}.ipynb")
        solution = next((ROOT / "solutions" / ASSIGNMENT).glob("*.ipynb"))
        (submissions / "reference_solution.ipynb").write_bytes(solution.read_bytes())
        # Graded last, after every attack: with the graders made no-ops it would get full marks.
        wrong = submissions_corpus.load(ASSIGNMENT)["wrong_axis_order"]
        wrong_download = submissions_corpus.colab_bytes(wrong, ASSIGNMENT)
        (submissions / "zz_wrong_axis_order.ipynb").write_bytes(wrong_download)
        protected = digests(course / "grading" / "graders", course / "solutions", earlier)

        assert grade.main([ASSIGNMENT, str(submissions), "--root", str(course), "--jobs", "2"]) == 0
        with pytest.raises(TimeoutError):
            server.accept()  # no kernel connected

    assert digests(course / "grading" / "graders", course / "solutions", earlier) == protected
    gradebook = course / "grading" / "gradebook.db"
    assert b"ATTACK-BYTES" not in gradebook.read_bytes()
    with sqlite3.connect(gradebook) as db:
        assert db.execute("pragma integrity_check").fetchone() == ("ok",)
    assert not list((course / "grading").rglob("planted.txt"))
    reports = course / "grading" / "reports" / ASSIGNMENT
    with open(reports / "scores.csv") as f:
        rows = {row["learner"]: row for row in csv.DictReader(f)}
    assert "mallory" not in rows
    assert float(rows["reference_solution"]["total"]) == float(rows["reference_solution"]["max"]) == 14
    cells = dict(worker.graded_cells(ASSIGNMENT, course))
    lost = wrong.lost(list(cells))
    for gid, points in cells.items():
        assert float(rows["zz_wrong_axis_order"][gid]) == (0.0 if gid in lost else points), gid
    # Each attack ran and was stopped inside the sandbox (its output is in the graded notebook).
    for name, attacks in HOSTILE.items():
        graded = next((course / "grading" / "autograded" / name / ASSIGNMENT).glob("*.ipynb"))
        text = outputs(graded)
        assert "ATTACK-SUCCEEDED" not in text, name
        for attack in attacks:
            assert f"ATTACK-BLOCKED {attack}:" in text, (name, attack)
        assert SECRET not in text
        assert not graded.is_symlink()
    # An attack that fails leaves the learner's own answers graded as usual.
    assert float(rows["hostile_course_files"]["total"]) == 14
    assert "hostile_fork_bomb" in rows
    # No kernel process is left behind.
    for slot in range(2 if os.geteuid() == 0 else 0):
        assert sandbox._user_tasks(int(sandbox.kernel_env(slot)[sandbox.UID_ENV])) == 0
