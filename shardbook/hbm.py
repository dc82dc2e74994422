"""A TPU program's HBM traffic: the bytes each top-level op of a program the TPU compiler wrote moves
between HBM and the chip (:func:`tpu_hbm_bytes`, :func:`tpu_hbm_traffic`), which :mod:`shardbook.cost`
charges at the measured bandwidths. Slices and in-place updates move their part, arrays placed in VMEM
move nothing, views are free, and a matmul reads its operands as often as its tiling fetches them
(:func:`tiled_rereads`), and the work inside a matmul kernel is done once per fetch
(:func:`operand_fetches`). What the vector unit costs is :mod:`shardbook.vector`'s.
"""

from __future__ import annotations

import math
import re

from .hlo import DTYPE_BYTES, Computation, Instruction, Module, parse_type, tuple_elements

# ops that move no data: views, the loop state, and the halves of async pairs whose start is charged
_FREE_OPS = {
    "parameter", "constant", "bitcast", "get-tuple-element", "tuple", "after-all", "partition-id",
    "replica-id", "opt-barrier", "add-dependency", "domain", "copy-done", "slice-done", "async-done",
    "async-update", "send-done", "recv-done",
}  # fmt: skip
# custom calls the TPU compiler inserts that allocate or relabel a buffer without moving it
_FREE_CUSTOM_CALLS = ("ConcatBitcast", "AllocateBuffer", "AssumeGatherIndicesInBound")
# ops inside a fusion through which it reads only part of an operand (the part is its result)
_SLICING_OPS = ("dynamic-slice", "slice", "gather")
_ARRAY_LAYOUT_RE = re.compile(r"([a-z][a-z0-9]*)\[([0-9,]*)\](\{[^{}]*\})?")


