"""The entry points: :func:`analyze` (a function and its arguments) and :func:`analyze_text` (a program).

They put the pieces together: compile (:mod:`~shardbook.comms.compiling`), ask the program
(:mod:`~shardbook.comms.queries`), correct for the CPU backend (:mod:`~shardbook.comms.cpu`), and fill
in the records of :mod:`~shardbook.comms.report`.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Callable
from typing import Any

from ..hlo import (
    DTYPE_BYTES,
    ArrayType,
    Computation,
    Instruction,
    Module,
    parse_mesh_groups,
    parse_module,
    parse_pairs,
    parse_replica_groups,
    replica_groups_text,
)
from . import cpu
from .compiled import Footprint, TpuProgram
from .compiling import compile_texts, find_mesh, platform_of
from .queries import (
    axes_of_groups,
    collective_kind,
    count_f32_collectives,
    cycle_size,
    executions_per_computation,
    num_partitions,
    total_flops,
    types_of,
)
from .report import Collective, Report, ring_bytes


def analyze(fn: Callable, *args: Any, **kwargs: Any) -> Report:
    """Compiles ``fn(*args, **kwargs)`` and reports its collectives, matmul FLOPs and temporary memory.

    Args:
      fn: a jitted function (anything with ``.lower``), a function ``jax.jit`` accepts, or a program
        compiled for a TPU (:func:`shardbook.compile_for_tpu`; no arguments then: its text is read).
      *args, **kwargs: the arguments, already placed (their NamedShardings name the mesh axes).

    Returns:
      A :class:`Report`: ``.collectives`` (list of :class:`Collective`), ``.count(kind)``,
      ``.total_bytes`` and ``.flops`` (per device, loop trip counts included), ``.temp_bytes``,
      ``.notes`` (corrections made for the CPU backend, corrections that could not be made, loops with
      unknown trip counts). It prints as a table, and as an HTML table in a notebook.

    Example: A[B_X, D_Y] @ W[D, F_Y] with the result sharded like A: each device gathers its row
    block of A over 'Y', (4-1)/4 of bf16[512,2048] (8 simulated CPU devices, as ``shardbook.setup()``
    gives):

      >>> import jax, jax.numpy as jnp
      >>> from jax.sharding import AxisType, NamedSharding, PartitionSpec as P
      >>> mesh = jax.make_mesh((2, 4), ("X", "Y"), axis_types=(AxisType.Auto,) * 2)
      >>> a = jax.device_put(jnp.ones((1024, 2048), jnp.bfloat16), NamedSharding(mesh, P("X", "Y")))
      >>> w = jax.device_put(jnp.ones((2048, 8192), jnp.bfloat16), NamedSharding(mesh, P(None, "Y")))
      >>> f = jax.jit(lambda a, w: a @ w, out_shardings=NamedSharding(mesh, P("X", "Y")))
      >>> report = analyze(f, a, w)
      >>> report.count("all-gather"), report.total_bytes
      (1, 1572864)
      >>> print(report.collectives[0].describe())
      all-gather bf16[512,2048] over 'Y' (groups of 4), 1.5 MiB per device
    """
    if isinstance(fn, TpuProgram):
        return _analyze_tpu_program(fn)
    start = time.perf_counter()
    compiled, text, corrected_text, notes = compile_texts(fn, *args, **kwargs)
    mesh = find_mesh(compiled, args)
    report = analyze_text(corrected_text or text, mesh=mesh, executed_text=text if corrected_text else None)
    report.notes = [*notes, *report.notes]
    memory = compiled.memory_analysis()  # None where the backend has no memory analysis
    report.temp_bytes = int(memory.temp_size_in_bytes) if memory is not None else None
    report.memory = Footprint.of(memory) if memory is not None else None
    report.platform = platform_of(compiled)
    report.text = text
    report.seconds = time.perf_counter() - start
    return report


def _analyze_tpu_program(program: TpuProgram) -> Report:
    """The report of a program compiled for a TPU (:func:`shardbook.compile_for_tpu`)."""
    program.require_compiled()
    assert program.text is not None
    report = analyze_text(program.text, mesh=program.mesh_axes)
    report.memory = program.memory
    report.temp_bytes = program.memory.temporaries if program.memory else None
    report.platform = "tpu"
    report.seconds = program.compile_seconds
    return report


def analyze_text(text: str, mesh: Any = None, executed_text: str | None = None) -> Report:
    """Like :func:`analyze` for program text you already have (``compiled.as_text()``).

    ``mesh`` (a ``jax.sharding.Mesh`` or a dict ``{'X': 2, 'Y': 4}``) names the axes; ``executed_text``
    is the program the backend really runs when ``text`` is the bf16-preserving copy, used only to say
    in the notes what was corrected.
    """
    module = parse_module(text)
    if mesh is None:
        mesh_shape = {}
    elif isinstance(mesh, dict):
        mesh_shape = dict(mesh)
    else:
        mesh_shape = dict(zip(mesh.axis_names, mesh.devices.shape, strict=True))
    num_devices = num_partitions(text) or (math.prod(mesh_shape.values()) if mesh_shape else 1)
    platform = platform_of_text(text)
    executions, unknown, notes = executions_per_computation(module, infer_trip_counts=platform == "tpu")
    collectives = collectives_in(module, executions, unknown, mesh_shape, num_devices)
    flops = total_flops(module, executions)
    notes = list(dict.fromkeys(notes))
    upcast = [c for c in collectives if c.upcast_by_backend]
    if executed_text is not None:
        widened = count_f32_collectives(parse_module(executed_text)) - count_f32_collectives(module)
        if widened > 0 or upcast:
            notes.append(
                "the CPU backend runs bf16 collectives in f32 (twice the bytes); this report shows the "
                "dtype and bytes the program means, read from a copy compiled without "
                f"{cpu.disabled_passes().replace(',', ' and ')}"
            )
    elif upcast:
        notes.append("some all-reduce/reduce-scatter reducers were promoted to f32; reported as bf16")
    if any(c.emitted_as for c in collectives):
        notes.append(
            "the TPU compiler fuses an all-reduce and the dynamic-slice after it into one reduce-scatter "
            "(a fusion calling %all-reduce-scatter); reported as reduce-scatter, with (n-1)/n of the bytes"
            if platform == "tpu"
            else "the CPU backend runs all-reduce + dynamic-slice, a pair that XLA:GPU fuses into one "
            "reduce-scatter; reported as reduce-scatter, with (n-1)/n of the bytes"
        )
    return Report(
        collectives=collectives,
        flops=flops,
        temp_bytes=None,
        mesh_axes=mesh_shape,
        notes=notes,
        module=module,
        text=text,
        executions=executions,
        platform=platform,
    )


# A TPU program's arrays carry tiled layouts: ``f32[8,128]{1,0:T(8,128)}``.
_TPU_TILED_LAYOUT = re.compile(r"\{[0-9,]*:T\(\d")


def platform_of_text(text: str) -> str:
    """``'tpu'`` for a program compiled by the TPU compiler (its layouts are tiled), else ``''``.

    Example:
      >>> platform_of_text("ENTRY %e (p: f32[8,128]) -> f32[8,128] { %p = f32[8,128]{1,0:T(8,128)} ...")
      'tpu'
      >>> platform_of_text("ENTRY %e (p: f32[8,128]) -> f32[8,128] { %p = f32[8,128]{1,0} ...")
      ''
    """
    return "tpu" if _TPU_TILED_LAYOUT.search(text) else ""


def collectives_in(
    module: Module,
    executions: dict[str, int],
    unknown: set[str],
    mesh_shape: dict[str, int],
    num_devices: int,
) -> list[Collective]:
    """Every collective of ``module`` as a :class:`Collective` record, in program order."""
    out = []
    done_of: dict[str, Instruction] = {}
    for comp in module.computations.values():
        for inst in comp.instructions:
            kind, phase = collective_kind(inst.opcode)
            if phase == "done" and inst.operands:
                done_of[inst.operands[0]] = inst
    # the TPU compiler runs some collectives as asynchronous fusions in parts (a start, one or two
    # continuations, a done), each fusion holding the same collective (kind, channel and shape): counted
    # once; two different collectives of a program can share a channel
    fused = {callee for c in module.computations.values() for i in c.instructions if i.opcode == "fusion"
             for _, callee in i.called()}  # fmt: skip
    by_channel: dict[tuple[str, str, str], Collective] = {}
    for comp in module.computations.values():
        times = executions.get(comp.name, 0)
        if times == 0:
            continue
        for inst in comp.instructions:
            kind, phase = collective_kind(inst.opcode)
            if kind is None or phase == "done":
                continue
            channel = inst.attr("channel_id") if comp.name in fused else None
            part_of = by_channel.get((kind, channel, _shape(inst))) if channel else None
            if part_of is not None:
                part_of.parts += 1
                continue
            operand_types = [t for op in inst.operands for t in types_of(comp, op)]
            operand_types = [t for t in operand_types if t.dtype != "token"]
            result_types = inst.arrays
            if phase == "start":
                done = done_of.get(inst.name)
                result_types = done.arrays if done is not None else result_types[-len(operand_types) or -1 :]
            record = _make_record(
                module, comp, inst, kind, operand_types, result_types, mesh_shape, num_devices
            )
            record.executions = times
            record.unknown_trip_count = comp.name in unknown
            record.computation = comp.name
            out.append(record)
            if channel:
                by_channel[kind, channel, _shape(inst)] = record
    order = {c.name: i for i, c in enumerate(module.computations.values())}
    out.sort(key=lambda c: (c.computation != module.entry.name, order.get(c.computation, 0)))
    return out


def _shape(inst: Instruction) -> str:
    """An instruction's result types without their layouts: ``f32[64,64]{1,0:T(8,128)}`` -> ``f32[64,64]``."""
    return re.sub(r"\{[^{}]*\}", "", inst.type_text)


