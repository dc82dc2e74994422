"""Graders for assignment 02_auto_sharding (jit with sharded inputs, what the compiler inserts,
reading the compiled program, with_sharding_constraint).

Each ``check_<function>(fn)`` runs a learner's function on the four 8-device meshes (4×2, 2×4, 8×1,
1×8, all with Auto axes 'X' and 'Y', one of them with its devices shuffled) and several shapes. Values
are compared with a NumPy oracle; the compiled program is read with :func:`shardbook.analyze`. The
first problem raises :class:`shardbook.checks.CheckFailed` with the call, what was expected, what came
back, and a hint.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import AxisType, Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from grading.graders.common import call_learner, make_mesh, oracle_block_means, place, show
from shardbook.checks import (
    CheckFailed,
    describe_array,
    expect_allclose,
    expect_no_collectives,
    expect_program_on_mesh,
)
from shardbook.comms import analyze, format_bytes

# Mesh layouts the hidden tests use: sizes of ('X', 'Y').
MESH_LAYOUTS: list[tuple[int, int]] = [(4, 2), (2, 4), (8, 1), (1, 8)]


# ----------------------------------------------------------------------------------------------
# Meshes, calls and messages.
# ----------------------------------------------------------------------------------------------


def mesh_cases() -> list[Mesh]:
    """The four layouts in device-id order, plus the 4×2 one with its devices shuffled."""
    return [make_mesh(sizes, axis_type=AxisType.Auto) for sizes in MESH_LAYOUTS] + [
        make_mesh((4, 2), axis_type=AxisType.Auto, shuffle=7)
    ]


def _uses_shard_map(fn: Callable, *args: Any) -> bool:
    try:
        return "shard_map" in str(jax.make_jaxpr(fn)(*args))
    except Exception:
        return False  # the call itself reports the error


# ----------------------------------------------------------------------------------------------
# Oracles: the plainest possible computations of the right answer.
# ----------------------------------------------------------------------------------------------


def oracle_block_shape(shape: tuple[int, ...], mesh_axes: dict[str, int], spec: P) -> tuple[int, ...]:
    """The per-device block of an array of ``shape`` laid out by ``spec`` (every dimension divides)."""
    block = []
    for dim, size in enumerate(shape):
        entry = spec[dim] if dim < len(spec) else None
        names = () if entry is None else entry if isinstance(entry, tuple) else (entry,)
        block.append(size // math.prod(mesh_axes[n] for n in names))
    return tuple(block)


def oracle_mlp(x: np.ndarray, w_in: np.ndarray, w_out: np.ndarray) -> np.ndarray:
    x, w_in, w_out = (a.astype(np.float64) for a in (x, w_in, w_out))
    return np.maximum(x @ w_in, 0.0) @ w_out


def mlp_byte_budget(batch: int, d_model: int, d_ff: int, nx: int, ny: int) -> int:
    """Bytes per device of the plan the exercise asks for, by the analyzer's ring formulas: a
    reduce-scatter of the f32[B/nx, F] partial hidden activation over 'Y', then an all-reduce of the
    f32[B/nx, D] partial output over 'Y'."""
    if ny == 1:
        return 0
    hidden = (batch // nx) * d_ff * 4
    out = (batch // nx) * d_model * 4
    return hidden * (ny - 1) // ny + 2 * out * (ny - 1) // ny


# ----------------------------------------------------------------------------------------------
# Exercise 2.1 — block means under jax.jit, no collectives.
# ----------------------------------------------------------------------------------------------

BLOCK_MEANS_SHAPES = [(16, 8), (24, 16), (8, 32)]


def check_block_means_jit(fn: Callable) -> None:
    """``jax.jit(lambda x: fn(x, mesh))`` on x sharded P('X', 'Y'): values, no shard_map, no collectives."""
    rng = np.random.default_rng(21)
    for k, mesh in enumerate(mesh_cases()):
        nx, ny = mesh.shape["X"], mesh.shape["Y"]
        for shape in BLOCK_MEANS_SHAPES[k % 2 : k % 2 + 2]:
            host = rng.normal(size=shape).astype(np.float32) + np.arange(shape[0], dtype=np.float32)[:, None]
            x = place(host, mesh, P("X", "Y"))
            where = (
                f"jax.jit(lambda x: block_means_jit(x, mesh))(f32{list(shape)} sharded P('X', 'Y')) "
                f"on {show(mesh)}"
            )
            jitted = jax.jit(lambda x, mesh=mesh: fn(x, mesh))
            got = call_learner(jitted, "block_means_jit", x, where=where)
            expect_allclose(
                got,
                oracle_block_means(host, nx, ny),
                where,
                rtol=1e-4,
                atol=1e-4,
                hint="entry (i, j) averages the block of mesh position (i, j): rows i·S/nX to (i+1)·S/nX and "
                "columns j·D/nY to (j+1)·D/nY. Split each dimension as (mesh axis size, block size), in that "
                "order, so that the mesh axis is the outer factor.",
            )
            if _uses_shard_map(jitted, x):
                raise CheckFailed(
                    f"{where}: expected a program written with jax.jit alone, got one that calls "
                    "jax.shard_map. Hint: reshape and mean on the whole array; the compiler does the rest."
                )
            expect_no_collectives(
                jitted,
                x,
                what=f"the compiled program of {where}",
                hint="a block's mean needs only that block. Keep every reduction inside a block: reshape "
                "(S, D) to (nX, S/nX, nY, D/nY) and average axes 1 and 3; grouping rows any other way mixes "
                "blocks from different devices, and XLA must add them up across the mesh.",
            )


# ----------------------------------------------------------------------------------------------
# Exercise 2.2 — one reduce-scatter.
# ----------------------------------------------------------------------------------------------

MATMUL_SHAPES = [(16, 32, 64), (32, 64, 16)]


def check_reduce_scatter_matmul(fn: Callable) -> None:
    """``fn(a, w, mesh)`` = a @ w, fully sharded result, compiled to exactly one reduce-scatter."""
    rng = np.random.default_rng(22)
    for k, mesh in enumerate(mesh_cases()):
        ny = mesh.shape["Y"]
        batch, d_model, d_ff = MATMUL_SHAPES[k % len(MATMUL_SHAPES)]
        a_host = rng.normal(size=(batch, d_model)).astype(np.float32)
        w_host = rng.normal(size=(d_model, d_ff)).astype(np.float32)
        a = place(a_host, mesh, P("X", "Y"))
        w = place(w_host, mesh, P("Y", None))
        where = (
            f"reduce_scatter_matmul(a f32[{batch},{d_model}] P('X', 'Y'), w f32[{d_model},{d_ff}] "
            f"P('Y', None), mesh) on {show(mesh)}"
        )
        jitted = jax.jit(lambda a, w, mesh=mesh: fn(a, w, mesh))
        got = call_learner(jitted, "reduce_scatter_matmul", a, w, where=where)
        expect_allclose(
            got, a_host.astype(np.float64) @ w_host, where, rtol=1e-4, atol=1e-3, hint="return a @ w."
        )
        block = got.sharding.shard_shape(got.shape)
        if math.prod(block) * mesh.size != batch * d_ff:
            spec = getattr(got.sharding, "spec", got.sharding)
            raise CheckFailed(
                f"{where}: expected a result that no two devices share (blocks of "
                f"{batch * d_ff // mesh.size} elements), got blocks of shape {block} ({describe_array(got)}, "
                f"spec {spec}). Hint: a mesh axis the result's sharding does not name replicates it; name "
                "both axes in out_shardings."
            )
        if _uses_shard_map(jitted, a, w):
            raise CheckFailed(
                f"{where}: expected jax.jit with shardings, got a program that calls jax.shard_map. "
                "Hint: the compiler can insert the reduce-scatter itself."
            )
        report = _analyze(jitted, (a, w), where)
        kinds = [c.kind for c in report.collectives]
        expected = [] if ny == 1 else ["reduce-scatter"]
        if kinds != expected:
            described = "; ".join(c.describe() for c in report.collectives) or "no collectives"
            hint = (
                "the contraction dimension is split over 'Y', so each device holds a partial sum. If the "
                "result is replicated over 'Y' the partial sums are all-reduced; if the result is split over "
                "'Y' each device only needs its own part of the sum."
                if ny > 1
                else "with 'Y' of size 1 every device already holds whole rows of a and all of w."
            )
            raise CheckFailed(
                f"the compiled program of {where}: expected "
                f"{'exactly one reduce-scatter' if expected else 'no collectives'}, got {described}. "
                f"Hint: {hint}"
            )


def _analyze(fn: Callable, args: tuple, where: str) -> Any:
    try:
        return analyze(fn, *args)
    except Exception as e:
        message = str(e).strip().splitlines()[0] if str(e).strip() else ""
        raise CheckFailed(
            f"{where}: expected a function that compiles, got {type(e).__name__}: {message[:200]}"
        ) from None


# ----------------------------------------------------------------------------------------------
# Exercise 2.3 — per-device shapes in the compiled text.
# ----------------------------------------------------------------------------------------------

SPECS_2D = [
    P("X", "Y"),
    P("Y", "X"),
    P("X", None),
    P(None, "Y"),
    P(("X", "Y"), None),
    P(None, ("Y", "X")),
    P(),
]
SPECS_3D = [P("X", None, "Y"), P(None, ("X", "Y"), None), P("Y", "X", None), P(None, None, "X"), P()]


def _programs(rng: random.Random) -> list[tuple[str, Callable, list[tuple[tuple[int, ...], P]], tuple, P]]:
    """(description, function, [(arg shape, arg spec)], result shape, result spec) for one mesh."""

    def spec2() -> P:
        return rng.choice(SPECS_2D)

    return [
        ("a @ w", lambda a, w: a @ w, [((32, 64), spec2()), ((64, 16), spec2())], (32, 16), spec2()),
        (
            "relu(x) + 2 * y",
            lambda x, y: jax.nn.relu(x) + 2 * y,
            [((16, 48), spec2()), ((16, 48), spec2())],
            (16, 48),
            spec2(),
        ),
        (
            "x.sum(axis=1)",
            lambda x: x.sum(axis=1),
            [((8, 16, 24), rng.choice(SPECS_3D))],
            (8, 24),
            spec2(),
        ),
        ("jnp.sum(x) * s", lambda x, s: jnp.sum(x) * s, [((24, 8), spec2()), ((), P())], (), P()),
    ]


def compiled_text_cases(seed: int = 23) -> list[tuple[str, str, list[tuple[int, ...]], tuple[int, ...]]]:
    """(description, compiled text, expected parameter blocks, expected result block) per case."""
    rng = random.Random(seed)
    host = np.random.default_rng(seed)
    cases = []
    for mesh in mesh_cases():
        axes = dict(mesh.shape)
        for name, fn, params, out_shape, out_spec in _programs(rng):
            args = [place(host.normal(size=shape).astype(np.float32), mesh, spec) for shape, spec in params]
            text = jax.jit(fn, out_shardings=NamedSharding(mesh, out_spec)).lower(*args).compile().as_text()
            if text is None:  # the grader's own program: XLA always prints it
                raise RuntimeError(f"XLA gave no text for the compiled program of {name}")
            shown = ", ".join(f"f32{list(s)} {spec}" for s, spec in params)
            description = f"{name} with {shown} -> {out_spec} on {show(mesh)}"
            expected = [oracle_block_shape(s, axes, spec) for s, spec in params]
            cases.append((description, text, expected, oracle_block_shape(out_shape, axes, out_spec)))
    return cases


def _as_shapes(got: Any) -> tuple[list[tuple[int, ...]], tuple[int, ...]] | None:
    try:
        params, result = got
        return [tuple(int(n) for n in p) for p in params], tuple(int(n) for n in result)
    except Exception:
        return None


def check_entry_block_shapes(fn: Callable) -> None:
    """``fn(text)`` returns (parameter blocks, result block) of the ENTRY computation of ``text``."""
    for description, text, expected_params, expected_result in compiled_text_cases():
        where = f"entry_block_shapes(<compiled text of {description}>)"
        got = call_learner(fn, "entry_block_shapes", text, where=where)
        shapes = _as_shapes(got)
        if shapes is None:
            raise CheckFailed(
                f"{where}: expected a pair (list of parameter shapes, result shape) such as "
                f"({expected_params!r}, {expected_result!r}), got {describe_array(got)}. Hint: return two "
                "things: a list of tuples and one tuple."
            )
        params, result = shapes
        if params != expected_params or result != expected_result:
            hint = (
                "the program's own parameters are those of the computation marked ENTRY; the fused "
                "computations and reducers above it have parameters of their own."
                if len(params) != len(expected_params)
                else "read the shapes in the ENTRY computation's signature line, in order; they are "
                "per-device blocks, and a scalar f32[] has the shape ()."
            )
            raise CheckFailed(
                f"{where}: expected ({expected_params!r}, {expected_result!r}), got "
                f"({params!r}, {result!r}). Hint: {hint}"
            )


# ----------------------------------------------------------------------------------------------
# Exercise 2.4 — one with_sharding_constraint.
# ----------------------------------------------------------------------------------------------

# (B, D, F): a small batch of activations and weights that are large by comparison.
MLP_SHAPES = [(8, 256, 1024), (16, 512, 1024)]
MLP_SPECS = {"x": P("X", None), "w_in": P("Y", None), "w_out": P("Y", None), "out": P("X", None)}


def mlp_inputs(mesh: Mesh, batch: int, d_model: int, d_ff: int, seed: int):
    """Host arrays and the placed inputs of constrained_mlp, in the layouts the exercise fixes."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(batch, d_model)).astype(np.float32)
    w_in = (rng.normal(size=(d_model, d_ff)) / np.sqrt(d_model)).astype(np.float32)
    w_out = (rng.normal(size=(d_ff, d_model)) / np.sqrt(d_ff)).astype(np.float32)
    hosts = (x, w_in, w_out)
    placed = tuple(place(h, mesh, MLP_SPECS[n]) for h, n in zip(hosts, ("x", "w_in", "w_out"), strict=True))
    return hosts, placed


