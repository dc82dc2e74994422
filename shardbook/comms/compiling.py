"""Compiling a function for its arguments, and what the compiled object says about devices and mesh."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from .cpu import compile_without_cpu_passes, copy_can_differ, has_collectives, pass_notes


def lower(fn: Callable, args: Sequence[Any], kwargs: dict) -> Any:
    """``fn`` lowered for ``args``: ``fn.lower`` when it is jitted, else ``jax.jit(fn).lower``."""
    import jax

    jitted = fn if hasattr(fn, "lower") else jax.jit(fn)
    return jitted.lower(*args, **kwargs)


def compile_texts(fn: Callable, *args: Any, **kwargs: Any) -> tuple[Any, str, str | None, list[str]]:
    """(compiled, executed program text, bf16-preserving text or None, notes).

    On the CPU backend, for a program with collectives, the second text is the copy compiled without
    the passes of :data:`shardbook.comms.cpu.CPU_PASSES` (None if XLA refused it); the notes say which
    correction could not be applied. A program without collectives (which those passes cannot change
    for the analyzer) and a program for another backend get None and no notes, and no second compile;
    so does a program with collectives on which neither pass acted
    (:func:`shardbook.comms.cpu.copy_can_differ`: its copy would be the executed program), with the notes.
    """
    lowered = lower(fn, args, kwargs)
    compiled = lowered.compile()
    text = compiled.as_text()
    corrected: str | None = None
    notes: list[str] = []
    if platform_of(compiled) == "cpu" and has_collectives(text):
        if copy_can_differ(lowered, text):
            corrected, notes = compile_without_cpu_passes(lowered)
        else:
            notes = pass_notes()
    return compiled, text, corrected, notes


def _shardings(compiled: Any) -> list:
    """The shardings of the compiled program's inputs and outputs ([] when it carries none)."""
    import jax

    out = []
    for attribute in ("input_shardings", "output_shardings"):
        try:
            tree = getattr(compiled, attribute)
        except NotImplementedError:  # jax.stages says a backend may carry no sharding information
            continue
        out += jax.tree_util.tree_leaves(tree, is_leaf=lambda x: hasattr(x, "device_set"))
    return out


def platform_of(compiled: Any) -> str:
    """The platform (``'cpu'``, ``'tpu'``, ``'gpu'``) a compiled program runs on.

    Read from its shardings; a program with none (no array inputs or outputs) runs on JAX's default
    backend, whose platform is returned.
    """
    import jax

    for s in _shardings(compiled):
        if hasattr(s, "device_set"):
            return next(iter(s.device_set)).platform
    return jax.devices()[0].platform


def find_mesh(compiled: Any, args: Sequence[Any]) -> Any:
    """The mesh of the first NamedSharding among the compiled inputs/outputs or the arguments."""
    import jax

    candidates = _shardings(compiled)
    candidates += [getattr(x, "sharding", None) for x in jax.tree_util.tree_leaves(args)]
    for s in candidates:
        mesh = getattr(s, "mesh", None)
        if mesh is not None and getattr(mesh, "axis_names", None) and hasattr(mesh, "devices"):
            return mesh
    return None
