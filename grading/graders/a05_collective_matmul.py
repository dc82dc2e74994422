"""Graders for assignment 05_collective_matmul (overlapping communication with matmuls).

Each ``check_<function>(fn)`` does three kinds of test:

* **values**: small integer-valued f32 inputs placed as the contract says, on meshes of 8 devices
  laid out (2, 4), (4, 2), (1, 8) and (8, 1) with Explicit axes ('X', 'Y') (JAX 0.12's default), the
  same layouts with Auto axes, and one mesh whose devices are shuffled; the answer is compared with a
  NumPy oracle in float64 and its sharding with the contract's; then one case of random floats that
  bfloat16 cannot hold, within float32's rounding (a block cast to bf16 on its way fails there);
* **what moves**: the learner's function is compiled (never run) for larger shapes and read with
  :func:`shardbook.analyze`: which collective kinds appear and how many bytes each device sends, next
  to the bound the exercise states; and, since these sizes are never run, that the program does the
  work the contract needs there too (:func:`shardbook.checks.expect_flops_and_bytes`: the product's
  FLOPs, within 5%, and at least the f32 bytes that must travel), so that an answer which tests the
  shapes and does something else at a size only compiled fails;
* **time**: where the exercise is about overlap, :func:`shardbook.estimate` models one step on a TPU
  v5e at a size where communication matters. The estimate may be at most
  :data:`shardbook.cost.MODEL_MARGIN` (10%) above the baseline's — plain ``jax.jit``, or, for the
  bidirectional all-gather, the one-directional reference ring below — since the model is only that
  close to published measurements (``make bench``); a correct program is never refused on a hair.
  Because that margin would let a program that does all its communication before or after its
  matmuls pass, every exercise is also checked for **overlap**: in the program read by
  :func:`shardbook.analyze` (XLA:CPU's all-reduce combiner switched off, so chunks reduced
  separately stay separate), at least :data:`MIN_OVERLAP_SHARE` of the matmul time must pass while a
  collective runs (:func:`shardbook.checks.expect_overlap`), so a tiny matmul beside the permutes
  does not count; Exercise 5.2 must split its reduction into at least two collectives.

A mesh whose 'Y' axis has one device needs no communication, and the graders check that none happens.
The first wrong answer raises :class:`shardbook.checks.CheckFailed` with the call, what was expected,
what came back, and a hint.

Why the bidirectional variants are compared with the one-directional ring and not with a speed-up:
the cost model gives a permute only the link directions its pairs use, and an 8-device v5e has no
wraparound links (How To Scale Your Model, "How to Think About TPUs"). On such a line a
one-directional ring already uses both directions (the pair that closes the ring goes back along the
line), so the model gives about the same time for a correct bidirectional version. The
time check therefore catches versions that expose communication a one-directional ring hides, while
the *structure* check (permutes both ways round 'Y', no extra bytes, at most ceil((nY - 1) / 2)
permutes each way, so that no block travels further than it needs to) grades the idea itself. The
bidirectional reduce-scatter is compared with plain jit, as Exercise 5.3 is: XLA:CPU orders its
matmuls itself, and a correct program models at 102.2 µs where its mirror image (the stream with more
steps going the other way) models at 113.9 µs, both of which must pass
(tests/submissions/05_collective_matmul/ok_reducescatter_bidir_mirror.py).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import AxisType, Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from grading.graders.common import (
    analyze_learner,
    call_learner,
    call_text,
    collectives_text,
    expect_kinds_and_bytes,
    make_mesh,
    place,
    small_ints,
    struct,
)
from shardbook.checks import (
    CheckFailed,
    expect_allclose,
    expect_estimate_within,
    expect_float32_close,
    expect_flops_and_bytes,
    expect_overlap,
    expect_sharding,
    ring_blocks,
)
from shardbook.comms import Report, analyze, format_bytes

MESH_LAYOUTS: list[tuple[int, int]] = [(2, 4), (4, 2), (1, 8), (8, 1)]
BYTES_F32 = 4
# Every estimate is compared with its baseline's plus shardbook.cost.MODEL_MARGIN (one constant for all
# graders and self-checks): see shardbook.checks.expect_estimate_within.
# Structure (kinds, bytes, directions) is read on these layouts at a middle size, and on (2, 4) at the
# large size of the time comparison.
STRUCTURE_LAYOUTS: list[tuple[int, int]] = [(1, 8)]
# The least share of the matmul time that must pass while a collective runs, at the large size: half a
# block's matmul on the (2, 4) mesh's ring of 4. A correct ring hides 1/4 to 3/4; an 8x8 matmul beside
# the permutes, or a chunk of one column beside the reduction of the rest, hides well under 1%.
MIN_OVERLAP_SHARE = 1 / 8


# ----------------------------------------------------------------------------------------------
# Oracles and references.
# ----------------------------------------------------------------------------------------------


def oracle_matmul(*factors: np.ndarray) -> np.ndarray:
    """The product of the factors, left to right, in float64."""
    return functools.reduce(lambda u, v: u @ v, [np.asarray(f, np.float64) for f in factors])


def plain_jit(mesh: Mesh, out_spec: P) -> Callable:
    """What XLA does by itself (on a mesh with Auto axes): the product under jit, laid out out_spec."""

    def product(*factors):
        return functools.reduce(jnp.matmul, factors)

    return jax.jit(product, out_shardings=NamedSharding(mesh, out_spec))


# ----------------------------------------------------------------------------------------------
# Meshes, inputs and calls.
# ----------------------------------------------------------------------------------------------


def value_meshes() -> list[Mesh]:
    """The meshes the value tests use: each layout once, Explicit and Auto axes in turn, one shuffled."""
    types = [AxisType.Explicit, AxisType.Auto]
    meshes = [make_mesh(s, axis_type=types[i % 2]) for i, s in enumerate(MESH_LAYOUTS)]
    meshes.append(make_mesh((2, 4), axis_type=AxisType.Auto, shuffle=5))
    return meshes


def _analyze(fn: Callable, name: str, args: tuple, mesh: Mesh) -> Report:
    """Compiles fn(*args, mesh) for ShapeDtypeStructs (nothing runs) and reads its collectives."""
    return analyze_learner(
        _jitted(fn, mesh),
        name,
        *args,
        where=f"{call_text(name, args + (mesh,))} compiled for these shapes",
        hint="the hidden tests use larger shapes than the self-check; do not hard-code sizes.",
    )


def _jitted(fn: Callable, mesh: Mesh) -> Callable:
    """fn(*arrays, mesh) under jax.jit, as the contracts say (shard_map run eagerly is ten times slower)."""
    return jax.jit(lambda *xs: fn(*xs, mesh))


# The hint when a learner's function raises.
CALL_HINT = (
    "read the error from the top; inside shard_map every array is one device's block, and the ring's "
    "length is mesh.shape['Y'] of the mesh given (the hidden tests use several)."
)


# ----------------------------------------------------------------------------------------------
# Shared checks.
# ----------------------------------------------------------------------------------------------


def _check_values(
    fn: Callable,
    name: str,
    shapes: Sequence[tuple[str, ...]],
    specs: list[P],
    out_spec: P,
    hint: str,
    sizes: tuple[dict[str, int], ...],
    meshes: list[Mesh] | None = None,
    call_hint: str = CALL_HINT,
) -> None:
    """Runs fn on every value mesh (or on ``meshes``) and compares with the oracle and the output sharding.

    ``call_hint`` is the hint when fn raises: the generic one, or the case's own where its shapes matter.
    """
    rng = np.random.default_rng(5)
    for i, mesh in enumerate(meshes or value_meshes()):
        dims = sizes[i % len(sizes)]
        arrays = [small_ints(rng, tuple(dims[k] for k in shape)) for shape in shapes]
        args = tuple(place(x, mesh, s) for x, s in zip(arrays, specs, strict=True))
        call = call_text(name, args + (mesh,))  # names the mesh, whatever goes wrong
        got = call_learner(_jitted(fn, mesh), name, *args, where=call, hint=call_hint)
        # which output blocks along 'Y' are wrong, and whether the ring ran the other way
        ring = list(out_spec).index("Y") if "Y" in tuple(out_spec) else None
        explain = ring_blocks(ring, mesh.shape["Y"], "Y", mesh) if ring is not None else None
        expect_allclose(got, oracle_matmul(*arrays), call, rtol=1e-6, atol=1e-6, hint=hint, explain=explain)
        expect_sharding(
            got,
            NamedSharding(mesh, out_spec),
            call,
            hint=f"the contract returns the product laid out {out_spec}: set out_specs accordingly.",
        )


def _check_float_values(
    fn: Callable,
    name: str,
    shapes: Sequence[tuple[str, ...]],
    specs: list[P],
    out_spec: P,
    dims: dict[str, int],
) -> None:
    """One case of random floats that bfloat16 cannot hold, on a (2, 4) mesh: the values within float32's
    rounding, so a block or a product cast to bf16 on its way fails."""
    rng = np.random.default_rng(6)
    mesh = make_mesh((2, 4))
    arrays = [rng.uniform(-1, 1, tuple(dims[k] for k in s)).astype(np.float32) for s in shapes]
    args = tuple(place(x, mesh, s) for x, s in zip(arrays, specs, strict=True))
    call = call_text(name, args + (mesh,)) + " with float inputs"
    got = call_learner(_jitted(fn, mesh), name, *args, where=call, hint=CALL_HINT)
    ring = list(out_spec).index("Y") if "Y" in tuple(out_spec) else None
    explain = ring_blocks(ring, mesh.shape["Y"], "Y", mesh) if ring is not None else None
    expect_float32_close(
        got,
        oracle_matmul(*arrays),
        call,
        hint="the integer cases passed: compare how this case differs (the values are not integers).",
        explain=explain,
    )


def _flops(shapes: Sequence[tuple[str, ...]], dims: dict[str, int], mesh: Mesh) -> int:
    """The matmul FLOPs per device of the product of factors of these named shapes, left to right, with
    the work split evenly over the mesh's devices."""
    rows, total = dims[shapes[0][0]], 0
    for inner, outer in shapes[1:]:
        total += 2 * rows * dims[inner] * dims[outer]
    return total // (mesh.shape["X"] * mesh.shape["Y"])


