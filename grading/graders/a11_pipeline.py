"""Graders for assignment 11_training, its pipeline half: exercises 11.3 ``pipeline_forward`` and 11.4
``circular_forward`` (grading/graders/a11_training.py holds the FSDP half and re-exports these checks; its
docstring says what each checks).
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import numpy as np
from jax.sharding import AxisType, Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from grading.graders.common import (
    analyze_learner,
    call_learner,
    collectives_text,
    expect_kinds_and_bytes,
    make_mesh,
    show,
)
from shardbook.checks import CheckFailed, expect_allclose, expect_report, list_collectives
from shardbook.comms import Report

BYTES_F32 = 4


def oracle_pipeline(w: np.ndarray, b: np.ndarray, x: np.ndarray) -> np.ndarray:
    """The stages one after another, in float64."""
    h = x.astype(np.float64)
    for s in range(w.shape[0]):
        h = np.tanh(h @ w[s].astype(np.float64) + b[s])
    return h


# ----------------------------------------------------------------------------------------------
# Exercise 11.3 — pipeline_forward
# ----------------------------------------------------------------------------------------------

# (stages, n_micro, batch rows, width, axis type, shuffle seed, reversed)
PIPELINE_CASES: list[tuple[int, int, int, int, AxisType, int | None, bool]] = [
    (8, 4, 16, 8, AxisType.Explicit, None, False),
    (4, 3, 12, 16, AxisType.Auto, 7, False),
    (2, 1, 4, 8, AxisType.Explicit, None, False),
    (4, 6, 24, 4, AxisType.Explicit, None, True),
]


def pipeline_case(k: int) -> tuple[Mesh, np.ndarray, np.ndarray, np.ndarray, int]:
    """(mesh, w f32[S, D, D], b f32[S, D], x f32[B, D], n_micro) of PIPELINE_CASES[k]."""
    stages, n_micro, rows, width, axis_type, shuffle, reverse = PIPELINE_CASES[k]
    mesh = make_mesh((stages,), ("stage",), axis_type=axis_type, shuffle=shuffle, reverse=reverse)
    rng = np.random.default_rng(30 + k)
    w = (rng.normal(size=(stages, width, width)) / np.sqrt(width)).astype(np.float32)
    b = rng.normal(size=(stages, width)).astype(np.float32)
    x = rng.normal(size=(rows, width)).astype(np.float32)
    return mesh, w, b, x, n_micro


def pipeline_steps(report: Report, rows: int, width: int, n_micro: int) -> float:
    """Steps of a pipeline run, read from its per-device matmul FLOPs: FLOPs / (2 · B/n_micro · D · D)."""
    return report.flops / (2 * (rows // n_micro) * width * width)


def check_pipeline_forward(fn: Callable) -> None:
    """The stages' composition, replicated; only permutes and an all-reduce; n_micro + S − 1 steps."""
    for k in range(len(PIPELINE_CASES)):
        mesh, w, b, x_host, n_micro = pipeline_case(k)
        stages, width = w.shape[0], x_host.shape[1]
        report, where = _run_pipeline(
            fn,
            "pipeline_forward",
            mesh,
            {"w": w, "b": b},
            P("stage"),
            x_host,
            {"n_micro": n_micro},
            f"{{'w': f32[{stages},{width},{width}], 'b': f32[{stages},{width}]}} P('stage')",
            oracle_pipeline(w, b, x_host),
            "stage 0 takes microbatch t at step t and passes its result on with ppermute (s -> s + 1); the "
            "last stage finishes microbatch t - (S - 1) at step t.",
        )
        _check_pipeline_program(report, f"the compiled {where}", stages, n_micro, x_host.shape[0], width)


