"""The grading engines: a batch graded on a 2-node Ray cluster matches the local engine byte for byte,
and a regrade after a grader changed names who gained or lost points on which test.

The batch is a representative slice of assignment 1's committed corpus (the solution, a wrong answer,
a kernel that dies, a cell past its time limit, a tampering notebook and an unreadable file): about 6
notebooks' worth of grading
per engine and one regrade, about 3.5 minutes on 2 busy cores (a minute of it starting and stopping
the cluster).
"""

import csv
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from grading import grade
from grading.local_ray import local_cluster
from tests.notebooks import ROOT

ASSIGNMENT = "01_meshes"
# broken_infinite_loop: a Ray worker blocks SIGINT, so without grade.py's reset the kernel was never
# interrupted at the cell limit and the whole notebook scored 0 on Ray (11 locally).
BATCH = [
    "wrong_axis_order",
    "broken_kills_kernel",
    "broken_infinite_loop",
    "tamper_patch_grader",
    "broken_not_a_notebook",
]
CELL_TIMEOUT = 30


@pytest.fixture(scope="module")
def ray_cluster(tmp_path_factory):
    """A head node and one worker node on this machine, one CPU each; both stopped afterwards."""
    with local_cluster(tmp_path_factory.mktemp("ray-logs"), nodes=2, cpus_per_node=1) as cluster:
        yield cluster


def _batch(into: Path) -> Path:
    batch = into / "downloads"
    batch.mkdir()
    solution = next((ROOT / "solutions" / ASSIGNMENT).glob("*.ipynb"))
    shutil.copy(solution, batch / "reference solution.ipynb")  # learner id: reference_solution
    for name in BATCH:
        shutil.copy(ROOT / "tests" / "submissions" / ASSIGNMENT / f"{name}.ipynb", batch)
    return batch


def _grade(course: Path, batch: Path | None, *extra: str) -> int:
    args = [ASSIGNMENT, *([str(batch)] if batch else []), "--root", str(course)]
    return grade.main([*args, "--cell-timeout", str(CELL_TIMEOUT), "--jobs", "2", *extra])


