"""Many hosts on one machine: run a function in N JAX processes on localhost and collect what each did.

A multi-controller JAX program is one Python process per host, each calling
``jax.distributed.initialize`` and then running the same code. :func:`run_workers` plays that on one
machine: it starts ``num_processes`` Python processes, each with ``devices_per_process`` simulated CPU
devices and Gloo collectives, joined by a coordinator on a free localhost port; each calls the
function and hands back its value and everything it printed. (On Linux they are forked from one Python
that imported JAX, which is most of a worker's cost: :mod:`shardbook.workers`.) It always ends every
process it started — on success, failure, timeout or ``KeyboardInterrupt`` — and never waits forever
on one:

* a worker that dies (an exception, ``os._exit``, a signal) is named in the result; the others get
  ``after_death`` seconds to show what they see, then are killed;
* ``timeout`` seconds after every worker joined, each one still running is killed; starting (importing
  JAX, reaching the coordinator) has its own, longer bound, ``start_timeout``, so a busy machine that
  is slow to start Python processes does not eat the function's time.

A worker the launcher stops is first asked where it is (every thread's Python stack:
:attr:`WorkerResult.stacks`). JAX catches SIGTERM (its preemption notifier turns it into a "preemption"
the program may never act on), so workers are then ended with SIGKILL, after which no process or port
of theirs is left. A worker whose function returned leaves at once, once every process has: nothing
left running in it (a device's share of a program never waited for) can hold it.

How the function reaches the workers: a function importable by module and name (a library's, a
grader's) is imported there; one defined in a notebook travels as source text (:func:`function_source`),
with the imports and helper functions it uses. Arguments and return values travel pickled; jax.Arrays
that live on one process come back as NumPy arrays.
"""

from __future__ import annotations

import builtins
import dataclasses
import inspect
import os
import pickle
import random
import re
import shutil
import signal
import socket
import sys
import tempfile
import textwrap
import time
import types
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from shardbook.workers import Workers

#: The pieces of the line Gloo prints once per device when its first collective connects ("[Gloo] Rank 0
#: is connected to 7 peer ranks. Expected number of connected peer ranks is : 7"). Each device's thread
#: writes them one by one, so the lines of a process's devices arrive interleaved piece by piece.
GLOO_PIECES = (
    "[Gloo] Rank ",
    " is connected to ",
    " peer ranks. ",
    "Expected number of connected peer ranks is : ",
)
_GLOO_TOKEN = re.compile("|".join([*(re.escape(p) for p in GLOO_PIECES), r"\d+", r"\n"]))


def drop_gloo_lines(text: str) -> str:
    """``text`` without Gloo's start-up lines, however their pieces interleaved.

    From each ``[Gloo] Rank`` on, it drops the pieces, numbers and line ends that follow, and stops once
    every message begun has all its pieces and its line end, so a line of the program's own after
    them (even one of digits) stays.

    Example:
      >>> drop_gloo_lines("a\\n[Gloo] Rank [Gloo] Rank 1 is connected to 3 peer ranks. Expected number of "
      ...     "connected peer ranks is : 3\\n0 is connected to 3 peer ranks. Expected number of connected "
      ...     "peer ranks is : 3\\n42\\n")
      'a\\n42\\n'
    """
    out, at = [], 0
    while (start := text.find(GLOO_PIECES[0], at)) >= 0:
        out.append(text[at:start])
        counts = dict.fromkeys([*GLOO_PIECES, "\n"], 0)
        at = start
        while m := _GLOO_TOKEN.match(text, at):
            at = m.end()
            if m.group() in counts:
                counts[m.group()] += 1
            if len(set(counts.values())) == 1:  # every message begun is complete
                break
    out.append(text[at:])
    return "".join(out)


#: XLA's C++ warning each time an array moves to a mesh of another device order (``jax.device_put``
#: across processes): a note for XLA's developers, dropped from a worker's output like Gloo's lines.
DEVICE_LIST_WARNING = re.compile(r"^W\d{4} [^\n]*JAX is not known to use device lists\.?\n", re.M)