def _run_pipeline(
    fn: Callable,
    name: str,
    mesh: Mesh,
    params_host: dict,
    spec: P,
    x_host: np.ndarray,
    static: dict[str, int],
    params_text: str,
    want: np.ndarray,
    value_hint: str,
) -> tuple[Report, str]:
    """Calls ``fn(params, x, mesh, *static.values())`` under jit (the static arguments named by ``static``):
    values as ``want``, replicated; returns (report, call)."""
    rows, width = x_host.shape
    with jax.set_mesh(mesh):
        stage_params = jax.device_put(params_host, NamedSharding(mesh, spec))
        x = jax.device_put(x_host, NamedSharding(mesh, P()))
    named, static_args = "".join(f", {k}={v}" for k, v in static.items()), tuple(static.values())
    where = f"{name}({params_text}, {show(x)}, {show(mesh)}{named})"
    forward = jax.jit(fn, static_argnums=tuple(range(2, 3 + len(static))))
    got = call_learner(forward, name, stage_params, x, mesh, *static_args, mesh=mesh, where=where)
    expect_allclose(got, want, where, rtol=1e-5, atol=1e-5, hint=value_hint)
    if not got.sharding.is_fully_replicated:
        raise CheckFailed(
            f"{where}: expected f32[{rows},{width}] replicated, got {show(got)}. Hint: psum the last "
            "stage's outputs (zeros on the other stages) and return them with out_specs=P()."
        )
    with jax.set_mesh(mesh):
        report = analyze_learner(
            forward,
            name,
            stage_params,
            x,
            mesh,
            *static_args,
            where=f"{where} compiled",
            hint="the function must compile for these arguments.",
        )
    return report, where


