"""What every grader needs: meshes, placed inputs, calling a learner's function safely, describing
arguments in words, oracles and collective checks used by more than one assignment."""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import AxisType, Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from shardbook.checks import CheckFailed, describe_array, describe_error, expect_report, list_collectives
from shardbook.comms import Report, analyze

AXES = ("X", "Y")
DEFAULT_HINT = "read the error from its first line; the exercise's contract says what each argument holds."


def make_mesh(
    sizes: Sequence[int],
    names: tuple[str, ...] = AXES,
    *,
    axis_type: AxisType = AxisType.Explicit,
    shuffle: int | None = None,
    reverse: bool = False,
) -> Mesh:
    """A mesh over the first prod(sizes) devices, in id order (as ``jax.make_mesh`` on CPU).

    Args:
      sizes: the mesh's shape; names: its axis names; axis_type: Explicit (the default, as
        ``jax.make_mesh``) or Auto, for every axis.
      shuffle: a seed: the devices are put in that random order, so that a device's id and its
        position on the mesh differ.
      reverse: the devices in reverse id order.
    """
    devices = list(jax.devices()[: math.prod(sizes)])
    if shuffle is not None:
        random.Random(shuffle).shuffle(devices)
    if reverse:
        devices.reverse()
    return Mesh(np.array(devices).reshape(tuple(sizes)), names, axis_types=(axis_type,) * len(names))


def show(a: Any) -> str:
    """A short description of an argument for a failure message: meshes by layout, arrays by type."""
    if isinstance(a, Mesh):
        kind = "Explicit" if all(t == AxisType.Explicit for t in a.axis_types) else "Auto"
        order = [d.id for d in a.devices.flat]
        shuffled = "" if order == sorted(order) else f", device ids {order}"
        return f"Mesh({dict(a.shape)}, {kind} axes{shuffled})"
    if isinstance(a, (jax.Array, jax.ShapeDtypeStruct)):
        shape = ",".join(map(str, a.shape))
        spec = getattr(getattr(a, "sharding", None), "spec", None)
        return f"{a.dtype}[{shape}] {spec}" if spec is not None else describe_array(a)
    if isinstance(a, dict) and a and isinstance(next(iter(a.values())), tuple):
        return "layout{…}"  # a device → index layout: too long to print
    text = repr(a)
    return text if len(text) <= 80 else text[:77] + "..."


def small_ints(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    """Small integers stored as f32: every sum is exact, whatever order the devices add in."""
    return rng.integers(-3, 4, size=shape).astype(np.float32)


def place(x: np.ndarray, mesh: Mesh, spec: P) -> jax.Array:
    """``x`` laid out over ``mesh`` by ``spec``."""
    return jax.device_put(x, NamedSharding(mesh, spec))


def struct(shape: tuple[int, ...], mesh: Mesh, spec: P, dtype=jnp.float32) -> jax.ShapeDtypeStruct:
    """A shape-only argument with a sharding: analyse a large program without allocating it."""
    return jax.ShapeDtypeStruct(shape, dtype, sharding=NamedSharding(mesh, spec))


def call_text(name: str, args: tuple, describe: Callable[[Any], str] = show) -> str:
    """``name(arg, …)`` with each argument described by ``describe``, for a failure message."""
    return f"{name}({', '.join(describe(a) for a in args)})"


def call_learner(
    fn: Callable,
    name: str,
    *args: Any,
    where: str | None = None,
    hint: str | None = None,
    mesh: Mesh | None = None,
) -> Any:
    """Calls a learner's ``fn(*args)``; any exception becomes one CheckFailed sentence.

    Args:
      fn: the learner's function (or a wrapper of it, e.g. under jax.jit).
      name: its name in the assignment, used in the messages.
      *args: the arguments.
      where: how to describe the call; default ``name(arg, …)`` with :func:`show`.
      hint: one hint for when it raises; a general one by default.
      mesh: if given, the call runs inside ``with jax.set_mesh(mesh)``.

    Raises:
      CheckFailed: "<name> is not written yet" for NotImplementedError, else
        "<where>: expected a result, got <Error>: <first line>. Hint: <hint>"; a common JAX mistake
        (shardbook.checks.describe_error) is put in words, with its own hint instead of ``hint``.
    """
    try:
        if mesh is not None:
            with jax.set_mesh(mesh):
                return fn(*args)
        return fn(*args)
    except NotImplementedError as e:
        raise CheckFailed(f"{name} is not written yet (it raised NotImplementedError: {e}).") from None
    except CheckFailed:
        raise
    except Exception as e:
        where = where or call_text(name, args)
        words, known_hint = describe_error(e)  # a common JAX mistake gets its own sentence and hint
        raise CheckFailed(
            f"{where}: expected a result, got {words}. Hint: {known_hint or hint or DEFAULT_HINT}"
        ) from None


def analyze_learner(fn: Callable, name: str, *args: Any, where: str, hint: str) -> Report:
    """Compiles a learner's (jitted) ``fn`` for ``args`` and reads its collectives; errors become words."""
    return call_learner(analyze, name, fn, *args, where=where, hint=hint)


def collectives_text(report: Report, limit: int = 3) -> str:
    """The report's collectives in words, for a failure message."""
    return list_collectives(report.collectives, limit) or "no collectives"


def expect_kinds_and_bytes(
    report: Report,
    call: str,
    allowed: tuple[str, ...],
    bound: int,
    bound_text: str,
    hint: str,
    *,
    sent: int | None = None,
) -> None:
    """Only collectives of the ``allowed`` kinds, sending at most ``bound`` bytes per device: the
    self-checks' :func:`shardbook.checks.expect_report`, with the bound's origin in words.

    ``sent`` is the byte count to compare (the report's total by default; a06 counts all-to-alls by
    what they deliver).
    """
    expect_report(report, allowed, bound, call, hint, sent=sent, bound_text=bound_text)


# ----------------------------------------------------------------------------------------------
# Oracles used by more than one assignment: the plainest possible computations of the right answer.
# ----------------------------------------------------------------------------------------------


def oracle_block_means(host: np.ndarray, n_x: int, n_y: int) -> np.ndarray:
    """Entry (i, j): the mean of the block at mesh position (i, j) of a P('X', 'Y') layout, that is
    rows i·S/nX … and columns j·D/nY …, one block at a time in float64."""
    rows, cols = host.shape[0] // n_x, host.shape[1] // n_y
    out = np.zeros((n_x, n_y))
    for i in range(n_x):
        for j in range(n_y):
            out[i, j] = host[i * rows : (i + 1) * rows, j * cols : (j + 1) * cols].astype(np.float64).mean()
    return out
