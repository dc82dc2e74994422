"""Memory per device of a compiled program, as a training loop runs it: :func:`footprint`.

``compiled.memory_analysis()`` reports the bytes of a program's arguments, its outputs, the outputs
that reuse a donated argument's buffer (*alias*) and its temporaries; at its peak a device holds
arguments + outputs - alias + temporaries (Chapter 10).

On the CPU backend (the simulated devices of this book) two choices of XLA:CPU hide what a program
itself keeps alive. Its default scheduler orders work for concurrency: it starts independent
collectives early, so every all-gather of an FSDP step runs before the first matmul and every layer's
gathered weights are alive at once, whatever the program saves for its backward pass. And it combines
independent all-reduces into one (``cpu-all-reduce-combiner``), so every gradient stays alive until the
last one is ready. Accelerator backends schedule under a memory limit instead. :func:`footprint`
therefore reads a copy compiled, never executed, with XLA:CPU's memory-optimized scheduler and without
the combiner (:data:`CPU_MEMORY_OPTIONS`): its temporaries are what the program keeps alive.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .compiled import Footprint, TpuProgram
from .compiling import lower
from .cpu import READ_ONLY

#: XLA options of the CPU copy that :func:`footprint` reads (jax/jaxlib 0.12.0.1); it is never executed,
#: so LLVM's optimisations are off too (:data:`~shardbook.comms.cpu.READ_ONLY`).
CPU_MEMORY_OPTIONS = {
    "xla_cpu_scheduler_type": "CPU_SCHEDULER_TYPE_MEMORY_OPTIMIZED",
    "xla_disable_hlo_passes": "cpu-all-reduce-combiner",
    **READ_ONLY,
}


def footprint(fn: Callable, *args: Any, **kwargs: Any) -> Footprint:
    """Compiles ``fn(*args, **kwargs)`` and reports its memory per device (nothing is executed).

    Args:
      fn: a jitted function (give it ``donate_argnums`` to count updates made in place), a function
        ``jax.jit`` accepts, or a program compiled for a TPU (:func:`shardbook.compile_for_tpu`; no
        arguments then).
      *args, **kwargs: the arguments: arrays or ``jax.ShapeDtypeStruct`` with their shardings.

    Returns:
      A :class:`Footprint`; on the CPU backend read from a copy compiled with
      :data:`CPU_MEMORY_OPTIONS` (see the module's docstring).

    Raises:
      DoesNotFit: a TPU program the compiler refused for lack of HBM (its verdict says by how much).

    Example: doubling 1,024 floats in place holds them once:

      >>> import jax, jax.numpy as jnp
      >>> f = jax.jit(lambda x: x * 2, donate_argnums=0)
      >>> memory = footprint(f, jax.ShapeDtypeStruct((1024,), jnp.float32))
      >>> memory.arguments, memory.outputs, memory.aliased, memory.peak
      (4096, 4096, 4096, 4096)
    """
    if isinstance(fn, TpuProgram):
        fn.require_compiled()
        assert fn.memory is not None
        return fn.memory
    lowered = lower(fn, args, kwargs)
    options = CPU_MEMORY_OPTIONS if _lowered_for_cpu(args, kwargs) else None
    stats = lowered.compile(compiler_options=options).memory_analysis()
    if stats is None:
        raise ValueError("this backend reports no memory analysis (compiled.memory_analysis() is None)")
    return Footprint.of(stats)


def _lowered_for_cpu(args: tuple, kwargs: dict) -> bool:
    """Whether arguments placed on devices (or, when none is, JAX's default backend) are CPU ones."""
    import jax

    for leaf in jax.tree_util.tree_leaves((args, kwargs)):
        devices = getattr(getattr(leaf, "sharding", None), "device_set", None)
        if devices:
            return next(iter(devices)).platform == "cpu"
    return jax.default_backend() == "cpu"
