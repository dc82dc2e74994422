"""Graders for assignment 12_many_hosts (several JAX processes, checkpoints onto another mesh).

The learner's functions run where they are meant to run: in every process of a 2-process job on
localhost (``shardbook.hosts.run_check``: 2 processes × 4 CPU devices, Gloo collectives, every
process killed when the check ends, whatever happens).

How an answer reaches the worker processes: ``check_*`` turns the learner's function into source text
with ``shardbook.hosts.function_source`` (its own source, plus the imports, constants and helper
functions of the notebook it uses) and passes that text to a case runner of this module, which each
worker imports; the runner executes the text in a fresh namespace and calls the function on every
case. A failed case raises CheckFailed in the worker, which comes back as the test's message; a
worker that dies (``os._exit``, a signal, a crash) or a run past :data:`TIMEOUT` costs only this test,
with the dead process named.
"""

from __future__ import annotations

import random
import shutil
import tempfile
from collections.abc import Callable
from typing import Any

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from grading.graders.common import call_learner, show
from shardbook import hosts
from shardbook.checks import NONE_HINT, CheckFailed, describe_array

#: Seconds one 2-process run may take: well inside the 120 s limit per test cell (a start costs ~5 s).
TIMEOUT = 75
PROCESSES, DEVICES = 2, 4

# global_batch cases: (mesh shape, device order, rows per process, columns).
BATCH_CASES: list[tuple[tuple[int, int], str, int, int]] = [
    ((2, 4), "id", 4, 3),
    ((2, 4), "reversed", 4, 3),
    ((4, 2), "shuffled", 8, 2),
    ((8, 1), "reversed", 4, 5),
    ((1, 8), "id", 12, 1),
    ((4, 2), "by process last", 2, 4),
]

HINT_ORDER = (
    "the rows must come out in dataset order, whatever the mesh's device order: process p loaded rows "
    "p·R to (p+1)·R, but on this mesh they belong on devices of another process. Place the rows where "
    "their process holds them first, then lay the array out on the mesh (JAX moves rows between "
    "processes)."
)


def _mesh(shape: tuple[int, int], order: str) -> Mesh:
    """A mesh of every device of the job with axes ('X', 'Y'), devices in the given order."""
    devices = list(jax.devices())
    if order == "reversed":
        devices.reverse()
    elif order == "shuffled":
        random.Random(11).shuffle(devices)
    elif order == "by process last":  # process 1's devices interleaved with process 0's
        half = len(devices) // 2
        devices = [d for pair in zip(devices[half:], devices[:half], strict=True) for d in pair]
    return Mesh(np.array(devices).reshape(shape), ("X", "Y"))


def _dataset(rows: int, cols: int) -> np.ndarray:
    """The whole dataset: every row different, so a row in the wrong place is seen."""
    return (np.arange(rows * cols, dtype=np.float32).reshape(rows, cols) + 1) * 0.5


def _ids(x: jax.Array) -> list[int]:
    devices: Any = x.sharding.device_set  # jax.Device has no stub attributes
    return [d.id for d in devices]


def _learner(source: str) -> Callable:
    namespace: dict[str, Any] = {"__name__": "__learner__"}
    exec(compile(source, "<your answer>", "exec"), namespace)
    return namespace["__entry__"]


def _gathered(x: jax.Array) -> np.ndarray:
    from jax.experimental import multihost_utils

    return np.asarray(multihost_utils.process_allgather(x, tiled=True))


def _row_origins(got: np.ndarray, data: np.ndarray) -> str:
    """Which dataset row came back in each row position, for a failure message."""
    origins = []
    for row in got[: min(len(got), 8)]:
        match = [i for i, d in enumerate(data) if np.array_equal(row, d)]
        origins.append(str(match[0]) if match else "?")
    more = ", …" if len(got) > 8 else ""
    return f"rows holding dataset rows [{', '.join(origins)}{more}]"


# ----------------------------------------------------------------------------------------------
# Case runners: these run inside every worker process.
# ----------------------------------------------------------------------------------------------


