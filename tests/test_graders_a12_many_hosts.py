"""The graders of assignment 12_many_hosts: each typical mistake fails with its hint, and a worker that
dies or hangs costs only its own test, with a named reason. That the solution passes both graders is
tests/test_submissions.py's (its in-process grading runs the hidden tests on the reference solution).

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
import orbax.checkpoint as ocp
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P
"""

WRONG = {
    # Rows concatenated in process order, whatever the mesh's order: the mistake exercise 12.1 is about.
    "process_order": """def global_batch(local_rows, mesh):
    return jax.make_array_from_process_local_data(NamedSharding(mesh, P("X", None)), local_rows)
""",
    # A process that dies in the middle of the check.
    "kills_worker": """def global_batch(local_rows, mesh):
    import os, signal
    if jax.process_index() == 1:
        os.kill(os.getpid(), signal.SIGKILL)
    return jax.make_array_from_process_local_data(NamedSharding(mesh, P("X", None)), local_rows)
""",
    # A process that never returns.
    "hangs": """def global_batch(local_rows, mesh):
    import time
    while True:
        time.sleep(1)
""",
    # Restored onto the mesh it was saved from.
    "saved_mesh": """def restore_on(mesh, path):
    return ocp.StandardCheckpointer().restore(path)
""",
    # Every array replicated on the new mesh: the saved specs are lost.
    "replicated": """def restore_on(mesh, path):
    checkpointer = ocp.StandardCheckpointer()
    tree = checkpointer.metadata(path).item_metadata.tree
    replicated = NamedSharding(mesh, P())
    like = {k: jax.ShapeDtypeStruct(m.shape, m.dtype, sharding=replicated) for k, m in tree.items()}
    return checkpointer.restore(path, like)
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


def test_rows_in_process_order_fail_with_the_order_hint(answers):
    with pytest.raises(CheckFailed) as info:
        graders.check_global_batch(answers("wrong_process_order").global_batch)
    message = str(info.value)
    assert (
        "expected the dataset's rows in order 0…7, got rows holding dataset rows [4, 5, 6, 7, 0, 1, 2, 3]"
        in message
    )
    assert "device ids [2051, 2050, 2049, 2048, 3, 2, 1, 0]" in message  # the reversed mesh
    assert "Hint: the rows must come out in dataset order" in message
    assert "(in process 0 of 2)" in message


def test_a_killed_worker_is_a_named_reason(answers):
    died = r"global_batch in 2 processes: expected all 2 worker processes to finish, got: worker process 1 "
    with pytest.raises(CheckFailed, match=died + r"of 2 died \(killed by SIGKILL\)"):
        graders.check_global_batch(answers("wrong_kills_worker").global_batch)


def test_a_hanging_answer_is_stopped_at_the_timeout(answers, monkeypatch):
    # Property: the grader's own timeout (below the cell limit) ends the run and says so.
    monkeypatch.setattr(graders, "TIMEOUT", 12)
    stopped = "expected the 2 worker processes to finish within 12 s, got them still running"
    with pytest.raises(CheckFailed, match=stopped):
        graders.check_global_batch(answers("wrong_hangs").global_batch)


def test_restoring_onto_the_saved_mesh_fails_naming_both_meshes(answers):
    with pytest.raises(CheckFailed) as info:
        graders.check_restore_on(answers("wrong_saved_mesh").restore_on)
    message = str(info.value)
    assert "expected 'w' as float32[8,16] sharded P('X', 'Y') on the mesh given" in message
    assert "on Mesh({'X': 2, 'Y': 4}" in message and "a restore without a target" in message


def test_losing_the_saved_specs_fails(answers):
    with pytest.raises(CheckFailed, match="expected 'w' as float32\\[8,16\\] sharded P\\('X', 'Y'\\)"):
        graders.check_restore_on(answers("wrong_replicated").restore_on)


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
