"""The vector unit of a TPU program's kernels: the time its element-wise work takes, which
:mod:`shardbook.cost` sets against the kernel's HBM traffic and its matmul.

Each element-wise op (:data:`VECTOR_OPS`) is charged its result's elements at the rate measured for it
(:class:`shardbook.measured.Measured`), every op without a rate of its own at the plain one (a kernel whose
results are all bf16 has its own plain rate; an iota, which reads nothing, writes each of its
elements); a reduction its input's elements at the plain rate, and, where it sums across the lanes
(the axis the layout stores last), a fixed time per 8 rows of its result per block of lanes the
kernel's grid steps through (each block's cross-lane sum); a slice that strides the lanes at the
lane-gather rate of its dtype. Ops that can run side by side go at a rate of their own, and a kernel
takes the longer of those and its longest chain of dependent ops at the plain rate; in a sum that does
not cross the lanes and keeps enough registers of partial sums at each step of its grid
(:func:`partial_sum_registers`), no chain binds: its ops, its additions included, run side by side.
Values computed from constants alone are folded, not run. Three things a kernel shares or repeats,
each read off a program of the record:

* a sine and a cosine of one value share their range reduction: the second costs
  ``sincos_second_seconds`` an element;
* a divide of the constant 1 (a reciprocal) has a rate of its own, ``reciprocal_seconds``;
* inside a matmul kernel, the work on an operand is done again at every fetch of it
  (:func:`shardbook.hbm.operand_fetches`).
"""

from __future__ import annotations

import re
from typing import Protocol

from .hbm import grid_bounds, operand_fetches
from .hlo import Computation, Instruction, Module


class VectorRates(Protocol):
    """The vector unit's rates of a chip, per element (what :class:`shardbook.measured.Measured` holds):
    ``vector_seconds``, the ops with a rate of their own; ``vector_op_seconds``, every other op
    (``vector_bf16_op_seconds`` in a kernel whose results are all bf16); the lane gathers of f32 and of
    bf16; a reciprocal; the second of a sine and a cosine of one value."""

    @property
    def vector_seconds(self) -> tuple[tuple[str, float], ...]: ...
    @property
    def vector_op_seconds(self) -> float: ...
    @property
    def vector_bf16_op_seconds(self) -> float: ...
    @property
    def vector_op_side_by_side_seconds(self) -> float: ...
    @property
    def lane_stride_seconds(self) -> float: ...
    @property
    def lane_stride_bf16_seconds(self) -> float: ...
    @property
    def reciprocal_seconds(self) -> float: ...
    @property
    def sincos_second_seconds(self) -> float: ...
    @property
    def lane_reduce_seconds(self) -> float: ...
    @property
    def lane_reduce_rank1_seconds(self) -> float: ...
    @property
    def lane_reduce_16bit_rows(self) -> int: ...

    @property
    def sum_registers_side_by_side(self) -> int: ...


#: The element-wise ops the vector unit runs (what :mod:`shardbook.cost` charges at the vector unit's rates).
VECTOR_OPS = frozenset(
    {
        "abs", "add", "and", "atan2", "cbrt", "ceil", "clamp", "compare", "convert", "cosine", "divide",
        "erf", "exponential", "exponential-minus-one", "floor", "iota", "is-finite", "log", "log-plus-one",
        "logistic", "maximum", "minimum", "multiply", "negate", "not", "or", "popcnt", "power",
        "remainder", "round-nearest-afz", "round-nearest-even", "rsqrt", "select", "shift-left",
        "shift-right-arithmetic", "shift-right-logical", "sign", "sine", "sqrt", "subtract", "tan",
        "tanh", "xor",
    }
)  # fmt: skip

#: element-wise ops no program of the record measured: a kernel that runs one is outside the model
UNMEASURED_VECTOR_OPS = ("tan", "atan2", "cbrt")

#: the dtypes whose lane gathers were measured (:attr:`Measured.lane_stride_seconds`, f32, and
#: :attr:`Measured.lane_stride_bf16_seconds`)
LANE_GATHER_DTYPES = ("f32", "bf16")


