"""Questions asked of a parsed program (:class:`shardbook.hlo.Module`), with no correction applied.

How many times each computation runs (loop trip counts), the matmul FLOPs, which instructions are
collectives, the mesh axes a device group spans, the ring size of a permutation, the large arrays.
The CPU backend's differences are :mod:`shardbook.comms.cpu`'s business, not this module's.
"""

from __future__ import annotations

import math

import numpy as np

from ..hlo import ArrayType, Computation, Instruction, Module, parse_module, parse_type
from .report import COLLECTIVE_KINDS

# opcodes whose called computations run as part of the caller (their FLOPs count through it)
CALLING_OPCODES = ("fusion", "call", "async-start", "custom-call")


def collective_kind(opcode: str) -> tuple[str | None, str]:
    """The collective an opcode belongs to and its phase: ``''``, ``'start'`` or ``'done'``.

    Example:
      >>> collective_kind("all-gather-start"), collective_kind("all-reduce"), collective_kind("add")
      (('all-gather', 'start'), ('all-reduce', ''), (None, ''))
    """
    return _KIND_OF_OPCODE.get(opcode, (None, ""))


# collective_kind's answers, looked up once per opcode (the cost model asks for every instruction)
_KIND_OF_OPCODE: dict[str, tuple[str | None, str]] = {}
for _kind in COLLECTIVE_KINDS:
    for _suffix, _phase in (("", ""), ("-start", "start"), ("-done", "done")):
        _KIND_OF_OPCODE.setdefault(_kind + _suffix, (_kind, _phase))


def value_type(comp: Computation, name: str) -> ArrayType | None:
    """The (first) array type of the value ``name`` in ``comp``, None when unknown."""
    inst = comp.by_name.get(name)
    if inst is None or not inst.arrays:
        return None
    return inst.arrays[0]


def types_of(comp: Computation, name: str) -> list[ArrayType]:
    """Every array type of the value ``name`` in ``comp`` (a tuple has several)."""
    inst = comp.by_name.get(name)
    return inst.arrays if inst is not None else []


# ---------------------------------------------------------------------------------------------------
# loops: how many times each computation runs