def _expect_work(report: Report, call: str, flops: int, min_bytes: int, bytes_text: str) -> None:
    """The product's FLOPs (within 5%) and at least ``min_bytes`` sent, in the program compiled for this
    size: what the values checked at small sizes do, done here too."""
    expect_flops_and_bytes(
        report,
        flops=flops,
        min_bytes=min_bytes,
        what=call,
        flops_text="the product, split over the devices",
        bytes_text=bytes_text,
    )


def _check_no_communication_without_y(fn: Callable, name: str, structs: list, specs: list[P]) -> None:
    """On an (8, 1) mesh every device already holds all it needs: nothing may move."""
    mesh = make_mesh((8, 1))
    args = tuple(struct(s, mesh, p) for s, p in zip(structs, specs, strict=True))
    report = _analyze(fn, name, args, mesh)
    if report.total_bytes > 0:
        raise CheckFailed(
            f"{call_text(name, args + (mesh,))}: expected no communication ('Y' has one device, so each "
            f"device already holds everything it multiplies), got {collectives_text(report)}. Hint: "
            "with n = 1 the ring has no steps; loop over range(n - 1) permutes, not a fixed number."
        )


def _structs(mesh: Mesh, dims: dict[str, int], shapes: Sequence[tuple[str, ...]], specs: list[P]) -> tuple:
    """Shape-only arguments: dimension names (``("B", "D")``) sized by ``dims``, laid out by ``specs``."""
    return tuple(struct(tuple(dims[k] for k in s), mesh, p) for s, p in zip(shapes, specs, strict=True))