def _check_pipeline_program(
    report: Report, call: str, stages: int, n_micro: int, rows: int, width: int, repeats: int | None = None
) -> None:
    """Only permutes and one all-reduce, the schedule's number of steps, and its bytes.

    ``repeats`` None is 11.3's GPipe (n_micro + S − 1 steps); an int V is 11.4's circular pipeline, each
    microbatch going round the ring V times (V · n_micro + S − 1 steps).
    """
    micro_bytes = rows // n_micro * width * BYTES_F32
    out_bytes = rows * width * BYTES_F32
    expected_steps = (repeats or 1) * n_micro + stages - 1
    hint = (
        "pass each microbatch's activations to the next stage with jax.lax.ppermute; never gather the "
        "stages' activations or parameters, and broadcast only the last stage's output, once."
    )
    expect_report(report, ("collective-permute", "all-reduce"), None, call, hint)
    if report.count("collective-permute") == 0:
        raise CheckFailed(
            f"{call}: expected collective-permutes passing microbatches from stage to stage, got "
            f"{collectives_text(report)}. Hint: after each step, jax.lax.ppermute(h, 'stage', "
            "[(s, s + 1) ...]) hands every stage's result to the next one."
        )
    steps = pipeline_steps(report, rows, width, n_micro)
    if steps != expected_steps:
        per_step = 2 * (rows // n_micro) * width * width
        formula = (
            f"n_micro + S - 1 = {n_micro} + {stages} - 1"
            if repeats is None
            else f"V · n_micro + S - 1 = {repeats} · {n_micro} + {stages} - 1"
        )
        raise CheckFailed(
            f"{call}: expected {formula} = {expected_steps} steps, got {steps:g} (matmul FLOPs per device "
            f"{report.flops:,} / {per_step:,} per stage and microbatch). Hint: "
            + _steps_hint(steps, stages, n_micro, repeats)
        )
    all_reduces = sum(c.executions for c in report.collectives if c.kind == "all-reduce")
    if all_reduces != 1:
        raise CheckFailed(
            f"{call}: expected one all-reduce (the output, once), got {all_reduces}: "
            f"{list_collectives([c for c in report.collectives if c.kind == 'all-reduce']) or 'none'}. Hint: "
            "collect the last stage's microbatches in the loop and psum the stacked outputs once, after the "
            "loop; each all-reduce waits for every stage, so n_micro of them pay that wait n_micro times"
            + (
                "."
                if repeats is None
                else "; from one repeat to the next, the permute S - 1 -> 0 carries them."
            )
        )
    expect_kinds_and_bytes(
        report,
        call,
        ("collective-permute", "all-reduce"),
        expected_steps * micro_bytes + 2 * (stages - 1) * out_bytes // stages,
        f"one microbatch permuted per step for {expected_steps} steps, and one all-reduce of the output",
        hint,
    )


def _steps_hint(steps: float, stages: int, n_micro: int, repeats: int | None) -> str:
    """The hint that fits the number of steps a pipeline took."""
    if repeats is None:
        return (
            "GPipe runs n_micro + S - 1 steps, each device applying its stage once per step to what it "
            "holds; "
            + (
                "one microbatch at a time through all stages takes n_micro · S steps."
                if steps == n_micro * stages and n_micro > 1
                else "loop over exactly range(n_micro + n_stages - 1)."
            )
        )
    if repeats > 1 and steps == repeats * (n_micro + stages - 1):
        return (
            "that is one GPipe pass per repeat, each draining before the next one fills (Exercise "
            "11.3's pipeline run V times): let the last stage pass its result round to stage 0 "
            "(s -> (s + 1) mod S), which starts that microbatch's next repeat at the very next step."
        )
    return (
        "loop over exactly range(V * n_micro + n_stages - 1), each device applying one of its layers per "
        "step; stage 0 takes microbatch t at steps t < S, and otherwise what came round from stage S - 1."
    )


# ----------------------------------------------------------------------------------------------
# Exercise 11.4 — circular_forward
# ----------------------------------------------------------------------------------------------

# (stages, repeats V, batch rows, width, axis type, shuffle seed, reversed); n_micro = stages
CIRCULAR_CASES: list[tuple[int, int, int, int, AxisType, int | None, bool]] = [
    (8, 2, 32, 4, AxisType.Explicit, 5, False),
    (4, 3, 8, 16, AxisType.Auto, 7, False),
    (2, 2, 4, 8, AxisType.Explicit, None, True),
    (4, 1, 12, 8, AxisType.Explicit, None, False),
]


def circular_case(k: int) -> tuple[Mesh, np.ndarray, np.ndarray, np.ndarray]:
    """(mesh, w f32[V, S, D, D], b f32[V, S, D], x f32[B, D]) of CIRCULAR_CASES[k]."""
    stages, repeats, rows, width, axis_type, shuffle, reverse = CIRCULAR_CASES[k]
    mesh = make_mesh((stages,), ("stage",), axis_type=axis_type, shuffle=shuffle, reverse=reverse)
    rng = np.random.default_rng(60 + k)
    w = (rng.normal(size=(repeats, stages, width, width)) / np.sqrt(width)).astype(np.float32)
    b = rng.normal(size=(repeats, stages, width)).astype(np.float32)
    x = rng.normal(size=(rows, width)).astype(np.float32)
    return mesh, w, b, x


def oracle_circular(w: np.ndarray, b: np.ndarray, x: np.ndarray) -> np.ndarray:
    """Layers ℓ = v · S + s in order, layer ℓ being (w[v, s], b[v, s]): 11.3's oracle on V · S stages."""
    repeats, stages, width = b.shape
    return oracle_pipeline(w.reshape(repeats * stages, width, width), b.reshape(repeats * stages, width), x)


def check_circular_forward(fn: Callable) -> None:
    """Layers 0 … V·S − 1 in order, replicated; only permutes and one all-reduce; V · S + S − 1 steps."""
    for k in range(len(CIRCULAR_CASES)):
        mesh, w, b, x_host = circular_case(k)
        repeats, stages, width = b.shape
        report, where = _run_pipeline(
            fn,
            "circular_forward",
            mesh,
            {"w": w, "b": b},
            P(None, "stage"),
            x_host,
            {},
            f"{{'w': f32[{repeats},{stages},{width},{width}], 'b': f32[{repeats},{stages},{width}]}} "
            "P(None, 'stage')",
            oracle_circular(w, b, x_host),
            "layer v · S + s is w[v, s], on device s: at step t device s runs repeat (t - s) // S of "
            "microbatch (t - s) mod S with its w[repeat]; stage 0 takes microbatch t while t < S, and "
            "afterwards what came round from stage S - 1.",
        )
        _check_pipeline_program(
            report, f"the compiled {where}", stages, stages, x_host.shape[0], width, repeats=repeats
        )
