"""Graders for assignment 06_moe (mixture-of-experts routing, from one device to all_to_all).

Each ``check_<function>(fn)`` compares the learner's answer with a float64 NumPy oracle on small
integer-valued f32 inputs (every sum is exact), for several sizes (E, S, D, F) with E a multiple of 8,
and for routings chosen to break shortcuts:

* ``uniform``: each token picks an expert at random;
* ``all_to_first`` / ``all_to_last``: every token goes to one expert (one device receives everything);
* ``even_only``: only even experts are used, so half the experts are empty;
* ``skewed``: three quarters of the tokens go to expert 1, the rest at random.

The sharded functions run under ``jax.jit`` on 1-D meshes of 8 devices with axis 'X' (Explicit axes,
JAX 0.12's default, and Auto axes, with devices in id order and shuffled), with w placed
``P('X', None, None)``, a ``P('X', None)`` and b ``P('X')`` (``P('X', None)`` for top-k). What they
send is read from the compiled program with :func:`shardbook.analyze` and compared with the bounds
the exercises state. The first wrong answer raises :class:`shardbook.checks.CheckFailed` with the
call, what was expected, what came back, and a hint.
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import AxisType, Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from grading.graders.common import (
    analyze_learner,
    call_learner,
    call_text,
    expect_kinds_and_bytes,
    make_mesh,
    place,
    small_ints,
    struct,
)
from shardbook.checks import (
    CheckFailed,
    expect_allclose,
    expect_no_intermediate_larger_than,
    expect_sharding,
    routed_rows,
)
from shardbook.comms import Report, ring_bytes

BYTES = 4  # f32 and int32
N = 8  # devices on the mesh axis 'X'
# (E, S, D, F) of the value tests: E a multiple of 8, S a multiple of 8.
SIZES: list[tuple[int, int, int, int]] = [(8, 64, 16, 32), (16, 128, 8, 40), (8, 32, 12, 24)]
ROUTINGS = ("uniform", "all_to_first", "all_to_last", "even_only", "skewed")
# Each value mesh uses one size for every routing (one compilation per mesh). The all_to_all
# exercises run E = n (SIZES[0]) and E = 2n (SIZES[1]): where they differ, a token sent to device
# e % n (round robin) instead of e // (E/n) reaches the wrong expert; with E = n both are right.
# Compile-only size for moe_allgather's bound: W (E·D·F) is far larger than the tokens (S·(D+F)).
STRUCTURE_SIZE = (16, 128, 32, 64)
# Where moe_local's largest intermediate is measured (the self-check uses the same size). E < D: masking
# over experts makes an [E, S, F] array, below S·D·F elements exactly when E < D, as Exercise 6.1 says.
LOCAL_STRUCTURE_SIZE = (8, 128, 32, 64)


# ----------------------------------------------------------------------------------------------
# Oracles.
# ----------------------------------------------------------------------------------------------


def oracle_moe(w: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Out[i] = A[i] @ W[B[i]] token by token, in float64."""
    w64, a64 = np.asarray(w, np.float64), np.asarray(a, np.float64)
    return np.stack([a64[i] @ w64[int(b[i])] for i in range(a64.shape[0])])