#: What the workers import before the function, whatever it uses.
PREAMBLE = "import jax\nimport jax.numpy as jnp\nimport numpy as np\n"


@dataclasses.dataclass
class WorkerResult:
    """What one worker process did: its index, how it ended, what it printed, what it returned."""

    process_id: int
    returncode: int | None  # None: still running when the launcher stopped it
    output: str  # stdout and stderr, interleaved, without Gloo's start-up lines
    value: Any = None
    seconds: float = 0.0
    stopped_by_launcher: str | None = None  # why the launcher killed it ("timeout", "process 1 died")
    coordinator: str = ""  # host:port of the coordinator the processes joined
    error: tuple[str, str] | None = None  # (exception type, message) when the function raised
    #: (function, source line) of each frame of the function sent that led to the error, outermost first
    error_lines: list[tuple[str, str]] = dataclasses.field(default_factory=list)
    #: every thread's Python stack when the launcher stopped it (faulthandler's words), else ""
    stacks: str = ""

    def stopped_at(self, source: str) -> list[tuple[str, str]]:
        """(function, source line) of each frame of the function sent (``source``) that the process was
        in when the launcher stopped it, outermost first; empty when it was elsewhere (starting, leaving
        the job) or not stopped."""
        main = [block for block in self.stacks.split("\n\n") if _BOOT_FRAME.search(block)]
        lines = source.splitlines()
        frames = _SENT_FRAME.findall(main[0]) if main else []
        return [(name, lines[int(n) - 1].strip()) for n, name in reversed(frames) if 0 < int(n) <= len(lines)]

    @property
    def ok(self) -> bool:
        """True when the function returned and the process exited cleanly."""
        return self.returncode == 0 and self.stopped_by_launcher is None

    def describe(self) -> str:
        """How this worker ended, in words."""
        if self.stopped_by_launcher:
            return f"process {self.process_id} was stopped by the launcher ({self.stopped_by_launcher})"
        if self.returncode == 0:
            return f"process {self.process_id} finished in {self.seconds:.1f} s"
        return f"process {self.process_id} died ({_exit_words(self.returncode)}) after {self.seconds:.1f} s"

    def last_lines(self, n: int = 6) -> str:
        """The last ``n`` lines of its output."""
        return "\n".join(self.output.rstrip().splitlines()[-n:])


class WorkersFailed(RuntimeError):
    """A worker died or the run timed out; ``results`` holds every worker's :class:`WorkerResult`."""

    def __init__(self, message: str, results: list[WorkerResult]):
        super().__init__(message)
        self.results = results

    @property
    def dead(self) -> WorkerResult | None:
        """The first worker that died by itself, if one did."""
        failed = [r for r in self.results if r.stopped_by_launcher is None and r.returncode != 0]
        return min(failed, key=lambda r: r.seconds) if failed else None


def _exit_words(returncode: int | None) -> str:
    if returncode is None:
        return "still running"
    if returncode < 0:
        try:
            return f"killed by {signal.Signals(-returncode).name}"
        except ValueError:
            return f"killed by signal {-returncode}"
    return f"exit code {returncode}"


#: Where coordinator ports are drawn from: below Linux's usual ephemeral range (32768-60999). A port the
#: kernel handed out for ``bind(0)`` is an ephemeral one, and between the launcher closing it and the
#: coordinator binding it, any outgoing connection on the machine (Gloo opens many) may take it as its
#: source port; a port outside that range is never given away like that.
COORDINATOR_PORTS = range(20000, 32000)


#: How a run stopped before its processes joined is named (the function never started).
START_LIMIT = "the start-up limit"

#: How a run stopped at its timeout is named (the function ran that long).
TIMED_OUT = "timeout passed"

#: Written into a worker's log before the launcher asks it for its stacks; what follows is theirs.
STACKS_HEADER = "\n── where this process was when the launcher stopped it ──\n"
#: In faulthandler's stacks: the boot program's own frame (the main thread's outermost) and a frame of
#: the function sent.
_BOOT_FRAME = re.compile(r'File "<string>", line \d+ in <module>')
_SENT_FRAME = re.compile(r'File "<function sent to the workers>", line (\d+) in (\S+)')


