"""See the communication: every collective in a compiled, SPMD-partitioned program.

``analyze(fn, *args)`` compiles ``fn`` for the given (already placed) arguments and reads the compiled
program — the one XLA actually runs on each device — and reports every collective: its kind, dtype,
per-device shapes, group size, the mesh axes its groups span, how many times it runs (loop trip counts
multiplied), the bytes each device moves, and the Python line it came from. It also reports the
per-device matmul FLOPs (loop-aware) and the program's temporary memory.

Bytes moved per device (``n`` = group size, ``B`` = bytes of the named per-device array), the usual
ring-algorithm figures:

======================  =====================================
all-gather              (n-1)/n × B(result)
reduce-scatter          (n-1)/n × B(operand)
all-reduce              2(n-1)/n × B(operand)  (reduce-scatter then all-gather)
all-to-all              (n-1)/n × B(operand)
collective-permute      B(operand)  (each device sends its block once)
======================  =====================================

Two things about the CPU backend (the simulated devices this book uses) are corrected for, and the
report says when it did so (``Report.notes``):

* The CPU compiler turns bf16 collectives into f32 ones (a float-normalization pass), doubling their
  bytes. ``analyze`` therefore compiles a second, never-executed copy with that pass and the CPU
  all-reduce combiner switched off. That copy keeps bf16 for all-gather, all-to-all and
  collective-permute; all-reduce and reduce-scatter stay f32 but keep a reducer whose name ends in
  ``_promoted``, so they are reported with the dtype the program meant (bf16).
* The SPMD partitioner writes a reduce-scatter as an all-reduce followed by a dynamic-slice that
  keeps 1/n of the result; XLA:GPU's ``ReduceScatterCreator`` pass fuses the pair into one
  reduce-scatter, and XLA:CPU runs no such pass. ``analyze`` reports that pair as a *reduce-scatter*
  (which moves (n-1)/n × B, not 2(n-1)/n × B) and sets ``emitted_as`` on the record.

``compiled.cost_analysis()`` counts a while-loop body once; the FLOPs here are multiplied by the trip
counts XLA records in each loop's ``backend_config`` (``known_trip_count``). A loop without one is
counted once and flagged (``Collective.unknown_trip_count``, ``Report.notes``).

Example:
  >>> report = analyze(jnp.matmul, a_sharded, w_sharded)   # doctest: +SKIP
  >>> report.count("all-gather"), report.total_bytes       # doctest: +SKIP
  (1, 1572864)
"""

from __future__ import annotations

import html
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from .hlo import (
    DTYPE_BYTES,
    ArrayType,
    Computation,
    Instruction,
    Module,
    parse_mesh_groups,
    parse_module,
    parse_pairs,
    parse_replica_groups,
    parse_type,
    replica_groups_text,
)

COLLECTIVE_KINDS = ("all-gather", "all-reduce", "reduce-scatter", "all-to-all", "collective-permute")

# The passes that upcast bf16 collectives to f32 on the CPU backend (jax/jaxlib 0.12.0.1).
CPU_DISABLED_PASSES = "float-normalization-bf16,cpu-all-reduce-combiner"

_PASS_THROUGH = ("convert", "bitcast", "copy", "reshape", "bitcast-convert")


@dataclass
class Collective:
    """One collective in the compiled program (an async ``-start``/``-done`` pair counts once)."""

    kind: str  # one of COLLECTIVE_KINDS
    name: str  # the HLO instruction name
    dtype: str  # the element type the program means (after correcting for the CPU backend)
    operand_shapes: tuple[tuple[int, ...], ...]  # per device
    result_shapes: tuple[tuple[int, ...], ...]  # per device
    group_size: int
    axes: tuple[str, ...]  # mesh axes the groups span
    groups: list[list[int]]  # device groups (or [source, target] pairs for collective-permute)
    executions: int  # loop trip counts multiplied
    bytes_per_execution: int  # per device
    source: str = ""  # "file.py:12 (function)" when metadata records it
    op_name: str = ""
    upcast_by_backend: bool = False  # the CPU program ran it in f32; dtype is the intended one
    emitted_as: str = ""  # e.g. "all-reduce + dynamic-slice" when reported as reduce-scatter
    unknown_trip_count: bool = False  # inside a loop whose trip count XLA does not know
    computation: str = ""

    @property
    def bytes(self) -> int:
        """Bytes moved per device over the whole program (all executions)."""
        return self.bytes_per_execution * self.executions

    @property
    def operand_text(self) -> str:
        return ", ".join(f"{self.dtype}[{','.join(map(str, s))}]" for s in self.operand_shapes)

    @property
    def result_text(self) -> str:
        return ", ".join(f"{self.dtype}[{','.join(map(str, s))}]" for s in self.result_shapes)

    def describe(self) -> str:
        """One line for a learner: ``all-gather bf16[512,2048] over 'Y' (group of 4), 1.5 MiB``."""
        axes = ",".join(repr(a) for a in self.axes) or "no mesh axis"
        times = f" ×{self.executions}" if self.executions != 1 else ""
        where = f" at {source_text(self.source)}" if self.source else ""
        return (
            f"{self.kind} {self.result_text} over {axes} (groups of {self.group_size}){times}, "
            f"{format_bytes(self.bytes)} per device{where}"
        )