def vector_seconds(module: Module, inst: Instruction, m: VectorRates) -> tuple[float, float, bool]:
    """(seconds, operand seconds, outside): the time ``inst`` (fused ops included) keeps the vector
    unit busy; the part of it spent on a plain product's operands inside its matmul kernel, once per
    fetch (:func:`shardbook.hbm.operand_fetches`); and whether it runs work no program of the record
    measured (an unmeasured op, a lane gather of another dtype than :data:`LANE_GATHER_DTYPES`)."""
    if not m.vector_op_seconds:
        return 0.0, 0.0, False
    rates = dict(m.vector_seconds)
    bf16 = inst.arrays and all(a.dtype == "bf16" for a in inst.arrays)
    plain = m.vector_bf16_op_seconds if bf16 and m.vector_bf16_op_seconds else m.vector_op_seconds
    times = operand_fetches(module, inst)  # a matmul kernel's operand work, once per fetch
    lane_blocks = (grid_bounds(inst) or [1])[-1]  # the blocks of lanes a reduction's grid steps through
    total, on_operands, outside = 0.0, 0.0, False
    side_by_side = m.vector_op_side_by_side_seconds if plain == m.vector_op_seconds else 0.0
    plain_seconds = 0.0  # charged at the plain rate: what ops side by side would take less of
    chained = True  # whether the kernel's longest chain of dependent ops bounds its time
    cost: dict[str, float] = {}  # each op of the kernel's own computation: its time, nested work included
    top = _own_computation(module, inst)
    stack: list[tuple[Instruction, float, bool, str]] = [(inst, 1.0, False, "")]
    seen: set[str] = set()
    constant: set[str] = set()  # values computed from constants alone: folded, not run per element
    ones: set[str] = set()  # the constant 1, and broadcasts of it
    second: set[str] = set()  # the second of a sine and a cosine of one value
    while stack:
        i, fetched, operand, owner = stack.pop()
        owner = owner or (i.name if top is not None and top.by_name.get(i.name) is i else "")
        before = total
        if i.opcode == "constant" or (
            (i.opcode in VECTOR_OPS or i.opcode == "broadcast")
            and bool(i.operands)
            and all(o in constant for o in i.operands)
        ):
            constant.add(i.name)
            if _is_one(i) or (i.opcode == "broadcast" and i.operands and i.operands[0] in ones):
                ones.add(i.name)
            continue
        elements = fetched * sum(a.elements for a in i.arrays)
        if i.opcode in VECTOR_OPS:
            if i.name in second and m.sincos_second_seconds:
                rate = m.sincos_second_seconds
            elif i.opcode == "divide" and i.operands[0] in ones and m.reciprocal_seconds:
                rate = m.reciprocal_seconds
            else:
                rate = rates.get(i.opcode, plain)
                if i.opcode not in rates:
                    plain_seconds += rate * elements
            total += rate * elements
            outside = outside or i.opcode in UNMEASURED_VECTOR_OPS
        elif i.opcode == "reduce" and i.operands:
            adds = m.vector_op_seconds * fetched * operand_elements(module, i)
            total += adds
            lanes = reduces_lanes(module, i)
            if side_by_side and not lanes and m.sum_registers_side_by_side:
                # a sum into enough registers of partial sums: its additions, and the ops that feed
                # them, run side by side, not as one chain
                if partial_sum_registers(module, inst, i) >= m.sum_registers_side_by_side:
                    plain_seconds += adds
                    chained = False
            if m.lane_reduce_seconds and lanes:
                # a vector register holds 8 rows of 32-bit values (and of 16-bit ones packed in pairs,
                # the rows a group of a 16-bit operand's sum holds where that was measured)
                short = _operand_dtype(module, i) in ("bf16", "f16")
                packed = (m.lane_reduce_16bit_rows or 8) if short else 8
                rows = max(sum(a.elements for a in i.arrays) // packed, 1)
                one_dimensional = len(i.arrays) == 1 and len(i.arrays[0].dims) == 1
                rate = m.lane_reduce_rank1_seconds if one_dimensional else 0.0
                total += (rate or m.lane_reduce_seconds) * rows * lane_blocks
        elif i.opcode == "slice" and strides_last_axis(i):
            dtypes = {a.dtype for a in i.arrays}
            rate = m.lane_stride_bf16_seconds if dtypes == {"bf16"} else m.lane_stride_seconds
            total += (rate or m.lane_stride_seconds) * elements
            outside = outside or not dtypes <= set(LANE_GATHER_DTYPES)
        if operand:
            on_operands += total - before
        if owner:
            cost[owner] = cost.get(owner, 0.0) + total - before
        for _, name in i.called():
            if name not in seen and (callee := module.computations.get(name)) is not None:
                seen.add(name)
                second |= _second_of_pairs(callee)
                own = times if i is inst else {}
                stack += [
                    (c, fetched * own.get(c.name, 1.0), operand or c.name in own, owner)
                    for c in reversed(callee.instructions)
                ]
    if side_by_side and top is not None and plain_seconds:
        # ops that can run side by side go at their own rate; the longest chain of dependent ops at
        # the plain one (read off a polynomial, one chain): the kernel takes the longer of the two
        longest: dict[str, float] = {}
        for c in top.instructions:
            longest[c.name] = cost.get(c.name, 0.0) + max(
                (longest.get(o, 0.0) for o in c.operands), default=0.0
            )
        apart = total - plain_seconds * (1 - side_by_side / m.vector_op_seconds)
        total = max(apart, max(longest.values(), default=0.0)) if chained else apart
    return total, on_operands, outside


def partial_sum_registers(module: Module, kernel: Instruction, reduce: Instruction) -> int:
    """The vector registers of partial sums a kernel's ``reduce`` keeps at each step of its grid: its
    window (``output_window_bounds``, one block per axis of the summed operand, the axis its layout
    stores first first) over the axes the sum keeps; 0 where the window does not say."""
    src = _first_operand(module, reduce)
    window = (kernel.backend_config().get("window_config") or {}).get("output_window_bounds", [])
    if src is None or not src.arrays or len(window) != len(src.arrays[0].dims):
        return 0
    layout = re.search(r"\{(\d+(?:,\d+)*)", src.type_text.split("]", 1)[1] if "]" in src.type_text else "")
    if not layout:
        return 0
    summed = {int(d) for d in re.findall(r"\d+", reduce.attr("dimensions") or "")}
    axes = [int(a) for a in reversed(layout.group(1).split(","))]  # the axis stored first, first
    registers = 1
    for axis, blocks in zip(axes, window, strict=True):
        registers *= 1 if axis in summed else int(blocks)
    return registers


def _own_computation(module: Module, inst: Instruction) -> Computation | None:
    """The computation a fusion runs (None for any other op)."""
    if inst.opcode != "fusion":
        return None
    return module.computations.get(dict(inst.called()).get("calls", ""))


def _is_one(inst: Instruction) -> bool:
    return inst.opcode == "constant" and inst.operand_text in ("1", "1.0", "1.")


def _second_of_pairs(comp: Computation) -> set[str]:
    """The cosines of values whose sine ``comp`` also computes, and the sines of values whose cosine it
    computes first: the second of each pair."""
    first: dict[str, str] = {}
    out = set()
    for i in comp.instructions:
        if i.opcode in ("sine", "cosine") and i.operands:
            other = first.get(i.operands[0])
            if other is None:
                first[i.operands[0]] = i.opcode
            elif other != i.opcode:
                out.add(i.name)
    return out


def _first_operand(module: Module, inst: Instruction) -> Instruction | None:
    """The instruction that computes ``inst``'s first operand (within its computation), if any."""
    comp = module.computations.get(inst.computation)
    return comp.by_name.get(inst.operands[0]) if comp is not None else None


def _operand_dtype(module: Module, inst: Instruction) -> str:
    """The dtype of an instruction's first operand; "" where unknown."""
    src = _first_operand(module, inst)
    return src.arrays[0].dtype if src is not None and src.arrays else ""


def operand_elements(module: Module, inst: Instruction) -> int:
    """Elements of an instruction's first operand (within its computation)."""
    src = _first_operand(module, inst)
    return sum(a.elements for a in src.arrays) if src is not None else 0


def reduces_lanes(module: Module, inst: Instruction) -> bool:
    """Whether a reduce sums across the lanes: one of its dimensions is the axis its operand's layout
    stores last."""
    src = _first_operand(module, inst)
    if src is None or not src.arrays:
        return False
    dims = {int(d) for d in re.findall(r"\d+", inst.attr("dimensions") or "")}
    return _minor_axis(src.type_text, len(src.arrays[0].dims)) in dims


def _minor_axis(type_text: str, rank: int) -> int:
    """The axis an array's layout stores last (its lanes); the last axis where no layout is given."""
    layout = re.search(r"\{(\d+(?:,\d+)*)", type_text.split("]", 1)[1] if "]" in type_text else "")
    return int(layout.group(1).split(",")[0]) if layout else rank - 1


def strides_last_axis(inst: Instruction) -> bool:
    """Whether a slice takes every k-th element (k > 1) of the axis its layout stores last (the lanes)."""
    spec = inst.attr("slice") or ""
    strides = [int(p.split(":")[2]) if p.count(":") == 2 else 1 for p in re.findall(r"\[([^\]]*)\]", spec)]
    minor = _minor_axis(inst.type_text, len(strides))
    return 0 <= minor < len(strides) and strides[minor] > 1
