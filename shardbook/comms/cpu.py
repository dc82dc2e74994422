"""What the CPU backend (the simulated devices this book uses) does differently, and the corrections.

* The CPU compiler turns bf16 collectives into f32 ones (the ``float-normalization-bf16`` pass),
  doubling their bytes, and combines independent all-reduces into one (``cpu-all-reduce-combiner``).
  :func:`compile_without_cpu_passes` compiles a second, never-executed copy with those passes switched
  off (:data:`CPU_PASSES`), and without LLVM's optimisations (:data:`READ_ONLY`). That copy keeps bf16
  for all-gather, all-to-all and collective-permute; all-reduce and reduce-scatter stay f32 but keep a
  reducer whose name ends in ``_promoted``, so :func:`intended_dtype` reports them with the dtype the
  program meant (bf16).
* The SPMD partitioner writes a reduce-scatter as an all-reduce followed by a dynamic-slice that keeps
  1/n of the result; XLA:GPU's ``ReduceScatterCreator`` pass fuses the pair into one reduce-scatter,
  and XLA:CPU runs no such pass. :func:`reduce_scatter_blocks` finds that pair.

The copy costs a whole compile, and it can differ from the executed program only where one of those
passes acted: :func:`copy_can_differ` says so from the program itself (bf16 anywhere in what JAX handed
XLA; an all-reduce of several operands, as the combiner writes one, in the executed program), and
``shardbook.comms.compiling`` compiles the copy only then (the others' copies were the very program).

XLA ignores a pass name it does not know, without an error. So before trusting the copy,
:func:`passes_without_effect` compiles a tiny program that each pass changes and reports any name that
changed nothing (a pass renamed in a newer XLA); the report then says which correction is missing.
"""

from __future__ import annotations

import functools
import re
from typing import Any

from ..hlo import ArrayType, Computation, Instruction, Module, without_debug_info
from .queries import value_type
from .report import COLLECTIVE_KINDS

#: XLA:CPU options for a copy that is compiled only to be read (its text, its ``memory_analysis()``),
#: never executed: LLVM runs without its optimisations. It runs after every HLO pass and the buffer
#: assignment, so the program text and memory_analysis() are the same as at the default level
#: (tests/test_comms.py checks both); about half the CPU time of such a compile is saved.
READ_ONLY = {"xla_backend_optimization_level": 0}

#: The CPU passes switched off in the copy the analyzer reads (jax/jaxlib 0.12.0.1), with what each does.
CPU_PASSES = {
    "float-normalization-bf16": "runs bf16 collectives in f32",
    "cpu-all-reduce-combiner": "combines independent all-reduces into one",
}

# an instruction of one of the collective kinds in program text: ``= f32[8] all-gather(`` (or -start)
_COLLECTIVE_OP = re.compile(rf" ({'|'.join(map(re.escape, COLLECTIVE_KINDS))})(-start)?\(")

# an all-reduce whose result is a tuple (several operands, as cpu-all-reduce-combiner writes one): one
# instruction a line, ``%all-reduce.7 = (f32[40]{0}, /*index=5*/f32[5,24]{1,0}) all-reduce(``
_COMBINED_ALL_REDUCE = re.compile(r"^\s*(?:ROOT )?%?[\w.\-]+ = \(.*\) all-reduce(?:-start)?\(", re.M)

# ops a value passes through unchanged on its way from an all-reduce to the dynamic-slice
PASS_THROUGH = ("convert", "bitcast", "copy", "reshape", "bitcast-convert")


def disabled_passes() -> str:
    """The value of XLA's ``xla_disable_hlo_passes`` option for :data:`CPU_PASSES`.

    Example:
      >>> disabled_passes()
      'float-normalization-bf16,cpu-all-reduce-combiner'
    """
    return ",".join(CPU_PASSES)


def has_collectives(text: str) -> bool:
    """Whether program text has an instruction of one of :data:`~shardbook.comms.report.COLLECTIVE_KINDS`.

    Example:
      >>> has_collectives("%ag = bf16[8]{0} all-gather-start(bf16[4]{0} %p)")
      True
      >>> has_collectives("%m = f32[8]{0} multiply(f32[8]{0} %p, f32[8]{0} %p)")
      False
    """
    return _COLLECTIVE_OP.search(text) is not None