def jit_mlp(fn: Callable, mesh: Mesh) -> Callable:
    """How the grader compiles the learner's function: jit with the result laid out P('X', None)."""
    return jax.jit(
        lambda x, w_in, w_out: fn(x, w_in, w_out, mesh), out_shardings=NamedSharding(mesh, MLP_SPECS["out"])
    )


def check_constrained_mlp(fn: Callable) -> None:
    """``fn(x, w_in, w_out, mesh)`` = relu(x @ w_in) @ w_out, moving at most the budget's bytes."""
    for k, mesh in enumerate(mesh_cases()):
        nx, ny = mesh.shape["X"], mesh.shape["Y"]
        batch, d_model, d_ff = MLP_SHAPES[k % len(MLP_SHAPES)]
        hosts, placed = mlp_inputs(mesh, batch, d_model, d_ff, seed=24 + k)
        where = (
            f"constrained_mlp(x f32[{batch},{d_model}] P('X', None), "
            f"w_in f32[{d_model},{d_ff}] P('Y', None), w_out f32[{d_ff},{d_model}] P('Y', None), mesh) "
            f"on {show(mesh)}"
        )
        jitted = jit_mlp(fn, mesh)
        got = call_learner(jitted, "constrained_mlp", *placed, where=where)
        # a constraint on a global mesh (a helper's default argument) runs, but moves H between layouts
        expect_program_on_mesh(jitted, *placed, mesh=mesh, what=where)
        expect_allclose(
            got,
            oracle_mlp(*hosts),
            where,
            rtol=1e-4,
            atol=1e-4,
            hint="with_sharding_constraint changes where data lives, never values: compute "
            "jax.nn.relu(x @ w_in) @ w_out.",
        )
        if _uses_shard_map(jitted, *placed):
            raise CheckFailed(
                f"{where}: expected jax.jit steered by with_sharding_constraint, got a program that calls "
                "jax.shard_map. Hint: one constraint is enough."
            )
        budget = mlp_byte_budget(batch, d_model, d_ff, nx, ny)
        report = _analyze(jitted, placed, where)
        gathers = [c for c in report.collectives if c.kind in ("all-gather", "all-to-all")]
        hint = (
            f"its {gathers[0].kind} ({format_bytes(gathers[0].bytes)} per device) moves a weight. "
            if gathers
            else ""
        ) + (
            f"With {batch // nx} rows of activations per device, summing the partial products of "
            f"x @ w_in over 'Y' (f32[{batch // nx},{d_ff}] per device) is far cheaper than moving w_in; a "
            "constraint on the hidden activation decides which of the two the compiler does."
        )
        if report.total_bytes > budget:
            listed = "; ".join(c.describe() for c in report.collectives[:3])
            raise CheckFailed(
                f"the compiled program of {where}: expected at most {format_bytes(budget)} "
                f"({budget:,} bytes) sent per device, got {format_bytes(report.total_bytes)} "
                f"({report.total_bytes:,} bytes: {listed}). Hint: {hint}"
            )