def collective_fusion_parts(module: Module) -> dict[tuple[str, str], tuple[str, list[tuple[str, str]]]]:
    """The TPU compiler's asynchronous collective fusions, part by part: each fusion (keyed by its
    computation's name and its own) that holds a collective another fusion of the same computation holds
    too (the same kind, channel and shape), with its role, ``"start"``, ``"continuation"`` or
    ``"done"`` (the first, a middle and the last such fusion in program order), and the (fused
    computation, collective) pair of every part. One of those pairs names the record
    :func:`collectives_in` counted once, unless that record went to a part in another computation (a
    continuation inside a loop's body): the cost model then charges the parts no link time.

    Example: an all-gather the compiler split into a start and a done (between them, in its programs,
    a compute fusion that carries it on: chapter 11's FSDP step has several such gathers):

      >>> text = '''HloModule m
      ... %g1 (p: f32[1,1024]) -> f32[1,2048] {
      ...   %p = f32[1,1024]{1,0:T(1,128)} parameter(0)
      ...   ROOT %ag = f32[1,2048] all-gather(%p), channel_id=9, replica_groups={{0,1}}, dimensions={1}
      ... }
      ... %g2 (p: f32[1,1024]) -> f32[1,2048] {
      ...   %p = f32[1,1024]{1,0:T(1,128)} parameter(0)
      ...   ROOT %ag.2 = f32[1,2048] all-gather(%p), channel_id=9, replica_groups={{0,1}}, dimensions={1}
      ... }
      ... ENTRY %e (x: f32[1,1024]) -> f32[1,2048] {
      ...   %x = f32[1,1024]{1,0:T(1,128)} parameter(0)
      ...   %start = f32[1,2048]{1,0:T(1,128)} fusion(%x), kind=kCustom, calls=%g1
      ...   ROOT %done = f32[1,2048]{1,0:T(1,128)} fusion(%start), kind=kCustom, calls=%g2
      ... }'''
      >>> parts = collective_fusion_parts(parse_module(text))
      >>> [(name, role) for (_, name), (role, _) in parts.items()]
      [('start', 'start'), ('done', 'done')]
    """
    holding: dict[str, tuple[tuple[str, str, str], str]] = {}  # fused computation -> (its key, collective)
    for comp in module.computations.values():
        for inst in comp.instructions:
            kind, phase = collective_kind(inst.opcode)
            channel = inst.attr("channel_id")
            if kind is not None and phase != "done" and channel:
                holding.setdefault(comp.name, ((kind, channel, _shape(inst)), inst.name))
    out: dict[tuple[str, str], tuple[str, list[tuple[str, str]]]] = {}
    for comp in module.computations.values():
        groups: dict[tuple[str, str, str], list[tuple[str, str, str]]] = {}  # (kind, channel, shape) -> parts
        for inst in comp.instructions:
            if inst.opcode != "fusion":
                continue
            for _, callee in inst.called():
                if callee in holding:
                    key, name = holding[callee]
                    groups.setdefault(key, []).append((inst.name, callee, name))
                    break
        for parts in groups.values():
            if len(parts) < 2:
                continue
            pairs = [(callee, name) for _, callee, name in parts]
            for k, (fusion, _, _) in enumerate(parts):
                role = "start" if k == 0 else "done" if k == len(parts) - 1 else "continuation"
                out[comp.name, fusion] = (role, pairs)
    return out


