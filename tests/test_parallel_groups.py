"""`make unit` runs pytest on 2 pytest-xdist workers with ``--dist loadgroup``: each test marked
``xdist_group(name)`` must run on the one worker of its group, so a session fixture the group shares
(the grading batch in tests/conftest.py, ~5 minutes on 2 cores) is built once and never by two
workers at once. pytest 9.2 with pytest-xdist 3.8.0 silently broke this (requirements.txt)."""

import os
import subprocess
import sys
import textwrap

CONFTEST = """
import os, pytest

@pytest.fixture(scope="session")
def shared(tmp_path_factory):
    with open(os.environ["SETUPS"], "a") as f:
        f.write(os.environ.get("PYTEST_XDIST_WORKER", "main") + "\\n")
"""

GROUPED = """
import os, time, pytest
pytestmark = pytest.mark.xdist_group("grading")

@pytest.mark.parametrize("i", range(4))
def test_grouped(shared, i):
    time.sleep(0.05)
    with open(os.environ["RAN"], "a") as f:
        f.write(os.environ["PYTEST_XDIST_WORKER"] + "\\n")
"""

FREE = """
import time, pytest

@pytest.mark.parametrize("i", range(20))
def test_free(i):
    time.sleep(0.05)
"""


def test_a_group_runs_on_one_worker_and_builds_its_session_fixture_once(tmp_path):
    (tmp_path / "conftest.py").write_text(textwrap.dedent(CONFTEST))
    for name in ("test_one.py", "test_two.py"):
        (tmp_path / name).write_text(textwrap.dedent(GROUPED))
    (tmp_path / "test_free.py").write_text(textwrap.dedent(FREE))
    env = {"SETUPS": str(tmp_path / "setups"), "RAN": str(tmp_path / "ran")}
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-n",
            "2",
            "--dist",
            "loadgroup",
            "-p",
            "no:cacheprovider",
            f"--basetemp={tmp_path / 'base'}",
            "--rootdir",
            str(tmp_path),
            str(tmp_path),
        ],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert run.returncode == 0, run.stdout[-2000:]
    workers = (tmp_path / "ran").read_text().split()
    assert len(workers) == 8 and len(set(workers)) == 1, f"the group ran on {sorted(set(workers))}"
    assert (tmp_path / "setups").read_text().split() == workers[:1], "the session fixture was built twice"
