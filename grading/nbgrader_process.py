"""nbgrader commands, each in a process of its own, forked from a server that imported nbgrader once.

``run(["autograde", ...], root, ...)`` does what ``python -m nbgrader autograde ...`` run in ``root``
did, with the same arguments, configuration, log and exit code, but its process is forked from a
server (``python -m grading.nbgrader_process``, one per grading process, started by the first
command) that imported nbgrader, nbconvert, jupyter_client and this course's preprocessors once.
Importing them costs about 0.8 s of CPU a process (measured 2026-12-03), and grading a notebook
takes two or three such processes. The server also renders a small notebook of its own to
HTML before it serves (:func:`_warm`), so that each child finds the compiled patterns and schema
validator a feedback page needs: a notebook's feedback page went from 0.51 s to 0.28 s.

The server is single-threaded and only forks: on each connection to its unix socket (in a folder
only this user can enter) it forks a child, which reads the command, says its pid, runs the command
and sends back the exit code. The caller kills the child's session at the time limit. The server
exits when its caller does (its stdin closes).

Each command still runs alone in its process: its own session (so the time limit kills it whole),
environment, working directory and address-space cap (which the kernel it starts inherits), and
SIGINT back to its default (a Ray worker may ignore or block it; the kernel must be interruptible).
Nothing of one notebook's grading survives in the server: the server only forks.

nbgrader also asks ``alembic heads`` (another Python process, about 1 s) each time it creates a
gradebook, for a constant of the installed nbgrader: it is read once from nbgrader's own migration
scripts instead (:func:`alembic_head`).
"""

from __future__ import annotations

import atexit
import contextlib
import os
import re
import resource
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import traceback
from functools import cache
from multiprocessing.connection import Connection
from pathlib import Path

_REVISION = re.compile(r"^(down_)?revision\s*=\s*['\"]?([0-9a-f]+|None)['\"]?", re.M)


def _preload() -> None:
    """What the server imports once, before it forks anything."""
    import jupyter_client.manager  # noqa: F401  (the kernel's start)
    import nbgrader.api
    import nbgrader.apps.nbgraderapp  # noqa: F401
    import nbgrader.converters  # noqa: F401

    import grading.preprocessors  # noqa: F401  (the course's preprocessors, named in nbgrader_config.py)
    import grading.sandbox  # noqa: F401

    alembic_head()
    nbgrader.api.get_alembic_version = alembic_head  # the forked processes inherit it
    _warm()


def _warm() -> None:
    """Fills, once, caches each forked child would otherwise fill for itself: nbformat's compiled
    schema validator, the compiled patterns of Pygments' lexers, of the Markdown renderer and of
    nbconvert's filters, and the modules nbconvert imports on first use. It renders a notebook of
    this module's own to HTML with the template the feedback pages extend: nothing of a learner's."""
    import nbformat
    from nbconvert import HTMLExporter

    notebook = nbformat.v4.new_notebook(
        cells=[
            nbformat.v4.new_markdown_cell("# A *title*\n\nSome `code`, a [link](https://jax.dev), $x^2$."),
            nbformat.v4.new_code_cell("import numpy as np\nx = np.arange(3)  # a comment\nprint(f'{x!r}')"),
        ]
    )
    notebook.cells[1].outputs = [nbformat.v4.new_output("stream", name="stdout", text="[0 1 2]\n")]
    nbformat.validate(notebook)
    HTMLExporter(template_name="classic").from_notebook_node(notebook)


@cache
def alembic_head() -> str:
    """The newest migration of nbgrader's gradebook schema, as ``alembic heads`` prints it.

    The one revision no other revision names as its ``down_revision``.
    """
    import nbgrader.api

    revisions: set[str] = set()
    parents: set[str] = set()
    for script in (Path(nbgrader.api.__file__).parent / "alembic" / "versions").glob("*.py"):
        for down, value in _REVISION.findall(script.read_text()):
            (parents if down else revisions).add(value)
    heads = revisions - parents
    if len(heads) != 1:
        raise RuntimeError(f"nbgrader's gradebook migrations have {len(heads)} heads: {sorted(heads)}")
    return heads.pop()


