"""Checks on a compiled program, for self-checks and graders: which collectives it runs, how many bytes
they move, its largest intermediate, its estimated time, how much of its matmul time runs beside its
communication, and the work and traffic it must have. Each raises :class:`~shardbook.failures.CheckFailed`
with a message written for a learner; :mod:`shardbook.checks` re-exports them, so a notebook's
``from shardbook.checks import expect_collectives`` keeps working.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .errors import describe_error
from .failures import _fail


def analyze_for_check(fn: Any, args: tuple, what: str) -> Any:
    """``analyze(fn, *args)``; a function that does not trace or compile is a CheckFailed on ``what``."""
    from .comms import analyze

    try:
        return analyze(fn, *args)
    except NotImplementedError:  # "not attempted yet" says it all
        raise
    except Exception as e:  # the learner's function does not trace or compile
        words, hint = describe_error(e)
        _fail(what, "a function that compiles for these arguments", words, hint)


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

    Example: doubling each device's own block needs no communication; a sum over the sharded rows does:

      >>> import jax, jax.numpy as jnp
      >>> from jax.sharding import NamedSharding, PartitionSpec as P
      >>> x = jax.device_put(jnp.ones((8, 4)), NamedSharding(jax.make_mesh((8,), ("X",)), P("X")))
      >>> expect_no_collectives(lambda x: x * 2, x)
      >>> expect_no_collectives(lambda x: x.sum(), x)  # doctest: +ELLIPSIS
      Traceback (most recent call last):
        ...
      shardbook.checks.CheckFailed: the compiled program: expected no collectives (each device works on its \
own block), got 1 collective: all-reduce f32[] over 'X' (groups of 8), 7 B per device at ...
    """
    report = analyze_for_check(fn, args, what)
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


def _allowed_kinds(allowed: Sequence[str] | str) -> tuple[str, ...]:
    from .comms import COLLECTIVE_KINDS

    allowed = (allowed,) if isinstance(allowed, str) else tuple(allowed)
    for kind in allowed:
        if kind not in COLLECTIVE_KINDS:
            raise ValueError(
                f"unknown collective kind {kind!r} in allowed: expected some of {COLLECTIVE_KINDS}"
            )
    return allowed


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
    allowed = _allowed_kinds(allowed)
    report = analyze_for_check(fn, args, what)
    return expect_report(report, allowed=allowed, max_bytes=max_bytes, what=what, hint=hint)