@pytest.fixture(scope="module")
def local_course(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("local")
    course = grade.copy_course(tmp)
    assert _grade(course, _batch(tmp)) == 0
    return course


@pytest.fixture(scope="module")
def ray_course(tmp_path_factory, ray_cluster):
    # As an instructor runs it: its own process, RAY_ADDRESS naming the cluster (Ray reads its
    # authentication settings when imported, so this test process could not connect as a driver).
    address, env = ray_cluster
    tmp = tmp_path_factory.mktemp("ray")
    course = grade.copy_course(tmp)
    args = [ASSIGNMENT, str(_batch(tmp)), "--root", str(course), "--cell-timeout", str(CELL_TIMEOUT)]
    done = subprocess.run(
        [sys.executable, "-m", "grading.grade", *args, "--engine", "ray"],
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


def test_ray_cluster_gives_the_local_engines_scores_and_feedback(local_course, ray_course, capsys):
    local, remote = _reports(local_course), _reports(ray_course)
    assert (remote / "scores.csv").read_bytes() == (local / "scores.csv").read_bytes()
    with open(local / "scores.csv") as f:
        rows = {row["learner"]: row for row in csv.DictReader(f)}
    assert set(rows) == {"reference_solution", *BATCH}
    assert rows["reference_solution"]["total"] == rows["reference_solution"]["max"]
    assert rows["wrong_axis_order"]["test_sharding_for_layout_hidden"] == "0"
    assert rows["broken_kills_kernel"]["test_shard_sums_hidden"] == "0"
    pages = sorted(p.name for p in (local / "feedback").glob("*.html"))
    assert pages == sorted(f"{n}.html" for n in rows if n != "broken_not_a_notebook")
    for page in pages:
        assert (remote / "feedback" / page).read_bytes() == (local / "feedback" / page).read_bytes(), page

    def notes(folder: Path) -> str:  # report.txt without the seconds each notebook took
        return re.sub(r" in [0-9.]+ s$", "", (folder / "report.txt").read_text(), flags=re.M)

    assert notes(remote) == notes(local)
    assert "stopped the Python kernel" in notes(local)


def test_every_learner_is_in_the_one_gradebook_with_the_csv_scores(local_course, ray_course):
    from nbgrader.api import Gradebook

    # Per learner and test cell (an unreadable notebook too: 0 for each test), in both engines.
    cells = [gid for gid, _ in grade.graded_cells(ASSIGNMENT, ROOT)]
    for course in (local_course, ray_course):
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


def test_original_downloads_are_kept_for_regrading(local_course):
    kept = _reports(local_course) / "submissions"
    for name in BATCH:
        original = ROOT / "tests" / "submissions" / ASSIGNMENT / f"{name}.ipynb"
        assert (kept / f"{name}.ipynb").read_bytes() == original.read_bytes()


def test_regrade_after_a_grader_change_names_who_lost_points_on_which_test(local_course, tmp_path, capsys):
    course = tmp_path / "course"
    shutil.copytree(local_course, course)
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
    header = f"regrade of {ASSIGNMENT}: 4 of 6 learner(s) changed\n"
    assert header in out
    after_header = out.split(header, 1)[1].splitlines()
    changed = [
        line.strip() for line in after_header[: len(after_header) - 3]
    ]  # then scores:, feedback:, notes:
    assert changed == [
        "broken_infinite_loop: lost 3, 11 -> 8 (test_shard_sums_hidden 3 -> 0)",
        "reference_solution: lost 3, 14 -> 11 (test_shard_sums_hidden 3 -> 0)",
        "tamper_patch_grader: lost 3, 11 -> 8 (test_shard_sums_hidden 3 -> 0)",
        "wrong_axis_order: lost 3, 10 -> 7 (test_shard_sums_hidden 3 -> 0)",
    ]
    after = (_reports(course) / "scores.csv").read_text()
    old, new = _rows(before), _rows(after)
    assert set(new) == set(old)
    lost = {"broken_infinite_loop", "reference_solution", "tamper_patch_grader", "wrong_axis_order"}
    for learner in old:
        if learner in lost:
            assert new[learner]["test_shard_sums_hidden"] == "0"
            assert float(new[learner]["total"]) == float(old[learner]["total"]) - 3
        else:
            assert new[learner] == old[learner], learner
    # The report keeps the name each file was handed in under, not the stored copy's.
    assert (
        "reference_solution: 11/14 from reference solution.ipynb"
        in (_reports(course) / "report.txt").read_text()
    )


def _rows(text: str) -> dict[str, dict]:
    return {row["learner"]: row for row in csv.DictReader(text.splitlines())}


def test_score_changes_and_progress_in_words():
    cells = [("test_f_visible", 1.0), ("test_f_hidden", 2.0)]
    before = {
        "ada": {"total": 1.0, "max": 3.0, "test_f_visible": 1.0, "test_f_hidden": 0.0},
        "bob": {"total": 3.0, "max": 3.0, "test_f_visible": 1.0, "test_f_hidden": 2.0},
    }
    outcomes = [
        grade.Outcome("bob", Path("bob.ipynb"), scores={"test_f_visible": 1.0, "test_f_hidden": 2.0}),
        grade.Outcome("ada", Path("ada.ipynb"), scores={"test_f_visible": 1.0, "test_f_hidden": 2.0}),
        grade.Outcome("cy", Path("cy.ipynb"), scores={"test_f_visible": 1.0}),
    ]
    assert grade.score_changes(before, outcomes, cells) == [
        "ada: gained 2, 1 -> 3 (test_f_hidden 0 -> 2)",
        "cy: new, 1 points",
    ]
    assert grade.progress(3, 10, 60.0) == "[3/10, 3.0 notebooks/min, about 2 min 20 s left]"
    assert grade.progress(10, 10, 75.0) == "[10/10, 8.0 notebooks/min, done]"
