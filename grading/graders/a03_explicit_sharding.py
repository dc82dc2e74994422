"""Graders for assignment 03_explicit_sharding (sharding in types).

Each ``check_<function>(fn)`` places its inputs on meshes of 8 devices laid out (4, 2), (2, 4), (8, 1)
and (1, 8), with Explicit axes ``('X', 'Y')``, and calls the learner's function **inside**
``with jax.set_mesh(mesh):`` (the assignment's contract says so, so ``out_sharding=P(...)`` works).
Every answer is compared with a naive NumPy oracle (values), with the type the contract names
(``jax.typeof``), and, where the exercise is about communication, with the bytes
:func:`shardbook.analyze` counts in the compiled program (for 3.4, also the kinds of collective). The
first wrong answer raises :class:`shardbook.checks.CheckFailed` with the call, what was expected, what
came back, and a hint.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import numpy as np
from jax.sharding import Mesh
from jax.sharding import PartitionSpec as P

from grading.graders.common import call_learner, call_text, make_mesh, place
from shardbook.checks import CheckFailed, describe_array, expect_allclose, expect_collectives

# Mesh layouts the hidden tests use: axis sizes of ('X', 'Y'), 8 devices each.
MESH_LAYOUTS: list[tuple[int, int]] = [(4, 2), (2, 4), (8, 1), (1, 8)]
BYTES_F32 = 4


# ----------------------------------------------------------------------------------------------
# Oracles: the plainest possible computations of the right answer.
# ----------------------------------------------------------------------------------------------


def oracle_matmul(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    """x @ w in float64."""
    return np.asarray(x, np.float64) @ np.asarray(w, np.float64)


def oracle_mlp(x: np.ndarray, w_in: np.ndarray, w_out: np.ndarray) -> np.ndarray:
    """relu(x @ w_in) @ w_out in float64."""
    h = np.asarray(x, np.float64) @ np.asarray(w_in, np.float64)
    return np.maximum(h, 0.0) @ np.asarray(w_out, np.float64)


def oracle_running_total(x: np.ndarray) -> np.ndarray:
    """Cumulative sum along axis 1, in float64."""
    return np.cumsum(np.asarray(x, np.float64), axis=1)


def normalise_spec(spec: Any, ndim: int) -> tuple:
    """A spec as a tuple of ndim entries: None, one axis name, or a tuple of two or more names."""
    entries = list(spec) + [None] * (ndim - len(spec))
    out = []
    for entry in entries:
        if isinstance(entry, (tuple, list)):
            entry = tuple(entry)
            entry = None if not entry else entry[0] if len(entry) == 1 else entry
        out.append(entry)
    return tuple(out)


def type_text(shape: tuple[int, ...], spec: Any, dtype: str = "float32") -> str:
    """What ``jax.typeof`` prints for an array of this shape and spec on an Explicit mesh."""
    dims = []
    for size, entry in zip(shape, normalise_spec(spec, len(shape)), strict=True):
        if entry is None:
            dims.append(str(size))
        elif isinstance(entry, tuple):
            dims.append(f"{size}@({','.join(entry)})")
        else:
            dims.append(f"{size}@{entry}")
    return f"{dtype}[{','.join(dims)}]"


def bytes_reduce_scatter(rows: int, cols: int, n: int) -> int:
    """Bytes one device sends to reduce-scatter its f32[rows, cols] partial sums over n devices."""
    return (n - 1) * rows * cols * BYTES_F32 // n


def bytes_all_reduce(rows: int, cols: int, n: int) -> int:
    """Bytes one device sends to all-reduce its f32[rows, cols] partial sums over n devices."""
    return 2 * (n - 1) * rows * cols * BYTES_F32 // n


# ----------------------------------------------------------------------------------------------
# Helpers.
# ----------------------------------------------------------------------------------------------


def _show(a: Any) -> str:
    if isinstance(a, jax.Array):
        try:
            return str(jax.typeof(a))
        except Exception:
            return describe_array(a)
    return repr(a)


def _call(fn: Callable, name: str, mesh: Mesh, *args: Any) -> Any:
    """Calls fn(*args) inside ``with jax.set_mesh(mesh)``; an exception becomes a sentence."""
    return call_learner(
        fn,
        name,
        *args,
        where=_where(name, mesh, *args),
        hint="read the error's types; the chapter's section on it shows the fix.",
        mesh=mesh,
    )


def _where(name: str, mesh: Mesh, *args: Any) -> str:
    return f"{call_text(name, args, _show)} on a mesh {dict(mesh.shape)}"


def expect_type_text(got: Any, expected: str, where: str, hint: str) -> None:
    """Checks that ``got`` is a JAX array whose ``jax.typeof`` prints ``expected``."""
    if not isinstance(got, jax.Array):
        raise CheckFailed(f"{where}: expected a JAX array of type {expected}, got {describe_array(got)}.")
    text = str(jax.typeof(got))
    if text != expected:
        raise CheckFailed(f"{where}: expected the type {expected}, got {text}. Hint: {hint}")


def _analyze_bytes(
    fn: Callable, mesh: Mesh, args: tuple, max_bytes: int, where: str, hint: str, allowed: tuple = ()
) -> None:
    """At most ``max_bytes`` sent per device (and, if ``allowed`` is given, only those kinds)."""
    what = f"the compiled program of {where}"
    with jax.set_mesh(mesh):
        expect_collectives(fn, *args, allowed=allowed, max_bytes=max_bytes, what=what, hint=hint)


# ----------------------------------------------------------------------------------------------
# Exercise 3.1 — matmul_reduce_scatter
# ----------------------------------------------------------------------------------------------

MATMUL_SHAPES = [(16, 32, 24), (8, 64, 16), (32, 16, 40)]  # (B, D, F); D and F divide by 8


def matmul_cases() -> list[tuple[tuple[int, int], tuple[int, int, int]]]:
    return [(sizes, shape) for sizes in MESH_LAYOUTS for shape in MATMUL_SHAPES[:2]] + [
        ((4, 2), MATMUL_SHAPES[2])
    ]


def _check_matmul_into_x_y(
    fn: Callable,
    name: str,
    cases: list[tuple[tuple[int, int], tuple[int, int, int]]],
    x_spec: P,
    seed: int,
    hints: tuple[str, str, str],
    allowed: tuple = (),
) -> None:
    """x f32[B, D] laid out ``x_spec`` @ w f32[D@Y, F] must come back as f32[B@X, F@Y], sending at most
    one reduce-scatter of the partial sums over Y (and, if ``allowed`` is given, only those kinds).

    ``hints``: for wrong values, for a wrong type, for too many bytes or a kind not allowed.
    """
    values_hint, type_hint, bytes_hint = hints
    rng = np.random.default_rng(seed)
    for sizes, (b, d, f) in cases:
        mesh = make_mesh(sizes)
        x_host = rng.uniform(-1, 1, (b, d)).astype(np.float32)
        w_host = rng.uniform(-1, 1, (d, f)).astype(np.float32)
        x, w = place(x_host, mesh, x_spec), place(w_host, mesh, P("Y", None))
        where = _where(name, mesh, x, w)
        got = _call(fn, name, mesh, x, w)
        expect_allclose(got, oracle_matmul(x_host, w_host), where, rtol=1e-4, atol=1e-4, hint=values_hint)
        expect_type_text(got, type_text((b, f), P("X", "Y")), where, type_hint)
        budget = bytes_reduce_scatter(b // sizes[0], f, sizes[1])
        _analyze_bytes(fn, mesh, (x, w), budget, where, bytes_hint, allowed=allowed)


def check_matmul_reduce_scatter(fn: Callable) -> None:
    """x f32[B@X, D@Y] @ w f32[D@Y, F] must come back as f32[B@X, F@Y], moving one reduce-scatter."""
    _check_matmul_into_x_y(
        fn,
        "matmul_reduce_scatter",
        matmul_cases(),
        P("X", "Y"),
        31,
        (
            "the result is the plain product x @ w; only its layout is yours to choose.",
            "ask the matmul for out_sharding=P('X', 'Y'): B stays split over X and F is split over Y, "
            "which is the reduce-scatter of the partial sums.",
            "the partial sums need only a reduce-scatter over Y; an all-reduce, or gathering x or w, "
            "sends more.",
        ),
    )


# ----------------------------------------------------------------------------------------------
# Exercise 3.2 — mlp_block
# ----------------------------------------------------------------------------------------------

MLP_SHAPES = [(16, 32, 128), (8, 16, 64)]  # (B, D, H); H divides by 8, H = 4 D


def check_mlp_block(fn: Callable) -> None:
    """relu(x @ w_in) @ w_out, typed f32[B@X, D], moving at most one all-reduce of the output."""
    rng = np.random.default_rng(32)
    for sizes in MESH_LAYOUTS:
        for b, d, h in MLP_SHAPES:
            mesh = make_mesh(sizes)
            x_host = rng.uniform(-1, 1, (b, d)).astype(np.float32)
            w_in_host = rng.uniform(-1, 1, (d, h)).astype(np.float32)
            w_out_host = rng.uniform(-1, 1, (h, d)).astype(np.float32)
            args = (
                place(x_host, mesh, P("X", None)),
                place(w_in_host, mesh, P(None, "Y")),
                place(w_out_host, mesh, P("Y", None)),
            )
            where = _where("mlp_block", mesh, *args)
            got = _call(fn, "mlp_block", mesh, *args)
            expect_allclose(
                got,
                oracle_mlp(x_host, w_in_host, w_out_host),
                where,
                rtol=1e-4,
                atol=1e-3,
                hint="compute relu(x @ w_in) @ w_out: jax.nn.relu between the two matmuls.",
            )
            expect_type_text(
                got,
                type_text((b, d), P("X", None)),
                where,
                "the result has x's layout: rows split over X, all of D on every device, "
                "so out_sharding=P('X', None) on the second matmul.",
            )
            _analyze_bytes(
                fn,
                mesh,
                args,
                bytes_all_reduce(b // sizes[0], d, sizes[1]),
                where,
                "sum the partial products of the second matmul (out_sharding=P('X', None), an all-reduce of "
                "the small output) instead of gathering the hidden activation, which is H/D times larger.",
            )


# ----------------------------------------------------------------------------------------------
# Exercise 3.3 — running_total
# ----------------------------------------------------------------------------------------------

RUNNING_SPECS = [
    P("X", "Y"),
    P("Y", "X"),
    P(None, ("X", "Y")),
    P("X", None),
    P(None, "Y"),
    P(("Y", "X"), None),
]


def running_total_cases() -> list[tuple[tuple[int, int], P, tuple[int, int]]]:
    cases = []
    for k, sizes in enumerate(MESH_LAYOUTS):
        for j, spec in enumerate(RUNNING_SPECS):
            if (k + j) % 2 == 0 or sizes == (4, 2):
                cases.append((sizes, spec, (16, 24) if j % 2 else (8, 32)))
    return cases


def check_running_total(fn: Callable) -> None:
    """Cumulative sum along axis 1 of x, returned with x's own type."""
    rng = np.random.default_rng(33)
    for sizes, spec, shape in running_total_cases():
        mesh = make_mesh(sizes)
        host = rng.integers(-5, 6, size=shape).astype(np.float32)
        x = place(host, mesh, spec)
        where = _where("running_total", mesh, x)
        got = _call(fn, "running_total", mesh, x)
        expect_allclose(
            got,
            oracle_running_total(host),
            where,
            hint="a cumulative sum along axis 1 (the columns), as jnp.cumsum(x, axis=1).",
        )
        expect_type_text(
            got,
            str(jax.typeof(x)),
            where,
            "return x's own layout: take it from the input (jax.typeof(x).sharding.spec) rather than "
            "writing a fixed P(...), since the input's spec varies.",
        )


