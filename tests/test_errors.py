"""shardbook.errors: each mistake a learner meets is one sentence and one hint, in a notebook cell, in a
check's message, in every process of a job, and on the feedback page (the same words)."""

import sys

import jax
import jax.numpy as jnp
import nbformat
import numpy as np
import pytest
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from shardbook.checks import CheckFailed, call
from shardbook.errors import describe_error, describe_text, error_lines, first_line, is_peer_error
from shardbook.setup import COMPANIONS_PIP

# What JAX 0.12 and Gloo said in 2 processes × 4 CPU devices (shardbook.hosts), word for word: the
# messages a worker's exception carried, or a line a process printed before Gloo ended it.
DEVICE_PUT_OF_LOCAL_ROWS = (
    "<class 'numpy.ndarray'> passed to device_put is not the same on each process. Make sure you are "
    "passing the same value of <class 'numpy.ndarray'> on each process.. Expected: [[ 0.  1.  2.]\n"
    " [ 3.  4.  5.]\n [ 6.  7.  8.]]; got: [[12. 13. 14.]\n [15. 16. 17.]]."
)
NEVER_JOINED = (
    "UNKNOWN: Gloo context initialization failed: DEADLINE_EXCEEDED: GetKeyValue() timed out with key: "
    "cpu:gloo/0,2048/1 and duration: 29.99999998s "
    "[type.googleapis.com/tensorflow.CoordinationServiceError='']"
)
GLOO_CLOSED = (
    "UNKNOWN: Gloo AllGather failed: [external/xla++third_party_ext+gloo/gloo/transport/tcp/pair.cc:547] "
    "Connection closed by peer [127.0.0.1]:23951"
)
SHAPES_DIFFER = (
    "[enforce fail at external/xla++third_party_ext+gloo/gloo/transport/tcp/pair.cc:459] op.preamble.length "
    "<= op.nbytes. 24 vs 12. Received data size doesn't match expected size. Is there a distributed "
    "collective mismatch in your code?"
)


def test_first_line_never_cuts_inside_an_array_print():
    # property: JAX's message quoted in a check ends before an array print it would cut, and says so
    assert first_line(DEVICE_PUT_OF_LOCAL_ROWS).endswith("on each process.. Expected: …")
    assert first_line("a (b) [c] done") == "a (b) [c] done"
    assert first_line("x" * 400).endswith(" …") and len(first_line("x" * 400)) <= 302
    words, hint = describe_text("ValueError", "bad value [[1. 2.]\n [3. 4.]]")
    assert words == "ValueError: bad value …" and hint is None


def test_each_multi_process_mistake_gets_its_sentence_and_hint():
    # property: the messages of a job of several processes get one sentence and a hint that fits them
    words, hint = describe_text("AssertionError", DEVICE_PUT_OF_LOCAL_ROWS)
    assert "device_put got different data in each process" in words
    assert "make_array_from_process_local_data" in hint and "[[" not in words
    words, hint = describe_text("JaxRuntimeError", NEVER_JOINED)
    assert "started a collective that the other processes never joined" in words
    assert "jax.process_index() == 0" in hint
    words, hint = describe_text("JaxRuntimeError", GLOO_CLOSED)
    assert "another process left while this one waited for it in a collective" in words
    assert "every process must run the same collectives" in hint
    words, hint = describe_text("Gloo", SHAPES_DIFFER)
    assert "arrays of different shapes" in words and "same global shape" in hint
    # only what follows from another process's failure counts as a peer's error
    assert is_peer_error(NEVER_JOINED) and is_peer_error(GLOO_CLOSED)
    assert not is_peer_error(DEVICE_PUT_OF_LOCAL_ROWS) and not is_peer_error("KeyError: 'X'")


def test_any_other_failure_between_processes_says_every_process_must_run_the_same_collectives():
    # property (issue 41): a collective that only some processes ran can end in many Gloo or coordination
    # texts, depending on when the others left; none of them may leave the learner with "read the error
    # from its first line". A Gloo error about arrays of different shapes stays this process's own.
    for text in (
        "INTERNAL: Gloo all-reduce failed: [gloo/transport/tcp/pair.cc:534] Read error 127.0.0.1:41234: "
        "Connection refused",
        "UNAVAILABLE: Failed to send RPC to coordination service. Either the leader task was preempted",
    ):
        words, hint = describe_text("JaxRuntimeError", text)
        assert hint is not None and "every process must run the same collectives in the same order" in hint
        assert is_peer_error(text) and is_peer_error(words), text
    assert not is_peer_error(SHAPES_DIFFER)


def test_a_missing_optax_or_orbax_says_what_to_install(monkeypatch):
    # property: outside Colab, importing optax or orbax where only the helper is installed raises
    # Python's own ModuleNotFoundError, which becomes one sentence with the pip command to run
    for name in ("optax", "orbax"):
        for module in [m for m in sys.modules if m.split(".")[0] == name]:
            monkeypatch.delitem(sys.modules, module)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if "packages" not in p])
    for statement in ("import optax", "import orbax.checkpoint as ocp"):
        with pytest.raises(ModuleNotFoundError) as e:
            exec(statement, {})
        words, hint = describe_error(e.value)
        assert words.startswith("ModuleNotFoundError: No module named ") and "outside Colab" in words
        assert COMPANIONS_PIP in hint and "restart the kernel" in hint
    assert describe_error(ModuleNotFoundError("No module named 'nope'"))[1] is None
    monkeypatch.setenv("COLAB_RELEASE_TAG", "release-colab")  # on Colab the sentence says where it is
    words, hint = describe_text("ModuleNotFoundError", "No module named 'flax'")
    assert words.endswith("this Colab runtime does not have it") and COMPANIONS_PIP in hint


