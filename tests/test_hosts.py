"""Tests for shardbook.hosts: workers see each other, every process ends, a death is named, no hang."""

import math
import os
import random
import re
import socket
import tempfile
import types

import pytest

from shardbook import hosts, workers
from shardbook.checks import CheckFailed
from shardbook.viz import processes
from tests import host_functions as sent


@pytest.fixture(autouse=True)
def _own_scratch(tmp_path, monkeypatch):
    """Each test's launcher folders (and a kernel's) in its own tmp_path, so that the processes it
    looks for are its own: the other pytest worker may be running workers of its own meanwhile."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.setenv("TMPDIR", str(tmp_path))


def _workers_alive(folder: str | None = None) -> list[int]:
    """Pids of processes this test's launcher started (their command line holds its folder, made in
    ``folder``, the system's temporary folder by default)."""
    mark = os.path.join(folder or tempfile.gettempdir(), "shardbook-hosts-").encode()
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if mark in f.read():
                    found.append(int(pid))
        except OSError:
            continue
    return found


def _port_is_free(address: str) -> bool:
    """Nothing listens on the port (connections of the finished run may linger in TIME_WAIT)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", int(address.rsplit(":", 1)[1])))
            s.listen()
        except OSError:
            return False
    return True


# ------------------------------------------------------------------------------------------------
# Runs. The functions sent to the workers are tests/host_functions.py's (``sent``): the workers import
# them by name, and that module imports nothing they do not need. Each run starts 2 JAX processes.
# ------------------------------------------------------------------------------------------------


def test_run_workers_joins_processes_with_their_own_device_counts():
    # Property: each process has its own devices, all see the global ones, a collective spans both,
    # values and output come back per process, and nothing is left running or listening.
    results = hosts.run_workers(sent.global_sum, devices_per_process=[2, 4], timeout=120)
    assert [r.value for r in results] == [(0, 2, 2, 6, 2 * 1 + 4 * 2), (1, 2, 4, 6, 2 * 1 + 4 * 2)]
    assert "process 0 sees 2 of 6 devices" in results[0].output
    assert "process 1 sees 4 of 6 devices" in results[1].output
    assert "[Gloo]" not in results[0].output
    assert all(r.ok for r in results)
    assert _workers_alive() == []
    assert _port_is_free(results[0].coordinator)


def test_dead_worker_is_named_and_the_others_are_stopped_without_a_hang():
    # Property: a worker that dies mid-run is named with its exit code; the survivor (blocked in a
    # collective with it) is killed after ``after_death`` seconds, long before the timeout (the message
    # says why each process stopped: had the timeout come first, it would say "the 120 s timeout").
    with pytest.raises(hosts.WorkersFailed) as info:
        hosts.run_workers(sent.one_dies_in_a_collective, timeout=120, after_death=1)
    message = str(info.value)
    assert "worker process 1 of 2 died (exit code 7)" in message
    assert "step 1" in message  # its last lines
    assert "process 0 was stopped by the launcher (process 1 died)" in message
    assert info.value.dead is not None and info.value.dead.process_id == 1
    assert _workers_alive() == []


def test_gloo_is_pinned_to_the_loopback_wherever_this_jax_keeps_its_factory_and_left_alone_elsewhere():
    # The boot code patches a private JAX name: found in either home JAX has had, and skipped, not
    # crashed, when neither has it (Gloo then keeps the host name's address).
    def factory(**kw):
        return kw

    new = types.SimpleNamespace(_jax=types.SimpleNamespace(make_gloo_tcp_collectives=factory))
    old = types.SimpleNamespace(
        xla_client=types.SimpleNamespace(_xla=types.SimpleNamespace(make_gloo_tcp_collectives=factory))
    )
    for bridge, home in ((new, new._jax), (old, old.xla_client._xla)):
        exec(workers._GLOO_LOOPBACK, {"xla_bridge": bridge})
        assert home.make_gloo_tcp_collectives(distributed_client="c") == {
            "hostname": "127.0.0.1",
            "distributed_client": "c",
        }
    neither = types.SimpleNamespace(_jax=types.SimpleNamespace())
    exec(workers._GLOO_LOOPBACK, {"xla_bridge": neither})
    assert vars(neither._jax) == {}
    assert all(workers._GLOO_LOOPBACK in workers._program(fork) for fork in (True, False))


def test_timeout_kills_every_worker():
    # Property: a run past its timeout is stopped, every process killed, and the message says so.
    with pytest.raises(hosts.WorkersFailed, match="did not finish within the 8 s timeout"):
        hosts.run_workers(sent.sleep_forever, timeout=8)
    assert _workers_alive() == []


def test_gloo_lines_are_dropped_however_their_pieces_interleave():
    # Property: the program's own lines come back exactly, whatever order the device threads wrote the
    # pieces of Gloo's start-up lines in (CI once showed "[Gloo] Rank [Gloo] Rank 1 is connected ...").
    rng = random.Random(0)
    for trial in range(200):
        devices = rng.randint(1, 4)
        messages = [
            [
                hosts.GLOO_PIECES[0],
                str(d),
                hosts.GLOO_PIECES[1],
                "7",
                hosts.GLOO_PIECES[2],
                hosts.GLOO_PIECES[3],
                "7",
                "\n",
            ]
            for d in range(devices)
        ]
        pieces = []
        while any(messages):
            pieces.append(rng.choice([m for m in messages if m]).pop(0))
        before, after = "compiling\n", rng.choice(["42\n", "step 1\n", "", "\n7\n"])
        assert hosts.drop_gloo_lines(before + "".join(pieces) + after) == before + after, trial


def _slow_to_start(tmp_path, monkeypatch, seconds: float) -> None:
    """Every worker Python started from now on sleeps ``seconds`` before its first line (a loaded machine)."""
    # Each Python that slept notes it (one line per process): proof of the slow start without a clock.
    slept = tmp_path / "slept.txt"
    (tmp_path / "sitecustomize.py").write_text(
        f"import os, time\ntime.sleep({seconds})\n"
        f"with open({str(slept)!r}, 'a') as f:\n    f.write(str(os.getpid()) + '\\n')\n"
    )
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))


def test_the_timeout_counts_from_when_every_process_joined(tmp_path, monkeypatch):
    # Property: a slow start (importing JAX on a busy machine) does not eat the function's time; the
    # CI failure this guards against: a 90 s self-check timed out before a trivial function ran.
    _slow_to_start(tmp_path, monkeypatch, 6)
    results = hosts.run_workers(sent.quick, timeout=4)
    # the slow start did happen: the Python that imports JAX for the workers slept 6 s before its first
    # line (each Python noted it: one forked both workers, or each worker is a Python of its own)
    assert len((tmp_path / "slept.txt").read_text().split()) >= 1
    assert [r.value for r in results] == [0, 1]


def test_a_start_past_the_start_up_limit_is_named_as_such(tmp_path, monkeypatch):
    # Property: workers that never join are stopped at start_timeout, with a message that blames the
    # machine, not the function (which never ran); run_check says the same to a learner.
    _slow_to_start(tmp_path, monkeypatch, 60)
    with pytest.raises(hosts.WorkersFailed, match="did not all start and join within the 3 s start-up limit"):
        hosts.run_workers(sent.quick, timeout=60, start_timeout=3)
    with pytest.raises(CheckFailed, match="did not start and join within 3 s, so nothing of yours ran"):
        hosts.run_check(sent.quick, what="the check", timeout=60, start_timeout=3)
    assert _workers_alive() == []


def test_check_false_returns_the_results_of_a_failed_run():
    # Property: with check=False the caller reads each process's fate instead of an exception.
    results = hosts.run_workers(sent.sleep_forever, timeout=8, check=False)
    assert [r.stopped_by_launcher for r in results] == ["the 8 s timeout passed"] * 2
    assert not any(r.ok for r in results)


def test_a_check_stopped_at_its_timeout_says_where_each_process_was():
    # Property: a learner whose check timed out sees the line of their function each process was
    # stopped in (never a worker's output); whoever debugs a hang gets every stopped process's Python
    # stacks, JAX's frames too: here process 0 had returned and waited in the job's leaving barrier.
    from tests.notebooks import run_cell

    namespace: dict = {"__name__": "__main__"}
    source = (
        "import os\nimport time\n\nimport jax\n\n\n"
        "def wait_for_ever():\n    while True:\n        time.sleep(0.1)\n\n\n"
        "def answer():\n    if jax.process_index() == 1:\n        wait_for_ever()\n    return 0\n\n\n"
        "def answer_and_die():\n    if jax.process_index() == 1:\n        os._exit(3)\n    wait_for_ever()\n"
    )
    run_cell(source, "<cell 7>", namespace)
    with pytest.raises(CheckFailed, match="within 6 s, got them still running; they were stopped") as e:
        hosts.run_check(namespace["answer"], what="the check", timeout=6)
    assert e.value.worker_lines == ["  process 1 of 2, stopped in wait_for_ever: time.sleep(0.1)"]
    first, _, second = e.value.worker_stacks.partition("process 1 of 2 (")
    assert first.startswith("process 0 of 2 (process 0 was stopped by the launcher (the 6 s timeout")
    assert "in shutdown" in first and "<function sent to the workers>" not in first
    assert re.search(r'File "<function sent to the workers>", line \d+ in wait_for_ever', second)
    # After a death the message names the dead process alone: the death is the cause, and where the
    # survivor happened to wait when it was stopped only follows from it (its stacks are still kept).
    with pytest.raises(CheckFailed, match="worker process 1 of 2 died \\(exit code 3\\)") as e:
        hosts.run_check(namespace["answer_and_die"], what="the check", timeout=60)
    assert getattr(e.value, "worker_lines", []) == []
    assert e.value.worker_stacks.startswith(
        "process 0 of 2 (process 0 was stopped by the launcher (process 1"
    )
    assert _workers_alive() == []


def test_a_worker_ends_once_its_function_returned_whatever_it_left_running():
    # Property: once the function has returned (its value written, the job left), the worker ends at
    # once, without waiting for what still runs in it. The CI failure this guards against: a device's
    # share of a program the function never waited for was still connecting to a peer that had left,
    # and the JAX client's destructor, at Python's exit, waited on it until the 90 s timeout.
    results = hosts.run_workers(sent.leaves_a_thread_running, timeout=20)
    assert [r.value for r in results] == [7, 7]


def test_keyboard_interrupt_leaves_no_process_behind(monkeypatch):
    # Property: an interrupt while waiting (the learner pressing stop) still kills every worker.
    calls = []

    def interrupt(seconds):
        calls.append(seconds)
        if len(calls) == 20:
            raise KeyboardInterrupt

    monkeypatch.setattr(hosts.time, "sleep", interrupt)
    with pytest.raises(KeyboardInterrupt):
        hosts.run_workers(sent.sleep_forever, timeout=60)
    assert _workers_alive() == []


def test_bad_device_counts_are_refused_before_anything_starts():
    with pytest.raises(ValueError, match="expected 2 device counts of at least 1, got \\[4\\]"):
        hosts.run_workers(sent.sleep_forever, devices_per_process=[4])


# ------------------------------------------------------------------------------------------------
# function_source: what travels when a function is defined in a notebook.
# ------------------------------------------------------------------------------------------------

SCALE = 3
_OPEN_FILE = open(os.devnull)  # noqa: SIM115 (a global that cannot travel)


def _helper(x):
    return x * SCALE


def _notebook_like(x):
    return math.floor(_helper(x)) + len([y for y in range(2)])


def _uses_a_file():
    return _OPEN_FILE.read()


def _as_if_in_a_notebook(fn, monkeypatch):
    """``fn`` as if defined in ``__main__`` (a notebook's namespace): not importable by name."""
    monkeypatch.setattr(fn, "__module__", "__main__")
    monkeypatch.setattr(_helper, "__module__", "__main__")
    return fn


def test_function_source_carries_helpers_imports_and_constants(monkeypatch):
    # Property: the text alone defines the function and everything it uses; run it in a fresh namespace.
    source = hosts.function_source(_as_if_in_a_notebook(_notebook_like, monkeypatch))
    assert "import math" in source and "SCALE = 3" in source and "def _helper" in source
    namespace: dict = {}
    exec(source, namespace)
    assert namespace["__entry__"](2.5) == math.floor(2.5 * 3) + 2


def test_function_source_imports_an_importable_function():
    assert hosts.function_source(sent.global_sum).endswith(
        "from tests.host_functions import global_sum as __entry__"
    )


def test_function_source_names_a_global_that_cannot_travel(monkeypatch):
    with pytest.raises(ValueError, match="uses the global '_OPEN_FILE' \\(TextIOWrapper\\)"):
        hosts.function_source(_as_if_in_a_notebook(_uses_a_file, monkeypatch))


def test_port_check_sees_a_listener():
    # Property: the "no port left behind" check above can fail: it sees a socket that listens.
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        assert not _port_is_free(f"127.0.0.1:{s.getsockname()[1]}")


# ------------------------------------------------------------------------------------------------
# run_check: a check's failure in a worker becomes one CheckFailed in the caller.
# ------------------------------------------------------------------------------------------------


def test_run_check_returns_the_first_check_message_with_its_process():
    from shardbook.checks import CheckFailed

    with pytest.raises(
        CheckFailed, match=r"^f\(x\): expected 1, got 2\. Hint: add one\. \(in process 0 of 2\)$"
    ):
        hosts.run_check(sent.fails_a_check, what="the check", timeout=60)
    assert _workers_alive() == []


def test_run_check_puts_another_exception_in_one_line():
    from shardbook.checks import CheckFailed

    with pytest.raises(
        CheckFailed,
        match=r"^the check: expected all 2 processes to finish, got: process 0 raised ValueError: bad rows\. "
        r"Hint: read the error from its first line\.$",
    ):
        hosts.run_check(sent.raises_value_error, what="the check", timeout=60)


# Mistakes of 12.1 (one batch from every process), run as its self-check runs them: the learner's
# function called through shardbook.checks.call in both processes, then a collective of the check's own.


def test_run_check_says_each_multi_process_mistake_in_one_sentence_with_its_hint():
    # Property: the learner-facing message of each mistake is its own sentence and hint, from the
    # process where it happened, never JAX's text cut inside an array print nor what only followed from
    # it in the other process (there, a Gloo connection closed under process 0's all-gather).
    cases = [
        (
            sent.device_put_of_local_rows,
            "global_batch(process 1): expected a result, got AssertionError: device_put got different data "
            "in each process (each process's own rows?), but onto a mesh that spans processes it takes the "
            "same whole array in every process. Hint: to make one global array of the rows each process "
            "holds, use jax.make_array_from_process_local_data, then lay that out on the mesh. (in process "
            "1 of 2)",
        ),
        (
            sent.returns_none,
            "global_batch: expected an array of shape (8, 3), got None (did the function forget to return?). "
            "Hint: a Python function that ends without a return statement returns None: return the result. "
            "(in process 0 of 2)",
        ),
        (
            sent.shapes_differ,
            "12.1: expected all 2 processes to finish, got: the processes gave one collective arrays of "
            "different shapes (Gloo ended process 1 of 2). Hint: every process must give each collective "
            "the same global shape: compute shapes from what all processes know (jax.process_count(), the "
            "mesh), not from one process's own data.",
        ),
    ]
    for fn, message in cases:
        with pytest.raises(CheckFailed) as e:
            hosts.run_check(fn, what="12.1", timeout=60)
        assert str(e.value) == message, fn.__name__
        assert "[[" not in str(e.value) and "\n" not in str(e.value)
    assert _workers_alive() == []


def test_a_collective_error_of_gloo_is_one_sentence_through_call():
    # Property: JAX's error for an all-gather whose peer left (the message Gloo gives, raised as JAX
    # raises it) reaches a self-check as one sentence with the hint, not as Gloo's source location.
    import jax

    from shardbook.checks import call

    def global_batch():
        raise jax.errors.JaxRuntimeError(
            "UNKNOWN: Gloo AllGather failed: [external/xla++third_party_ext+gloo/gloo/transport/tcp/pair.cc:"
            "547] Connection closed by peer [127.0.0.1]:23951"
        )

    with pytest.raises(CheckFailed) as e:
        call(global_batch, what="global_batch(...)")
    assert str(e.value) == (
        "global_batch(...): expected a result, got JaxRuntimeError: another process left while this one "
        "waited for it in a collective: it failed, finished, or skipped that collective. Hint: read what "
        "the other process reported; every process must run the same collectives in the same order "
        "(process_allgather, and any device_put or jit of arrays that span processes): none may sit "
        "under `if jax.process_index() == 0`."
    )


def test_draw_process_shards_colours_blocks_by_process():
    # Property: one rectangle per block, coloured by the process holding it; a legend per process.
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.patches import Rectangle

    rows = [
        (0, 0, ((0, 4), (0, 2))),
        (0, 1, ((0, 4), (2, 4))),
        (1, 2048, ((4, 8), (0, 2))),
        (1, 2049, ((4, 8), (2, 4))),
    ]
    fig = processes.draw_process_shards(rows, (8, 4))
    ax = fig.axes[0]
    blocks = [p for p in ax.patches if isinstance(p, Rectangle)]
    assert len(blocks) == 4
    colours = {matplotlib.colors.to_hex(p.get_facecolor()) for p in blocks}
    assert colours == {processes.PROCESS_COLOURS[0], processes.PROCESS_COLOURS[1]}
    assert {t.get_text() for t in ax.texts} == {"p0 d0", "p0 d1", "p1 d2048", "p1 d2049"}
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["process 0", "process 1"]
    with pytest.raises(ValueError, match=r"expected a 1-D or 2-D array, got shape \(2, 2, 2\)"):
        processes.draw_process_shards(rows, (2, 2, 2))


def test_run_check_passes_not_implemented_through():
    # Property: an exercise's stub stops its self-check as NotImplementedError, as in one process.
    with pytest.raises(NotImplementedError, match="^write global_batch$"):
        hosts.run_check(sent.not_written_yet, what="the check", timeout=60)


def test_free_port_skips_a_taken_port_and_stays_below_the_ephemeral_range():
    # Property: the coordinator's port is one nothing listens on, drawn outside the range the kernel
    # hands out as source ports (where a port freed by bind(0) could be taken before JAX binds it).
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        busy = taken.getsockname()[1]

        class Draws:
            def __init__(self, ports):
                self.ports = list(ports)

            def choice(self, _range):
                return self.ports.pop(0)

        spare = next(p for p in hosts.COORDINATOR_PORTS if p != busy)
        assert hosts.free_port(Draws([busy, spare])) == spare
    low, high = map(int, open("/proc/sys/net/ipv4/ip_local_port_range").read().split())
    assert hosts.COORDINATOR_PORTS.stop <= low


def test_a_failing_multi_process_self_check_in_a_notebook_is_a_few_lines_down_to_the_learners(capsys):
    # Property: 12.1's self-check, run in a notebook with a wrong answer, shows its one-line message,
    # the self-check's cell line, and the learner's own lines where it failed in the worker process,
    # named by process and function; nothing of the helper's files (hosts.py run_check, checks.py _fail).
    from IPython.core.interactiveshell import InteractiveShell

    from shardbook.checks import explain_common_errors

    shell = InteractiveShell.instance()
    explain_common_errors(shell)
    cells = [
        "import jax, numpy as np\n"
        "from jax.experimental import multihost_utils\n"
        "from jax.sharding import Mesh, NamedSharding, PartitionSpec as P\n"
        "from shardbook.checks import call, expect_allclose\n"
        "from shardbook.hosts import run_check\n",
        "def global_batch(local_rows, mesh):\n"
        "    sharding = NamedSharding(mesh, P('X', None))\n"
        "    return jax.device_put(local_rows, sharding)\n",
        "def self_check_global_batch():\n"
        "    mesh = Mesh(np.array(jax.devices()[::-1]).reshape(2, 4), ('X', 'Y'))\n"
        "    data = np.arange(8 * 3, dtype=np.float32).reshape(8, 3)\n"
        "    me = jax.process_index()\n"
        "    got = call(global_batch, data[4 * me : 4 * me + 4], mesh, what='global_batch')\n"
        "    expect_allclose(multihost_utils.process_allgather(got, tiled=True), data, 'rows')\n"
        "\n"
        "run_check(self_check_global_batch, what='the self-check', timeout=60)\n",
    ]
    try:
        for cell in cells:
            capsys.readouterr()
            result = shell.run_cell(cell, store_history=True)
        shown = capsys.readouterr().out.strip().splitlines()
    finally:
        shell.set_custom_exc((), None)
        InteractiveShell.clear_instance()
    assert not result.success
    assert len(shown) == 4, shown
    assert shown[0].startswith(
        "CheckFailed: global_batch: expected a result, got AssertionError: device_put got"
    )
    assert (
        shown[1]
        == "  Cell In[3], line 8: run_check(self_check_global_batch, what='the self-check', timeout=60)"
    )
    assert shown[3] == "  process 0 of 2, in global_batch: return jax.device_put(local_rows, sharding)"
    assert _workers_alive() == []


def test_an_unknown_collective_failure_in_one_process_says_every_process_must_run_the_same_collectives():
    # Property (issue 41): when process 0 alone ran a collective and its worker's check put the error in
    # words, the message says in one sentence that every process must run the same collectives; never
    # "read the error from its first line", whatever Gloo's words were.
    from shardbook.errors import describe_text

    words, hint = describe_text("JaxRuntimeError", "INTERNAL: Gloo broadcast failed: Socket closed")
    alone = ("CheckFailed", f"global_batch(...): expected a result, got {words}. Hint: {hint}")
    results = [hosts.WorkerResult(0, 1, "", error=alone), hosts.WorkerResult(1, 0, "")]
    message, source = hosts._check_message(results, "global_batch", {})
    assert message is not None and source is results[0]
    assert "every process must run the same collectives in the same order" in message
    assert "first line" not in message


def test_a_peers_closed_connection_says_what_the_other_processes_did():
    # Property: the hint under "another process left" names the processes that returned without the
    # collective when some did, and drops "read what the other process reported" when every other
    # process only failed in a collective too (the learner sees one message, not theirs).
    from shardbook.errors import describe_text

    words, hint = describe_text("JaxRuntimeError", "Gloo AllGather failed: Connection closed by peer")
    left = ("CheckFailed", f"f(x): expected a result, got {words}. Hint: {hint}")
    returned = [hosts.WorkerResult(0, 1, "", error=left), hosts.WorkerResult(1, 0, "")]
    message, source = hosts._check_message(returned, "f", {})
    assert message is not None and source is returned[0]
    assert "Hint: process 1 of 2 returned without running that collective; every process must run" in message
    also_left = [hosts.WorkerResult(0, 1, "", error=left), hosts.WorkerResult(1, 1, "", error=left)]
    message, _ = hosts._check_message(also_left, "f", {})
    assert message is not None and message.endswith("(in process 0 of 2)")
    assert "read what the other process reported" not in message and "Hint: every process must run" in message


def test_xlas_device_list_warning_is_dropped_and_other_lines_kept():
    # Property: the C++ warning device_put across processes prints is not the program's output; a
    # warning of another kind and the program's own lines stay.
    text = (
        "W1206 05:49:25.321651   19076 export_shardings.cc:486] This branch is not expected as JAX is"
        " not known to use device lists.\nprocess 0: moved\n"
        "W1206 05:49:25.350447   19076 utils.cc:471] This branch is not expected as JAX is not known"
        " to use device lists\nW1206 05:49:26.000000   19076 other.cc:1] something else\n"
    )
    kept = hosts.DEVICE_LIST_WARNING.sub("", text)
    assert kept == "process 0: moved\nW1206 05:49:26.000000   19076 other.cc:1] something else\n"