def oracle_topk(w: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Out[i] = mean over j of A[i] @ W[B[i, j]], in float64."""
    return np.mean([oracle_moe(w, a, b[:, j]) for j in range(b.shape[1])], axis=0)


def routing(kind: str, rng: np.random.Generator, s: int, e: int) -> np.ndarray:
    """int32[S] expert ids for one of ROUTINGS."""
    if kind == "uniform":
        b = rng.integers(0, e, s)
    elif kind == "all_to_first":
        b = np.zeros(s)
    elif kind == "all_to_last":
        b = np.full(s, e - 1)
    elif kind == "even_only":
        b = 2 * rng.integers(0, e // 2, s)
    elif kind == "skewed":
        b = np.where(rng.random(s) < 0.75, 1, rng.integers(0, e, s))
    else:
        raise ValueError(f"unknown routing {kind!r}: expected one of {ROUTINGS}")
    return np.asarray(b, np.int32)


def routing_topk(kind: str, rng: np.random.Generator, s: int, e: int, k: int) -> np.ndarray:
    """int32[S, k]: column 0 follows ``kind``, the others are uniform (repeats allowed)."""
    cols = [routing(kind, rng, s, e)] + [routing("uniform", rng, s, e) for _ in range(k - 1)]
    return np.stack(cols, axis=1)


# ----------------------------------------------------------------------------------------------
# Bounds the exercises state (bytes one device sends).
# ----------------------------------------------------------------------------------------------


def allgather_bound(e: int, s: int, d: int, f: int) -> int:
    """Gather the tokens and their ids, reduce-scatter the outputs: (n-1)/n · S·(D + 1 + F) · 4 bytes."""
    return (N - 1) * s * (d + 1 + f) * BYTES // N


def all_to_all_bound(e: int, s: int, d: int, f: int, k: int = 1) -> int:
    """Buffers of C = k·S/n rows per device pair: (n-1)·C·(D + F + 2)·4 bytes.

    Tokens out (n-1)·C·D, results back (n-1)·C·F, and up to two int32 per row for expert ids or
    sizes. C = k·S/n is what one device must be able to send to one other device so that no token is
    ever dropped (all its token copies may pick the same device).
    """
    c = k * s // N
    return (N - 1) * c * (d + f + 2) * BYTES


def bytes_sent(report: Report) -> int:
    """Bytes one device sends, by the ring formulas of shardbook.comms, read from result shapes.

    An all-to-all is counted from what it delivers (as many bytes as it takes), so the count does not
    depend on how the program text lists the operands.
    """
    total = 0
    for c in report.collectives:
        if c.kind == "all-to-all":
            delivered = sum(int(np.prod(s)) for s in c.result_shapes) * BYTES
            total += ring_bytes(c.kind, c.group_size, delivered, delivered) * c.executions
        else:
            total += c.bytes
    return total


# ----------------------------------------------------------------------------------------------
# Meshes, inputs and calls.
# ----------------------------------------------------------------------------------------------


def value_meshes() -> list[Mesh]:
    """Explicit axes, and Auto axes with the devices shuffled (each mesh costs one compilation)."""
    return [make_mesh((N,), ("X",)), make_mesh((N,), ("X",), axis_type=AxisType.Auto, shuffle=6)]


def _analyze(fn: Callable, name: str, args: tuple) -> Report:
    return analyze_learner(
        fn,
        name,
        *args,
        where=f"{_call_text(name, args)} compiled for these shapes",
        hint="the hidden tests use other sizes than the self-check; do not hard-code them.",
    )


def _call_text(name: str, args: tuple, routing_kind: str | None = None) -> str:
    text = call_text(name, args)
    return f"{text} with the {routing_kind!r} routing" if routing_kind else text


# The hint when a learner's function raises.
CALL_HINT = (
    "read the error from the top; inside shard_map every array is one device's block, and "
    "shapes must not depend on the routing's values."
)


#: The hint when the wrong rows match no known mistake (routed_rows names the ones it recognises:
#: dropped tokens, another expert's result, another token's row, the sum of the k experts).
VALUES_HINT = "compare with Out[i] = A[i] @ W[B[i]] token by token, on this routing."

#: jax.lax.ragged_dot reads its rows in order, group after group: the hint for tokens not grouped by
#: expert (as the self-check gives it), and for results left in the grouped order.
RAGGED_HINT = (
    "jax.lax.ragged_dot takes the rows grouped by expert: sort the tokens by expert first, then put each "
    "result back in its token's row."
)


def ragged_mistakes(w: np.ndarray, a: np.ndarray, b: np.ndarray) -> list[tuple[np.ndarray, str]]:
    """What moe_local returns when ragged_dot gets the tokens in their own order (row i multiplied by
    the expert of the i-th smallest id), or when the grouped results are not put back in token order."""
    grouped = np.sort(b, kind="stable")
    order = np.argsort(b, kind="stable")
    return [(oracle_moe(w, a, grouped), RAGGED_HINT), (oracle_moe(w, a[order], grouped), RAGGED_HINT)]


def _check_sharded_values(
    fn: Callable,
    name: str,
    *,
    meshes: list[Mesh] | None = None,
    topk: tuple[int, ...] = (),
    hint: str = VALUES_HINT,
    sizes: list[tuple[int, int, int, int]] = SIZES,
) -> tuple[Callable, tuple]:
    """Each value mesh with one size (``sizes`` in turn), every routing, compared with the oracle and
    P('X', None); a wrong row is explained by :func:`shardbook.checks.routed_rows`.

    One jitted function per mesh serves all routings (same shapes, other values), so each mesh
    compiles once. ``topk`` gives k per mesh for the top-k exercise. Returns the last mesh's jitted
    function and arguments, so that the analysis of the same program can reuse its compilation.
    """
    rng = np.random.default_rng(6 + sum(topk))
    for i, mesh in enumerate(meshes or value_meshes()):
        e, s, d, f = sizes[i % len(sizes)]
        k = topk[i % len(topk)] if topk else None
        jitted = jax.jit(lambda w, a, b, mesh=mesh: fn(w, a, b, mesh))
        for kind in ROUTINGS:
            w_np, a_np = small_ints(rng, (e, d, f)), small_ints(rng, (s, d))
            if k is None:
                b_np, b_spec = routing(kind, rng, s, e), P("X")
                expected = oracle_moe(w_np, a_np, b_np)
            else:
                b_np, b_spec = routing_topk(kind, rng, s, e, k), P("X", None)
                expected = oracle_topk(w_np, a_np, b_np)
            args = (
                place(w_np, mesh, P("X", None, None)),
                place(a_np, mesh, P("X", None)),
                place(b_np, mesh, b_spec),
            )
            where = _call_text(name, args + (mesh,), kind)
            if k is not None:
                where += f" with k = {k}"
            where += f" (E = {e} experts on n = {N} devices)"
            got = call_learner(jitted, name, *args, where=where, hint=CALL_HINT)
            explain = routed_rows(w_np, a_np, b_np, experts_per_device=e // N)
            expect_allclose(got, expected, where, rtol=1e-6, atol=1e-6, hint=hint, explain=explain)
            expect_sharding(
                got,
                NamedSharding(mesh, P("X", None)),
                where,
                hint="each device returns the rows of its own tokens: out_specs=P('X', None).",
            )
    return jitted, args


def _structure_args(mesh: Mesh) -> tuple:
    e, s, d, f = STRUCTURE_SIZE
    return (
        struct((e, d, f), mesh, P("X", None, None)),
        struct((s, d), mesh, P("X", None)),
        struct((s,), mesh, P("X"), jnp.int32),
    )


# ----------------------------------------------------------------------------------------------
# Exercise 6.1 — moe_local
# ----------------------------------------------------------------------------------------------


def check_moe_local(fn: Callable) -> None:
    """Values on one device for every routing and size; no intermediate with S·D·F or more elements."""
    rng = np.random.default_rng(61)
    for case, kind in enumerate(ROUTINGS):
        e, s, d, f = SIZES[case % len(SIZES)]
        w_np, a_np, b_np = small_ints(rng, (e, d, f)), small_ints(rng, (s, d)), routing(kind, rng, s, e)
        args = (jnp.asarray(w_np), jnp.asarray(a_np), jnp.asarray(b_np))
        where = _call_text("moe_local", args, kind)
        got = call_learner(jax.jit(fn), "moe_local", *args, where=where, hint=CALL_HINT)
        expect_allclose(
            got,
            oracle_moe(w_np, a_np, b_np),
            where,
            rtol=1e-6,
            atol=1e-6,
            hint=VALUES_HINT,
            mistakes=ragged_mistakes(w_np, a_np, b_np),
            explain=routed_rows(w_np, a_np, b_np),
        )
    e, s, d, f = LOCAL_STRUCTURE_SIZE
    structs = (
        jax.ShapeDtypeStruct((e, d, f), jnp.float32),
        jax.ShapeDtypeStruct((s, d), jnp.float32),
        jax.ShapeDtypeStruct((s,), jnp.int32),
    )
    try:
        expect_no_intermediate_larger_than(
            jax.jit(fn),
            *structs,
            elements=s * d * f,
            what=f"the compiled program of {_call_text('moe_local', structs)}",
            hint="w[b] makes one [D, F] matrix per token, an [S, D, F] array; multiply each token by its "
            "expert's matrix without copying it: mask over experts, or sort by expert and ragged_dot.",
        )
    except NotImplementedError as e:
        raise CheckFailed(f"moe_local is not written yet (it raised NotImplementedError: {e}).") from None


# ----------------------------------------------------------------------------------------------
# Exercise 6.2 — moe_allgather
# ----------------------------------------------------------------------------------------------


def check_moe_allgather(fn: Callable) -> None:
    """Values on every mesh and routing; the tokens travel, not the experts (bytes bound)."""
    _check_sharded_values(fn, "moe_allgather")
    mesh = make_mesh((N,), ("X",))
    args = _structure_args(mesh)
    report = _analyze(lambda w, a, b: fn(w, a, b, mesh), "moe_allgather", args)
    e, s, d, f = STRUCTURE_SIZE
    expect_kinds_and_bytes(
        report,
        _call_text("moe_allgather", args + (mesh,)),
        ("all-gather", "reduce-scatter", "all-reduce"),
        allgather_bound(e, s, d, f),
        "(n-1)/n · S·(D + 1 + F) · 4: gather the tokens and their ids, reduce-scatter the outputs",
        "gather the tokens (they are smaller than the experts here), let each device apply its own "
        "experts, and psum_scatter the [S, F] partial outputs back over 'X'; never gather w.",
    )


# ----------------------------------------------------------------------------------------------
# Exercise 6.3 — moe_all_to_all
# ----------------------------------------------------------------------------------------------

A2A_HINT = (
    "send each token only to its expert's device with jax.lax.all_to_all and bring the result back the "
    "same way; no all_gather or psum of the tokens, and buffers of S/n rows per device pair."
)


def check_moe_all_to_all(fn: Callable) -> None:
    """Values on every routing (skewed ones: no drops), with E = 2n experts and with E = n; only
    all-to-all, within the stated bound.

    All-to-all programs take the longest to compile: two meshes (Explicit axes with E = 2n, then Auto
    axes with shuffled devices and E = n), and the analysis reads the last program.
    """
    mesh = make_mesh((N,), ("X",), axis_type=AxisType.Auto, shuffle=6)
    jitted, args = _check_sharded_values(
        fn,
        "moe_all_to_all",
        meshes=[make_mesh((N,), ("X",), shuffle=9), mesh],
        sizes=[SIZES[1], SIZES[0]],
    )
    report = _analyze(jitted, "moe_all_to_all", args)
    expect_kinds_and_bytes(
        report,
        _call_text("moe_all_to_all", args + (mesh,)),
        ("all-to-all",),
        all_to_all_bound(*SIZES[0]),
        "(n-1)·C·(D + F + 2)·4 with C = S/n",
        A2A_HINT,
        sent=bytes_sent(report),
    )


# ----------------------------------------------------------------------------------------------
# Exercise 6.4 — moe_topk
# ----------------------------------------------------------------------------------------------

TOPK_HINT = (
    "Out[i] is the mean over j of A[i] @ W[B[i, j]]; treat the k copies of a token as k rows of the "
    "all_to_all and combine them when they return."
)


def check_moe_topk(fn: Callable) -> None:
    """Top-3 values on every routing; only all-to-all, within the stated bound for k.

    One mesh (Explicit axes, shuffled devices, E = n), and the analysis reads that same program; then
    k = 2 with E = 2n on a mesh of Auto axes, where shard_map cannot take the layout from the
    arguments' types, and where a round-robin placement of the experts reaches the wrong ones.
    """
    mesh = make_mesh((N,), ("X",), shuffle=7)
    k = 3
    jitted, args = _check_sharded_values(fn, "moe_topk", meshes=[mesh], topk=(k,), hint=TOPK_HINT)
    report = _analyze(jitted, "moe_topk", args)
    expect_kinds_and_bytes(
        report,
        _call_text("moe_topk", args + (mesh,)),
        ("all-to-all",),
        all_to_all_bound(*SIZES[0], k=k),
        "(n-1)·C·(D + F + 2)·4 with C = k·S/n",
        A2A_HINT,
        sent=bytes_sent(report),
    )
    _check_sharded_values(
        fn,
        "moe_topk",
        meshes=[make_mesh((N,), ("X",), axis_type=AxisType.Auto, shuffle=8)],
        topk=(2,),
        hint=TOPK_HINT,
        sizes=[SIZES[1]],
    )
