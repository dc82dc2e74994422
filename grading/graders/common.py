"""What every grader needs: call a learner's function safely, and describe arguments in words."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
from jax.sharding import Mesh

from shardbook.checks import CheckFailed, describe_array

DEFAULT_HINT = "read the error from its first line; the exercise's contract says what each argument holds."


def show(a: Any) -> str:
    """A short description of an argument for a failure message: meshes by layout, arrays by type."""
    if isinstance(a, Mesh):
        order = [d.id for d in a.devices.flat]
        return f"Mesh({dict(a.shape)}, device ids {order})"
    if isinstance(a, jax.Array):
        return describe_array(a)
    if isinstance(a, jax.ShapeDtypeStruct):
        return f"{a.dtype}[{','.join(map(str, a.shape))}]"
    text = repr(a)
    return text if len(text) <= 80 else text[:77] + "..."


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
        "<where>: expected a result, got <Error>: <first line>. Hint: <hint>".
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
        where = where or f"{name}({', '.join(show(a) for a in args)})"
        text = str(e).strip()
        first = text.splitlines()[0][:300] if text else ""
        raise CheckFailed(
            f"{where}: expected a result, got {type(e).__name__}: {first}. Hint: {hint or DEFAULT_HINT}"
        ) from None
