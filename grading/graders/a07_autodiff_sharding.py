"""Graders for assignment 07_autodiff_sharding (gradients with unreduced and reduced types).

Each ``check_<function>(fn)`` builds meshes of 8 devices with Explicit axes — ``('X',)`` of 8 in the
usual and in a shuffled device order, and ``('X', 'Y')`` laid out (4, 2) and (2, 4), where the batch is
split over ``'X'`` and everything is replicated over ``'Y'`` — places the inputs as the contract says
and calls ``fn`` inside ``with jax.set_mesh(mesh)``. Values are compared with a plain ``jax.grad``
oracle computed on one device without any mesh; types with ``jax.typeof``; communication with
:func:`shardbook.analyze` (kinds of collectives and how many times each runs, loop trip counts
included). The first wrong answer raises :class:`shardbook.checks.CheckFailed` with the call, what was
expected, what came back, and a hint.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh
from jax.sharding import PartitionSpec as P

from grading.graders.common import call_learner, make_mesh, place, show
from shardbook.checks import CheckFailed, analyze_for_check, describe_array, expect_allclose, expect_shape

# Mesh layouts of 8 devices: (axis sizes, axis names, shuffled device order?).
MESHES: list[tuple[tuple[int, ...], tuple[str, ...], bool]] = [
    ((8,), ("X",), False),
    ((8,), ("X",), True),
    ((4, 2), ("X", "Y"), False),
    ((2, 4), ("X", "Y"), False),
]
# (L, H, N per 'X' device): layers, width, rows of a microbatch per device along 'X'.
GRAD_SHAPES: list[tuple[int, int, int]] = [(2, 8, 2), (3, 16, 1), (1, 4, 3), (4, 8, 2)]
# (L, H, M, N per 'X' device): M microbatches.
STEP_SHAPES: list[tuple[int, int, int, int]] = [(3, 8, 4, 2), (2, 16, 3, 1), (1, 8, 1, 2), (4, 4, 5, 1)]
# (L, H, M, N per 'X' device) for the split weights of 7.3: H divides by every size of 'X' (8, 4, 2).
SHARDED_SHAPES: list[tuple[int, int, int, int]] = [(2, 16, 3, 2), (3, 8, 2, 1), (1, 16, 4, 2), (2, 8, 3, 3)]
LEARNING_RATES = [0.05, 0.1, 0.01, 0.2]
RTOL, ATOL = 1e-4, 2e-5


# ----------------------------------------------------------------------------------------------
# Oracles: the model of the assignment, differentiated on one device, without any mesh.
# ----------------------------------------------------------------------------------------------


def predict(ws: Any, x: Any) -> jax.Array:
    """x -> tanh(x @ w) for each layer w of ws, as a scan (the assignment's model)."""

    def layer(h, w):
        return jnp.tanh(h @ w), None

    return jax.lax.scan(layer, x, ws)[0]


def microbatch_loss(ws: Any, x: Any) -> jax.Array:
    """Sum of squared predictions of one microbatch (the assignment's loss)."""
    return jnp.sum(predict(ws, x) ** 2)


_grad_one_device = jax.jit(jax.grad(microbatch_loss))


def oracle_grad(ws_host: np.ndarray, x_host: np.ndarray) -> np.ndarray:
    """d microbatch_loss / d ws for one microbatch, with plain jax.grad on one device, no mesh."""
    device = jax.devices()[0]
    return np.asarray(_grad_one_device(jax.device_put(ws_host, device), jax.device_put(x_host, device)))


def oracle_step(ws_host: np.ndarray, xs_host: np.ndarray, lr: float) -> np.ndarray:
    """ws - lr * (sum over microbatches of the gradient), microbatch by microbatch."""
    g = sum(oracle_grad(ws_host, x).astype(np.float64) for x in xs_host)
    return ws_host.astype(np.float64) - lr * g


def _expect_step_values(got: Any, ws_host: np.ndarray, xs_host: np.ndarray, lr: float, where: str) -> None:
    """The training step's new weights against the oracle's, with the hint both steps share."""
    expect_allclose(
        got,
        oracle_step(ws_host, xs_host, lr),
        where,
        rtol=RTOL,
        atol=ATOL,
        hint="g is the SUM (not the mean) over microbatches of jax.grad(microbatch_loss)(ws, xs[m]); "
        "the result is ws - lr * g.",
    )


# ----------------------------------------------------------------------------------------------
# Helpers.
# ----------------------------------------------------------------------------------------------


# Which layouts of MESHES each grader uses (three each, to keep a hidden-test cell short).
GRAD_MESHES = (1, 2, 3)
STEP_MESHES = (0, 1, 3)
SHARDED_MESHES = (1, 2, 3)


def cases(which: tuple[int, ...]) -> Iterator[tuple[Mesh, int, int]]:
    """(mesh, size of 'X', case index) for the layouts of MESHES named by ``which``."""
    for k in which:
        sizes, names, shuffled = MESHES[k]
        mesh = make_mesh(sizes, names, reverse=shuffled)
        yield mesh, mesh.shape["X"], k


def type_text(x: Any) -> str:
    """What jax.typeof prints for x, or a description when it is not an array."""
    if isinstance(x, jax.Array):
        return str(jax.typeof(x))
    return describe_array(x)


def runs_of(report: Any) -> list[tuple[str, int]]:
    """(kind, executions) of every collective of a report, in program order."""
    return [(c.kind, c.executions) for c in report.collectives]


def _describe_runs(report: Any) -> str:
    if not report.collectives:
        return "no collectives"
    return "; ".join(c.describe() for c in report.collectives[:3]) + (
        f"; and {len(report.collectives) - 3} more" if len(report.collectives) > 3 else ""
    )


# ----------------------------------------------------------------------------------------------
# Exercise 7.1 — grad_unreduced
# ----------------------------------------------------------------------------------------------


def check_grad_unreduced(fn: Callable) -> None:
    """d loss / d ws as f32[L,H,H]{U:X}: right type, right values once reduced, no collectives."""
    rng = np.random.default_rng(71)
    for mesh, n_x, k in cases(GRAD_MESHES):
        layers, width, rows = GRAD_SHAPES[k % len(GRAD_SHAPES)]
        ws_host = (rng.normal(size=(layers, width, width)) / np.sqrt(width)).astype(np.float32)
        x_host = rng.normal(size=(rows * n_x, width)).astype(np.float32)
        ws = place(ws_host, mesh, P(None, None, None))
        x = place(x_host, mesh, P("X", None))
        where = f"grad_unreduced({type_text(ws)}, {type_text(x)}) on {show(mesh)}"
        got = call_learner(
            fn,
            "grad_unreduced",
            ws,
            x,
            mesh=mesh,
            where=where,
            hint="make the weights reduced over 'X' with jax.reshard before differentiating.",
        )
        expect_shape(got, ws_host.shape, where, hint="the gradient has the weights' shape [L, H, H].")
        expected_type = f"float32[{layers},{width},{width}]{{U:X}}"
        if type_text(got) != expected_type:
            raise CheckFailed(
                f"{where}: expected type {expected_type}, got {type_text(got)}. Hint: the cotangent's type "
                "follows the primal's: a replicated ws gives a replicated (already all-reduced) gradient, "
                "a ws reduced over 'X' (jax.reshard(ws, P(None, None, None, reduced={'X'}))) gives an "
                "unreduced one."
            )
        with jax.set_mesh(mesh):
            total = jax.reshard(got, P(None, None, None))
        expect_allclose(
            total,
            oracle_grad(ws_host, x_host),
            f"{where}, once reduced with jax.reshard(result, P())",
            rtol=RTOL,
            atol=ATOL,
            hint="differentiate microbatch_loss(ws, x) with respect to ws; the partial sums of all devices "
            "must add up to the full gradient.",
        )
        with jax.set_mesh(mesh):
            report = analyze_for_check(fn, (ws, x), f"the compiled program of {where}")
        if report.collectives:
            raise CheckFailed(
                f"the compiled program of {where}: expected no collectives (each device keeps its partial "
                f"sum), got {_describe_runs(report)}. Hint: reduce the gradient and it has to be "
                "all-reduced first; differentiate with respect to reduced weights instead, so the "
                "gradient comes out unreduced without any communication."
            )


# ----------------------------------------------------------------------------------------------
# Exercise 7.2 — sgd_step_accumulated
# ----------------------------------------------------------------------------------------------


def step_case(rng, mesh, n_x: int, k: int, shapes: list, w_spec: P) -> tuple:
    """Case ``k`` of a training step's check: (lr, ws and xs on the host, ws laid out as ``w_spec`` and
    xs split by rows over 'X' on ``mesh``)."""
    layers, width, micro, rows = shapes[k % len(shapes)]
    ws_host = (rng.normal(size=(layers, width, width)) / np.sqrt(width)).astype(np.float32)
    xs_host = rng.normal(size=(micro, rows * n_x, width)).astype(np.float32)
    ws, xs = place(ws_host, mesh, w_spec), place(xs_host, mesh, P(None, "X", None))
    return LEARNING_RATES[k % len(LEARNING_RATES)], ws_host, xs_host, ws, xs


def check_sgd_step_accumulated(fn: Callable) -> None:
    """ws - lr * sum_m grad_m, replicated; exactly one all-reduce, executed once, no other collective."""
    rng = np.random.default_rng(72)
    for mesh, n_x, k in cases(STEP_MESHES):
        lr, ws_host, xs_host, ws, xs = step_case(rng, mesh, n_x, k, STEP_SHAPES, P(None, None, None))
        layers, width = ws_host.shape[:2]
        where = f"sgd_step_accumulated({type_text(ws)}, {type_text(xs)}, {lr}) on {show(mesh)}"
        got = call_learner(
            fn,
            "sgd_step_accumulated",
            ws,
            xs,
            lr,
            mesh=mesh,
            where=where,
            hint="loop over the microbatches with jax.lax.scan, summing gradients taken with respect to "
            "reduced weights, and reshard the sum to P() once at the end.",
        )
        _expect_step_values(got, ws_host, xs_host, lr, where)
        if type_text(got) != f"float32[{layers},{width},{width}]":
            raise CheckFailed(
                f"{where}: expected the new weights replicated, float32[{layers},{width},{width}], got "
                f"{type_text(got)}. Hint: reshard the summed gradient to P(None, None, None) before the "
                "update."
            )
        with jax.set_mesh(mesh):
            report = analyze_for_check(fn, (ws, xs, lr), f"the compiled program of {where}")
        runs = runs_of(report)
        if runs != [("all-reduce", 1)]:
            executions = sum(e for _, e in runs)
            raise CheckFailed(
                f"the compiled program of {where}: expected exactly one all-reduce, executed once per call, "
                f"got {len(runs)} collective(s) executed {executions} time(s) in all: "
                f"{_describe_runs(report)}. Hint: a collective inside a loop runs once per iteration: with "
                "replicated weights every layer of every microbatch all-reduces its gradient, and a reshard "
                "to P() inside the microbatch loop all-reduces once per microbatch. Take gradients with "
                "respect to weights reduced over 'X', add up the unreduced sums in the loop, and reshard "
                "the sum to P() once, after it."
            )


# ----------------------------------------------------------------------------------------------
# Exercise 7.3 — sgd_step_sharded
# ----------------------------------------------------------------------------------------------


def _sharded_hint(runs: list[tuple[str, int]]) -> str:
    """The hint that fits the collectives a learner's sgd_step_sharded ran."""
    kinds = {kind for kind, _ in runs}
    if "all-reduce" in kinds and any(executions > 1 for _, executions in runs):
        return (
            "with weights replicated for the computation, every layer of every microbatch all-reduces "
            "its gradient (a collective inside a loop runs once per iteration). Gather the weights once, "
            "before the loop, into a type whose gradient comes back unreduced over 'X', add up the "
            "unreduced gradients in the loop, and reduce the sum once, after it, into the layout of ws."
        )
    if any(executions > 1 for _, executions in runs):
        return (
            "a collective inside a loop runs once per iteration: gradients taken with respect to the "
            "split weights gather them and reduce-scatter their gradient in every layer of every "
            "microbatch. Gather the weights once, before the loop, into a type whose gradient comes back "
            "unreduced over 'X', add up the unreduced gradients in the loop, and reduce the sum once, "
            "after it."
        )
    if "all-reduce" in kinds:
        return (
            "an all-reduce leaves the whole gradient on every device, twice the bytes of a reduce-scatter; "
            "reshard the unreduced sum straight to the layout of ws, P(None, 'X', None)."
        )
    if "all-gather" not in kinds:
        return "the split weights must be gathered once to compute each layer; gather them before the loop."
    return "gather the weights once before the loop, and reduce-scatter the summed gradient once after it."


def check_sgd_step_sharded(fn: Callable) -> None:
    """ws - lr * sum_m grad_m, split like ws; one all-gather and one reduce-scatter, each run once."""
    rng = np.random.default_rng(73)
    for mesh, n_x, k in cases(SHARDED_MESHES):
        lr, ws_host, xs_host, ws, xs = step_case(rng, mesh, n_x, k, SHARDED_SHAPES, P(None, "X", None))
        layers, width = ws_host.shape[:2]
        where = f"sgd_step_sharded({type_text(ws)}, {type_text(xs)}, {lr}) on {show(mesh)}"
        got = call_learner(
            fn,
            "sgd_step_sharded",
            ws,
            xs,
            lr,
            mesh=mesh,
            where=where,
            hint="loop over the microbatches with jax.lax.scan, summing gradients left unreduced over 'X', "
            "and reshard the sum to the layout of ws once at the end.",
        )
        _expect_step_values(got, ws_host, xs_host, lr, where)
        split = f"float32[{layers},{width}@X,{width}]"
        if type_text(got) != split:
            raise CheckFailed(
                f"{where}: expected the new weights laid out like ws, {split}, got {type_text(got)}. Hint: "
                "reshard the summed gradient to P(None, 'X', None) before the update, so that each device "
                "updates its own rows."
            )
        with jax.set_mesh(mesh):
            report = analyze_for_check(fn, (ws, xs, lr), f"the compiled program of {where}")
        runs = sorted(runs_of(report))
        if runs != [("all-gather", 1), ("reduce-scatter", 1)]:
            executions = sum(e for _, e in runs)
            raise CheckFailed(
                f"the compiled program of {where}: expected one all-gather and one reduce-scatter, each "
                f"executed once per call, got {len(runs)} collective(s) executed {executions} time(s) in "
                f"all: {_describe_runs(report)}. Hint: {_sharded_hint(runs)}"
            )