def global_batch_cases(source: str) -> int:
    """Runs the learner's global_batch (given as source) on every case, in this process of the job."""
    fn = _learner(source)
    me = jax.process_index()
    for shape, order, rows, cols in BATCH_CASES:
        mesh = _mesh(shape, order)
        data = _dataset(PROCESSES * rows, cols)
        mine = data[me * rows : (me + 1) * rows]
        first, last = me * rows, (me + 1) * rows - 1
        where = f"global_batch(local_rows f32[{rows},{cols}] = dataset rows {first}…{last}, {show(mesh)})"
        got = call_learner(fn, "global_batch", mine, mesh, where=where)
        expected_sharding = NamedSharding(mesh, P("X", None))
        if not isinstance(got, jax.Array) or got.shape != data.shape:
            hint = NONE_HINT if got is None else "return the global array, not this process's rows."
            raise CheckFailed(
                f"{where}: expected a jax.Array float32[{data.shape[0]},{cols}] (the whole dataset), got "
                f"{describe_array(got)}. Hint: {hint}"
            )
        if not got.sharding.is_equivalent_to(expected_sharding, 2):
            raise CheckFailed(
                f"{where}: expected float32[{data.shape[0]},{cols}] sharded P('X', None) on the mesh given, "
                f"got {describe_array(got)} on devices {sorted(_ids(got))}. "
                "Hint: the result must be laid out on `mesh` itself."
            )
        full = _gathered(got)
        if not np.array_equal(full, data):
            raise CheckFailed(
                f"{where}: expected the dataset's rows in order 0…{len(data) - 1}, got "
                f"{_row_origins(full, data)}. Hint: {HINT_ORDER}"
            )
    return len(BATCH_CASES)


# The train state restore_on must restore: (name, shape, dtype, spec it is saved with).
STATE: list[tuple[str, tuple[int, ...], Any, P]] = [
    ("w", (8, 16), np.float32, P("X", "Y")),
    ("b", (16,), np.float32, P("Y")),
    ("m", (16, 8), np.float32, P(None, "X")),
    ("step", (), np.int32, P()),
]


def _state_value(name: str, shape: tuple[int, ...], dtype: Any) -> np.ndarray:
    size = int(np.prod(shape)) if shape else 1
    offset = {"w": 0, "b": 1000, "m": 2000, "step": 7}[name]
    return (np.arange(size) + offset).astype(dtype).reshape(shape)


def _indexer(value: np.ndarray) -> Callable[[Any], np.ndarray]:
    return lambda index: value[index]


def save_state(path: str, mesh_shape: tuple[int, int] = (2, 4)) -> None:
    """Saves the grader's train state from every process (Orbax StandardCheckpointer)."""
    import orbax.checkpoint as ocp  # type: ignore[import-untyped]

    mesh = _mesh(mesh_shape, "id")
    state = {}
    for name, shape, dtype, spec in STATE:
        value = _state_value(name, shape, dtype)
        state[name] = jax.make_array_from_callback(shape, NamedSharding(mesh, spec), _indexer(value))
    checkpointer = ocp.StandardCheckpointer()
    checkpointer.save(path, state)
    checkpointer.wait_until_finished()


RESTORE_SPEC_HINT = (
    "keep the spec each array was saved with: read it from the checkpoint's metadata (its sharding's "
    "partition_spec) for each array, instead of one spec for all."
)
RESTORE_MESH_HINT = (
    "keep the spec each array was saved with, on the mesh given (a restore without a target uses the "
    "mesh it was saved from)."
)


def _same_mesh(a: Mesh, b: Mesh) -> bool:
    """The same devices in the same places, under the same axis names."""
    ids = [[d.id for d in m.devices.flat] for m in (a, b)]
    return a.axis_names == b.axis_names and a.devices.shape == b.devices.shape and ids[0] == ids[1]


