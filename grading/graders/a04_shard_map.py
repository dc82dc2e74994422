"""Graders for assignment 04_shard_map (manual sharding with ``jax.shard_map``).

Each ``check_<function>(fn)`` places its input on meshes of 8 devices laid out (2, 4), (4, 2), (1, 8)
and (8, 1) with axes ``('X', 'Y')``, both with Auto and with Explicit axis types, on arrays of several
sizes, and calls ``fn(x, ...)`` with the input already laid out as the contract says. Every answer is
compared with a naive NumPy oracle (values), with the layout the contract names (``x.sharding``), and
with what the compiled program moves between devices (kinds and bytes, read by
:func:`shardbook.analyze`). The first wrong answer raises :class:`shardbook.checks.CheckFailed` with
the call, what was expected, what came back, and a hint.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import numpy as np
from jax.sharding import AxisType, Mesh
from jax.sharding import PartitionSpec as P

from grading.graders.common import call_learner, call_text, make_mesh, oracle_block_means, place
from shardbook.checks import (
    expect_allclose,
    expect_collectives,
    expect_no_collectives,
    expect_shape,
    expect_sharding,
)

# Mesh layouts the hidden tests use: axis sizes of ('X', 'Y'), 8 devices each.
MESH_LAYOUTS: list[tuple[int, int]] = [(2, 4), (4, 2), (1, 8), (8, 1)]
AXIS_TYPES = (AxisType.Auto, AxisType.Explicit)
BYTES_F32 = 4
# Rows and columns of one device's block; each case uses one pair.
BLOCK_SHAPES: list[tuple[int, int]] = [(4, 2), (6, 3), (3, 4)]


# ----------------------------------------------------------------------------------------------
# Oracles: the plainest possible computations of the right answer.
# ----------------------------------------------------------------------------------------------


def oracle_roll_within_shards(host: np.ndarray, shift: int, n_x: int, n_y: int) -> np.ndarray:
    """Every P('X', 'Y') block replaced by np.roll(block, shift, axis=0) - block."""
    rows, cols = host.shape[0] // n_x, host.shape[1] // n_y
    out = np.zeros(host.shape)
    for i in range(n_x):
        for j in range(n_y):
            where = (slice(i * rows, (i + 1) * rows), slice(j * cols, (j + 1) * cols))
            block = host[where].astype(np.float64)
            out[where] = np.roll(block, shift, axis=0) - block
    return out


def oracle_center_rows(host: np.ndarray) -> np.ndarray:
    """Each row minus its mean, in float64."""
    x = host.astype(np.float64)
    return x - x.mean(axis=1, keepdims=True)


def bytes_all_reduce(elements: int, n: int) -> int:
    """Bytes one device sends to all-reduce f32[elements] over a group of n (ring)."""
    return 2 * (n - 1) * elements * BYTES_F32 // n


def bytes_all_to_all(elements: int, n: int) -> int:
    """Bytes one device sends in an all-to-all of its f32[elements] block over a group of n."""
    return (n - 1) * elements * BYTES_F32 // n


# ----------------------------------------------------------------------------------------------
# Helpers.
# ----------------------------------------------------------------------------------------------


def cases(seed: int) -> Iterator[tuple[Mesh, tuple[int, int], tuple[int, int]]]:
    """(mesh, (n_x, n_y), block shape): every layout with both axis types, block shapes in turn."""
    k = seed
    for sizes in MESH_LAYOUTS:
        for kind in AXIS_TYPES:
            yield make_mesh(sizes, axis_type=kind), sizes, BLOCK_SHAPES[k % len(BLOCK_SHAPES)]
            k += 1


# The hint when a learner's function raises.
CALL_HINT = (
    "the input already has the layout the contract names, on an Auto or an Explicit mesh; "
    "write the per-device code with jax.shard_map(..., mesh=mesh, in_specs=..., out_specs=...)."
)


# ----------------------------------------------------------------------------------------------
# Exercise 4.1 — block_means_shmap
# ----------------------------------------------------------------------------------------------


def check_block_means_shmap(fn: Callable) -> None:
    """f32[S, D] P('X', 'Y') -> f32[nX, nY] of per-block means, with no collectives."""
    rng = np.random.default_rng(41)
    for mesh, (n_x, n_y), (rows, cols) in cases(0):
        host = rng.normal(size=(rows * n_x, cols * n_y)).astype(np.float32)
        x = place(host, mesh, P("X", "Y"))
        where = call_text("block_means_shmap", (x, mesh))
        got = call_learner(fn, "block_means_shmap", x, mesh, hint=CALL_HINT)
        expect_shape(got, (n_x, n_y), where, hint="one mean per device, arranged like the mesh: [nX, nY].")
        expect_allclose(
            got,
            oracle_block_means(host, n_x, n_y),
            where,
            rtol=1e-5,
            atol=1e-5,
            hint="entry (i, j) is the mean of the whole block at mesh position (i, j): all its rows and "
            "columns, and nothing from any other block.",
        )
        expect_no_collectives(
            lambda a, mesh=mesh: fn(a, mesh),
            x,
            what=f"the compiled program of {where}",
            hint="each mean needs only the device's own block: no psum or pmean. Return a [1, 1] block "
            "per device and let out_specs=P('X', 'Y') put the [nX, nY] result together.",
        )


# ----------------------------------------------------------------------------------------------
# Exercise 4.2 — roll_within_shards
# ----------------------------------------------------------------------------------------------

SHIFTS = [1, -1, 2, 5, -3, 0, 3, 1]


def check_roll_within_shards(fn: Callable) -> None:
    """roll(block, shift, 0) - block for every P('X', 'Y') block, laid out P('X', 'Y'), no collectives."""
    rng = np.random.default_rng(42)
    for k, (mesh, (n_x, n_y), (rows, cols)) in enumerate(cases(1)):
        shift = SHIFTS[k % len(SHIFTS)]
        host = rng.normal(size=(rows * n_x, cols * n_y)).astype(np.float32)
        x = place(host, mesh, P("X", "Y"))
        where = call_text("roll_within_shards", (x, shift, mesh))
        got = call_learner(fn, "roll_within_shards", x, shift, mesh, hint=CALL_HINT)
        expect_allclose(
            got,
            oracle_roll_within_shards(host, shift, n_x, n_y),
            where,
            rtol=1e-5,
            atol=1e-5,
            hint="roll each device's block inside jax.shard_map (jnp.roll(x_block, shift, axis=0)); "
            "rolling the global array moves rows across block boundaries.",
        )
        expect_sharding(
            got,
            P("X", "Y"),
            where,
            hint="the result is laid out like x: out_specs=P('X', 'Y').",
        )
        expect_no_collectives(
            lambda a, shift=shift, mesh=mesh: fn(a, shift, mesh),
            x,
            what=f"the compiled program of {where}",
            hint="a roll within a block never needs another device's rows; roll inside shard_map.",
        )


# ----------------------------------------------------------------------------------------------
# Exercise 4.3 — center_rows
# ----------------------------------------------------------------------------------------------


def check_center_rows(fn: Callable) -> None:
    """x - row means, laid out P('X', 'Y'), sending at most an all-reduce of the row sums over 'Y'."""
    rng = np.random.default_rng(43)
    for mesh, (n_x, n_y), (rows, cols) in cases(2):
        host = rng.normal(loc=3.0, size=(rows * n_x, cols * n_y)).astype(np.float32)
        x = place(host, mesh, P("X", "Y"))
        where = call_text("center_rows", (x, mesh))
        got = call_learner(fn, "center_rows", x, mesh, hint=CALL_HINT)
        expect_allclose(
            got,
            oracle_center_rows(host),
            where,
            rtol=1e-4,
            atol=1e-4,
            hint="a row is split over 'Y': its mean is the sum over all of 'Y' divided by the global "
            "number of columns, not the mean of the device's own columns (and nothing over 'X').",
        )
        expect_sharding(got, P("X", "Y"), where, hint="the result is laid out like x: out_specs=P('X', 'Y').")
        expect_collectives(
            lambda a, mesh=mesh: fn(a, mesh),
            x,
            max_bytes=bytes_all_reduce(rows, n_y),
            what=f"the compiled program of {where}",
            hint="reduce before you communicate: sum each row of your block first, then psum (or pmean) "
            "those row sums over 'Y', one number per row; don't gather the blocks.",
        )


# ----------------------------------------------------------------------------------------------
# Exercise 4.4 — rows_to_columns
# ----------------------------------------------------------------------------------------------


def check_rows_to_columns(fn: Callable) -> None:
    """x f32[S, D] P('X', None) returned unchanged but laid out P(None, 'X'), with one all-to-all."""
    rng = np.random.default_rng(44)
    for mesh, (n_x, _), (rows, cols) in cases(3):
        shape = (rows * n_x, cols * n_x)
        host = rng.normal(size=shape).astype(np.float32)
        x = place(host, mesh, P("X", None))
        where = call_text("rows_to_columns", (x, mesh))
        got = call_learner(fn, "rows_to_columns", x, mesh, hint=CALL_HINT)
        expect_allclose(
            got,
            host,
            where,
            rtol=0,
            atol=0,
            hint="the values do not change, only who holds them: all_to_all(x_block, 'X', split_axis=1, "
            "concat_axis=0, tiled=True) sends column piece j of your rows to device j.",
        )
        expect_sharding(
            got, P(None, "X"), where, hint="the columns end split over 'X': out_specs=P(None, 'X')."
        )
        expect_collectives(
            lambda a, mesh=mesh: fn(a, mesh),
            x,
            allowed=("all-to-all",),
            max_bytes=bytes_all_to_all(rows * shape[1], n_x),
            what=f"the compiled program of {where}",
            hint="each device needs only (n-1)/n of its block moved, piece j to device j: one all_to_all "
            "over 'X'. Gathering the whole array and slicing it moves n times more.",
        )


# ----------------------------------------------------------------------------------------------
# Exercise 4.5 — roll_global_shmap
# ----------------------------------------------------------------------------------------------

# One shift per case of cases(4), as a signed count of rows clipped to the block (1 <= |shift| <= rows):
# both signs, 1, a whole block (clipped), and shifts in between.
GLOBAL_SHIFTS = [2, -1, -6, 5, 1, -2, 3, -3]
# Meshes whose devices are not in id order (shuffle seeds); the shifts that go with them.
SHUFFLED_GLOBAL = [((4, 2), AxisType.Explicit, 5, -2), ((2, 4), AxisType.Auto, 6, 3)]


def oracle_roll_global(host: np.ndarray, shift: int) -> np.ndarray:
    """The whole array rolled: row r moves to row (r + shift) mod S."""
    return np.roll(host.astype(np.float64), shift, axis=0)


def bytes_boundary_rows(shift: int, cols: int) -> int:
    """Bytes one device sends to pass |shift| rows of its f32[rows, cols] block to a neighbour."""
    return abs(shift) * cols * BYTES_F32


def global_roll_cases() -> list[tuple[Mesh, tuple[int, int], tuple[int, int], int]]:
    """(mesh, (n_x, n_y), block shape, shift): every layout and axis type, then shuffled devices."""
    out = []
    for k, (mesh, sizes, (rows, cols)) in enumerate(cases(4)):
        shift = GLOBAL_SHIFTS[k % len(GLOBAL_SHIFTS)]
        out.append((mesh, sizes, (rows, cols), max(-rows, min(rows, shift))))
    for sizes, kind, seed, shift in SHUFFLED_GLOBAL:
        out.append((make_mesh(sizes, axis_type=kind, shuffle=seed), sizes, BLOCK_SHAPES[0], shift))
    return out


def check_roll_global_shmap(fn: Callable) -> None:
    """jnp.roll(x, shift, axis=0) for x P('X', 'Y'), laid out P('X', 'Y'), moving only the boundary rows."""
    rng = np.random.default_rng(45)
    for mesh, (n_x, n_y), (rows, cols), shift in global_roll_cases():
        host = rng.normal(size=(rows * n_x, cols * n_y)).astype(np.float32)
        x = place(host, mesh, P("X", "Y"))
        where = call_text("roll_global_shmap", (x, shift, mesh))
        got = call_learner(fn, "roll_global_shmap", x, shift, mesh, hint=CALL_HINT)
        within_blocks = oracle_roll_within_shards(host, shift, n_x, n_y) + host
        expect_allclose(
            got,
            oracle_roll_global(host, shift),
            where,
            rtol=0,
            atol=0,
            hint="row r of the whole array moves to row (r + shift) mod S: the |shift| rows at one edge "
            "of every block go to the neighbouring device along 'X' (the last device's wrap round to the "
            "first), and the other rows move inside the block.",
            mistakes=[
                (
                    within_blocks,
                    "that is the roll within each block (Exercise 4.2): the rows that leave a "
                    "block must arrive on the next device along 'X', not wrap round inside the block.",
                ),
                (
                    oracle_roll_global(host, -shift),
                    "that is the roll by -shift: for a positive shift the "
                    "last rows of a block go to device i + 1, for a negative shift the first rows go to "
                    "device i - 1.",
                ),
            ],
        )
        expect_sharding(got, P("X", "Y"), where, hint="the result is laid out like x: out_specs=P('X', 'Y').")
        expect_collectives(
            lambda a, shift=shift, mesh=mesh: fn(a, shift, mesh),
            x,
            allowed=("collective-permute",),
            max_bytes=bytes_boundary_rows(shift, cols),
            what=f"the compiled program of {where}",
            hint="send only the |shift| rows that leave your block, with one jax.lax.ppermute over 'X'; "
            "permuting the whole block or gathering the rows moves more.",
        )
