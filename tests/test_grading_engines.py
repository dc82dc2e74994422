"""The grading engines: a batch graded on a 2-node Ray cluster matches the local engine byte for byte,
and a regrade after a grader changed names who gained or lost points on which test.

The Ray batch is a representative slice of assignment 1's batch in tests/test_grading.py (the solution,
a wrong answer, a kernel that dies, a cell past its time limit, a tampering notebook and an unreadable
file), the very same files under the same course file and submission times (a late wrong answer): its
results are compared with that batch's, graded by the local engine, so only the Ray side is graded here
(6 notebooks, and a regrade of 5; a minute of it is starting and stopping the cluster).
"""

import csv
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from grading import grade, handin, reports, worker
from grading.local_ray import TEST_CLUSTER_ENV, local_cluster, raylet_abort, read_state
from tests.conftest import CELL_TIMEOUT, GRADED_ASSIGNMENT, REFERENCE, write_course_file, write_downloads
from tests.notebooks import ROOT

# Runs `make grade`: never at the same time as another module that does (see CONTRIBUTING.md).
pytestmark = pytest.mark.xdist_group("grading")

ASSIGNMENT = GRADED_ASSIGNMENT
# broken_infinite_loop (its hidden test of devices_holding never returns): a Ray worker blocks SIGINT, so
# without grade.py's reset the kernel was never interrupted at the cell limit and the whole notebook
# scored 0 on Ray, against the points of every other cell locally.
BATCH = [
    "wrong_axis_order",
    "broken_kills_kernel",
    "broken_infinite_loop",
    "tamper_patch_grader",
    "broken_not_a_notebook",
]


@pytest.fixture(scope="module", autouse=True)
def own_excepthook():
    """Importing Ray (grading.local_ray does, to start or probe a cluster) replaces sys.excepthook
    (ray._private.worker): after this module the worker's later tests get the interpreter's own back
    (tests/test_protocol.py holds that only IPython's and the book's hooks are registered)."""
    hook = sys.excepthook
    yield
    sys.excepthook = hook


@pytest.fixture(scope="module")
def ray_cluster(tmp_path_factory):
    """A head node and one worker node on this machine, one CPU each.

    Under ``make test`` the cluster was started before the checks began, on a quiet machine
    (``$SHARDBOOK_TEST_RAY``, see grading/local_ray.py): a raylet gives its agents a fixed 15 s to start,
    which a loaded machine exceeds. Run alone, the tests start one of their own and stop it afterwards.
    A cluster that does not start fails the tests: the engine is never left unchecked.
    """
    state = os.environ.get(TEST_CLUSTER_ENV)
    if state:
        yield read_state(Path(state))
        return
    with local_cluster(tmp_path_factory.mktemp("ray-logs"), nodes=2) as cluster:
        yield cluster


def _grade(course: Path, batch: Path | None, *extra: str) -> int:
    args = [ASSIGNMENT, *([str(batch)] if batch else []), "--root", str(course)]
    return grade.main([*args, "--cell-timeout", str(CELL_TIMEOUT), "--jobs", "2", *extra])


@pytest.fixture(scope="module")
def ray_course(tmp_path_factory, ray_cluster):
    # As an instructor runs it: its own process, RAY_ADDRESS naming the cluster (Ray reads its
    # authentication settings when imported, so this test process could not connect as a driver).
    address, env = ray_cluster
    tmp = tmp_path_factory.mktemp("ray")
    course = worker.copy_course(tmp)
    downloads = write_downloads(tmp, BATCH)
    times = write_course_file(course, tmp)  # the local batch's course file and times
    args = [ASSIGNMENT, str(downloads), "--root", str(course), "--cell-timeout", str(CELL_TIMEOUT)]
    done = subprocess.run(
        [sys.executable, "-m", "grading.grade", *args, "--times", str(times), "--engine", "ray"],
        env=dict(env, RAY_ADDRESS=address, PYTHONPATH=str(ROOT)),
        capture_output=True,
        text=True,
        timeout=900,
    )
    print(done.stdout, done.stderr[-3000:])
    assert done.returncode == 0
    assert "Ray: 2 node(s), 2 notebook(s) at a time" in done.stdout  # one notebook on each node at once
    assert re.search(r"\[6/6, [0-9.]+ notebooks/min, done\]", done.stdout)
    return course