def collectives_fused_whole(
    module: Module, collectives: list[Collective]
) -> dict[tuple[str, str], Collective]:
    """Each collective a fusion holds whole, with no start and done of its own (the TPU compiler's
    all-reduce-scatter fusions), keyed by the computation's name and the fusion's that run it. A fusion
    that is one part of an asynchronous collective (:func:`collective_fusion_parts`) is not one.

    Example: the reduce-scatter a program runs as one all-reduce-scatter fusion:

      >>> text = '''HloModule m, num_partitions=2
      ... %add (x: f32[], y: f32[]) -> f32[] {
      ...   %x = f32[] parameter(0)
      ...   %y = f32[] parameter(1)
      ...   ROOT %s = f32[] add(%x, %y)
      ... }
      ... %all-reduce-scatter (p: f32[8,128]) -> f32[4,128] {
      ...   %p = f32[8,128]{1,0:T(8,128)} parameter(0)
      ...   %ar = f32[8,128]{1,0:T(8,128)} all-reduce(%p), channel_id=1, replica_groups={{0,1}}, to_apply=%add
      ...   %i = u32[] partition-id()
      ...   %z = u32[] constant(0)
      ...   ROOT %ds = f32[4,128]{1,0:T(4,128)} dynamic-slice(%ar, %i, %z), dynamic_slice_sizes={4,128}
      ... }
      ... ENTRY %e (x: f32[8,128]) -> f32[4,128] {
      ...   %x = f32[8,128]{1,0:T(8,128)} parameter(0)
      ...   ROOT %rs = f32[4,128]{1,0:T(4,128)} fusion(%x), kind=kCustom, calls=%all-reduce-scatter
      ... }'''
      >>> report = analyze_text(text)
      >>> [(key, c.kind) for key, c in collectives_fused_whole(report.module, report.collectives).items()]
      [(('e', 'rs'), 'reduce-scatter')]
    """
    parts = collective_fusion_parts(module)
    held = {c.computation: c for c in collectives}
    return {(comp.name, i.name): c for comp in module.computations.values() for i in comp.instructions
            if i.opcode == "fusion" and (comp.name, i.name) not in parts
            for _, callee in i.called() if (c := held.get(callee))}  # fmt: skip


