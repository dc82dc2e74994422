"""Comparisons for self-checks and graders, with failure messages written for learners.

Every check raises :class:`CheckFailed` with one message of the form
``"<what>: expected <this>, got <that>. Hint: <one hint>"`` and never a traceback from deep inside
JAX: a learner's function that returns the wrong kind of object is described, not crashed on.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np


class CheckFailed(AssertionError):
    """A check did not pass. The message says what was expected, what came back, and a hint."""


def _fail(what: str, expected: str, got: str, hint: str | None = None) -> None:
    message = f"{what}: expected {expected}, got {got}."
    if hint:
        message += f" Hint: {hint}"
    raise CheckFailed(message)


def _spec_text(spec: Any) -> str:
    entries = [repr(e) if not isinstance(e, tuple) else "(" + ", ".join(map(repr, e)) + ")" for e in spec]
    return "P(" + ", ".join(entries) + ")"


def describe_array(x: Any) -> str:
    """A short description of a value: dtype, shape and, for a JAX array, its sharding.

    Example:
      >>> import numpy as np
      >>> describe_array(np.zeros((2, 3), np.float32))
      'a NumPy array float32[2,3]'
    """
    try:
        import jax
    except ImportError:  # pragma: no cover - jax is a dependency
        jax = None
    if jax is not None and isinstance(x, jax.Array):
        shape = ",".join(map(str, x.shape))
        text = f"{x.dtype}[{shape}]"
        sharding = getattr(x, "sharding", None)
        spec = getattr(sharding, "spec", None)
        if spec is not None:
            if sharding.is_fully_replicated and x.ndim > 0:
                text += " replicated"
            else:
                text += f" sharded {_spec_text(spec)}"
        elif sharding is not None and len(sharding.device_set) == 1:
            text += " on one device"
        return text
    if isinstance(x, np.ndarray):
        return f"a NumPy array {x.dtype}[{','.join(map(str, x.shape))}]"
    if isinstance(x, (list, tuple, set, dict)):
        text = repr(x)
        return f"the {type(x).__name__} {text if len(text) <= 60 else text[:57] + '...'}"
    if x is None:
        return "None (did the function forget to return?)"
    text = repr(x)
    text = text if len(text) <= 60 else text[:57] + "..."
    kind = type(x).__name__
    if type(x).__name__ == "P" or kind == "PartitionSpec":
        return f"the PartitionSpec {text}"
    return text if text.startswith(kind) else f"{kind} {text}"


def expect_equal(got: Any, expected: Any, what: str = "the result", hint: str | None = None) -> None:
    """Checks ``got == expected`` for plain Python values (ints, tuples, sets, strings…).

    Raises:
      CheckFailed: with both values in the message.
    """
    try:
        same = bool(got == expected)
    except Exception:  # e.g. an array compared with a tuple
        same = False
    if not same:
        _fail(what, repr(expected), repr(got) if _is_plain(got) else describe_array(got), hint)


def _is_plain(x: Any) -> bool:
    return isinstance(x, (int, float, str, bool, tuple, list, set, frozenset, dict))


def expect_shape(
    got: Any, expected: Sequence[int], what: str = "the result", hint: str | None = None
) -> None:
    """Checks that ``got`` is an array of the given shape."""
    shape = getattr(got, "shape", None)
    if shape is None:
        _fail(what, f"an array of shape {tuple(expected)}", describe_array(got), hint)
    if tuple(shape) != tuple(expected):
        _fail(what, f"shape {tuple(expected)}", f"shape {tuple(shape)}", hint)


def expect_allclose(
    got: Any,
    expected: Any,
    what: str = "the result",
    *,
    rtol: float = 1e-5,
    atol: float = 1e-5,
    hint: str | None = None,
) -> None:
    """Checks that ``got`` has ``expected``'s shape and values within tolerance.

    The message names the first wrong position and the largest error, so a learner can see whether
    everything is off or one block is.

    Raises:
      CheckFailed: wrong type, wrong shape, or values too far apart.
    """
    expected = np.asarray(expected)
    if not hasattr(got, "shape") or not hasattr(got, "dtype"):
        _fail(what, f"an array of shape {expected.shape}", describe_array(got), hint)
    try:
        got_np = np.asarray(got)
    except Exception as e:  # e.g. a deleted or non-addressable array
        _fail(what, f"an array of shape {expected.shape}", f"an array that cannot be read ({e})", hint)
    if got_np.shape != expected.shape:
        _fail(what, f"shape {expected.shape}", f"shape {got_np.shape}", hint)
    a = got_np.astype(np.float64) if got_np.dtype != bool else got_np
    b = expected.astype(np.float64) if expected.dtype != bool else expected
    close = np.isclose(a, b, rtol=rtol, atol=atol, equal_nan=True)
    if not close.all():
        bad = np.argwhere(~close)
        first = tuple(int(i) for i in bad[0])
        err = np.abs(a - b)
        _fail(
            what,
            f"{b[first].item()!r} at index {first}",
            f"{a[first].item()!r} ({len(bad)} of {close.size} entries differ; "
            f"largest error {np.nanmax(err):.3g})",
            hint,
        )


def expect_sharding(x: Any, expected: Any, what: str = "the result", hint: str | None = None) -> None:
    """Checks how a JAX array is laid out: ``expected`` is a Sharding or a PartitionSpec.

    A PartitionSpec is compared on ``x``'s own mesh; equivalent layouts (e.g. ``P('X', None)`` and
    ``P('X')``) pass.
    """
    import jax
    from jax.sharding import NamedSharding, PartitionSpec

    if not isinstance(x, jax.Array):
        _fail(what, "a JAX array", describe_array(x), hint)
    if isinstance(expected, PartitionSpec):
        mesh = getattr(x.sharding, "mesh", None)
        if mesh is None:
            _fail(what, f"an array sharded {_spec_text(expected)} over a mesh", describe_array(x), hint)
        expected_sharding = NamedSharding(mesh, expected)
        expected_text = f"sharded {_spec_text(expected)}"
    else:
        expected_sharding = expected
        spec = getattr(expected, "spec", None)
        expected_text = f"sharded {_spec_text(spec)}" if spec is not None else str(expected)
    if not x.sharding.is_equivalent_to(expected_sharding, x.ndim):
        _fail(what, f"{x.dtype}[{','.join(map(str, x.shape))}] {expected_text}", describe_array(x), hint)


def expect_type(
    got: Any, expected: type | tuple[type, ...], what: str = "the result", hint: str | None = None
) -> None:
    """Checks ``isinstance(got, expected)``."""
    if not isinstance(got, expected):
        names = (
            " or ".join(t.__name__ for t in expected) if isinstance(expected, tuple) else expected.__name__
        )
        _fail(what, f"a {names}", describe_array(got), hint)


# ---------------------------------------------------------------------------------------------------
# checks on the compiled program (they use shardbook.comms)


def _analyze_for_check(fn: Any, args: tuple, what: str) -> Any:
    from .comms import analyze

    try:
        return analyze(fn, *args)
    except Exception as e:  # the learner's function does not trace or compile
        message = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        _fail(what, "a function that compiles for these arguments", f"{type(e).__name__}: {message[:200]}")


def list_collectives(collectives: Sequence[Any], limit: int = 3) -> str:
    """The first ``limit`` collectives described in words, joined by '; ' (empty if there are none)."""
    texts = [c.describe() for c in collectives[:limit]]
    if len(collectives) > limit:
        texts.append(f"and {len(collectives) - limit} more")
    return "; ".join(texts)


def expect_no_collectives(
    fn: Any, *args: Any, what: str = "the compiled program", hint: str | None = None
) -> None:
    """Checks that ``fn(*args)`` compiles to a program with no communication between devices.

    Raises:
      CheckFailed: naming each collective found, its shape, mesh axes and source line.

    Example:
      >>> expect_no_collectives(per_shard_mean, x_sharded)  # doctest: +SKIP
    """
    report = _analyze_for_check(fn, args, what)
    if report.collectives:
        n = len(report.collectives)
        _fail(
            what,
            "no collectives (each device works on its own block)",
            f"{n} collective{'s' if n > 1 else ''}: {list_collectives(report.collectives)}",
            hint
            or "look at the source line named: a reduction or a reshape across a sharded dimension needs "
            "data from other devices; keep it inside the block, or reshard the input first.",
        )


def expect_collectives(
    fn: Any,
    *args: Any,
    allowed: Sequence[str] | str = (),
    max_bytes: int | None = None,
    what: str = "the compiled program",
    hint: str | None = None,
) -> Any:
    """Checks that ``fn(*args)`` communicates only with the ``allowed`` kinds and at most ``max_bytes``.

    Args:
      allowed: collective kinds that may appear ("all-gather", "all-reduce", "reduce-scatter",
        "all-to-all", "collective-permute"); anything else fails. Empty: any kind is allowed.
      max_bytes: the most bytes one device may send over the whole call (loop trip counts included),
        by the ring formulas of :mod:`shardbook.comms`. None: no limit.

    Returns:
      The :class:`shardbook.comms.Report`, for further checks.

    Raises:
      CheckFailed: a kind not allowed is present, or too many bytes move.
    """
    from .comms import COLLECTIVE_KINDS, format_bytes

    allowed = (allowed,) if isinstance(allowed, str) else tuple(allowed)
    for kind in allowed:
        if kind not in COLLECTIVE_KINDS:
            raise ValueError(
                f"unknown collective kind {kind!r} in allowed: expected some of {COLLECTIVE_KINDS}"
            )
    report = _analyze_for_check(fn, args, what)
    if allowed:
        bad = [c for c in report.collectives if c.kind not in allowed]
        if bad:
            _fail(
                what,
                "only " + " or ".join(allowed),
                list_collectives(bad),
                hint
                or f"XLA inserted {bad[0].kind} because a sharding did not line up; write the communication "
                f"yourself with {' / '.join(allowed)} inside shard_map, or change the in/out shardings.",
            )
    if max_bytes is not None and report.total_bytes > max_bytes:
        _fail(
            what,
            f"at most {format_bytes(max_bytes)} sent per device",
            f"{format_bytes(report.total_bytes)} ({list_collectives(report.collectives)})",
            hint or "move the smaller operand, not the larger one, or avoid gathering a full array.",
        )
    return report


def expect_no_intermediate_larger_than(
    fn: Any, *args: Any, elements: int, what: str = "the compiled program", hint: str | None = None
) -> None:
    """Checks that no array of ``elements`` or more elements is made while computing ``fn(*args)``.

    Every array in the compiled program is scanned, per device, including values inside fusions (an
    [S, D, F] product that XLA keeps inside one kernel still counts); the inputs themselves do not.

    Raises:
      CheckFailed: naming the largest offending array and the operation that made it.
    """
    from .comms import _lower, largest_intermediates

    try:
        text = _lower(fn, args, {}).compile().as_text()
    except Exception as e:
        _fail(what, "a function that compiles for these arguments", f"{type(e).__name__}: {str(e)[:200]}")
    found = largest_intermediates(text, elements)
    if found:
        name, array, op_name = max(found, key=lambda f: f[1].elements)
        made_by = op_name.rsplit("/", 1)[-1] if op_name else name
        _fail(
            what,
            f"no array with {elements:,} or more elements on a device",
            f"{array} ({array.elements:,} elements) made by {made_by}"
            + (f", and {len(found) - 1} more" if len(found) > 1 else ""),
            hint
            or "contract as you go (einsum / dot_general, or a loop over chunks) instead of building the "
            "full broadcast product and summing it afterwards.",
        )