def _structure_cases(middle: dict[str, int], big: dict[str, int]) -> list[tuple[Mesh, dict[str, int]]]:
    """(mesh, sizes) of the compile-only checks: each STRUCTURE_LAYOUTS mesh at a middle size, then a
    (2, 4) mesh with Auto axes at the large size the time comparison uses (it comes last)."""
    cases = [(make_mesh(shape), middle) for shape in STRUCTURE_LAYOUTS]
    return cases + [(make_mesh((2, 4), axis_type=AxisType.Auto), big)]


def _check_time(
    report: Report,
    baseline: Report | float,
    call: str,
    baseline_name: str,
    hint: str,
    *,
    min_collectives: int = 1,
) -> None:
    """Overlap (a real share of the matmul time beside the collectives), then the estimate within the
    model's margin."""
    expect_overlap(
        report,
        what=f"{call}, as modelled on a TPU v5e",
        min_collectives=min_collectives,
        min_share=MIN_OVERLAP_SHARE,
        hint=hint,
    )
    expect_estimate_within(report, baseline, what=call, baseline_name=baseline_name, hint=hint)


def _permute_directions(report: Report, mesh_shape: dict[str, int]) -> set[int]:
    """The shifts along 'Y' (+1, -1, ...) of the collective-permutes, from their source→target pairs."""
    n_y = mesh_shape["Y"]
    shifts = set()
    for c in report.collectives:
        if c.kind != "collective-permute":
            continue
        for source, target in c.groups:
            shifts.add((target % n_y - source % n_y) % n_y)
    return shifts