def expect_restored(fn: Callable, mesh: Mesh, path: str) -> None:
    """Calls restore_on(mesh, path) and checks every array: saved values, saved spec, on ``mesh``."""
    names = sorted(name for name, *_ in STATE)
    where = (
        f"restore_on({show(mesh)}, path of a checkpoint saved from 2 processes × 4 devices, "
        f"a checkpoint that holds {names})"
    )
    hint = (
        "build a target for each array from the checkpoint's metadata (shape, dtype, and the "
        "partition_spec it was saved with) on the mesh given, and restore with it."
    )
    got = call_learner(fn, "restore_on", mesh, path, where=where, hint=hint)
    if not isinstance(got, dict) or sorted(got) != sorted(name for name, *_ in STATE):
        hint = NONE_HINT if got is None else "return the restored tree as Orbax gives it."
        raise CheckFailed(
            f"{where}: expected a dict with keys {sorted(n for n, *_ in STATE)}, got {describe_array(got)}. "
            f"Hint: {hint}"
        )
    for name, shape, dtype, spec in STATE:
        x = got[name]
        expected = NamedSharding(mesh, spec)
        if not isinstance(x, jax.Array) or not x.sharding.is_equivalent_to(expected, len(shape)):
            on = getattr(getattr(x, "sharding", None), "mesh", None)
            on_text = show(on) if isinstance(on, Mesh) else "no mesh"
            if isinstance(on, Mesh) and _same_mesh(on, mesh):  # the mesh is right, the spec is not
                on_text, hint = "the mesh given", RESTORE_SPEC_HINT
            else:
                hint = RESTORE_MESH_HINT
            raise CheckFailed(
                f"{where}: expected {name!r} as {np.dtype(dtype).name}[{','.join(map(str, shape))}] sharded "
                f"{spec} on the mesh given, got {describe_array(x)} on {on_text}. Hint: {hint}"
            )
        if x.dtype != dtype or not np.array_equal(_gathered(x), _state_value(name, shape, dtype)):
            raise CheckFailed(
                f"{where}: expected {name!r} to hold the saved values, got different ones "
                f"({describe_array(x)}). Hint: restore the checkpoint at `path`; do not rebuild the state."
            )


def restore_on_cases(source: str, path: str) -> int:
    """In every worker: save the state on a 2 × 4 mesh, then restore it with the learner's function
    onto a 4 × 2 mesh in another device order."""
    fn = _learner(source)
    save_state(path)
    expect_restored(fn, _mesh((4, 2), "reversed"), path)
    return 1


# ----------------------------------------------------------------------------------------------
# Checks: these run in the grading kernel.
# ----------------------------------------------------------------------------------------------


def check_global_batch(fn: Callable) -> None:
    """global_batch in each of 2 processes × 4 devices, for several row counts and mesh layouts."""
    source = _source(fn, "global_batch")
    hosts.run_check(
        global_batch_cases,
        source,
        what="global_batch in 2 processes",
        num_processes=PROCESSES,
        devices_per_process=DEVICES,
        timeout=TIMEOUT,
    )


def check_restore_on(fn: Callable) -> None:
    """restore_on of a checkpoint saved from 2 processes × 4 devices: in those 2 processes onto a
    4 × 2 mesh of another device order, then here (1 process) onto 4 devices and onto 8 shuffled ones."""
    source = _source(fn, "restore_on")
    folder = tempfile.mkdtemp(prefix="a12-")
    try:
        path = f"{folder}/state"
        hosts.run_check(
            restore_on_cases,
            source,
            path,
            what="restore_on in 2 processes",
            num_processes=PROCESSES,
            devices_per_process=DEVICES,
            timeout=TIMEOUT,
        )
        devices = jax.devices()
        expect_restored(fn, Mesh(np.array(devices[:4]).reshape(2, 2), ("X", "Y")), path)
        shuffled = list(devices)
        random.Random(5).shuffle(shuffled)
        expect_restored(fn, Mesh(np.array(shuffled).reshape(1, 8), ("X", "Y")), path)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _source(fn: Callable, name: str) -> str:
    if not callable(fn):
        raise CheckFailed(f"{name}: expected a function, got {describe_array(fn)}.")
    try:
        return hosts.function_source(fn)
    except ValueError as e:
        raise CheckFailed(
            f"{name} could not be sent to the worker processes: {e}. Hint: the graders run your function "
            "in other processes, from its source; import what it needs inside the answer cell."
        ) from None
