"""Your chips, beside the book's reference devices: a chapter's step measured on them, never asserted.

The book's text is checked on its reference devices, 8 simulated CPU devices (``shardbook.setup()``):
every figure a sentence quotes and every ``claim`` comes from XLA:CPU's programs, or from the TPU
compiler's for a named topology (``shardbook.compile_for_tpu``), never from the hardware a learner
happens to have. Where a runtime has 8 or more accelerators (Kaggle's TPU v5e-8, a TPU VM, a GPU
machine), ``setup()`` starts them beside the CPU devices, and a chapter may run the same step on them:

    >>> def build(devices):  # the same (fn, args) a chapter gives compile_for_tpu
    ...     mesh = jax.make_mesh((2, 4), ("X", "Y"), devices=devices)
    ...     a = jax.ShapeDtypeStruct((256, 512), jnp.float32, sharding=NamedSharding(mesh, P("X", "Y")))
    ...     return jax.jit(lambda a: a.sum()), (a,)
    >>> shardbook.on_your_chips(build, "the sum")  # doctest: +SKIP
    measured on your chips (8 TPU v5 lite): the sum, 0.052 ms a call (median of 5 after a warm-up)

On a runtime without them it prints nothing and returns None. What it returns is a
:class:`ChipMeasurement`, which :func:`shardbook.claim` refuses: a figure measured on the learner's
hardware is printed for them, and no sentence of the book rests on it.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from .setup import NUM_DEVICES, chips_platform

#: How a measurement on a learner's chips is introduced wherever it is printed.
MEASURED = "measured on your chips"


@dataclass(frozen=True)
class ChipMeasurement:
    """A step timed on the learner's accelerators: printed, never a basis for a claim."""

    label: str
    device: str  # "TPU v5 lite"
    count: int
    seconds: float  # the median of the timed calls

    def __str__(self) -> str:
        return (
            f"{MEASURED} ({self.count} {self.device}): {self.label}, {self.seconds * 1e3:.3g} ms a call "
            f"(median of the timed calls after a warm-up)"
        )


def your_chips() -> list | None:
    """The accelerators ``setup()`` started beside the reference devices (8 or more), else None."""
    platform = chips_platform()
    if platform is None:
        return None
    import jax

    return list(jax.devices(platform))


def _materialize(arg: Any) -> Any:
    """A ShapeDtypeStruct becomes an array of its shape, dtype and sharding (ones: values do not time)."""
    import jax
    import jax.numpy as jnp

    if isinstance(arg, jax.ShapeDtypeStruct):
        sharding = arg.sharding
        return jax.jit(lambda: jnp.ones(arg.shape, arg.dtype), out_shardings=sharding)()
    return arg


def on_your_chips(
    build: Callable[[Sequence], tuple],
    label: str,
    *,
    devices: Sequence | None = None,
    calls: int = 5,
    quiet: bool = False,
) -> ChipMeasurement | None:
    """Runs a chapter's step on the learner's accelerators and prints its time, *measured on your chips*.

    Args:
      build: ``build(devices) -> (fn, args)`` or ``(fn, args, kwargs)``, as for ``compile_for_tpu``:
        the step on a mesh over ``devices``; ``jax.ShapeDtypeStruct`` arguments are made into arrays.
      label: what the step is, in the printed line ("the ring collective matmul").
      devices: the devices to run on (default: :func:`your_chips`; tests pass CPU devices).
      calls: timed calls after one warm-up call; the median is reported.
      quiet: do not print.

    Returns:
      A :class:`ChipMeasurement`, or None where there are no chips (nothing is printed then).
    """
    import jax

    chips = list(devices) if devices is not None else your_chips()
    if not chips or len(chips) < NUM_DEVICES:
        return None
    chips = chips[:NUM_DEVICES]
    out = build(chips)
    fn, args = out[0], tuple(_materialize(a) for a in out[1])
    kwargs = dict(out[2]) if len(out) == 3 else {}
    jax.block_until_ready(fn(*args, **kwargs))  # compile and warm up
    times = []
    for _ in range(max(1, calls)):
        start = time.perf_counter()
        jax.block_until_ready(fn(*args, **kwargs))
        times.append(time.perf_counter() - start)
    measurement = ChipMeasurement(label, chips[0].device_kind, len(chips), statistics.median(times))
    if not quiet:
        print(measurement)
    return measurement