def test_a_none_result_gets_the_return_hint_not_the_checks_own():
    # property: the hint a self-check gives for another mistake gives way to the one for None
    from shardbook.checks import expect_sharding

    with pytest.raises(CheckFailed) as e:
        expect_sharding(None, P("X"), "f(x)", hint="lay the result out on the mesh given.")
    assert str(e.value) == (
        "f(x): expected a JAX array, got None (did the function forget to return?). Hint: a Python "
        "function that ends without a return statement returns None: return the result."
    )


def _shell(shell):
    """The test's IPython shell (the fixture ipython_shell) as the book sets one up."""
    from shardbook.checks import explain_common_errors

    explain_common_errors(shell)
    shell.user_ns.update(jax=jax, jnp=jnp, np=np, P=P, NamedSharding=NamedSharding, call=call)
    return shell


def _run(shell, capsys, source):
    result = shell.run_cell(source, store_history=True)
    return result, capsys.readouterr().out


def test_a_failing_self_check_shows_its_message_and_the_learners_lines_named_by_cell(capsys, ipython_shell):
    # Property: a failed check in a notebook is its one-line message and the notebook lines that led to
    # it, each named by its cell (the self-check's line, then the learner's), and nothing of the
    # helper's own files: at most a few lines, where IPython printed 18 to 34.
    shell = _shell(ipython_shell)
    _run(shell, capsys, "def double(x):\n    y = x.reshape(5)\n    return y * 2\n")
    result, shown = _run(shell, capsys, "got = call(double, np.ones(6), what='double(x)')\nprint(got)\n")
    lines = shown.strip().splitlines()
    assert not result.success and result.error_in_exec is not None  # the cell still fails
    assert len(lines) <= 4, shown
    assert lines[0].startswith("CheckFailed: double(x): expected a result, got ValueError: cannot reshape")
    assert lines[1].startswith("  Cell In[2], line 1: got = call(double, np.ones(6)")
    assert lines[2] == "  Cell In[1], line 2, in double: y = x.reshape(5)"
    assert "checks.py" not in shown and "_fail" not in shown and "Traceback" not in shown


def test_an_error_through_three_cells_names_each_cell(capsys, ipython_shell):
    # Property: a JAX error raised in a helper of the imports cell, called by the answer, called by the
    # self-check, lists one line per cell, each named by its own cell (11.2's case).
    shell = _shell(ipython_shell)
    _run(
        shell,
        capsys,
        "mesh = jax.make_mesh((4, 2), ('X', 'Y'))\ndef layer(h, w):\n    return h @ w\n",
    )
    _run(shell, capsys, "def step(h, w):\n    return layer(h, w)\n")
    result, shown = _run(
        shell,
        capsys,
        "w = jax.device_put(np.ones((4, 2), np.float32), NamedSharding(mesh, P('Y', None)))\n"
        "h = jax.device_put(np.ones((8, 4), np.float32), NamedSharding(mesh, P('X', 'Y')))\n"
        "jax.jit(step)(h, w)\n",
    )
    lines = shown.strip().splitlines()
    assert not result.success
    assert lines[0].startswith("ShardingTypeError: on a mesh with Explicit axes") and lines[1].startswith(
        "Hint:"
    )
    assert lines[2:] == [
        "  Cell In[3], line 3: jax.jit(step)(h, w)",
        "  Cell In[2], line 2, in step: return layer(h, w)",
        "  Cell In[1], line 3, in layer: return h @ w",
    ]


def test_the_feedback_page_shows_the_sentence_and_hint_the_notebook_showed(capsys, ipython_shell):
    # Property: what HideHiddenTests leaves of a test cell's error is what the learner saw in the cell
    # on Colab without its cell lines: a known JAX mistake's sentence and hint (not JAX's raw
    # ShardingTypeError), a failed check's message; an unknown error stays ``Name: message``.
    from grading.preprocessors import HideHiddenTests

    shell = _shell(ipython_shell)
    _run(shell, capsys, "mesh = jax.make_mesh((4, 2), ('X', 'Y'))\n")
    result, shown = _run(
        shell,
        capsys,
        "w = jax.device_put(np.ones((4, 2), np.float32), NamedSharding(mesh, P('Y', None)))\n"
        "h = jax.device_put(np.ones((8, 4), np.float32), NamedSharding(mesh, P('X', 'Y')))\n"
        "jax.jit(lambda a, b: a @ b)(h, w)\n",
    )
    error = result.error_in_exec
    assert type(error).__name__ == "ShardingTypeError"
    cell = nbformat.v4.new_code_cell("self-check")
    cell.metadata["nbgrader"] = {"grade": True, "grade_id": "test_step_visible", "points": 1}
    cell.outputs = [
        nbformat.v4.new_output(
            "error", ename=type(error).__name__, evalue=str(error), traceback=["\x1b[0;31mraw traceback"]
        )
    ]
    cell, _ = HideHiddenTests().preprocess_cell(cell, {}, 0)
    on_page = cell.outputs[0]["traceback"]
    assert on_page == shown.strip().splitlines()[:2] and on_page[1].startswith("Hint: ")
    assert error_lines("CheckFailed", "f: expected 1, got 2. Hint: h") == [
        "CheckFailed: f: expected 1, got 2. Hint: h"
    ]
    assert error_lines("KeyError", "'Z'") is None