def trip_count(loop: Instruction, module: Module, infer: bool = True) -> int | None:
    """How many times a while op runs its body: XLA's ``known_trip_count``, or (``infer``) read from
    a counted loop's condition when XLA left none; None when neither says.

    The TPU compiler drops ``known_trip_count`` from the loops it rewrites (a scan over layers comes
    out as ``counter < 12`` and nothing else), so the count is read the way XLA's own analysis does:
    the condition compares one element of the loop state with a constant, the body adds a constant to
    that element, and the caller starts it at a constant.

    Example:
      >>> m = parse_module('''HloModule m
      ... %cond (s: (s32[])) -> pred[] {
      ...   %s = (s32[]) parameter(0)
      ...   %i = s32[] get-tuple-element(%s), index=0
      ...   %n = s32[] constant(12)
      ...   ROOT %lt = pred[] compare(%i, %n), direction=LT
      ... }
      ... %body (s.1: (s32[])) -> (s32[]) {
      ...   %s.1 = (s32[]) parameter(0)
      ...   %i.1 = s32[] get-tuple-element(%s.1), index=0
      ...   %one = s32[] constant(1)
      ...   %next = s32[] add(%i.1, %one)
      ...   ROOT %t = (s32[]) tuple(%next)
      ... }
      ... ENTRY %main () -> (s32[]) {
      ...   %zero = s32[] constant(0)
      ...   %init = (s32[]) tuple(%zero)
      ...   ROOT %w = (s32[]) while(%init), condition=%cond, body=%body
      ... }''')
      >>> trip_count(m.entry.root, m), trip_count(m.entry.root, m, infer=False)
      (12, None)
    """
    n = loop.backend_config().get("known_trip_count", {}).get("n")
    if n is not None:
        return int(n)
    calls = dict(loop.called())
    cond, body = (
        module.computations.get(calls.get("condition", "")),
        module.computations.get(calls.get("body", "")),
    )
    caller = module.computations.get(loop.computation)
    if not infer or cond is None or body is None or caller is None or cond.root.opcode != "compare":
        return None
    sides = [_through_copies(cond, o) for o in cond.root.operands]
    if len(sides) != 2:
        return None
    direction = cond.root.attr("direction") or ""
    if sides[0] is not None and sides[0].opcode == "constant":  # bound < counter: swap the sides
        sides.reverse()
        direction = {"LT": "GT", "GT": "LT", "LE": "GE", "GE": "LE"}.get(direction, direction)
    counter, bound = sides
    if (
        counter is None
        or bound is None
        or counter.opcode != "get-tuple-element"
        or bound.opcode != "constant"
    ):
        return None
    index = int(counter.attr("index") or 0)
    start, step, end = _tuple_constant(caller, loop.operands[0], index), _step(body, index), _int(bound)
    if start is None or step is None or end is None or step == 0:
        return None
    if direction in ("LT", "LE") and step > 0:
        span = end - start + (direction == "LE")
    elif direction in ("GT", "GE") and step < 0:
        span = start - end + (direction == "GE")
    elif direction == "NE" and (end - start) % step == 0 and (end - start) // step >= 0:
        return (end - start) // step
    else:
        return None
    return max(-(-span // abs(step)), 0)


def _through_copies(comp: Computation, name: str) -> Instruction | None:
    inst = comp.by_name.get(name)
    while inst is not None and inst.opcode in ("copy", "bitcast", "convert") and inst.operands:
        inst = comp.by_name.get(inst.operands[0])
    return inst


def _int(inst: Instruction | None) -> int | None:
    if inst is None or inst.opcode != "constant":
        return None
    try:
        return int(inst.operand_text)
    except ValueError:
        return None


def _tuple_constant(comp: Computation, name: str, index: int) -> int | None:
    """The constant that element ``index`` of the tuple ``name`` starts at, if it is one."""
    tup = comp.by_name.get(name)
    if tup is None or tup.opcode != "tuple" or index >= len(tup.operands):
        return None
    return _int(_through_copies(comp, tup.operands[index]))


def _step(body: Computation, index: int) -> int | None:
    """What the body adds to element ``index`` of the loop state each trip (a constant), if it does."""
    root = body.root
    if root.opcode != "tuple" or index >= len(root.operands):
        return None
    update = _through_copies(body, root.operands[index])
    if update is None or update.opcode not in ("add", "subtract") or len(update.operands) != 2:
        return None
    a, b = (_through_copies(body, o) for o in update.operands)
    if a is not None and a.opcode == "constant" and update.opcode == "add":
        a, b = b, a
    if a is None or a.opcode != "get-tuple-element" or int(a.attr("index") or 0) != index:
        return None
    step = _int(b)
    if step is None:
        return None
    return -step if update.opcode == "subtract" else step


def executions_per_computation(
    module: Module, infer_trip_counts: bool = False
) -> tuple[dict[str, int], set[str], list[str]]:
    """(computation -> times it runs per call, computations inside an unknown-trip-count loop, notes).

    A while body runs ``known_trip_count`` times per execution of the while op (its condition once
    more); fusions, reducers and branches run as often as their caller (branches: an upper bound).
    ``compiled.cost_analysis()`` counts a loop body once; this is why the analyzer counts for itself.
    With ``infer_trip_counts`` (a TPU program, whose compiler drops ``known_trip_count``), a loop
    without one is counted by :func:`trip_count` from its condition.
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
                n = trip_count(inst, module, infer=infer_trip_counts)
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
    """2·(result elements)·(contracted size) for a dot; for a convolution 2·(result elements)·(input
    features per group)·(kernel taps that meet an input element, averaged over the output). 0 for
    anything else.

    The TPU compiler writes a batched matmul (an einsum with batch dimensions) as a convolution whose
    batch dimensions are spatial ones, dilated so that each output position meets exactly one input
    position (``window={size=8x16 stride=7x15 lhs_dilate=8x16}``): counting every kernel tap would
    overstate it by the window's size, so the taps are counted as the convolution visits them.
    """
    if inst.opcode not in ("dot", "convolution"):
        return 0
    result = inst.arrays[0].elements if inst.arrays else 0
    operand_types = [value_type(comp, op) for op in inst.operands]
    if inst.opcode == "dot":
        lhs = operand_types[0] if operand_types else None
        dims_text = (inst.attr("lhs_contracting_dims") or "{}").strip("{}")
        dims = [int(d) for d in dims_text.split(",") if d.strip()]
        k = math.prod(lhs.dims[d] for d in dims) if lhs is not None else 1
        return 2 * result * k
    lhs, kernel = (operand_types + [None, None])[:2]
    labels = inst.attr("dim_labels") or ""
    if lhs is None or kernel is None or not inst.arrays or "_" not in labels or "->" not in labels:
        return 0
    lhs_labels, rest = labels.split("_", 1)
    kernel_labels, out_labels = rest.split("->")
    if "i" not in kernel_labels or len(kernel_labels) != len(kernel.dims):
        return 0
    in_features = kernel.dims[kernel_labels.index("i")]
    out = inst.arrays[0]
    outputs = out.elements  # output positions × features; the spatial ones are replaced by taps below
    window = _window(inst.attr("window") or "")
    for d, size in enumerate(window.get("size", [])):
        label = str(d)
        if label not in lhs_labels or label not in out_labels:
            return 0
        n, m = lhs.dims[lhs_labels.index(label)], out.dims[out_labels.index(label)]
        pad = window.get("pad", [])
        lo = pad[d][0] if d < len(pad) else 0
        taps = _valid_taps(
            n,
            size,
            m,
            _at(window, "stride", d),
            lo,
            _at(window, "lhs_dilate", d),
            _at(window, "rhs_dilate", d),
        )
        outputs = outputs // max(m, 1) * taps
    return 2 * outputs * in_features


def _window(text: str) -> dict[str, list]:
    """``{size=8x16 stride=7x15 pad=0_0x0_-288 lhs_dilate=8x16}`` as lists per spatial dimension."""
    out: dict[str, list] = {}
    for part in text.strip("{}").split():
        key, _, value = part.partition("=")
        if key == "pad":
            out[key] = [tuple(int(v) for v in p.split("_")) for p in value.split("x")]
        elif key in ("size", "stride", "lhs_dilate", "rhs_dilate"):
            out[key] = [int(v) for v in value.split("x")]
    return out


def _at(window: dict[str, list], key: str, d: int) -> int:
    values = window.get(key, [])
    return values[d] if d < len(values) else 1


def _valid_taps(n: int, k: int, m: int, stride: int, lo: int, lhs_dilate: int, rhs_dilate: int) -> int:
    """(output position, kernel tap) pairs of one spatial dimension that land on an input element
    (not on padding, nor on a hole left by ``lhs_dilate``)."""
    o = np.arange(m)
    last = (n - 1) * lhs_dilate
    total = 0
    for tap in range(k):
        p = o * stride + tap * rhs_dilate - lo
        total += int(np.count_nonzero((p >= 0) & (p <= last) & (p % lhs_dilate == 0)))
    return total


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
                if inst.opcode in CALLING_OPCODES:
                    for _, callee in inst.called():
                        total += of(callee, depth + 1)
        memo[name] = total
        return total

    for name in module.computations:
        of(name)
    return memo


def total_flops(module: Module, executions: dict[str, int]) -> int:
    """Per-device matmul FLOPs of one call of the program, loop trip counts included."""
    fused_into: set[str] = set()
    for comp in module.computations.values():
        for inst in comp.instructions:
            if inst.opcode in CALLING_OPCODES:
                fused_into.update(c for _, c in inst.called())
    per_run = flops_per_computation(module)
    total = 0
    for comp in module.computations.values():
        if comp.name in fused_into:
            continue  # counted through its caller
        own = sum(dot_flops(i, comp) for i in comp.instructions)
        nested = sum(
            per_run.get(c, 0)
            for inst in comp.instructions
            if inst.opcode in CALLING_OPCODES
            for _, c in inst.called()
        )
        total += (own + nested) * executions.get(comp.name, 0)
    return total


# ---------------------------------------------------------------------------------------------------
# device groups


def axes_of_groups(groups: list[list[int]], mesh_shape: dict[str, int]) -> tuple[str, ...]:
    """Mesh axes along which the device coordinates differ within a group (logical ids in mesh order).

    Example: on a 2×4 mesh, devices 0-3 share X and differ in Y; devices 0 and 4 differ in X:

      >>> axes_of_groups([[0, 1, 2, 3], [4, 5, 6, 7]], {"X": 2, "Y": 4})
      ('Y',)
      >>> axes_of_groups([[0, 4], [1, 5], [2, 6], [3, 7]], {"X": 2, "Y": 4})
      ('X',)
    """
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


def cycle_size(pairs: list[tuple[int, int]]) -> int:
    """The length of the longest permutation cycle (the ring size of a ppermute), 1 if none.

    Example:
      >>> cycle_size([(0, 1), (1, 2), (2, 3), (3, 0)]), cycle_size([(0, 1), (1, 0), (2, 3), (3, 2)])
      (4, 2)
    """
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


def num_partitions(text: str) -> int:
    """The device count in the program's header (``num_partitions=8``), 0 when it names none above 1."""
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


def count_f32_collectives(module: Module) -> int:
    """How many collective ops the program runs on f32 data, as written (no corrections)."""
    count = 0
    for comp in module.computations.values():
        for inst in comp.instructions:
            kind, phase = collective_kind(inst.opcode)
            if kind and phase != "done" and any(t.dtype == "f32" for t in inst.arrays):
                count += 1
    return count


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