def _reports(course: Path) -> Path:
    return course / "grading" / "reports" / ASSIGNMENT


def _rows(text: str) -> dict[str, dict]:
    return {row["learner"]: row for row in csv.DictReader(text.splitlines())}


def _notes(folder: Path) -> dict[str, str]:
    """Each learner's lines of report.txt, without the seconds each notebook took."""
    text = re.sub(r" in [0-9.]+ s$", "", (folder / "report.txt").read_text(), flags=re.M)
    blocks: dict[str, str] = {}
    learner = None
    for line in text.splitlines():
        if re.match(r"^[A-Za-z0-9_.-]+: ", line):
            learner = line.split(":", 1)[0]
            blocks[learner] = line
        elif line.startswith("  ") and learner:
            blocks[learner] += "\n" + line
        else:
            learner = None
    return blocks


def test_ray_cluster_gives_the_local_engines_scores_and_feedback(graded_batch, ray_course):
    local, remote = graded_batch.reports, _reports(ray_course)
    rows = _rows((remote / "scores.csv").read_text())
    assert set(rows) == {"reference_solution", *BATCH}
    local_rows = _rows((local / "scores.csv").read_text())
    for learner, row in rows.items():
        assert row == local_rows[learner], learner
    assert rows["reference_solution"]["total"] == rows["reference_solution"]["max"]
    assert rows["wrong_axis_order"]["test_sharding_for_layout_hidden"] == "0"
    assert rows["broken_kills_kernel"]["test_shard_sums_hidden"] == "0"
    pages = sorted(p.name for p in (remote / "feedback").glob("*.html"))
    assert pages == sorted(f"{n}.html" for n in rows if n != "broken_not_a_notebook")
    for page in pages:
        assert (remote / "feedback" / page).read_bytes() == (local / "feedback" / page).read_bytes(), page
    remote_notes, local_notes = _notes(remote), _notes(local)
    assert set(remote_notes) == set(rows)
    for learner, block in remote_notes.items():
        assert block == local_notes[learner], learner
    assert "stopped the Python kernel" in remote_notes["broken_kills_kernel"]
    # What the class report is computed from (grading/classreport.py): each learner's kept JSON, the same
    # from either engine but for the seconds taken (in all and per phase) and the files' times.
    for learner in rows:
        kept = [json.loads((f / "learners" / f"{learner}.json").read_text()) for f in (remote, local)]
        for k in kept:
            for varying in ("seconds", "phases", "submitted"):
                k.pop(varying)
        assert kept[0] == kept[1], learner


def test_every_learner_is_in_the_one_gradebook_with_the_csv_scores(graded_batch, ray_course):
    from nbgrader.api import Gradebook

    # Per learner and test cell (an unreadable notebook too: 0 for each test), in both engines.
    cells = [gid for gid, _ in worker.graded_cells(ASSIGNMENT, ROOT)]
    for course in (graded_batch.course, ray_course):
        with open(_reports(course) / "scores.csv") as f:
            csv_scores = {
                row["learner"]: {gid: float(row[gid]) for gid in cells} for row in csv.DictReader(f)
            }
        with Gradebook(f"sqlite:///{course / 'grading' / 'gradebook.db'}") as gb:
            stored = {
                s.student.id: {g.name: g.score for nb in s.notebooks for g in nb.grades if g.name in cells}
                for s in gb.assignment_submissions(ASSIGNMENT)
            }
        assert stored == csv_scores, course


def test_original_downloads_are_kept_for_regrading(graded_batch):
    kept = graded_batch.reports / "submissions"
    originals = sorted(graded_batch.downloads.iterdir())
    assert len(originals) == len(graded_batch.rows)
    for original in originals:  # kept under the learner's id
        stored = kept / f"{handin.learner_id(original.name)}.ipynb"
        assert stored.read_bytes() == original.read_bytes(), original