# ----------------------------------------------------------------------------------------------
# Exercise 3.4 — matmul_split_contraction
# ----------------------------------------------------------------------------------------------

# (B, D, F): B and F divide by 8, and D >= 16 B, so that moving any part of w (D/nY x F per device) costs
# more than the reduce-scatter of the partial sums (B/nX x F) on every mesh layout, 1 x 8 included.
SPLIT_SHAPES = [(8, 256, 16), (16, 256, 24)]


def split_cases() -> list[tuple[tuple[int, int], tuple[int, int, int]]]:
    return [(sizes, shape) for sizes in MESH_LAYOUTS for shape in SPLIT_SHAPES]


def check_matmul_split_contraction(fn: Callable) -> None:
    """x f32[B@X, D] @ w f32[D@Y, F] must come back as f32[B@X, F@Y], moving only one reduce-scatter."""
    _check_matmul_into_x_y(
        fn,
        "matmul_split_contraction",
        split_cases(),
        P("X", None),
        34,
        (
            "the result is the plain product x @ w; only the layouts are yours to choose.",
            "B stays split over X and F is split over Y: out_sharding=P('X', 'Y').",
            "w is D/B times larger than the partial sums, so it must stay where it is: give x the "
            "split of w's rows (keeping a slice of what a device holds is free), then only the "
            "partial sums travel, as a reduce-scatter over Y.",
        ),
        allowed=("reduce-scatter",),
    )