def _permutes_each_way(report: Report, n_y: int) -> tuple[int, int]:
    """How many collective-permutes run to the left (shift -1) and to the right (+1) along 'Y' (loop
    trip counts included); on a ring of 2 both count every permute."""
    left = right = 0
    for c in report.collectives:
        if c.kind != "collective-permute":
            continue
        shifts = {(target % n_y - source % n_y) % n_y for source, target in c.groups}
        left += c.executions * (n_y - 1 in shifts)
        right += c.executions * (1 in shifts)
    return left, right


def _expect_both_directions(report: Report, call: str, mesh: Mesh, hint: str) -> None:
    """On a ring of more than 2 devices along 'Y', collective-permutes with shifts +1 and -1, at most
    ceil((nY - 1) / 2) of them each way: every block goes the shorter way round, no further."""
    n_y = mesh.shape["Y"]
    if n_y <= 2:
        return  # left and right neighbours are the same device
    directions = _permute_directions(report, dict(mesh.shape))
    if not {1, n_y - 1} <= directions:
        raise CheckFailed(
            f"{call}: expected collective-permutes going both ways round 'Y' (shifts +1 and -1), "
            f"got shifts {sorted(directions)} only. Hint: {hint}"
        )
    most = n_y // 2  # ceil((n_y - 1) / 2)
    left, right = _permutes_each_way(report, n_y)
    if max(left, right) > most:
        raise CheckFailed(
            f"{call}: expected at most ceil((nY - 1) / 2) = {most} collective-permutes each way round "
            f"'Y' (each block goes the shorter way, so none travels further than {most} steps), got "
            f"{left} to the left and {right} to the right. Hint: send whole blocks, one stream each way, "
            f"the longer stream {most} steps and the other {n_y - 1 - most}; a block cut in pieces that "
            "each go the whole ring travels further than it needs to."
        )


# ----------------------------------------------------------------------------------------------
# Exercise 5.1: all-gather collective matmul.
# ----------------------------------------------------------------------------------------------

AG_SHAPES = [("B", "D"), ("D", "F")]
AG_SPECS = [P("X", "Y"), P(None, "Y")]
AG_VALUE_SIZES = ({"B": 16, "D": 32, "F": 64}, {"B": 8, "D": 64, "F": 32})
AG_BIG = {"B": 1024, "D": 2048, "F": 8192}  # the published v5e-8 case (How To Scale Your Model)


# The all-gather bidirectional exercise's time target: the TPU v5e estimate of the one-directional ring
# (the answer of Exercise 5.1) for the last structure case, AG_BIG on a (2, 4) mesh, in µs.
# A number, not the ring: the graders are public and hold no copy of an answer.
# tests/test_graders_a05_collective_matmul.py recomputes it from the solution notebook, and checks
# that the exercise's prompt and self-check state it.
RING_ALLGATHER_US = 90.55591111111112