def test_regrade_after_a_grader_change_names_who_lost_points_on_which_test(ray_course, tmp_path, capsys):
    # The Ray batch's course, regraded by the local engine, but for the spinning loop: its stored copy
    # is taken away, so the regrade leaves its row as it was (the class files cover every learner
    # graded so far) and does not spin through another 30 s cell limit.
    course = tmp_path / "course"
    shutil.copytree(ray_course, course)
    (_reports(course) / "submissions" / "broken_infinite_loop.ipynb").unlink()
    before = (_reports(course) / "scores.csv").read_text()
    # An instructor's change: the hidden test of shard_sums now fails every answer; the learners who
    # passed it lose its 3 points, the two who had 0 there (a dying kernel, an unreadable file) do not.
    graders = course / "grading" / "graders" / "a01_meshes.py"
    text = graders.read_text()
    anchor = (
        '    """Compares ``fn(x)`` with the oracle on arrays of several shardings, dtypes and meshes."""\n'
    )
    assert anchor in text
    graders.write_text(text.replace(anchor, anchor + '    raise AssertionError("changed grader")\n'))
    capsys.readouterr()
    assert _grade(course, None, "--regrade") == 0
    out = capsys.readouterr().out
    header = f"regrade of {ASSIGNMENT}: 3 of 5 learner(s) changed\n"
    assert header in out
    after_header = out.split(header, 1)[1].splitlines()
    changed = [
        line.strip() for line in after_header[: len(after_header) - 4]
    ]  # then scores:, feedback:, notes:, class report:
    assert changed == [
        "reference_solution: lost 3, 14 -> 11 (test_shard_sums_hidden 3 -> 0)",
        "tamper_patch_grader: lost 3, 11 -> 8 (test_shard_sums_hidden 3 -> 0)",
        "wrong_axis_order: lost 3, 10 -> 7 (test_shard_sums_hidden 3 -> 0)",
    ]
    after = (_reports(course) / "scores.csv").read_text()
    old, new = _rows(before), _rows(after)
    assert set(new) == set(old)
    lost = {"reference_solution", "tamper_patch_grader", "wrong_axis_order"}
    for learner in old:
        if learner in lost:
            assert new[learner]["test_shard_sums_hidden"] == "0"
            assert float(new[learner]["total"]) == float(old[learner]["total"]) - 3
        else:
            assert new[learner] == old[learner], learner
    # The report keeps the name each file was handed in under, not the stored copy's.
    assert f"reference_solution: 11/14 from {REFERENCE}" in (_reports(course) / "report.txt").read_text()


def test_score_changes_and_progress_in_words():
    cells = [("test_f_visible", 1.0), ("test_f_hidden", 2.0)]
    before = {
        "ada": {"total": 1.0, "max": 3.0, "test_f_visible": 1.0, "test_f_hidden": 0.0},
        "bob": {"total": 3.0, "max": 3.0, "test_f_visible": 1.0, "test_f_hidden": 2.0},
    }
    outcomes = [
        worker.Outcome("bob", Path("bob.ipynb"), scores={"test_f_visible": 1.0, "test_f_hidden": 2.0}),
        worker.Outcome("ada", Path("ada.ipynb"), scores={"test_f_visible": 1.0, "test_f_hidden": 2.0}),
        worker.Outcome("cy", Path("cy.ipynb"), scores={"test_f_visible": 1.0}),
    ]
    assert reports.score_changes(before, outcomes, cells) == [
        "ada: gained 2, 1 -> 3 (test_f_hidden 0 -> 2)",
        "cy: new, 1 points",
    ]
    assert grade.progress(3, 10, 60.0) == "[3/10, 3.0 notebooks/min, about 2 min 20 s left]"
    assert grade.progress(10, 10, 75.0) == "[10/10, 8.0 notebooks/min, done]"


def test_a_cluster_that_does_not_start_says_why_the_raylet_aborted(tmp_path):
    # A line as Ray 2.60 logged it in CI, when a loaded machine kept an agent from starting in time.
    logs = tmp_path / "session_2026-12-02_00-11-24_066845_25624" / "logs"
    logs.mkdir(parents=True)
    (tmp_path / "session_latest").symlink_to(logs.parent)
    assert raylet_abort(tmp_path) == ""
    (logs / "raylet.out").write_text("Check failed: not an error file\n")
    (logs / "raylet.err").write_text(
        "[2026-12-02 00:11:57,541 C 25925 25925] (raylet) node_manager.cc:3576:  An unexpected system state "
        "has occurred. Check failed: statussetor3576.has_value() Timed out waiting for file /tmp/ray/x/port\n"
        "*** StackTrace Information ***\n"
    )
    why = raylet_abort(tmp_path)
    assert why == (
        f"; {tmp_path / 'session_latest' / 'logs' / 'raylet.err'}: Check failed: statussetor3576.has_value() "
        "Timed out waiting for file /tmp/ray/x/port"
    )