def copy_can_differ(lowered: Any, text: str) -> bool:
    """Whether the copy without :data:`CPU_PASSES` can differ from the executed program ``text`` of
    ``lowered``: only where one of those passes acted.

    ``float-normalization-bf16`` rewrites bf16 operations only, and XLA:CPU makes no bf16 of its own:
    without ``bf16`` anywhere in the program JAX hands XLA (``lowered.as_text()``), it has nothing to
    do. ``cpu-all-reduce-combiner`` joins all-reduces into one of several operands (a tuple result):
    where the executed program has no such all-reduce, it joined nothing. A pass that did nothing
    leaves the rest of the pipeline the same input, so the copy would be the executed program itself.
    (``lowered`` None: the executed text alone is read.)

    Example: a float32 sum over devices (one all-reduce of one array) needs no copy:
      >>> copy_can_differ(None, "%ar = f32[4]{0} all-reduce(f32[4]{0} %p), to_apply=%add")
      False
      >>> copy_can_differ(None, "%ar = (f32[4]{0}, f32[]) all-reduce(f32[4]{0} %p, f32[] %q)")
      True
    """
    if _COMBINED_ALL_REDUCE.search(text):
        return True
    return lowered is not None and "bf16" in lowered.as_text()


def pass_notes() -> list[str]:
    """A note for each pass of :data:`CPU_PASSES` this XLA does not know (:func:`passes_without_effect`),
    said for every program with collectives, whether its copy is compiled or not."""
    return [
        f"the correction for a CPU pass that {CPU_PASSES[name]} could not be applied: this XLA does not "
        f"know a pass named {name!r} (renamed?), so figures it affects are those of the program the CPU "
        "runs; update shardbook.comms.cpu.CPU_PASSES"
        for name in passes_without_effect(tuple(CPU_PASSES))
    ]


def compile_without_cpu_passes(lowered: Any) -> tuple[str | None, list[str]]:
    """(text of ``lowered`` compiled without :data:`CPU_PASSES`, notes on what could not be done).

    The text is None when XLA refuses the option itself; a pass name XLA does not know is not an
    error for XLA, so :func:`passes_without_effect` is asked, and each such name gets a note
    (:func:`pass_notes`). Callers compile this copy only for a program with collectives
    (:func:`has_collectives`) that one of the passes may have changed (:func:`copy_can_differ`): these
    passes change nothing else the analyzer reads.
    """
    import jax

    notes = pass_notes()
    try:
        options = {**READ_ONLY, "xla_disable_hlo_passes": disabled_passes()}
        text = lowered.compile(compiler_options=options).as_text()
    except jax.errors.JaxRuntimeError as e:  # e.g. an XLA without the xla_disable_hlo_passes option
        first_line = str(e).splitlines()[0] if str(e) else type(e).__name__
        notes.append(
            "the corrections for the CPU backend could not be applied (XLA refused to compile a copy "
            f"without {disabled_passes()}: {first_line}); bytes are those of the program the CPU runs, "
            "where bf16 collectives move f32"
        )
        return None, notes
    return text, notes


@functools.cache
def passes_without_effect(names: tuple[str, ...]) -> tuple[str, ...]:
    """The pass names whose switching off leaves a small probe program unchanged (unknown to XLA), its
    debug information aside (:func:`shardbook.hlo.without_debug_info`: a compile that JAX's persistent
    cache answered carries its own).

    The probe (compiled once per process for two CPU devices) has a bf16 all-gather, which
    float-normalization widens to f32, and two independent all-reduces, which the combiner joins.
    With fewer than two CPU devices nothing can be probed, and nothing is reported.
    """
    import jax
    import jax.numpy as jnp
    import numpy as np
    from jax.sharding import AxisType, Mesh, NamedSharding
    from jax.sharding import PartitionSpec as P

    devices = jax.devices("cpu")[:2]
    if len(devices) < 2:
        return ()
    mesh = Mesh(np.array(devices), ("i",), axis_types=(AxisType.Auto,))

    def spec(*s: str | None) -> NamedSharding:
        return NamedSharding(mesh, P(*s))

    a = jax.ShapeDtypeStruct((4, 8), jnp.bfloat16, sharding=spec("i"))
    b = jax.ShapeDtypeStruct((4, 8), jnp.float32, sharding=spec(None, "i"))
    probe = jax.jit(lambda a, b, c: (a * 2, b.sum(1), c.sum(1)), out_shardings=(spec(), spec(), spec()))
    with jax.set_mesh(mesh):  # the caller may have set a mesh of its own: the probe uses its mesh
        lowered = probe.lower(a, b, b)

    def text(options: dict) -> str:
        return without_debug_info(lowered.compile(compiler_options=options).as_text() or "")

    plain = text(READ_ONLY)
    return tuple(name for name in names if text({**READ_ONLY, "xla_disable_hlo_passes": name}) == plain)