def _ag_bound(mesh: Mesh, dims: dict[str, int]) -> int:
    """What plain jit's all-gather of A over 'Y' sends: (nY - 1) blocks of A."""
    n_x, n_y = mesh.shape["X"], mesh.shape["Y"]
    return (n_y - 1) * (dims["B"] // n_x) * (dims["D"] // n_y) * BYTES_F32


def _ag_structs(mesh: Mesh, dims: dict[str, int]) -> tuple:
    return _structs(mesh, dims, AG_SHAPES, AG_SPECS)


def _check_allgather_family(fn: Callable, name: str, bidirectional: bool) -> None:
    hint = (
        "device j of 'Y' starts with columns j·D/nY… of A; after s steps of your ppermute it holds the "
        "block of a neighbour — check which one, and slice the matching rows of W."
    )
    _check_values(fn, name, AG_SHAPES, AG_SPECS, P("X", "Y"), hint, AG_VALUE_SIZES)
    _check_float_values(fn, name, AG_SHAPES, AG_SPECS, P("X", "Y"), AG_VALUE_SIZES[0])
    _check_no_communication_without_y(fn, name, [(64, 128), (128, 256)], AG_SPECS)
    hint = (
        "never gather A: keep one block of A in hand, multiply it by the matching rows of W, and pass "
        "it on round 'Y' with jax.lax.ppermute."
    )
    for mesh, dims in _structure_cases({"B": 64, "D": 256, "F": 512}, AG_BIG):
        args = _ag_structs(mesh, dims)
        report = _analyze(fn, name, args, mesh)
        call = call_text(name, args + (mesh,))
        bound = _ag_bound(mesh, dims)
        expect_kinds_and_bytes(
            report, call, ("collective-permute",), bound, "what plain jit's all-gather of A sends", hint
        )
        _expect_work(
            report,
            call,
            _flops(AG_SHAPES, dims, mesh),
            bound,
            "(nY - 1) blocks of A in float32: each device needs every block of its row band of A",
        )
        if bidirectional:
            _expect_both_directions(
                report,
                call,
                mesh,
                "send one stream of blocks to the left neighbour and another to the right one; each "
                "block then needs at most nY/2 steps.",
            )
    if bidirectional:
        _check_time(
            report,
            RING_ALLGATHER_US,
            call,
            "the one-directional ring of Exercise 5.1",
            "multiply each block as soon as it arrives, and keep the number of permutes at nY - 1 (every "
            "extra permute pays the link latency again).",
        )
    else:
        plain = analyze(plain_jit(mesh, P("X", "Y")), *args)
        _check_time(
            report,
            plain,
            call,
            "plain jit (blocking all-gather)",
            "a block's matmul should only wait for that block's permute, so the next permute runs "
            "while the current block is multiplied.",
        )


def check_matmul_allgather(fn: Callable) -> None:
    """A[B_X, D_Y] · W[D, F_Y] → Out[B_X, F_Y] with a ring of permutes, no all-gather."""
    _check_allgather_family(fn, "matmul_allgather", bidirectional=False)


def check_matmul_allgather_bidir(fn: Callable) -> None:
    """As Exercise 5.1, with blocks travelling both ways round 'Y'."""
    _check_allgather_family(fn, "matmul_allgather_bidir", bidirectional=True)


# ----------------------------------------------------------------------------------------------
# Exercise 5.2: all-reduce collective matmul.
# ----------------------------------------------------------------------------------------------

AR_SHAPES = [("B", "D"), ("D", "F")]
AR_SPECS = [P("X", "Y"), P("Y", None)]
AR_BIG = {"B": 512, "D": 16384, "F": 4096}  # comparable on a v5e: the all-reduce under twice the matmul


def check_matmul_allreduce(fn: Callable) -> None:
    """A[B_X, D_Y] · W[D_Y, F] → Out[B_X, F], reduced in chunks that overlap the matmuls."""
    name = "matmul_allreduce"
    _check_values(
        fn,
        name,
        AR_SHAPES,
        AR_SPECS,
        P("X", None),
        "each device's product is a partial sum over its slice of D; every chunk must be summed over "
        "'Y' exactly once.",
        ({"B": 16, "D": 32, "F": 64}, {"B": 8, "D": 64, "F": 128}),
    )
    f9_hint = (
        "F need not divide by your number of chunks (here F = 9): split it unevenly, or into fewer chunks."
    )
    _check_values(  # the contract puts no condition on F: chunks need not divide it; a learner's may raise
        fn, name, AR_SHAPES, AR_SPECS, P("X", None), f9_hint, ({"B": 16, "D": 32, "F": 9},), call_hint=f9_hint
    )
    _check_float_values(fn, name, AR_SHAPES, AR_SPECS, P("X", None), {"B": 16, "D": 32, "F": 64})
    _check_no_communication_without_y(fn, name, [(64, 128), (128, 256)], AR_SPECS)
    hint = (
        "split the output's F columns into chunks; psum each chunk as soon as it is computed, so its "
        "reduction runs while the next chunk is multiplied."
    )
    for mesh, dims in _structure_cases({"B": 64, "D": 256, "F": 512}, AR_BIG):
        shape = tuple(mesh.devices.shape)
        args = _structs(mesh, dims, AR_SHAPES, AR_SPECS)
        report = _analyze(fn, name, args, mesh)
        call = call_text(name, args + (mesh,))
        n_x, n_y = shape
        out_block = dims["B"] // n_x * dims["F"] * BYTES_F32
        bound = 2 * (n_y - 1) * out_block // n_y
        expect_kinds_and_bytes(
            report,
            call,
            ("all-reduce", "reduce-scatter", "all-gather", "collective-permute"),
            bound,
            "one all-reduce of the output block, as plain jit sends",
            hint,
        )
        _expect_work(  # chunks of uneven sizes round their bytes down: 1% below the bound is the same
            report,
            call,
            _flops(AR_SHAPES, dims, mesh),
            bound - bound // 100,
            "one all-reduce of the f32 output block: every partial sum must be reduced",
        )
    plain = analyze(plain_jit(mesh, P("X", None)), *args)
    _check_time(
        report,
        plain,
        call,
        "plain jit (one all-reduce)",
        "psum each chunk of the output as soon as it is computed, before multiplying the next chunk: "
        "one psum of the whole product, psums after the last matmul, or a chunk too small to hide "
        "the others' reductions leave nothing to overlap.",
        min_collectives=2,
    )


# ----------------------------------------------------------------------------------------------
# Exercise 5.3: reduce-scatter collective matmul.
# ----------------------------------------------------------------------------------------------

RS_SHAPES = [("B", "F"), ("F", "D")]
RS_SPECS = [P("X", "Y"), P("Y", None)]
RS_VALUE_SIZES = ({"B": 16, "F": 32, "D": 64}, {"B": 8, "F": 64, "D": 32})
RS_BIG = {"B": 1024, "F": 8192, "D": 2048}


def _rs_structs(mesh: Mesh, dims: dict[str, int]) -> tuple:
    return _structs(mesh, dims, RS_SHAPES, RS_SPECS)


def _check_reducescatter_family(fn: Callable, name: str, bidirectional: bool) -> None:
    value_cases: list[tuple[str, tuple[dict[str, int], ...], list[Mesh] | None]] = [
        (
            "device j must end with output block j of D: the accumulator it receives last must be the one "
            "for its own block, with every other device's contribution added once.",
            RS_VALUE_SIZES,
            None,
        )
    ]
    if bidirectional:  # a ring of 3 (6 devices): the two streams of accumulators no longer meet halfway
        value_cases.append(
            (
                "with an odd number of devices on 'Y' the streams take n // 2 and n - 1 - n // 2 steps: the "
                "block a stream starts with is me + steps (going right) or me - steps (going left), mod n.",
                ({"B": 8, "F": 24, "D": 48},),
                [make_mesh((2, 3))],
            )
        )
    for hint, sizes, meshes in value_cases:
        _check_values(fn, name, RS_SHAPES, RS_SPECS, P("X", "Y"), hint, sizes, meshes=meshes)
    _check_float_values(fn, name, RS_SHAPES, RS_SPECS, P("X", "Y"), RS_VALUE_SIZES[0])
    _check_no_communication_without_y(fn, name, [(64, 128), (128, 256)], RS_SPECS)
    hint = (
        "never reduce the whole output (psum and psum_scatter show up as all-reduce / reduce-scatter): "
        "pass an accumulator of one output block round 'Y' with ppermute, each device adding its "
        "contribution to that block before sending it on."
    )
    for mesh, dims in _structure_cases({"B": 64, "F": 256, "D": 512}, RS_BIG):
        shape = tuple(mesh.devices.shape)
        args = _rs_structs(mesh, dims)
        report = _analyze(fn, name, args, mesh)
        call = call_text(name, args + (mesh,))
        n_x, n_y = shape
        out_block = dims["B"] // n_x * dims["D"] // n_y * BYTES_F32
        expect_kinds_and_bytes(
            report,
            call,
            ("collective-permute",),
            (n_y - 1) * out_block,
            f"(nY - 1) = {n_y - 1} output blocks of {format_bytes(out_block)}",
            hint,
        )
        _expect_work(
            report,
            call,
            _flops(RS_SHAPES, dims, mesh),
            (n_y - 1) * out_block,
            "(nY - 1) f32 output blocks: every device's contribution to every other block must travel",
        )
        if bidirectional:
            _expect_both_directions(
                report,
                call,
                mesh,
                "send the partial sums of the blocks on your right to the right and those on your left "
                "to the left.",
            )
    plain = analyze(plain_jit(mesh, P("X", "Y")), *args)
    baseline = "plain jit (one reduce-scatter after the matmul)"
    if bidirectional:
        hint = "send each accumulator on as soon as your contribution is added; keep to nY - 1 permutes."
        baseline += ", as for Exercise 5.3"
    _check_time(report, plain, call, baseline, hint)


def check_matmul_reducescatter(fn: Callable) -> None:
    """T[B_X, F_Y] · W2[F_Y, D] → Out[B_X, D_Y] with a ring of accumulators, no all-reduce."""
    _check_reducescatter_family(fn, "matmul_reducescatter", bidirectional=False)


def check_matmul_reducescatter_bidir(fn: Callable) -> None:
    """As Exercise 5.3, with accumulators travelling both ways round 'Y'."""
    _check_reducescatter_family(fn, "matmul_reducescatter_bidir", bidirectional=True)


# ----------------------------------------------------------------------------------------------
# Exercise 5.6: transformer MLP block.
# ----------------------------------------------------------------------------------------------

MLP_SHAPES = [("B", "D"), ("D", "F"), ("F", "D")]
MLP_SPECS = [P("X", "Y"), P(None, "Y"), P("Y", None)]
MLP_BIG = {"B": 1024, "D": 2048, "F": 8192}


def check_transformer_mlp(fn: Callable) -> None:
    """In[B_X, D_Y] · Win[D, F_Y] · Wout[F_Y, D] → Out[B_X, D_Y], only permutes, overlapped."""
    name = "transformer_mlp"
    _check_values(
        fn,
        name,
        MLP_SHAPES,
        MLP_SPECS,
        P("X", "Y"),
        "the hidden activation H[B_X, F_Y] is exactly what the reduce-scatter ring takes as its T.",
        ({"B": 16, "D": 32, "F": 64}, {"B": 8, "D": 64, "F": 32}),
    )
    _check_values(  # a ring of 3: a ring length written down, or an even ring assumed, shows here
        fn,
        name,
        MLP_SHAPES,
        MLP_SPECS,
        P("X", "Y"),
        "each ring takes n - 1 steps on the mesh given: read n from mesh.shape['Y'].",
        ({"B": 8, "D": 24, "F": 48},),
        meshes=[make_mesh((2, 3))],
    )
    _check_float_values(fn, name, MLP_SHAPES, MLP_SPECS, P("X", "Y"), {"B": 16, "D": 32, "F": 64})
    _check_no_communication_without_y(fn, name, [(64, 128), (128, 256), (256, 128)], MLP_SPECS)
    hint = (
        "chain the two rings: permute blocks of x while multiplying by w_in, then pass accumulators of "
        "the output round 'Y' while multiplying by w_out; never gather x or reduce the whole output."
    )
    for mesh, dims in _structure_cases({"B": 64, "D": 256, "F": 512}, MLP_BIG):
        shape = tuple(mesh.devices.shape)
        args = _structs(mesh, dims, MLP_SHAPES, MLP_SPECS)
        n_x, n_y = shape
        block = dims["B"] // n_x * dims["D"] // n_y * BYTES_F32  # x block = output block
        report = _analyze(fn, name, args, mesh)
        call = call_text(name, args + (mesh,))
        expect_kinds_and_bytes(
            report,
            call,
            ("collective-permute",),
            2 * (n_y - 1) * block,
            "(nY - 1) blocks of x plus (nY - 1) output blocks, what plain jit sends",
            hint,
        )
        _expect_work(
            report,
            call,
            _flops(MLP_SHAPES, dims, mesh),
            2 * (n_y - 1) * block,
            "(nY - 1) f32 blocks of x plus (nY - 1) f32 output blocks",
        )
    plain = analyze(plain_jit(mesh, P("X", "Y")), *args)
    _check_time(report, plain, call, "plain jit (all-gather, then reduce-scatter)", hint)
