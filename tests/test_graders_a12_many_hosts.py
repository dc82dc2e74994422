"""The graders of assignment 12_many_hosts: a worker that hangs costs only its own test, with a named
reason; an answer that cannot travel to the workers is told why. That the solution passes both graders,
and that each typical mistake (rows in process order, a killed worker, a restore onto the saved mesh or
with the saved specs lost) fails with its sentence and hint, is tests/test_submissions.py's: its
in-process grading runs the hidden tests on the reference solution and on each committed wrong answer
(tests/submissions/12_many_hosts), whose expected feedback holds what those graders must say.

Each check starts 2 JAX processes (a few seconds each). The learner's answers are written into a
module here, so that they have source files (as cells of a notebook do in a kernel).
"""

import importlib
import sys

import numpy as np
import pytest

from grading.graders import a12_many_hosts as graders
from shardbook.checks import CheckFailed

IMPORTS = """import jax
import numpy as np
"""

WRONG = {
    # A process that never returns.
    "hangs": """def global_batch(local_rows, mesh):
    import time
    while True:
        time.sleep(1)
""",
}


@pytest.fixture(scope="module")
def answers(tmp_path_factory):
    """A module per wrong answer, importable by the workers too."""
    folder = tmp_path_factory.mktemp("a12_answers")
    for name, source in WRONG.items():
        (folder / f"a12_wrong_{name}.py").write_text(IMPORTS + "\n\n" + source)
    sys.path.insert(0, str(folder))
    try:
        yield lambda name: importlib.import_module(f"a12_{name}")
    finally:
        sys.path.remove(str(folder))


def test_a_hanging_answer_is_stopped_at_the_timeout(answers, monkeypatch):
    # Property: the grader's own timeout (below the cell limit) ends the run and says so.
    monkeypatch.setattr(graders, "TIMEOUT", 12)
    stopped = "expected the 2 worker processes to finish within 12 s, got them still running"
    with pytest.raises(CheckFailed, match=stopped):
        graders.check_global_batch(answers("wrong_hangs").global_batch)


def test_an_answer_that_cannot_travel_is_told_why():
    table = np.zeros(3)

    def global_batch(local_rows, mesh):  # uses a local array: no source can carry it
        return table

    global_batch.__module__ = "__main__"
    with pytest.raises(
        CheckFailed, match=r"global_batch could not be sent to the worker processes: .*\(table\)"
    ):
        graders.check_global_batch(global_batch)


def test_row_origins_name_each_row():
    # The oracle's message reads which dataset row landed where; every dataset row is different.
    data = graders._dataset(6, 2)
    assert len({tuple(r) for r in data}) == 6
    assert (
        graders._row_origins(data[[3, 4, 5, 0, 1, 2]], data) == "rows holding dataset rows [3, 4, 5, 0, 1, 2]"
    )
    assert graders._row_origins(np.full((1, 2), -1.0), data) == "rows holding dataset rows [?]"
