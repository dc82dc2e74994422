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
    >>> shardbook.on_your_chips(build, "a sum")  # doctest: +SKIP
    measured on your chips (8 TPU v5 lite): a sum, 0.052 ms a call (median of the timed calls after a warm-up)

On a runtime without them it prints nothing and returns None. What it returns is a
:class:`ChipMeasurement`, which :func:`shardbook.claim` refuses: a figure measured on the learner's
hardware is printed for them, and no sentence of the book rests on it.

Three chapters call it, each with its own ``build(devices)`` functions, those it gives
``compile_for_tpu``: chapter 3 times the four one-sided matmuls, chapter 5 plain ``jit`` and the ring
collective matmul (bf16 and int32), chapter 11 the tiny model's training step of each layout on eight
chips. tests/test_chips.py runs chapter 5's on the simulated devices; none has yet run on 8 real
accelerators.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

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


def _materializer(args: tuple) -> Callable[[], tuple]:
    """Makes fresh arrays for ``args``: each ``jax.ShapeDtypeStruct`` in their pytrees becomes an array of
    its shape, dtype and sharding (ones: values do not time), anything else is passed as it is. Fresh on
    every call, since a step may donate its arguments (chapter 11's training step does)."""
    import jax
    import jax.numpy as jnp

    leaves, tree = jax.tree.flatten(args)
    abstract = [i for i, x in enumerate(leaves) if isinstance(x, jax.ShapeDtypeStruct)]
    placed = [i for i in abstract if leaves[i].sharding is not None]
    ones = jax.jit(
        lambda: [jnp.ones(leaves[i].shape, leaves[i].dtype) for i in placed],
        out_shardings=[leaves[i].sharding for i in placed],
    )

    def make() -> tuple:
        fresh = list(leaves)
        for i, array in zip(placed, ones(), strict=True):
            fresh[i] = array
        for i in set(abstract) - set(placed):
            fresh[i] = jnp.ones(leaves[i].shape, leaves[i].dtype)
        return jax.tree.unflatten(tree, fresh)

    return make


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
        the step on a mesh over ``devices``, built with no mesh set and run with its arguments' mesh
        set (a bare ``PartitionSpec`` inside resolves against it); each ``jax.ShapeDtypeStruct`` in
        ``args`` (pytrees too) is made into an array, afresh for every call, so a step that donates
        its arguments can be timed.
      label: what the step is, in the printed line ("the ring collective matmul").
      devices: the devices to run on (default: :func:`your_chips`; tests pass CPU devices).
      calls: timed calls after one warm-up call; the median is reported.
      quiet: do not print.

    Returns:
      A :class:`ChipMeasurement`, or None where there are no chips (nothing is printed then).
    """
    import jax

    from .tpu import _mesh_of

    chips = list(devices) if devices is not None else your_chips()
    if not chips or len(chips) < NUM_DEVICES:
        return None
    chips = chips[:NUM_DEVICES]
    with jax.set_mesh(None):  # built on the chips, not on a mesh the caller has set
        out = build(chips)
    fn, make_args = out[0], _materializer(tuple(out[1]))
    kwargs = dict(out[2]) if len(out) == 3 else {}
    times = []
    with jax.set_mesh(_mesh_of(out[1])):  # as compile_for_tpu lowers it: a bare P() needs the mesh
        jax.block_until_ready(fn(*make_args(), **kwargs))  # compile and warm up
        for _ in range(max(1, calls)):
            args = jax.block_until_ready(make_args())  # not timed
            start = time.perf_counter()
            jax.block_until_ready(fn(*args, **kwargs))
            times.append(time.perf_counter() - start)
    measurement = ChipMeasurement(label, chips[0].device_kind, len(chips), statistics.median(times))
    if not quiet:
        print(measurement)
    return measurement