def _child(conn: Connection) -> None:
    """A forked child of the server: becomes ``nbgrader <args>`` run in ``root`` with ``env``, sends
    its exit code and exits."""
    code = 1
    try:
        os.setsid()
        args, root, env, memory_bytes, log_path = conn.recv()
        conn.send(os.getpid())
        log = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.dup2(log, 1)
        os.dup2(log, 2)
        os.close(log)
        if memory_bytes:
            resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
        os.environ.clear()
        os.environ.update(env)
        os.chdir(root)
        sys.argv = ["nbgrader", *args]
        from nbgrader.apps.nbgraderapp import NbGraderApp

        try:
            NbGraderApp.launch_instance(argv=args)
            code = 0
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    except BaseException:
        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        try:
            conn.send(code)
        except OSError:
            pass
        os._exit(code)


def serve(address: str) -> None:
    """The server's loop: a child per connection, until stdin closes (the caller is gone).

    Children are reaped here, so that their CPU time counts in the caller's (``make test``'s table
    reads it from the processes it waited for)."""
    _preload()
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(address)
    listener.listen(64)
    print("ready", flush=True)
    children: set[int] = set()
    while True:
        readable, _, _ = select.select([listener, sys.stdin], [], [], 0.5)
        for pid in list(children):
            if os.waitpid(pid, os.WNOHANG)[0]:
                children.discard(pid)
        if sys.stdin in readable and not os.read(sys.stdin.fileno(), 1):
            for pid in children:  # the caller is gone: nobody waits for their results
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
            # Its folder goes with it (a caller killed outright, a Ray worker say, cannot remove it).
            shutil.rmtree(os.path.dirname(address), ignore_errors=True)
            os._exit(0)  # nothing to tear down: the caller should not wait for nbgrader's modules
        if listener in readable:
            client, _ = listener.accept()
            pid = os.fork()
            if pid == 0:
                listener.close()
                _child(Connection(client.detach()))
            children.add(pid)
            client.close()


class _Server:
    """The caller's handle on its server: started once, stopped when the caller exits."""

    def __init__(self) -> None:
        self.stopped = False
        self.folder = tempfile.mkdtemp(prefix="shardbook-nbgrader-")  # 0700: this user alone connects
        self.address = os.path.join(self.folder, "socket")
        package_root = str(Path(__file__).resolve().parents[1])  # where this `grading` was imported from
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, env.get("PYTHONPATH")) if p)
        self.process = subprocess.Popen(
            [sys.executable, "-m", "grading.nbgrader_process", self.address],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=env,
            start_new_session=True,
        )
        assert self.process.stdout is not None
        ready = self.process.stdout.readline()
        if ready.strip() != b"ready":
            self.stop()
            raise RuntimeError("the nbgrader server did not start (see its error above)")
        atexit.register(self.stop)

    def stop(self) -> None:
        if self.stopped:
            return
        self.stopped = True
        if self.process.stdin:
            self.process.stdin.close()  # the server's signal to stop
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        if self.process.stdout:
            self.process.stdout.close()
        shutil.rmtree(self.folder, ignore_errors=True)


_lock = threading.Lock()
_server: _Server | None = None


def stop() -> None:
    """Stops this process's server if it runs (it is also stopped when this process exits)."""
    global _server
    with _lock:
        if _server is not None:
            _server.stop()
            _server = None


def start() -> None:
    """Starts this process's server if it is not running (about 0.9 s: it imports nbgrader and warms up)."""
    global _server
    with _lock:
        if _server is None or _server.process.poll() is not None:
            _server = _Server()


def run(
    args: list[str], root: Path, env: dict[str, str], timeout: float, memory_bytes: int | None = None
) -> tuple[int | None, str]:
    """``nbgrader <args>`` in ``root`` with environment ``env``: (exit code, or None when it ran past
    ``timeout`` seconds and was killed with what it started; its log, stdout and stderr)."""
    start()
    assert _server is not None
    with tempfile.TemporaryDirectory(prefix="shardbook-nbgrader-log-") as scratch:
        log_path = os.path.join(scratch, "log")
        client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        client.connect(_server.address)
        with Connection(client.detach()) as conn:
            conn.send((list(args), str(root), dict(env), memory_bytes or 0, log_path))
            pid = conn.recv()
            code: int | None
            if conn.poll(timeout):
                try:
                    code = conn.recv()
                except EOFError:  # died without a word: killed (memory, a signal)
                    code = -signal.SIGKILL
            else:
                code = None
                try:
                    os.killpg(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        log = Path(log_path).read_text(errors="replace") if os.path.exists(log_path) else ""
    return code, log


if __name__ == "__main__":
    serve(sys.argv[1])