def _make_record(
    module: Module,
    comp: Computation,
    inst: Instruction,
    kind: str,
    operand_types: list[ArrayType],
    result_types: list[ArrayType],
    mesh_shape: dict[str, int],
    num_devices: int,
) -> Collective:
    dtype = (result_types or operand_types or [ArrayType("f32", ())])[0].dtype
    upcast = False
    if dtype == "f32" and inst.operands and kind != "all-reduce" and kind != "reduce-scatter":
        # a convert from bf16 right before the collective: the backend widened it (seen inside loops)
        intended = cpu.intended_dtype(module, comp, inst.operands[0])
        if intended == "bf16":
            dtype, upcast = intended, True
    reducer = inst.attr("to_apply") or ""
    if kind in ("all-reduce", "reduce-scatter") and reducer.endswith("_promoted"):
        intended = None
        if inst.operands:
            intended = cpu.intended_dtype(module, comp, inst.operands[0])
        intended = intended if intended and intended != dtype else "bf16"
        dtype, upcast = intended, True
    groups: list[list[int]]
    axes: tuple[str, ...]
    if kind == "collective-permute":
        pairs = parse_pairs(inst.attr("source_target_pairs"))
        groups = [list(p) for p in pairs]
        axes = axes_of_groups(groups, mesh_shape)
        group_size = cycle_size(pairs)
    else:
        rg = replica_groups_text(inst)
        if rg and rg.startswith("mesh"):
            groups, hlo_axes, grouped = parse_mesh_groups(rg)
            # the names in the program may be 'axis_0', ...: map them by position to the mesh's names
            if mesh_shape and list(hlo_axes.values()) == list(mesh_shape.values()):
                rename = dict(zip(hlo_axes, mesh_shape, strict=True))
                axes = tuple(rename[a] for a in grouped)
            else:
                axes = tuple(grouped)
        else:
            groups = parse_replica_groups(rg)
            if not groups:
                groups = [list(range(num_devices))]
            axes = axes_of_groups(groups, mesh_shape)
        group_size = len(groups[0]) if groups else num_devices
    size = DTYPE_BYTES.get(dtype, 4)
    operand_bytes = sum(t.elements for t in operand_types) * size
    result_bytes = sum(t.elements for t in result_types) * size
    emitted_as = ""
    kept = (
        cpu.reduce_scatter_blocks(module, comp, inst, group_size)
        if kind == "all-reduce" and group_size > 1
        else None
    )
    if kept is not None:
        kind, emitted_as = "reduce-scatter", "all-reduce + dynamic-slice"
        result_types = [ArrayType(dtype, block.dims) for block in kept]
        result_bytes = operand_bytes // group_size
    src = module.source_of(inst)
    return Collective(
        kind=kind,
        name=inst.name,
        dtype=dtype,
        operand_shapes=tuple(t.dims for t in operand_types),
        result_shapes=tuple(t.dims for t in result_types),
        group_size=group_size,
        axes=axes,
        groups=groups,
        executions=1,
        bytes_per_execution=ring_bytes(kind, group_size, operand_bytes, result_bytes),
        source=str(src) if src else "",
        op_name=module.op_name(inst),
        upcast_by_backend=upcast,
        emitted_as=emitted_as,
    )