def expect_report(
    report: Any,
    allowed: Sequence[str] | str = (),
    max_bytes: int | None = None,
    what: str = "the compiled program",
    hint: str | None = None,
    *,
    sent: int | None = None,
    bound_text: str | None = None,
) -> Any:
    """:func:`expect_collectives` on a :class:`shardbook.comms.Report` already made.

    ``sent`` is the byte count compared with ``max_bytes`` (the report's ``total_bytes`` by default);
    ``bound_text`` says in words where ``max_bytes`` comes from. Returns the report.
    """
    from .comms import format_bytes

    allowed = _allowed_kinds(allowed)
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
    sent = report.total_bytes if sent is None else sent
    if max_bytes is not None and sent > max_bytes:
        _fail(
            what,
            f"at most {format_bytes(max_bytes)} sent per device" + (f" ({bound_text})" if bound_text else ""),
            f"{format_bytes(sent)} ({list_collectives(report.collectives)})",
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
    from .comms import largest_intermediates, lower

    try:
        text = lower(fn, args, {}).compile().as_text()
    except NotImplementedError:
        raise
    except Exception as e:
        words, error_hint = describe_error(e)
        _fail(what, "a function that compiles for these arguments", words, error_hint)
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


# ---------------------------------------------------------------------------------------------------
# checks on the modelled TPU time (they use shardbook.cost)


def expect_estimate_within(
    report: Any,
    baseline: Any,
    *,
    what: str,
    baseline_name: str,
    margin: float | None = None,
    chip: str = "v5e",
    hint: str | None = None,
) -> str:
    """Checks that a program's modelled TPU time is at most ``baseline``'s plus the model's margin.

    Args:
      report: the :func:`shardbook.analyze` report of the program checked.
      baseline: the report of the program to compare with, or its estimate in microseconds.
      baseline_name: how to call the baseline in the message ("plain jit").
      margin: the allowed excess as a fraction; default :data:`shardbook.cost.MODEL_MARGIN`, the
        model's accuracy against published measurements, so a correct program is never refused on a
        difference the model cannot resolve.

    Returns:
      One line, the estimate next to the target, for a self-check to print.

    Raises:
      CheckFailed: the estimate is above the target; the message gives both and the exposed
        communication (time not hidden behind matmuls).
    """
    from .cost import MODEL_MARGIN, estimate

    margin = MODEL_MARGIN if margin is None else margin
    got = estimate(report, chip=chip)
    base_us = (
        float(baseline) if isinstance(baseline, (int, float)) else estimate(baseline, chip=chip).microseconds
    )
    target = base_us * (1 + margin)
    target_text = f"at most {target:.1f} µs ({baseline_name}: {base_us:.1f} µs, + {margin:.0%}"
    target_text += " for the model's accuracy)"
    if got.microseconds > target:
        _fail(
            what,
            f"a TPU {chip} estimate {target_text}",
            f"{got.microseconds:.1f} µs, {got.exposed_communication_seconds * 1e6:.1f} µs of it "
            "communication not hidden behind matmuls",
            hint,
        )
    return f"TPU {chip} estimate: {got.microseconds:.1f} µs; target: {target_text}."


def overlap_seconds(est: Any) -> float:
    """How long, in an :class:`shardbook.cost.Estimate`'s timeline, a collective and a matmul run at once."""
    compute = [(e.start, e.end) for e in est.events if e.stream == "compute"]
    comm = [(e.start, e.end) for e in est.events if e.stream == "communication"]
    return sum(max(0.0, min(b, d) - max(a, c)) for a, b in compute for c, d in comm)


def matmul_seconds_beside_communication(est: Any) -> float:
    """How much of an :class:`shardbook.cost.Estimate`'s matmul time passes while some collective runs
    (each moment counted once, however many collectives run then)."""
    spans: list[list[float]] = []
    for start, end in sorted((e.start, e.end) for e in est.events if e.stream == "communication"):
        if spans and start <= spans[-1][1]:
            spans[-1][1] = max(spans[-1][1], end)
        else:
            spans.append([start, end])
    compute = [(e.start, e.end) for e in est.events if e.stream == "compute"]
    return sum(max(0.0, min(b, d) - max(a, c)) for a, b in compute for c, d in spans)


def expect_overlap(
    report: Any,
    *,
    what: str,
    min_collectives: int = 1,
    min_share: float = 0.0,
    chip: str = "v5e",
    hint: str | None = None,
) -> None:
    """Checks that communication is split up and runs while matmuls run.

    The program (as :func:`shardbook.analyze` reads it: XLA:CPU's all-reduce combiner switched off,
    so chunks you reduce separately stay separate) must hold at least ``min_collectives`` collectives,
    and in the modelled timeline at least one of them must run at the same time as a matmul — it only
    needs values computed before the last matmul. Doing every matmul first and reducing afterwards,
    however many pieces, fails.

    ``min_share``: at least this fraction of the program's matmul time must pass while a collective
    runs (:func:`matmul_seconds_beside_communication`), so that the matmuls hidden behind the
    communication do a real share of the work: a tiny matmul beside the permutes, or a one-column
    chunk, does not count.

    Raises:
      CheckFailed: too few collectives, none overlapping a matmul, or too little matmul time beside them.
    """
    from .cost import estimate

    n = len(report.collectives)
    if n < min_collectives:
        _fail(
            what,
            f"the communication split into at least {min_collectives} collectives",
            f"{n} collective{'s' if n != 1 else ''}"
            + (f": {list_collectives(report.collectives)}" if n else ""),
            hint,
        )
    est = estimate(report, chip=chip)
    if overlap_seconds(est) <= 1e-12:
        _fail(
            what,
            "a collective that runs while a matmul is still running",
            f"{n} collective{'s' if n != 1 else ''}, each waiting for the matmuls before it "
            f"({list_collectives(report.collectives)})",
            hint,
        )
    beside, total = matmul_seconds_beside_communication(est), est.compute_seconds
    if min_share > 0 and beside < min_share * total:
        _fail(
            what,
            f"at least {min_share:.1%} of the matmul time ({min_share * total * 1e6:.1f} of "
            f"{total * 1e6:.1f} µs) to pass while a collective runs",
            f"{beside * 1e6:.1f} µs ({beside / total if total else 0:.1%}): the matmuls beside the "
            "communication do little of the work",
            hint,
        )


def expect_flops_and_bytes(
    report: Any,
    *,
    flops: int,
    min_bytes: int,
    what: str,
    flops_text: str,
    bytes_text: str,
    slack: float = 0.05,
    hint: str | None = None,
) -> None:
    """Checks that a compiled program does the work its contract needs, at the size it was compiled for.

    Its matmuls (``report.flops``, per device) must do between ``flops`` and ``flops * (1 + slack)``
    FLOPs — the whole product, and no matmul beside it whose result is not needed — and its collectives
    must send at least ``min_bytes`` per device: the blocks the contract says must travel, in their
    own dtype. A program that does something else at a size only compiled, never run, fails here.

    Raises:
      CheckFailed: too few or too many FLOPs, or too few bytes; naming where the figure comes from.
    """
    from .comms import format_bytes

    size_hint = (
        "a program compiled at this size (never run) must do the same work as the one whose values "
        "were checked: no shortcut that depends on the shapes."
    )
    if report.flops < flops:
        _fail(
            what,
            f"matmuls of at least {flops:,} FLOPs per device ({flops_text})",
            f"{report.flops:,}",
            hint or size_hint,
        )
    if report.flops > flops * (1 + slack):
        _fail(
            what,
            f"matmuls of at most {int(flops * (1 + slack)):,} FLOPs per device ({flops_text}, + {slack:.0%})",
            f"{report.flops:,}: a matmul the result does not need",
            "multiply each block once, and only by what the result needs; a matmul beside the real "
            "work is not overlap.",
        )
    if report.total_bytes < min_bytes:
        _fail(
            what,
            f"at least {format_bytes(min_bytes)} sent per device ({bytes_text})",
            f"{format_bytes(report.total_bytes)}"
            + (f" ({list_collectives(report.collectives)})" if report.collectives else ""),
            hint or size_hint,
        )