def intended_dtype(module: Module, comp: Computation, name: str, depth: int = 0) -> str | None:
    """The element type a value had before the converts the CPU backend inserted around it."""
    inst = comp.by_name.get(name)
    if inst is None or depth > 8:
        return None
    if inst.opcode == "convert" and inst.operands:
        src = value_type(comp, inst.operands[0])
        return src.dtype if src else None
    if inst.opcode == "fusion":
        callee = next((module.computations.get(c) for _, c in inst.called()), None)
        if callee is not None and callee.root.opcode == "convert" and callee.root.operands:
            src = value_type(callee, callee.root.operands[0])
            return src.dtype if src else None
    if inst.opcode in ("bitcast", "copy", "reshape") and inst.operands:
        return intended_dtype(module, comp, inst.operands[0], depth + 1)
    return None


def reduce_scatter_blocks(
    module: Module, comp: Computation, inst: Instruction, n: int
) -> list[ArrayType] | None:
    """The block kept of each result of the all-reduce ``inst`` when every use of it (through
    converts and copies, and a tuple's through its get-tuple-elements) is a dynamic-slice keeping 1/n
    of it — a reduce-scatter as XLA:CPU writes it, and as the TPU compiler's all-reduce-scatter
    fusions hold it, several arrays to one all-reduce — else None."""
    if len(inst.arrays) <= 1:
        block = _kept_block(module, comp, inst.name, inst.arrays[0].elements if inst.arrays else 0, n)
        return [block] if block is not None else None
    blocks: list[ArrayType | None] = [None] * len(inst.arrays)
    for user in module.users(comp).get(inst.name, []):
        index = int(user.attr("index") or 0) if user.opcode == "get-tuple-element" else -1
        if not 0 <= index < len(blocks):
            return None
        block = _kept_block(module, comp, user.name, inst.arrays[index].elements, n)
        if block is None or (blocks[index] not in (None, block)):
            return None
        blocks[index] = block
    return [b for b in blocks if b is not None] if all(b is not None for b in blocks) else None


def _kept_block(module: Module, comp: Computation, start: str, full: int, n: int) -> ArrayType | None:
    """The block every use of ``start`` (through converts and copies) keeps with a dynamic-slice, if
    each keeps the same 1/n of its ``full`` elements, else None."""
    users = module.users(comp)
    frontier, seen, found = [start], set(), None
    while frontier:
        name = frontier.pop()
        if name in seen:
            continue
        seen.add(name)
        for user in users.get(name, []):
            opcodes = {user.opcode}
            if user.opcode == "fusion":
                callee = next((module.computations.get(c) for _, c in user.called()), None)
                if callee is None:
                    return None
                opcodes = {i.opcode for i in callee.instructions} - {"parameter", "constant"}
            if "dynamic-slice" in opcodes:
                block = _slice_in_fusion(module, user, name) if user.opcode == "fusion" else None
                block = block or (user.arrays[0] if user.arrays else None)
                if block is None or block.elements * n != full:
                    return None
                if found is not None and found.dims != block.dims:
                    return None
                found = block
            elif opcodes <= set(PASS_THROUGH):
                frontier.append(user.name)
            else:
                return None
    return found


def _slice_in_fusion(module: Module, fusion: Instruction, operand: str) -> ArrayType | None:
    """The block a dynamic-slice inside ``fusion`` keeps of its operand ``operand``, else None.

    XLA:CPU may fuse the slice of a reduce-scatter with what consumes the block — the stacking of a
    scanned layer's gradient into its ``[L, ...]`` buffer (a dynamic-update-slice) — so the fusion's
    own result is not the kept block; the slice that reads the operand's parameter is.
    """
    callee = next((module.computations.get(c) for _, c in fusion.called()), None)
    if callee is None:
        return None
    positions = {str(i) for i, op in enumerate(fusion.operands) if op == operand}
    params = {i.name for i in callee.instructions if i.opcode == "parameter" and i.operand_text in positions}
    slices = [i for i in callee.instructions if i.opcode == "dynamic-slice" and i.operands]
    slices = [i for i in slices if i.operands[0] in params]
    if not slices or len({s.arrays[0].dims for s in slices if s.arrays}) != 1 or not slices[0].arrays:
        return None
    return slices[0].arrays[0]