def hbm_bytes(type_text: str) -> int:
    """Bytes of the arrays in an HLO type that live in HBM, each padded to its layout's tile.

    A TPU layout names the memory space of an array not in HBM (``S(1)``: the chip's VMEM, ``S(2)``
    sync flags, ``S(6)`` scalar memory) and the tile the array is stored in (``T(8,128)``: its two
    most minor dimensions padded to multiples of 8 and 128).

    Example:
      >>> hbm_bytes("f32[16384,8192]{1,0:T(8,128)}") == 16384 * 8192 * 4
      True
      >>> hbm_bytes("f32[8,1024]{1,0:T(8,128)S(1)}"), hbm_bytes("f32[8,100]{1,0:T(8,128)}")
      (0, 4096)
    """
    total = 0
    for m in _ARRAY_LAYOUT_RE.finditer(type_text):
        dtype, layout = m.group(1), m.group(3) or ""
        if re.search(r"S\([1-9]", layout):
            continue
        dims = [int(d) for d in m.group(2).split(",") if d]
        tile = re.search(r":(?:[^T]*)T\(([0-9,]+)\)", layout)
        if tile and dims:
            order = [int(d) for d in layout[1:].split(":")[0].split(",") if d.strip()]
            physical = [dims[d] for d in reversed(order)] if len(order) == len(dims) else dims
            sizes = [int(t) for t in tile.group(1).split(",")]
            for k, t in enumerate(reversed(sizes)):
                if k < len(physical):
                    physical[-1 - k] = -(-physical[-1 - k] // t) * t
            dims = physical
        total += math.prod(dims) * DTYPE_BYTES.get(dtype, 4)
    return total


def hbm_results(type_text: str) -> int:
    """How many of the arrays of an HLO type (an op's result) live in HBM (not in VMEM or another
    memory space; :func:`hbm_bytes`).

    Example:
      >>> hbm_results("(f32[8,128]{1,0:T(8,128)}, f32[8]{0:T(256)S(1)}, bf16[8,128]{1,0:T(8,128)(2,1)})")
      2
    """
    return sum(
        1 for m in _ARRAY_LAYOUT_RE.finditer(type_text) if not re.search(r"S\([1-9]", m.group(3) or "")
    )


def grid_bounds(inst: Instruction) -> list[int]:
    """The grid a TPU kernel steps through (its ``window_config``'s ``iteration_bounds``), the
    contraction's steps last in a matmul kernel; empty where the program gives none."""
    window = inst.backend_config().get("window_config") or {}
    return [int(b) for b in window.get("iteration_bounds", [])]


def tpu_hbm_bytes(module: Module, comp: Computation, inst: Instruction) -> int | None:
    """HBM bytes one top-level op of a TPU program reads and writes; None for an op that is free
    (:func:`tpu_hbm_traffic` gives the two apart).

    * an op reads its operands and writes its result; an array in VMEM costs nothing (:func:`hbm_bytes`);
    * a fusion that reads an operand only through slices inside it (a scanned layer's weights, sliced
      from the stacked [L, ...] buffer) reads the slices, not the buffer;
    * a dynamic-update-slice, alone or as a fusion's result, is done in place: it writes its update,
      and does not read the buffer it updates;
    * an async copy or slice (``copy-start``, ``slice-start``) moves its bytes when it starts (charged
      like a kernel: it shares HBM with the kernels around it); a copy the compiler prefetches across
      calls (``cross_program_prefetch_index``) overlaps the previous call and is free;
    * views, the loop state and allocations (bitcast, get-tuple-element, tuple, parameter, constant,
      ``ConcatBitcast``) are free.
    """
    traffic = tpu_hbm_traffic(module, comp, inst)
    return None if traffic is None else sum(traffic)


def tpu_hbm_traffic(module: Module, comp: Computation, inst: Instruction) -> tuple[int, int] | None:
    """(bytes read, bytes written) of one top-level op of a TPU program, counted as
    :func:`tpu_hbm_bytes` says; None for an op that is free."""
    op = inst.opcode
    if op in _FREE_OPS or op == "while":
        return None
    if op == "custom-call" and any(f'"{t}"' in inst.attrs_text for t in _FREE_CUSTOM_CALLS):
        return None
    types = tuple_elements(inst.type_text)
    if op == "copy-start":
        if inst.attr("cross_program_prefetch_index") is not None:
            return None
        return hbm_bytes(types[1]) if len(types) > 1 else 0, hbm_bytes(types[0])  # (dest, source, ctx)
    if op == "slice-start":  # ((source), result, context): reads the slice, writes it
        source = comp.by_name.get(inst.operands[0]) if inst.operands else None
        result = types[1] if len(types) > 1 else ""
        read = _unpadded(result) if source is not None and hbm_bytes(source.type_text) else 0
        return read, hbm_bytes(result)
    written = hbm_bytes(inst.type_text)
    operands = [comp.by_name[o] for o in inst.operands if o in comp.by_name]
    if op == "dynamic-update-slice" and len(operands) > 1:
        update = operands[1]
        return hbm_bytes(update.type_text), (_unpadded(update.type_text) if written else 0)
    if op in ("dynamic-slice", "slice", "gather") and operands:
        read = _unpadded(inst.type_text) if hbm_bytes(operands[0].type_text) else 0
        return read + sum(hbm_bytes(o.type_text) for o in operands[1:]), written
    if op == "fusion":
        callee = module.computations.get(dict(inst.called()).get("calls", ""))
        if callee is not None:
            return _fusion_traffic(module, callee, types, operands)
    return sum(hbm_bytes(o.type_text) for o in operands), written


def _fusion_traffic(
    module: Module, callee: Computation, types: list[str], operands: list[Instruction]
) -> tuple[int, int]:
    """(read, written) of a fusion: its results written (an in-place update: the update), its operands
    read (one read only through slices: the slices)."""
    root = callee.root
    results = root.operands if root.opcode == "tuple" else [root.name]
    in_place: set[int] = set()
    written = 0
    for k, type_text in enumerate(types):
        value = _down_views(callee, results[k]) if k < len(results) else None
        if value is not None and value.opcode == "dynamic-update-slice" and len(value.operands) > 1:
            buffer = _down_views(callee, value.operands[0])
            if buffer is not None and buffer.opcode == "parameter" and buffer.operand_text.isdigit():
                in_place.add(int(buffer.operand_text))
            update = callee.by_name.get(value.operands[1])
            written += _unpadded(update.type_text) if update is not None and hbm_bytes(type_text) else 0
        else:
            written += hbm_bytes(type_text)
    read = 0
    for index, operand in enumerate(operands):
        if index in in_place:
            continue
        full = hbm_bytes(operand.type_text)
        sliced = _sliced_read(module, callee, index) if full else None
        read += min(full, sliced) if sliced is not None else full
    return read, written


def _sliced_read(module: Module, comp: Computation, index: int, depth: int = 0) -> int | None:
    """Bytes a fused computation reads of its parameter ``index`` when every use of it (through views
    and nested fusions) is the sliced operand of a slice; None when some use reads all of it."""
    param = next(
        (i for i in comp.instructions if i.opcode == "parameter" and i.operand_text == str(index)), None
    )
    if param is None or depth > 8:
        return None
    views, frontier, total = {param.name}, [param.name], 0
    while frontier:
        name = frontier.pop()
        if name == comp.root.name:
            return None  # the whole operand leaves the computation
        for user in (i for i in comp.instructions if name in i.operands):
            nested = module.computations.get(dict(user.called()).get("calls", ""))
            if user.opcode == "bitcast" or (nested is not None and _is_view_of_parameter(nested)):
                if user.name not in views:  # a view, or a fused computation that only makes one
                    views.add(user.name)
                    frontier.append(user.name)
            elif user.opcode in _SLICING_OPS and user.operands[0] == name and name not in user.operands[1:]:
                total += _unpadded(user.type_text)
            elif user.opcode == "fusion" and nested is not None:
                reads = [
                    _sliced_read(module, nested, k, depth + 1)
                    for k, o in enumerate(user.operands)
                    if o == name
                ]
                if any(r is None for r in reads):
                    return None
                total += sum(r for r in reads if r is not None)
            else:
                return None
    return total


def _is_view_of_parameter(comp: Computation) -> bool:
    """A fused computation whose result is its parameter seen through bitcasts (``bitcast_fusion``)."""
    root = _down_views(comp, comp.root.name)
    return root is not None and root.opcode == "parameter"


def _down_views(comp: Computation, name: str) -> Instruction | None:
    """The value ``name`` is a view of (through bitcasts and fused bitcast computations' inputs)."""
    inst = comp.by_name.get(name)
    while inst is not None and inst.opcode == "bitcast" and inst.operands:
        inst = comp.by_name.get(inst.operands[0])
    return inst


def _unpadded(type_text: str) -> int:
    return sum(a.nbytes for a in parse_type(type_text))


def _dot_dtype(module: Module, comp: Computation, inst: Instruction) -> str:
    """The operand type that sets a TPU matmul's rate: f32 if any matmul ``inst`` runs reads f32, else
    the first matmul's first operand's type."""
    return _dot_setting(module, comp, inst)[0]


#: how many bf16 passes each precision of an f32 matmul makes on a TPU (chapter 9): JAX's levels as the
#: compiled program names them (``operand_precision={high,high}``), and the dot-algorithm presets
#: (``algorithm=dot_bf16_bf16_f32_x6``) by the levels they run as
PRECISION_PASSES = {"default": 1, "high": 3, "highest": 6}
_ALGORITHMS = {
    "dot_bf16_bf16_f32": "default",
    "dot_bf16_bf16_f32_x3": "high",
    "dot_bf16_bf16_f32_x6": "highest",
}


def dot_precision(inst: Instruction) -> str:
    r"""The precision one dot or convolution asks for: "default", "high" or "highest", read from its
    ``operand_precision={...}`` (the higher of the two operands') or its ``algorithm=`` attribute.

    Example:
      >>> from shardbook.hlo import parse_module
      >>> m = parse_module(
      ...     "HloModule m\nENTRY %e (a: f32[8,8]) -> f32[8,8] {\n  %a = f32[8,8] parameter(0)\n"
      ...     "  ROOT %d = f32[8,8] dot(%a, %a), lhs_contracting_dims={1}, rhs_contracting_dims={0}, "
      ...     "operand_precision={highest,highest}\n}\n")
      >>> dot_precision(m.entry.root)
      'highest'
    """
    algorithm = (inst.attr("algorithm") or "").strip().lower()
    if algorithm:
        return _ALGORITHMS.get(algorithm, "highest" if "f32_f32" in algorithm else "default")
    levels = (inst.attr("operand_precision") or "").strip("{}").lower().split(",")
    found = [v.strip() for v in levels if v.strip() in PRECISION_PASSES]
    return max(found, key=PRECISION_PASSES.__getitem__, default="default")


def _dot_setting(module: Module, comp: Computation, inst: Instruction) -> tuple[str, str]:
    """(operand type, precision) that set the rate of the matmuls ``inst`` runs: f32 if any reads f32,
    else the first one's type; the most passes any f32 one asks for (a bf16 one makes one pass at any
    precision)."""
    found: list[str] = []
    precision = "default"
    stack = [(comp, inst)]
    while stack and len(found) < 64:
        c, i = stack.pop()
        if i.opcode in ("dot", "convolution"):
            types = [src.arrays[0].dtype for o in i.operands[:2] if (src := c.by_name.get(o)) and src.arrays]
            found += types
            if "f32" in types:
                precision = max(precision, dot_precision(i), key=PRECISION_PASSES.__getitem__)
        for _, name in i.called():
            if (callee := module.computations.get(name)) is not None:
                stack += [(callee, sub) for sub in reversed(callee.instructions)]
    return ("f32" if "f32" in found else (found[0] if found else "bf16")), precision


# ---------------------------------------------------------------------------------------------------


# ---------------------------------------------------------------------------------------------------
# a matmul kernel's tiling: how often it reads its operands from HBM

#: ops through which a matmul fusion reads its operand element for element (the bytes are the operand's)
_ELEMENTWISE_VIEWS = ("bitcast", "convert", "copy", "reshape")


def tiled_rereads(module: Module, comp: Computation, inst: Instruction) -> int:
    """HBM bytes a TPU matmul kernel reads beyond each operand once and writes beyond its result once,
    from the tiling the compiler chose (its ``window_config``: the grid of ``iteration_bounds`` and the
    window of each operand one grid step holds); 0 for any other op.

    Read for a plain product (a grid of three axes: the output's columns, its rows and the
    contraction, the innermost); a batched or windowed one is left at each operand once. A window is
    fetched again whenever its block changes, so an operand is read once per block of the axes outside
    its innermost axis: with the contraction split into steps, the left operand once per block of output
    columns and the right one once per block of output rows; with the contraction in one step, the right
    one stays while the rows go by. An operand the compiler placed in VMEM is read from there. A padded
    contraction reads its padding too. An operand the kernel computes (the ReLU of an f32 activation,
    converted to bf16, in an MLP's backward pass) reads what it is computed from as often as its window
    is fetched.

    Example: f32[8192,8192] @ f32[8192,8192] at the default precision, as a v5e compiled it: 8 × 8
    blocks of 1024 × 1024, the contraction in 22 steps of 384 (8448, padded): each operand is read
    8 × 8448 / 8192 times: 4.43 GB, 3.89 GB more than reading each once.

      >>> import gzip, json
      >>> from pathlib import Path
      >>> from shardbook.hlo import parse_module
      >>> path = Path(__file__).parent / "data" / "tpu_v5e_programs.json.gz"
      >>> m = parse_module(json.load(gzip.open(path))["matmul float32 8192"])
      >>> round(tiled_rereads(m, m.entry, m.entry.root) / 1e9, 2)
      3.89
    """
    tiled = _matmul_tiling(module, inst)
    if tiled is None:
        return 0
    callee, dot, bounds, window = tiled
    operands = [comp.by_name.get(o) for o in inst.operands]
    extra = 0
    for role, key, axes in _ROLES:
        index = _parameter_read(module, callee, dot.operands[role])
        if index is None:  # computed in the kernel: what it is computed from is fetched as often
            extra += _computed_rereads(
                callee, dot.operands[role], operands, bounds, window.get(key, []), axes
            )
            continue
        if index >= len(operands) or (operand := operands[index]) is None:
            continue
        full = hbm_bytes(operand.type_text)
        arrays = operand.arrays
        if not full or not arrays:
            continue  # in VMEM, or not an array
        elements = _window_elements(window.get(key, []))
        if elements:
            read = _fetches(bounds, axes) * elements * DTYPE_BYTES.get(arrays[0].dtype, 4)
            extra += max(0, read - full)
    return extra


def _computed_rereads(
    callee: Computation, value: str, operands: list, bounds: list[int], window: list, axes: set[int]
) -> int:
    """HBM bytes beyond once that a matmul kernel reads for an operand it computes inside itself (a ReLU
    and a convert of an f32 parameter, say): each parameter of the kernel the operand is computed from
    element for element (as many elements) is fetched as often as the operand's window."""
    source = callee.by_name.get(value)
    elements = _window_elements(window)
    if source is None or not source.arrays or not elements:
        return 0
    whole = source.arrays[0].elements
    times = _fetches(bounds, axes) * elements / whole
    extra = 0
    for name in _computed_from(callee, value):
        inst = callee.by_name[name]
        if inst.opcode != "parameter" or not inst.arrays or inst.arrays[0].elements != whole:
            continue
        index = int(inst.operand_text) if inst.operand_text.isdigit() else len(operands)
        if index < len(operands) and operands[index] is not None:
            full = hbm_bytes(operands[index].type_text)
            extra += max(0, round(times * full) - full)
    return extra


#: each operand of a plain product: its role, its window's key, the grid axes its block moves along
#: (the grid is [output columns, output rows, contraction])
_ROLES = ((0, "input_window_bounds", {1, 2}), (1, "kernel_window_bounds", {0, 2}))


def _matmul_tiling(
    module: Module, inst: Instruction
) -> tuple[Computation, Instruction, list[int], dict] | None:
    """(fused computation, its dot, grid, window_config) of a plain product's matmul kernel; None for
    any other op, a batched or windowed product, or one whose tiling the program does not give."""
    if inst.opcode != "fusion":
        return None
    window = inst.backend_config().get("window_config") or {}
    bounds = grid_bounds(inst)
    callee = module.computations.get(dict(inst.called()).get("calls", ""))
    if len(bounds) != 3 or callee is None:
        return None
    dot = next((i for i in callee.instructions if i.opcode in ("convolution", "dot")), None)
    if dot is None or len(dot.operands) < 2 or dot.attr("window") is not None:
        return None
    return callee, dot, bounds, window


def operand_fetches(module: Module, inst: Instruction) -> dict[str, float]:
    """For a TPU matmul kernel, how many times over its tiling fetches each value its dot reads (the
    values of the fused computation, by name, that the dot's operands are computed from): element-wise
    work on an operand inside the kernel is done again at every fetch. An operand whose window is the
    whole of it is fetched once. Empty for any other op (a batched or windowed product included).

    Example: ``sin(x) @ w`` of f32[4096,16384] @ [16384,4096], as a v5e compiled it: a grid of 3 column
    blocks, 5 row blocks of 824 and 64 contraction steps of 256; ``x``'s window is fetched 960 times,
    3.02 times its elements, and so is its sine; ``w``'s, 5.16 times.

      >>> import gzip, json
      >>> from pathlib import Path
      >>> from shardbook.hlo import parse_module
      >>> path = Path(__file__).parent / "data" / "tpu_v5e_programs.json.gz"
      >>> m = parse_module(json.load(gzip.open(path))["sine into a matmul f32"])
      >>> fusion = next(i for i in m.entry.instructions if i.opcode == "fusion")
      >>> sorted({round(f, 2) for f in operand_fetches(m, fusion).values()})
      [3.02, 5.16]
    """
    tiled = _matmul_tiling(module, inst)
    if tiled is None:
        return {}
    callee, dot, bounds, window = tiled
    times: dict[str, float] = {}
    for role, key, axes in _ROLES:
        source = callee.by_name.get(dot.operands[role])
        elements = _window_elements(window.get(key, []))
        if source is None or not elements or not source.arrays:
            continue
        whole = source.arrays[0].elements
        factor = 1.0 if elements >= whole else max(1.0, _fetches(bounds, axes) * elements / whole)
        for name in _computed_from(callee, source.name):
            times[name] = max(times.get(name, 1.0), factor)
    return times


def _computed_from(comp: Computation, name: str) -> set[str]:
    """``name`` and every value of ``comp`` it is computed from."""
    out, stack = set(), [name]
    while stack:
        n = stack.pop()
        if n in out or (i := comp.by_name.get(n)) is None:
            continue
        out.add(n)
        stack += i.operands
    return out


def _window_elements(window: list) -> int:
    """Elements of one window of a 2-D operand: its bounds count (8, 128) tiles."""
    sizes = [int(w) for w in window]
    return sizes[0] * 8 * sizes[1] * 128 if len(sizes) == 2 else 0


def _fetches(bounds: list[int], axes: set[int]) -> int:
    """How many times a window that moves along ``axes`` is fetched as the grid is walked in order (the
    last axis fastest): the number of grid steps down to the innermost of its axes that has more than
    one block."""
    moving = [a for a in axes if bounds[a] > 1]
    return math.prod(bounds[: max(moving) + 1]) if moving else 1


def _parameter_read(module: Module, comp: Computation, name: str, depth: int = 0) -> int | None:
    """The parameter of ``comp`` that value ``name`` reads element for element (through bitcasts,
    converts, copies and fused computations of them), or None."""
    inst = comp.by_name.get(name)
    while inst is not None and depth < 16:
        depth += 1
        if inst.opcode == "parameter":
            return int(inst.operand_text) if inst.operand_text.isdigit() else None
        if inst.opcode in _ELEMENTWISE_VIEWS and inst.operands:
            inst = comp.by_name.get(inst.operands[0])
            continue
        nested = module.computations.get(dict(inst.called()).get("calls", ""))
        if inst.opcode == "fusion" and nested is not None and len(inst.operands) == 1:
            if _parameter_read(module, nested, nested.root.name, depth) == 0:
                inst = comp.by_name.get(inst.operands[0])
                continue
        return None
    return None


def window_spans_lanes(inst: Instruction) -> bool | None:
    """Whether a kernel's output window (``window_config``'s ``output_window_bounds``, its last entry in
    tiles of 128 lanes) spans the whole minor dimension of its first result in HBM, so that each block
    it writes is whole rows of that result; None where the program does not say.

    Example: the scores q kᵀ alone, 8 heads of 256 at 2,048 tokens, as a v5e compiled them (their window
    holds 16 lane tiles, all 2,048 keys), and the whole attention's scores, the queries on the lanes in
    windows of one tile of 128:

      >>> import gzip, json
      >>> from pathlib import Path
      >>> from shardbook.hlo import parse_module
      >>> texts = json.load(gzip.open(Path(__file__).parent / "data" / "tpu_v5e_programs.json.gz", "rt"))
      >>> alone = parse_module(texts["attention scores bf16, 8 heads of 256"])
      >>> whole = parse_module(texts["attention bfloat16 2048"])
      >>> [window_spans_lanes(m.entry.by_name[k]) for m, k in ((alone, "fusion"), (whole, "fusion.11"))]
      [True, False]
    """
    window = (inst.backend_config().get("window_config") or {}).get("output_window_bounds", [])
    for m in _ARRAY_LAYOUT_RE.finditer(inst.type_text):
        layout = m.group(3) or ""
        if re.search(r"S\([1-9]", layout):
            continue
        dims = [int(d) for d in m.group(2).split(",") if d]
        order = [int(d) for d in layout[1:].split(":")[0].split(",") if d.strip()]
        if not window or not dims or len(order) != len(dims):
            return None
        return int(window[-1]) * 128 >= dims[order[0]]
    return None


def stepped_weight_tile(module: Module, inst: Instruction) -> tuple[int, int] | None:
    """(elements of one grid step's window of the weights, rows each weight tile meets) of a product's
    kernel that the compiler laid out with its output's batch in the sublanes (an emitter named
    ``…OutputBatchInSublanes…``: attention's second product p v in the [batch, tokens, heads, width]
    form, computed as vᵀ pᵀ, the weights p, the head's width the batch of the convolution); None for any
    other kernel. The weights' window is ``window_config``'s ``kernel_window_bounds`` (its last entry in
    tiles of 128 lanes, the one before in tiles of 8 sublanes); the rows are the size of the
    convolution's batch dimension (``dim_labels``' ``b`` in its result).

    Example: attention's second product, 8 heads of 256 at 2,048 tokens, batch 8, as a v5e compiled
    it: each step holds 2 heads × 208 keys × 2,048 queries of p, and each tile of p meets 256 rows:

      >>> import gzip, json
      >>> from pathlib import Path
      >>> from shardbook.hlo import parse_module
      >>> texts = json.load(gzip.open(Path(__file__).parent / "data" / "tpu_v5e_programs.json.gz", "rt"))
      >>> m = parse_module(texts["attention bfloat16 2048, 8 heads of 256"])
      >>> [stepped_weight_tile(m, m.entry.by_name[k]) for k in ("fusion.8", "fusion.11")]
      [(851968, 256), None]
    """
    config = inst.backend_config()
    if "OutputBatchInSublanes" not in (config.get("convolution_algorithm_config") or {}).get("emitter", ""):
        return None
    window = [int(b) for b in (config.get("window_config") or {}).get("kernel_window_bounds", [])]
    nested = module.computations.get(dict(inst.called()).get("calls", ""))
    convs = [i for i in nested.instructions if i.opcode == "convolution"] if nested is not None else []
    labels = convs[0].attr("dim_labels") if len(convs) == 1 else None
    if len(window) < 2 or not labels or "->" not in labels:
        return None
    out = labels.split("->")[1]
    dims = convs[0].arrays[0].dims if convs[0].arrays else ()
    if "b" not in out or len(dims) != len(out):
        return None
    return math.prod(window[:-2]) * window[-2] * 8 * window[-1] * 128, dims[out.index("b")]