def free_port(rng: random.Random | None = None) -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now, outside the ephemeral range if possible.

    >>> free_port() in COORDINATOR_PORTS
    True
    """
    rng = rng or random.SystemRandom()
    for _ in range(50):
        port = rng.choice(COORDINATOR_PORTS)
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:  # all tried were taken: any free one
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ----------------------------------------------------------------------------------------------
# Shipping a function as source.
# ----------------------------------------------------------------------------------------------


def _importable(obj: Any) -> tuple[str, str] | None:
    """(module, qualified name) when ``obj`` can be imported back by them, else None."""
    module, name = getattr(obj, "__module__", None), getattr(obj, "__qualname__", None)
    if not module or not name or module in ("__main__", "__worker__", "builtins") or "<" in name:
        return None
    found: Any = sys.modules.get(module)
    for part in name.split("."):
        found = getattr(found, part, None)
    return (module, name) if found is obj else None


def _names_used(code: types.CodeType) -> Iterator[str]:
    yield from code.co_names
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from _names_used(const)


def function_source(fn: Callable) -> str:
    """A module's text that defines ``fn`` as ``__entry__``, ready to run in another process.

    A function importable by module and name is imported. One defined in a notebook travels as its
    source, with what it uses from its globals: modules become imports, importable functions and
    classes ``from … import``, functions of the notebook their own source (recursively), and plain
    constants (numbers, strings, tuples of them) their ``repr``.

    Raises:
      ValueError: ``fn`` uses a global that cannot travel (an array, an open file…), or its source
        is not available (a lambda typed at a prompt); the message names it.

    >>> import math
    >>> print(function_source(math.sqrt).splitlines()[-1])
    from math import sqrt as __entry__
    """
    where = _importable(fn)
    if where:
        module, first, *rest = [where[0], *where[1].split(".")]
        text = PREAMBLE + f"from {module} import {first} as __entry__"
        return text + "".join(f"\n__entry__ = __entry__.{part}" for part in rest)
    imports: dict[str, str] = {}
    bodies: list[str] = []
    seen: set[str] = set()

    def visit(f: Callable) -> None:
        f = inspect.unwrap(f)
        if f.__name__ in seen:
            return
        seen.add(f.__name__)
        code = getattr(f, "__code__", None)
        if code is None:
            raise ValueError(f"{f!r} is not a Python function, so it cannot be sent to the workers")
        if code.co_freevars:
            raise ValueError(
                f"{f.__name__} uses variables of the function around it ({', '.join(code.co_freevars)}), "
                "which cannot be sent to the worker processes: define it at the top level of a cell"
            )
        glob = getattr(f, "__globals__", {})
        for name in dict.fromkeys(_names_used(code)):
            if name in seen or name not in glob or (hasattr(builtins, name) and name not in glob):
                continue
            obj = glob[name]
            if isinstance(obj, types.ModuleType):
                imports[name] = (
                    f"import {obj.__name__}" if obj.__name__ == name else f"import {obj.__name__} as {name}"
                )
            elif (origin := _importable(obj)) and "." not in origin[1]:
                imports[name] = f"from {origin[0]} import {origin[1]}" + (
                    "" if origin[1] == name else f" as {name}"
                )
            elif isinstance(obj, types.FunctionType):
                visit(obj)
            elif _is_constant(obj):
                imports[name] = f"{name} = {obj!r}"
            else:
                raise ValueError(
                    f"{fn.__name__} uses the global {name!r} ({type(obj).__name__}), which cannot be "
                    "sent to the worker processes: define or import it inside the function"
                )
        try:
            source = textwrap.dedent(inspect.getsource(f))
        except (OSError, TypeError) as e:
            raise ValueError(
                f"the source of {f.__name__} is not available ({e}); define it with def"
            ) from None
        bodies.append(source)

    visit(fn)
    return (
        PREAMBLE
        + "\n".join(imports.values())
        + "\n\n"
        + "\n\n".join(bodies)
        + f"\n__entry__ = {inspect.unwrap(fn).__name__}\n"
    )


def _is_constant(obj: Any) -> bool:
    if obj is None or isinstance(obj, (bool, int, float, str, bytes)):
        return True
    if isinstance(obj, (tuple, list, frozenset)):
        return all(_is_constant(x) for x in obj)
    if isinstance(obj, dict):
        return all(_is_constant(k) and _is_constant(v) for k, v in obj.items())
    return False


# ----------------------------------------------------------------------------------------------
# The launcher.
# ----------------------------------------------------------------------------------------------


def run_workers(
    fn: Callable,
    *args: Any,
    num_processes: int = 2,
    devices_per_process: int | Sequence[int] = 4,
    timeout: float = 60.0,
    start_timeout: float = 300.0,
    after_death: float = 3.0,
    heartbeat: int = 5,
    check: bool = True,
    config: dict[str, Any] | None = None,
    env: dict[str, str] | None = None,
    cwd: str | None = None,
) -> list[WorkerResult]:
    """Runs ``fn(*args)`` in ``num_processes`` JAX processes on localhost; one result per process.

    Each process calls ``jax.distributed.initialize`` (a free port on 127.0.0.1; Gloo collectives on
    CPU) before ``fn``, so inside it ``jax.process_index()``, ``jax.devices()`` and every collective
    span all processes.

    Args:
      fn: the function; see the module docstring for how it reaches the workers.
      *args: its arguments (pickled).
      num_processes: how many processes.
      devices_per_process: simulated CPU devices per process (one number, or one per process).
      timeout: seconds the function gets once every process has joined; then every worker still
        running is killed.
      start_timeout: seconds the processes get to start and join (import JAX, reach the coordinator)
        before they are killed; generous, since a loaded machine starts Python processes slowly.
      after_death: once a worker died, seconds the others get to finish or fail before they are killed.
      heartbeat: JAX's heartbeat timeout (seconds): a process whose peer stopped answering is ended by
        JAX's coordination service after about this long.
      check: raise :class:`WorkersFailed` unless every worker returned.
      config: ``jax.config`` settings each worker makes before joining (``{"jax_enable_x64": True}``).
      env: environment variables to add for the workers.
      cwd: the workers' working directory (default: this process's).

    Returns:
      A :class:`WorkerResult` per process, in process order.

    Raises:
      WorkersFailed: with ``check``, when a worker died, the workers never joined, or the timeout
        passed; the message names the worker that died first, how, and its last lines; ``.results``
        has every worker's output.
      ValueError: ``fn`` cannot be sent (:func:`function_source`).
    """
    counts = (
        [devices_per_process] * num_processes
        if isinstance(devices_per_process, int)
        else list(devices_per_process)
    )
    if len(counts) != num_processes or min(counts, default=0) < 1:
        raise ValueError(f"expected {num_processes} device counts of at least 1, got {devices_per_process!r}")
    source = function_source(fn)
    folder = tempfile.mkdtemp(prefix="shardbook-hosts-")
    started: Workers | None = None
    logs = []
    try:
        with open(os.path.join(folder, "args.pkl"), "wb") as f:
            pickle.dump(args, f)
        coordinator = f"127.0.0.1:{free_port()}"
        orders = [
            {
                "coordinator": coordinator,
                "num_processes": num_processes,
                "process_id": pid,
                "init_timeout": max(10, int(start_timeout)),
                "heartbeat": heartbeat,
                "config": config or {},
                "source": source,
                "args": os.path.join(folder, "args.pkl"),
                "value": os.path.join(folder, f"value{pid}.pkl"),
                "joined": os.path.join(folder, f"joined{pid}"),
            }
            for pid in range(num_processes)
        ]
        for pid in range(num_processes):
            logs.append(open(os.path.join(folder, f"output{pid}.txt"), "wb"))  # noqa: SIM115 (closed below)
        started = Workers(folder, orders, counts, env, cwd, logs)
        joined = [os.path.join(folder, f"joined{pid}") for pid in range(num_processes)]
        results = _watch(started, joined, timeout, start_timeout, after_death, logs)
        for r in results:
            with open(os.path.join(folder, f"output{r.process_id}.txt"), "rb") as f:
                output, _, r.stacks = f.read().decode(errors="replace").partition(STACKS_HEADER)
            r.output = DEVICE_LIST_WARNING.sub("", drop_gloo_lines(output))
            r.coordinator = coordinator
            value_path = os.path.join(folder, f"value{r.process_id}.pkl")
            if r.ok and os.path.exists(value_path):
                with open(value_path, "rb") as f:
                    r.value = pickle.load(f)
            if os.path.exists(value_path + ".error"):
                with open(value_path + ".error", "rb") as f:
                    r.error = pickle.load(f)
            if os.path.exists(value_path + ".lines"):
                with open(value_path + ".lines", "rb") as f:
                    r.error_lines = pickle.load(f)
    finally:
        if started is not None:
            started.end()
        for log in logs:
            log.close()
        shutil.rmtree(folder, ignore_errors=True)
    if check and not all(r.ok for r in results):
        raise WorkersFailed(_failure_message(results, timeout, start_timeout), results)
    return results


def _watch(
    started: Workers,
    joined: list[str],
    timeout: float,
    start_timeout: float,
    after_death: float,
    logs: Sequence[Any],
) -> list[WorkerResult]:
    """Waits for the workers; kills them all at a deadline, or ``after_death`` s after one died.

    The deadline is ``start_timeout`` s after the start until every worker has written its ``joined``
    file, then ``timeout`` s after the last one did. Those still running then are asked where they are
    first (:func:`_ask_where`, into ``logs``, their open log files).
    """
    procs = started.handles
    start = time.monotonic()
    ended: dict[int, float] = {}
    stopped: dict[int, str] = {}
    deadline = start + start_timeout
    reason = f"{START_LIMIT} ({start_timeout:g} s) passed before every process joined"
    all_joined = False
    while len(ended) < len(procs):
        now = time.monotonic()
        if not all_joined and all(os.path.exists(j) for j in joined):
            all_joined = True
            if "died" not in reason:
                deadline, reason = now + timeout, f"the {timeout:g} s {TIMED_OUT}"
        for pid, p in enumerate(procs):
            if pid not in ended and p.poll() is not None:
                ended[pid] = now - start
                if p.returncode != 0 and deadline > now + after_death and "died" not in reason:
                    deadline, reason = now + after_death, f"process {pid} died"
        if now >= deadline:
            for pid, p in enumerate(procs):
                if p.poll() is None:
                    stopped[pid] = reason
                    ended[pid] = now - start
            _ask_where([procs[pid] for pid in stopped], [logs[pid] for pid in stopped])
            started.end()
            break
        time.sleep(0.05)
    return [
        WorkerResult(
            process_id=pid,
            returncode=None if pid in stopped else p.returncode,
            output="",
            seconds=ended.get(pid, time.monotonic() - start),
            stopped_by_launcher=stopped.get(pid),
        )
        for pid, p in enumerate(procs)
    ]


def _ask_where(procs: Sequence[Any], logs: Sequence[Any], wait: float = 2.0) -> None:
    """Asks each process to write every thread's Python stack under :data:`STACKS_HEADER` in its log
    (SIGUSR1: faulthandler, registered by the boot program), and waits up to ``wait`` s for them to.

    The launcher's writes and the worker's share the log's file offset (one open file, inherited), so
    the header lands in order. A process that has not registered the handler yet (still starting
    Python) dies of the signal; it was about to be killed anyway.
    """
    sizes: dict[Any, tuple[int, float]] = {}  # log -> (its size, when it last changed)
    for p, log in zip(procs, logs, strict=True):
        if p.poll() is None and p.pid is not None:  # a worker not forked yet has nothing to say
            log.write(STACKS_HEADER.encode())
            log.flush()
            sizes[log] = (os.fstat(log.fileno()).st_size, 0.0)
            p.send_signal(signal.SIGUSR1)
    end = time.monotonic() + wait
    while sizes and time.monotonic() < end:  # until each log grew, then stayed put for 0.2 s
        time.sleep(0.05)
        now = time.monotonic()
        for log, (n, changed) in list(sizes.items()):
            size = os.fstat(log.fileno()).st_size
            if size != n:
                sizes[log] = (size, now)
            elif changed and now - changed > 0.2:
                del sizes[log]


def _never_joined(results: Sequence[WorkerResult]) -> bool:
    return any(r.stopped_by_launcher and START_LIMIT in r.stopped_by_launcher for r in results)


def _failure_message(results: list[WorkerResult], timeout: float, start_timeout: float) -> str:
    if _never_joined(results):
        return (
            f"the workers did not all start and join within the {start_timeout:g} s start-up limit, so the "
            "function never ran; is the machine very busy?"
        )
    dead = [r for r in results if r.stopped_by_launcher is None and r.returncode != 0]
    if dead:
        first = min(dead, key=lambda r: r.seconds)
        head = f"worker process {first.process_id} of {len(results)} died ({_exit_words(first.returncode)})"
        head += f" after {first.seconds:.1f} s. Its last lines:\n{textwrap.indent(first.last_lines(), '  ')}"
    else:
        head = f"the workers did not finish within the {timeout:g} s timeout"
    others = "; ".join(
        r.describe() for r in results if not dead or r is not min(dead, key=lambda r: r.seconds)
    )
    return f"{head}\nThe others: {others}." if others else head


def run_check(fn: Callable, *args: Any, what: str, **kwargs: Any) -> list[WorkerResult]:
    """:func:`run_workers` for a check: any failure becomes one :class:`shardbook.checks.CheckFailed`.

    ``fn`` runs in every worker and raises CheckFailed when a case is wrong. What comes back is the
    failure that caused the others: a process's own mistake (a check's message, another exception put
    in words by :func:`shardbook.errors.describe_error`, arrays of different shapes in one collective,
    a process that died) before what only follows from it in the other processes (a peer that left, a
    collective the others never joined: :func:`shardbook.errors.is_peer_error`), with the process it
    came from. A worker's output is never shown (it may hold a grader's traceback); a
    NotImplementedError (an exercise not written yet) is raised again as itself. ``what`` names the
    check in messages; ``kwargs`` go to :func:`run_workers`.

    Under the message a notebook shows ``worker_lines``: the lines of the function sent that led to
    the error in the process that raised it, or, when the timeout stopped the run, the line each process
    was stopped in. ``worker_stacks`` holds every stopped process's Python stacks, JAX's frames too,
    for whoever debugs the check; it is never shown.
    """
    from shardbook.checks import CheckFailed

    try:
        sent = function_source(fn)
        results = run_workers(fn, *args, check=False, **kwargs)
    except ValueError as e:  # the function cannot be sent to the workers
        raise CheckFailed(f"{what}: {e}.") from None
    if all(r.ok for r in results):
        return results
    message, source = _check_message(results, what, kwargs)
    if message is None:  # the exercise is not attempted yet: say so as the function itself did
        error = next(r.error for r in results if r.error and r.error[0] == "NotImplementedError")
        raise NotImplementedError(error[1])
    failed = CheckFailed(message)
    if source is not None and source.error_lines:  # shown under the message in a notebook
        failed.worker_lines = [  # type: ignore[attr-defined]
            f"  process {source.process_id} of {len(results)}, in {name}: {line}"
            for name, line in source.error_lines
        ]
    elif stopped := [(r, r.stopped_at(sent)) for r in results if TIMED_OUT in (r.stopped_by_launcher or "")]:
        # where each process was in the function when the timeout stopped it (its innermost line)
        failed.worker_lines = [  # type: ignore[attr-defined]
            f"  process {r.process_id} of {len(results)}, stopped in {at[-1][0]}: {at[-1][1]}"
            for r, at in stopped
            if at
        ]
    # Every stopped process's stacks, JAX's frames too, for whoever debugs the check (never shown).
    failed.worker_stacks = "".join(  # type: ignore[attr-defined]
        f"process {r.process_id} of {len(results)} ({r.describe()}):\n{r.stacks}" for r in results if r.stacks
    )
    raise failed


def _check_message(
    results: list[WorkerResult], what: str, kwargs: dict[str, Any]
) -> tuple[str | None, WorkerResult | None]:
    """The one message of a failed check run (None: the function raised NotImplementedError), and the
    worker whose error it tells, if one raised it."""
    from shardbook.errors import READ_THE_OTHER, describe_text, is_peer_error

    n = len(results)
    raised = [r for r in results if r.error]
    own = [r for r in raised if r.error and not is_peer_error(r.error[1])]
    peer = [r for r in raised if r.error and is_peer_error(r.error[1])]
    dead = [r for r in results if r.stopped_by_launcher is None and r.returncode != 0 and not r.error]
    mismatched = [r for r in dead if "Received data size doesn't match expected size" in r.output]
    died = [r for r in dead if not _ended_by_jax(r.output)]

    def told(r: WorkerResult) -> str:
        assert r.error is not None
        name, text = r.error
        if name == "CheckFailed":
            return f"{text} (in process {r.process_id} of {n})"
        words, hint = describe_text(name, text)
        hint = hint or "read the error from its first line."
        return (
            f"{what}: expected all {n} processes to finish, got: process {r.process_id} raised {words}. "
            f"Hint: {hint}"
        )

    def first(rs: list[WorkerResult]) -> WorkerResult:  # a check's own message first, then process order
        return min(rs, key=lambda r: (r.error is not None and r.error[0] != "CheckFailed", r.process_id))

    if any(r.error and r.error[0] == "NotImplementedError" for r in raised):
        return None, None
    if own:
        return told(first(own)), first(own)
    if mismatched:
        words, hint = describe_text("Gloo", "Received data size doesn't match expected size")
        return (
            f"{what}: expected all {n} processes to finish, got: {words.removeprefix('Gloo: ')} (Gloo "
            f"ended process {mismatched[0].process_id} of {n}). Hint: {hint}"
        ), None
    if died or (dead and not peer):
        r = min(died or dead, key=lambda r: r.seconds)
        # No seconds in the message: it reaches feedback pages, which must not depend on the machine.
        return (
            f"{what}: expected all {n} worker processes to finish, got: worker process {r.process_id} of {n} "
            f"died ({_exit_words(r.returncode)}). Hint: does your code end or kill a process?"
        ), None
    if peer:
        r = first(peer)
        finished = [o.process_id for o in results if o.ok]
        if finished:  # what the others did is known: they returned without joining
            who = " and ".join(f"process {p}" for p in finished)
            return told(r).replace(
                READ_THE_OTHER, f"{who} of {n} returned without running that collective; "
            ), r
        return told(r).replace(READ_THE_OTHER, ""), r  # the others only failed in collectives too
    if _never_joined(results):
        return (
            f"{what}: the {n} worker processes did not start and join within "
            f"{kwargs.get('start_timeout', 300.0):g} s, so nothing of yours ran; the machine is busy. "
            "Run the cell again."
        ), None
    return (
        f"{what}: expected the {n} worker processes to finish within {kwargs.get('timeout', 60.0):g} s, got "
        "them still running; they were stopped. Hint: look for a loop that never ends, or a collective that "
        "only some processes call."
    ), None


def _ended_by_jax(output: str) -> bool:
    """Whether a process was ended by JAX or Gloo because another one failed or left (not by itself)."""
    return any(
        marker in output
        for marker in (
            "detected fatal errors",
            "Received data size doesn't match expected size",
            "Connection closed by peer",
            "Connection reset by peer",
        )
    )


def print_outputs(results: Sequence[WorkerResult]) -> None:
    """Prints each worker's output under a header naming it and how it ended."""
    for r in results:
        print(f"── {r.describe()} ──")
        print(r.output.rstrip() or "(no output)")