def source_text(source: str) -> str:
    """A source location as a reader of a notebook knows it.

    ``'3418627298.py:4 (f)'`` (the temporary file of a notebook cell) becomes ``'cell line 4 (f)'``;
    anything else comes back unchanged.
    """
    import re

    match = re.fullmatch(r"\d+\.py:(\d+)(.*)", source)
    return f"cell line {match.group(1)}{match.group(2)}" if match else source


@dataclass
class Report:
    """What the compiled program communicates and computes, per device, for one call."""

    collectives: list[Collective]
    flops: int  # per-device matmul FLOPs, loop-aware
    temp_bytes: int | None  # compiled.memory_analysis().temp_size_in_bytes (of the executed program)
    mesh_axes: dict[str, int]
    notes: list[str] = field(default_factory=list)
    module: Module | None = field(default=None, repr=False)  # the parsed (corrected) program
    text: str = field(default="", repr=False)  # the executed program's text
    platform: str = ""
    seconds: float = 0.0  # how long the analysis took (compilation included)
    executions: dict[str, int] = field(default_factory=dict, repr=False)  # computation -> times run

    def count(self, kind: str | None = None) -> int:
        """How many collective ops of ``kind`` (all kinds when None) the program contains."""
        _check_kind(kind)
        return sum(1 for c in self.collectives if kind is None or c.kind == kind)

    @property
    def total_bytes(self) -> int:
        """Bytes moved per device by all collectives, loop trip counts included."""
        return sum(c.bytes for c in self.collectives)

    def bytes_of(self, kind: str) -> int:
        _check_kind(kind)
        return sum(c.bytes for c in self.collectives if c.kind == kind)

    def rows(self) -> list[list[str]]:
        out = []
        for c in self.collectives:
            flag = "*" if (c.upcast_by_backend or c.emitted_as or c.unknown_trip_count) else ""
            out.append(
                [
                    c.kind + flag,
                    c.result_text,
                    ",".join(c.axes) or "-",
                    str(c.group_size),
                    ("?" if c.unknown_trip_count else "") + str(c.executions),
                    format_bytes(c.bytes),
                    source_text(c.source) if c.source else "-",
                ]
            )
        return out

    _HEADER = ["collective", "per-device result", "axes", "group", "runs", "bytes/device", "source"]

    def summary(self) -> str:
        kinds = ", ".join(f"{self.count(k)} {k}" for k in COLLECTIVE_KINDS if self.count(k))
        temp = "unknown" if self.temp_bytes is None else format_bytes(self.temp_bytes)
        return (
            f"{kinds or 'no collectives'}; {format_bytes(self.total_bytes)} moved per device; "
            f"{self.flops / 1e9:.3g} GFLOP of matmul per device; temporary memory {temp}"
        )

    def __repr__(self) -> str:
        rows = [self._HEADER, *self.rows()]
        widths = [max(len(r[i]) for r in rows) for i in range(len(self._HEADER))]
        lines = ["  ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=True)).rstrip() for r in rows]
        lines.insert(1, "  ".join("-" * w for w in widths))
        lines.append(self.summary())
        lines += [f"* {n}" for n in self.notes]
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        head = "".join(f"<th style='text-align:left'>{h}</th>" for h in self._HEADER)
        body = "".join(
            "<tr>" + "".join(f"<td style='text-align:left'>{html.escape(x)}</td>" for x in r) + "</tr>"
            for r in self.rows()
        )
        notes = "".join(f"<li>{html.escape(n)}</li>" for n in self.notes)
        return (
            f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"
            f"<p>{html.escape(self.summary())}</p>" + (f"<ul>{notes}</ul>" if notes else "")
        )


def _check_kind(kind: str | None) -> None:
    if kind is not None and kind not in COLLECTIVE_KINDS:
        raise ValueError(f"unknown collective kind {kind!r}: expected one of {COLLECTIVE_KINDS}")


def format_bytes(n: float) -> str:
    """``1572864`` → ``'1.5 MiB'``."""
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if abs(n) >= size:
            return f"{n / size:.4g} {unit}"
    return f"{int(n)} B"


def ring_bytes(kind: str, n: int, operand_bytes: int, result_bytes: int) -> int:
    """Bytes one device sends for one collective of group size ``n`` (see the module docstring)."""
    if kind == "collective-permute":
        return operand_bytes
    if n <= 1:
        return 0
    if kind == "all-gather":
        return result_bytes * (n - 1) // n
    if kind in ("reduce-scatter", "all-to-all"):
        return operand_bytes * (n - 1) // n
    if kind == "all-reduce":
        return 2 * operand_bytes * (n - 1) // n
    raise ValueError(f"unknown collective kind {kind!r}")


# ---------------------------------------------------------------------------------------------------
# compiling


def _lower(fn: Callable, args: Sequence[Any], kwargs: dict) -> Any:
    import jax

    jitted = fn if hasattr(fn, "lower") else jax.jit(fn)
    return jitted.lower(*args, **kwargs)


def compile_texts(fn: Callable, *args: Any, **kwargs: Any) -> tuple[Any, str, str | None]:
    """(compiled, executed program text, bf16-preserving text or None when not on CPU)."""
    lowered = _lower(fn, args, kwargs)
    compiled = lowered.compile()
    text = compiled.as_text()
    platform = _platform(compiled)
    corrected = None
    if platform == "cpu":
        try:
            corrected = lowered.compile(
                compiler_options={"xla_disable_hlo_passes": CPU_DISABLED_PASSES}
            ).as_text()
        except Exception:  # an XLA that does not know the pass names: fall back to the real program
            corrected = None
    return compiled, text, corrected


def _platform(compiled: Any) -> str:
    try:
        shardings = compiled.input_shardings[0] or compiled.output_shardings
        for s in _flatten(shardings):
            return next(iter(s.device_set)).platform
    except Exception:
        pass
    import jax

    return jax.devices()[0].platform


def _flatten(tree: Any) -> list:
    import jax

    return jax.tree_util.tree_leaves(tree, is_leaf=lambda x: hasattr(x, "device_set"))


def _find_mesh(compiled: Any, args: Sequence[Any]) -> Any:
    """The mesh of the first NamedSharding among the compiled inputs/outputs or the arguments."""
    import jax

    candidates = []
    try:
        candidates += _flatten(compiled.input_shardings)
        candidates += _flatten(compiled.output_shardings)
    except Exception:
        pass
    candidates += [getattr(x, "sharding", None) for x in jax.tree_util.tree_leaves(args)]
    for s in candidates:
        mesh = getattr(s, "mesh", None)
        if mesh is not None and getattr(mesh, "axis_names", None) and hasattr(mesh, "devices"):
            return mesh
    return None


# ---------------------------------------------------------------------------------------------------
# loops: how many times each computation runs


def executions_per_computation(module: Module) -> tuple[dict[str, int], set[str], list[str]]:
    """(computation -> times it runs per call, computations inside an unknown-trip-count loop, notes).

    A while body runs ``known_trip_count`` times per execution of the while op (its condition once
    more); fusions, reducers and branches run as often as their caller (branches: an upper bound).
    """
    counts: dict[str, int] = {}
    unknown: set[str] = set()
    notes: list[str] = []

    def visit(comp: Computation, times: int, in_unknown: bool, depth: int = 0) -> None:
        counts[comp.name] = counts.get(comp.name, 0) + times
        if in_unknown:
            unknown.add(comp.name)
        if depth > 64:
            return
        for inst in comp.instructions:
            calls = inst.called()
            if not calls:
                continue
            trip, unknown_here = 1, False
            if inst.opcode == "while":
                n = inst.backend_config().get("known_trip_count", {}).get("n")
                if n is None:
                    unknown_here = True
                    notes.append(
                        f"the loop {inst.name} has no known trip count: what it contains is counted "
                        "once per execution (a lower bound)"
                    )
                else:
                    trip = int(n)
            for role, name in calls:
                callee = module.computations.get(name)
                if callee is None:
                    continue
                k = trip + 1 if role == "condition" and inst.opcode == "while" else trip
                if role == "condition" and unknown_here:
                    k = 1
                visit(callee, times * k, in_unknown or unknown_here, depth + 1)

    visit(module.entry, 1, False)
    return counts, unknown, notes


# ---------------------------------------------------------------------------------------------------
# matmul FLOPs


def dot_flops(inst: Instruction, comp: Computation) -> int:
    """2·(result elements)·(contracted size) for a dot; 2·(result)·(kernel elements / out features)
    for a convolution. 0 for anything else."""
    if inst.opcode not in ("dot", "convolution"):
        return 0
    result = inst.arrays[0].elements if inst.arrays else 0
    operand_types = [_value_type(comp, op) for op in inst.operands]
    if inst.opcode == "dot":
        lhs = operand_types[0] if operand_types else None
        dims_text = (inst.attr("lhs_contracting_dims") or "{}").strip("{}")
        dims = [int(d) for d in dims_text.split(",") if d.strip()]
        k = math.prod(lhs.dims[d] for d in dims) if lhs is not None else 1
        return 2 * result * k
    kernel = operand_types[1] if len(operand_types) > 1 else None
    labels = inst.attr("dim_labels") or ""
    if kernel is None or "_" not in labels:
        return 0
    kernel_labels = labels.split("_")[1].split("->")[0]
    out_features = kernel.dims[kernel_labels.index("o")] if "o" in kernel_labels else 1
    return 2 * result * kernel.elements // max(out_features, 1)


def _value_type(comp: Computation, name: str) -> ArrayType | None:
    inst = comp.by_name.get(name)
    if inst is None or not inst.arrays:
        return None
    return inst.arrays[0]


def flops_per_computation(module: Module) -> dict[str, int]:
    """Matmul FLOPs of one run of each computation, counting the fusions and calls it makes
    (but not while bodies, which are counted through their own trip counts)."""
    memo: dict[str, int] = {}

    def of(name: str, depth: int = 0) -> int:
        if name in memo:
            return memo[name]
        comp = module.computations.get(name)
        total = 0
        if comp is not None and depth < 64:
            for inst in comp.instructions:
                total += dot_flops(inst, comp)
                if inst.opcode in ("fusion", "call", "async-start", "custom-call"):
                    for _, callee in inst.called():
                        total += of(callee, depth + 1)
        memo[name] = total
        return total

    for name in module.computations:
        of(name)
    return memo


def total_flops(module: Module, executions: dict[str, int]) -> int:
    """Per-device matmul FLOPs of one call of the program, loop trip counts included."""
    fused_into = set()
    for comp in module.computations.values():
        for inst in comp.instructions:
            if inst.opcode in ("fusion", "call", "async-start", "custom-call"):
                fused_into.update(c for _, c in inst.called())
    total = 0
    for comp in module.computations.values():
        if comp.name in fused_into:
            continue  # counted through its caller
        own = sum(dot_flops(i, comp) for i in comp.instructions)
        nested = sum(
            flops_per_computation_cached(module, c)
            for inst in comp.instructions
            if inst.opcode in ("fusion", "call", "async-start", "custom-call")
            for _, c in inst.called()
        )
        total += (own + nested) * executions.get(comp.name, 0)
    return total


def flops_per_computation_cached(module: Module, name: str) -> int:
    cache = getattr(module, "_flops_cache", None)
    if cache is None:
        cache = flops_per_computation(module)
        module._flops_cache = cache  # type: ignore[attr-defined]
    return cache.get(name, 0)


# ---------------------------------------------------------------------------------------------------
# collectives


def _base_kind(opcode: str) -> tuple[str | None, str]:
    """('all-gather', 'start') for 'all-gather-start'; (None, '') for non-collectives."""
    for kind in COLLECTIVE_KINDS:
        if opcode == kind:
            return kind, ""
        if opcode == kind + "-start":
            return kind, "start"
        if opcode == kind + "-done":
            return kind, "done"
    return None, ""


def _producer_dtype(module: Module, comp: Computation, name: str, depth: int = 0) -> str | None:
    """The element type a value had before the converts the CPU backend inserted around it."""
    inst = comp.by_name.get(name)
    if inst is None or depth > 8:
        return None
    if inst.opcode == "convert" and inst.operands:
        src = _value_type(comp, inst.operands[0])
        return src.dtype if src else None
    if inst.opcode == "fusion":
        callee = next((module.computations.get(c) for _, c in inst.called()), None)
        if callee is not None and callee.root.opcode == "convert" and callee.root.operands:
            src = _value_type(callee, callee.root.operands[0])
            return src.dtype if src else None
    if inst.opcode in ("bitcast", "copy", "reshape") and inst.operands:
        return _producer_dtype(module, comp, inst.operands[0], depth + 1)
    return None


def _slices_to_fraction(module: Module, comp: Computation, inst: Instruction, n: int) -> ArrayType | None:
    """The kept block when every use of ``inst`` (through converts/copies) is a dynamic-slice keeping
    1/n of it, else None."""
    users = module.users(comp)
    full = inst.arrays[0].elements if inst.arrays else 0
    frontier, seen, found = [inst.name], set(), None
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
                kept = user.arrays[0].elements if user.arrays else 0
                if kept * n != full or (found is not None and found.dims != user.arrays[0].dims):
                    return None
                found = user.arrays[0]
            elif opcodes <= set(_PASS_THROUGH):
                frontier.append(user.name)
            else:
                return None
    return found


def _axes_of_groups(groups: list[list[int]], mesh_shape: dict[str, int]) -> tuple[str, ...]:
    """Mesh axes along which the device coordinates differ within a group (logical ids in mesh order)."""
    if not mesh_shape or not groups:
        return ()
    names, sizes = list(mesh_shape), list(mesh_shape.values())
    total = math.prod(sizes)
    varying = set()
    for group in groups:
        if any(d >= total or d < 0 for d in group):
            return ()
        coords = [_unravel(d, sizes) for d in group]
        for axis in range(len(names)):
            if len({c[axis] for c in coords}) > 1:
                varying.add(axis)
    return tuple(names[a] for a in sorted(varying))


def _unravel(i: int, sizes: list[int]) -> tuple[int, ...]:
    out = []
    for s in reversed(sizes):
        out.append(i % s)
        i //= s
    return tuple(reversed(out))


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
            kind, phase = _base_kind(inst.opcode)
            if phase == "done" and inst.operands:
                done_of[inst.operands[0]] = inst
    for comp in module.computations.values():
        times = executions.get(comp.name, 0)
        if times == 0:
            continue
        for inst in comp.instructions:
            kind, phase = _base_kind(inst.opcode)
            if kind is None or phase == "done":
                continue
            operand_types = [t for op in inst.operands for t in _types_of(comp, op)]
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
    order = {c.name: i for i, c in enumerate(module.computations.values())}
    out.sort(key=lambda c: (c.computation != module.entry.name, order.get(c.computation, 0)))
    return out


def _types_of(comp: Computation, name: str) -> list[ArrayType]:
    inst = comp.by_name.get(name)
    return inst.arrays if inst is not None else []


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
        intended = _producer_dtype(module, comp, inst.operands[0])
        if intended == "bf16":
            dtype, upcast = intended, True
    reducer = inst.attr("to_apply") or ""
    if kind in ("all-reduce", "reduce-scatter") and reducer.endswith("_promoted"):
        intended = None
        if inst.operands:
            intended = _producer_dtype(module, comp, inst.operands[0])
        intended = intended if intended and intended != dtype else "bf16"
        dtype, upcast = intended, True
    groups: list[list[int]]
    axes: tuple[str, ...]
    if kind == "collective-permute":
        pairs = parse_pairs(inst.attr("source_target_pairs"))
        groups = [list(p) for p in pairs]
        axes = _axes_of_groups(groups, mesh_shape)
        group_size = _cycle_size(pairs)
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
            axes = _axes_of_groups(groups, mesh_shape)
        group_size = len(groups[0]) if groups else num_devices
    size = DTYPE_BYTES.get(dtype, 4)
    operand_bytes = sum(t.elements for t in operand_types) * size
    result_bytes = sum(t.elements for t in result_types) * size
    emitted_as = ""
    kept = (
        _slices_to_fraction(module, comp, inst, group_size)
        if kind == "all-reduce" and group_size > 1
        else None
    )
    if kept is not None:
        kind, emitted_as = "reduce-scatter", "all-reduce + dynamic-slice"
        result_types = [ArrayType(dtype, kept.dims)]
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


def _cycle_size(pairs: list[tuple[int, int]]) -> int:
    """The length of the longest permutation cycle (the ring size of a ppermute), 1 if none."""
    nxt = dict(pairs)
    best = 1 if pairs else 0
    for start in nxt:
        length, cur = 0, start
        while cur in nxt and length <= len(pairs):
            cur = nxt[cur]
            length += 1
            if cur == start:
                best = max(best, length)
                break
    return best or (2 if pairs else 0)


# ---------------------------------------------------------------------------------------------------
# the public entry point


def analyze(fn: Callable, *args: Any, **kwargs: Any) -> Report:
    """Compiles ``fn(*args, **kwargs)`` and reports its collectives, matmul FLOPs and temporary memory.

    Args:
      fn: a jitted function (anything with ``.lower``) or a function ``jax.jit`` accepts.
      *args, **kwargs: the arguments, already placed (their NamedShardings name the mesh axes).

    Returns:
      A :class:`Report`: ``.collectives`` (list of :class:`Collective`), ``.count(kind)``,
      ``.total_bytes`` and ``.flops`` (per device, loop trip counts included), ``.temp_bytes``,
      ``.notes`` (corrections made for the CPU backend, loops with unknown trip counts). It prints as a
      table, and as an HTML table in a notebook.

    Example:
      >>> report = analyze(lambda a, w: a @ w, a_sharded, w_sharded)  # doctest: +SKIP
      >>> print(report)                                               # doctest: +SKIP
    """
    start = time.perf_counter()
    compiled, text, corrected_text = compile_texts(fn, *args, **kwargs)
    mesh = _find_mesh(compiled, args)
    report = analyze_text(corrected_text or text, mesh=mesh, executed_text=text if corrected_text else None)
    try:
        report.temp_bytes = int(compiled.memory_analysis().temp_size_in_bytes)
    except Exception:
        report.temp_bytes = None
    report.platform = _platform(compiled)
    report.text = text
    report.seconds = time.perf_counter() - start
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
    num_devices = _num_partitions(text) or (math.prod(mesh_shape.values()) if mesh_shape else 1)
    executions, unknown, notes = executions_per_computation(module)
    collectives = collectives_in(module, executions, unknown, mesh_shape, num_devices)
    flops = total_flops(module, executions)
    notes = list(dict.fromkeys(notes))
    upcast = [c for c in collectives if c.upcast_by_backend]
    if executed_text is not None:
        widened = _raw_f32_collectives(parse_module(executed_text)) - _raw_f32_collectives(module)
        if widened > 0 or upcast:
            notes.append(
                "the CPU backend runs bf16 collectives in f32 (twice the bytes); this report shows the "
                "dtype and bytes the program means, read from a copy compiled without "
                f"{CPU_DISABLED_PASSES.replace(',', ' and ')}"
            )
    elif upcast:
        notes.append("some all-reduce/reduce-scatter reducers were promoted to f32; reported as bf16")
    if any(c.emitted_as for c in collectives):
        notes.append(
            "the CPU backend runs all-reduce + dynamic-slice, a pair that XLA:GPU fuses into one "
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
    )


def _raw_f32_collectives(module: Module) -> int:
    """How many collective ops the program runs on f32 data, as written (no corrections)."""
    return sum(
        1
        for comp in module.computations.values()
        for inst in comp.instructions
        if _base_kind(inst.opcode)[0]
        and _base_kind(inst.opcode)[1] != "done"
        and any(t.dtype == "f32" for t in inst.arrays)
    )


def _num_partitions(text: str) -> int:
    head = text[: text.find("\n")] if "\n" in text else text
    for key in ("num_partitions=", "replica_count="):
        i = head.find(key)
        if i >= 0:
            digits = ""
            for ch in head[i + len(key) :]:
                if not ch.isdigit():
                    break
                digits += ch
            if digits and int(digits) > 1:
                return int(digits)
    return 0


def largest_intermediates(text: str, elements: int) -> list[tuple[str, ArrayType, str]]:
    """Arrays with at least ``elements`` elements made anywhere in the program (per device), as
    (instruction name, type, op name); parameters are not counted, fused values are."""
    module = parse_module(text)
    out = []
    for comp in module.computations.values():
        for inst in comp.instructions:
            if inst.opcode in ("parameter", "get-tuple-element", "tuple", "bitcast"):
                continue
            for t in parse_type(inst.type_text):
                if t.elements >= elements:
                    out.append((inst.name, t, module.op_name(inst)))
    return out


__all__ = [
    "COLLECTIVE_KINDS",
    "Collective",
    "Report",
    "analyze",
    "analyze_text",
    "format_bytes",
    "ring_bytes",
    "largest_intermediates",
]
