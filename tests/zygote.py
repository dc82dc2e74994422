"""In-process gradings forked from one Python that imported what they import (tests/conftest.py).

An in-process grading (``python -m tests.submissions grade``) is a fresh process, as a kernel of `make
grade` is: no JAX backend has started in it, and its devices and memory cap are its own. Before it
grades anything it spends about 2 s of CPU importing JAX, NumPy, nbformat, nbgrader's preprocessors
and the graders (measured 2026-12-07), and a session starts a dozen. So each test process that grades
starts one *zygote* (``python -m tests.zygote``, with the gradings' environment), which imports those
modules once, before any backend or device exists, and forks each grading from it. A grading then runs
``tests.submissions``' ``main`` with its arguments, as ``python -m tests.submissions`` would: in its own
session (a time limit kills it whole), standard input from /dev/null, its output into files, Python's
and NumPy's global random states seeded afresh. What it shares with the other gradings is Python's
string hash seed (a ``set`` of strings iterates in the same order in each).

The zygote is the gradings' parent: it reaps each one and reports its exit code, and the test process
waits for the zygote at the end (:meth:`Zygote.close`), so their CPU time is counted where make test's
table counts the test process's. Protocol, one JSON object a line: the test process sends ``{"argv":
[...], "stdout": path, "stderr": path}``; the zygote answers ``{"pid": pid}`` at once and ``{"ended":
pid, "code": code}`` (``subprocess``' convention: minus the signal that killed it) when it ends.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import subprocess
import sys
from pathlib import Path
from typing import IO, Any

#: What every grading imports before it reads a notebook: imported once, in the zygote.
PRELOAD = (
    "numpy",
    "jax",
    "jax.numpy",
    "nbformat",
    "grading.preprocessors",
    "tests.submissions.__main__",
)


class Zygote:
    """The test process's handle on its zygote: :meth:`start` a grading, :meth:`wait` for it."""

    def __init__(self, env: dict[str, str]):
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.zygote"], env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE
        )
        self.ended: dict[int, int] = {}
        self._buffer = b""

    def _read(self, timeout: float | None) -> dict[str, Any] | None:
        """The zygote's next line, or None when none came within ``timeout`` seconds. Read from the
        pipe's descriptor with a buffer of its own: a file object's buffer could hold a line that
        ``select`` no longer sees."""
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        while b"\n" not in self._buffer:
            ready, _, _ = select.select([fd], [], [], timeout)
            if not ready:
                return None
            chunk = os.read(fd, 65536)
            if not chunk:
                raise RuntimeError(f"the gradings' zygote ended (exit code {self.proc.wait()})")
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        return json.loads(line)

    def start(self, argv: list[str], stdout: Path, stderr: Path) -> int:
        """Forks a grading, ``python -m tests.submissions *argv``; its pid."""
        assert self.proc.stdin is not None
        request = {"argv": argv, "stdout": str(stdout), "stderr": str(stderr)}
        self.proc.stdin.write((json.dumps(request) + "\n").encode())
        self.proc.stdin.flush()
        while True:
            message = self._read(None)
            assert message is not None
            if "pid" in message:
                return int(message["pid"])
            self.ended[message["ended"]] = message["code"]

    def wait(self, pid: int, timeout: float) -> int:
        """The exit code of grading ``pid``; kills its session and raises TimeoutError after ``timeout``
        seconds."""
        import time

        deadline = time.monotonic() + timeout
        while pid not in self.ended:
            left = deadline - time.monotonic()
            message = self._read(max(left, 0.0)) if left > 0 else None
            if message is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(pid, signal.SIGKILL)
                raise TimeoutError(f"grading process {pid} still running after {timeout:.0f} s: killed")
            self.ended[message["ended"]] = message["code"]
        return self.ended.pop(pid)

    def close(self) -> None:
        """Ends the zygote (it kills any grading still running) and waits for it."""
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        if self.proc.stdout is not None:
            self.proc.stdout.close()


def _grade(request: dict[str, Any]) -> None:
    """In the forked child: becomes the grading process ``request`` asks for, runs it, exits."""
    import random

    import numpy

    try:
        os.setsid()
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        for fd, path in ((1, request["stdout"]), (2, request["stderr"])):
            out = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            os.dup2(out, fd)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        random.seed()
        numpy.random.seed()
        sys.argv = ["python -m tests.submissions", *request["argv"]]
        from tests.submissions.__main__ import main

        code = main(request["argv"])
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else 1
    except BaseException:
        import traceback

        traceback.print_exc()
        code = 1
    with contextlib.suppress(Exception):
        sys.stdout.flush()
        sys.stderr.flush()
    os._exit(code or 0)


def _serve(requests: IO[str], replies: IO[str]) -> None:
    """The zygote's loop: forks a grading per request, reports each one's end; on end of input, kills
    the gradings still running and returns once every one is reaped."""
    import gc
    import importlib

    for name in PRELOAD:
        importlib.import_module(name)
    from shardbook.setup import _backends_started

    if _backends_started():  # each grading's devices are its own: none may exist before the fork
        raise RuntimeError(f"importing {PRELOAD} started a JAX backend in the zygote")
    gc.collect()
    gc.freeze()  # what the zygote imported stays out of each grading's garbage collections
    running: set[int] = set()
    open_input = True

    def reap() -> None:
        for pid in list(running):
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                running.discard(pid)
                code = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
                replies.write(json.dumps({"ended": pid, "code": code}) + "\n")
                replies.flush()

    # One request at a time: the test process waits for a pid before it sends the next, so no second
    # line waits in the file object's buffer where select would not see it.
    while open_input or running:
        ready, _, _ = select.select([requests] if open_input else [], [], [], 0.2)
        if ready:
            line = requests.readline()
            if not line:
                open_input = False
                for pid in running:
                    with contextlib.suppress(ProcessLookupError):
                        os.killpg(pid, signal.SIGKILL)
            else:
                request = json.loads(line)
                pid = os.fork()
                if pid == 0:
                    _grade(request)
                running.add(pid)
                replies.write(json.dumps({"pid": pid}) + "\n")
                replies.flush()
        reap()


if __name__ == "__main__":
    _serve(sys.stdin, sys.stdout)
