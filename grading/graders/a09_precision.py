"""Graders for assignment 09_precision (matmul precision presets).

Each ``check_<function>(fn)`` calls a learner's function on many cases and compares every answer
with a naive oracle: a float64 NumPy matmul for the emulated three-pass bf16 product, a plain sort of
the table for the preset chooser, and a hand-written float64 backward pass for the model's gradients.
Where the exercise is about *how* a result is computed, the check also reads the program
(``jax.make_jaxpr``, every program inside it included: jit, each branch of a cond, custom_vjp): the dtypes
of every ``dot_general``'s operands, or the algorithm each one names; and runs it with each dot_general's
result doubled in turn (``shardbook.matmuls.expect_matmul_work``), so that the matmuls must do the work:
an elementwise multiply-and-sum beside a matmul whose result is thrown away does not count. A three-pass
product is also at most ``MAX_GAIN`` times more accurate than one bf16 pass: more means some of it ran in
f32.
The first wrong answer raises :class:`shardbook.checks.CheckFailed` with the call, what was expected,
what came back, and a hint.

``bf16x3_matmul_vjp`` is checked as ``bf16x3_matmul`` on the same products (:func:`product_cases`), then
through ``jax.vjp`` for a cotangent G: every ``dot_general`` of the VJP's program bf16 × bf16 → f32, and
dA = G·Bᵀ and dB = Aᵀ·G each 50× more accurate than one bf16 pass of that product, under ``jax.jit``;
twice on a mesh with Explicit axes (A split ``P('X', None)``; G typed like C), where dA and dB must also
have A's and B's types and JAX refuses a backward that does not say where Aᵀ·G's sum lands.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import AxisType, NamedSharding
from jax.sharding import PartitionSpec as P

from grading.graders.common import call_learner, make_mesh
from shardbook.checks import CheckFailed, describe_array
from shardbook.matmuls import dot_generals, expect_matmul_work

# (M, K, N) of the hidden products A[M, K] · B[K, N], with N(0, 1) entries.
MATMUL_SIZES: list[tuple[int, int, int]] = [(16, 64, 8), (64, 256, 32), (33, 517, 65), (128, 1024, 96)]
# One size again with operands far from 1 (a power of two: the same accuracy target), where float16
# overflows (its largest value is 65504) and loses bits (below 6e-5); bf16 and f32 hold both.
SCALED_CASE: tuple[tuple[int, int, int], float] = ((16, 64, 8), 2.0**18)
# The emulated three-pass product must be at least this many times more accurate than one bf16 pass,
# and at most MAX_GAIN times: three passes give 480x to 580x on these sizes (adding low·low, 600x to
# 710x), an f32 product 4,100x (K = 1024) to 16,000x (K = 64).
MIN_GAIN = 50
MAX_GAIN = 2000
# The products whose matmuls are probed one by one (matmul_work runs the program once per dot_general):
# the first two of product_cases().
WORK_CASES = 2
# (batch, d_in, hidden, d_out) of the hidden two-layer models.
MODEL_SIZES: list[tuple[int, int, int, int]] = [(8, 4, 16, 3), (32, 24, 40, 8), (64, 128, 96, 16)]
# Presets whose name the program must carry; all of them compile on a CPU.
STRUCTURE_PRESETS: list[Any] = [
    "BF16_BF16_F32_X3",
    "BF16_BF16_F32",
    "F32_F32_F32",
    jax.lax.DotAlgorithmPreset.BF16_BF16_F32_X6,
]
# Presets whose values are compared with the float64 oracle (f32-accurate on every backend).
VALUE_PRESETS: list[str] = ["F32_F32_F32", "BF16_BF16_F32_X6"]


# ----------------------------------------------------------------------------------------------
# Oracles: the plainest possible computations of the right answer.
# ----------------------------------------------------------------------------------------------


def oracle_matmul(a: Any, b: Any) -> np.ndarray:
    """A · B in float64."""
    return np.asarray(a, np.float64) @ np.asarray(b, np.float64)


def relative_error(got: Any, ref: np.ndarray) -> float:
    """Frobenius norm of the difference over the Frobenius norm of the reference."""
    return float(np.linalg.norm(np.asarray(got, np.float64) - ref) / np.linalg.norm(ref))


def one_bf16_pass(a: jax.Array, b: jax.Array) -> jax.Array:
    """One bf16 pass: both operands rounded to bf16, products accumulated in f32."""
    return jnp.dot(a.astype(jnp.bfloat16), b.astype(jnp.bfloat16), preferred_element_type=jnp.float32)


def oracle_cheapest(errors: dict[str, float], costs: dict[str, float], tol: float) -> str | None:
    """The qualifying preset (error <= tol; NaN never qualifies) of least (cost, error, name)."""
    ok = [name for name in errors if errors[name] <= tol]
    if not ok:
        return None
    return min(ok, key=lambda name: (costs[name], errors[name], name))


def oracle_mlp(w1: Any, w2: Any, x: Any, y: Any) -> tuple[float, np.ndarray, np.ndarray]:
    """Loss mean((tanh(x·w1)·w2 − y)²) and its gradients in w1 and w2, by hand in float64."""
    w1, w2, x, y = (np.asarray(v, np.float64) for v in (w1, w2, x, y))
    h = np.tanh(x @ w1)
    r = h @ w2 - y
    loss = float(np.mean(r**2))
    g_out = 2 * r / r.size
    g_w2 = h.T @ g_out
    g_h = g_out @ w2.T
    g_w1 = x.T @ (g_h * (1 - h**2))
    return loss, g_w1, g_w2


# ----------------------------------------------------------------------------------------------
# Reading a program.
# ----------------------------------------------------------------------------------------------


def describe_dot(eqn: Any) -> str:
    """'dot_general(f32[64,256], bf16[256,32]) -> f32[64,32], precision=BF16_BF16_F32'."""
    ins = ", ".join(str(v.aval.str_short()) for v in eqn.invars)
    out = eqn.outvars[0].aval.str_short()
    return f"dot_general({ins}) -> {out}, precision={eqn.params.get('precision')}"


def preset_name(preset: Any) -> str:
    """The name of a preset given as a string or a DotAlgorithmPreset."""
    return preset if isinstance(preset, str) else preset.name


def _fail(where: str, expected: str, got: str, hint: str) -> None:
    raise CheckFailed(f"{where}: expected {expected}, got {got}. Hint: {hint}")


# ----------------------------------------------------------------------------------------------
# Exercise 9.1 — three bf16 passes.
# ----------------------------------------------------------------------------------------------


def normal_pair(m: int, k: int, n: int, seed: int) -> tuple[jax.Array, jax.Array]:
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    return jnp.asarray(a), jnp.asarray(b)


def product_cases() -> list[tuple[str, jax.Array, jax.Array, bool]]:
    """(how the operands are described, A, B, scaled) for every size of MATMUL_SIZES and the SCALED_CASE."""
    cases = []
    for seed, ((m, k, n), scale) in enumerate([*((size, 1.0) for size in MATMUL_SIZES), SCALED_CASE]):
        a, b = normal_pair(m, k, n, seed)
        shapes = f"f32[{m},{k}], f32[{k},{n}]"
        if scale != 1:
            shapes = f"f32[{m},{k}] × {scale:g}, f32[{k},{n}] / {scale:g}"
        cases.append((shapes, a * scale, b / scale, scale != 1))
    return cases


def _expect_bf16_dots(dots: list[Any], where: str, hint: str) -> None:
    """At least one dot_general, and every one bf16 × bf16 with preferred_element_type=float32."""
    if not dots:
        _fail(
            where,
            "bf16 × bf16 dot_generals with preferred_element_type=float32",
            "no dot_general at all",
            "the products must be real matmuls (jnp.dot, @, jnp.einsum, lax.dot_general) on bf16 "
            "operands; elementwise multiply-and-sum does not count.",
        )
    for eqn in dots:
        dtypes = [v.aval.dtype for v in eqn.invars]
        accum = eqn.params.get("preferred_element_type")
        if any(d != jnp.bfloat16 for d in dtypes) or accum != jnp.float32:
            _fail(
                where,
                "every dot_general to take bf16 operands with preferred_element_type=float32",
                describe_dot(eqn) + f", preferred_element_type={accum}",
                hint,
            )


TOO_ACCURATE_HINT = (
    "three bf16 passes give about 500×; this much more means some of the product was computed in f32 (an "
    "f32 matmul, or an elementwise multiply-and-sum) or by more than three passes, which the contract "
    "forbids: the product comes from the three bf16 matmuls high·high, high·low and low·high."
)


def _expect_gain(got: Any, ref: np.ndarray, base: float, where: str, hint: str) -> float:
    """A relative error against float64 at least MIN_GAIN times below ``base``, one bf16 pass's; returns
    the error."""
    err = relative_error(got, ref)
    if not err * MIN_GAIN <= base:
        _fail(
            where,
            f"a relative error (Frobenius, against float64) of at most {base / MIN_GAIN:.2e} — "
            f"{MIN_GAIN}× below one bf16 pass ({base:.2e})",
            f"{err:.2e}, {base / err:.1f}× below one pass" if err > 0 else "0",
            hint,
        )
    return err


def _expect_no_f32_accuracy(err: float, base: float, where: str) -> None:
    """A relative error at most MAX_GAIN times below ``base``, one bf16 pass's: three passes' accuracy,
    not f32's. Checked after the matmuls' work (:func:`_expect_three_passes`), whose message is the more
    precise one for an elementwise product."""
    if not err * MAX_GAIN >= base:
        _fail(
            where,
            f"a relative error (Frobenius, against float64) of at least {base / MAX_GAIN:.2e} — at most "
            f"{MAX_GAIN}× below one bf16 pass ({base:.2e}), as three bf16 passes are",
            f"{err:.2e}, {base / err:.0f}× below one pass" if err > 0 else "0, exact",
            TOO_ACCURATE_HINT,
        )


WORK_HINT = (
    "every product must be a real matmul (jnp.dot, @, jnp.einsum, lax.dot_general) on bf16 pieces whose "
    "result goes into the answer: an elementwise multiply-and-sum is not a matmul, and a matmul whose "
    "result is multiplied by zero does no work."
)


BACKWARD_WORK_HINT = (
    "the backward's products must be matmuls too: G·Bᵀ and Aᵀ·G each as three bf16 matmuls (high·high, "
    "high·low, low·high) whose results make up dA and dB; an elementwise multiply-and-sum is not a matmul."
)


def _expect_three_passes(
    fn: Callable, args: tuple, products: list[tuple[str, int, int, int]], where: str, hint: str = WORK_HINT
) -> None:
    """The dot_generals that each output of ``fn(*args)`` depends on multiply at least three M·K·N
    products' worth of pairs; ``products``: (name, M, K, N) per output."""
    needs = [
        (name, 3 * m * k * n, f"three bf16 passes of {name}, 3 × {m}·{k}·{n}") for name, m, k, n in products
    ]
    expect_matmul_work(fn, *args, needs=needs, what=f"the program of {where}", hint=hint)


def _expect_f32(got: Any, shape: tuple[int, ...], where: str, hint: str) -> None:
    if getattr(got, "shape", None) != shape or getattr(got, "dtype", None) != jnp.float32:
        _fail(where, f"f32[{','.join(map(str, shape))}]", describe_array(got), hint)


FORWARD_DTYPE_HINT = (
    "round each piece to jnp.bfloat16 *before* the matmul and pass preferred_element_type=jnp.float32; a "
    "precision= preset leaves the operands f32 in the program, and on a CPU it computes in f32 anyway."
)
SCALED_HINT = (
    "float16 holds nothing past 65504 and loses bits below 6e-5, bf16 and f32 hold both: keep every piece "
    "in bfloat16 and the remainder (x - high) in float32."
)


def _check_forward(
    fn: Callable, name: str, shapes: str, a: jax.Array, b: jax.Array, hint: str, work: bool = False
) -> None:
    """9.1's contract for ``fn(a, b)``: only bf16 × bf16 → f32 dots (``work``: which carry three passes'
    worth of the product), 50× to MAX_GAIN× the accuracy of one pass, jitted."""
    where = f"{name}({shapes})"
    jaxpr = call_learner(jax.make_jaxpr(fn), name, a, b, where=f"jax.make_jaxpr({name})(a, b)")
    _expect_bf16_dots(dot_generals(jaxpr), f"the program of {where}", FORWARD_DTYPE_HINT)
    out = call_learner(jax.jit(fn), name, a, b, where=where)
    _expect_f32(out, (a.shape[0], b.shape[1]), where, "return the f32 sum of the bf16 products.")
    ref = oracle_matmul(a, b)
    base = relative_error(one_bf16_pass(a, b), ref)
    err = _expect_gain(out, ref, base, where, hint)
    if work:
        _expect_three_passes(fn, (a, b), [("C = A·B", a.shape[0], a.shape[1], b.shape[1])], where)
    _expect_no_f32_accuracy(err, base, where)


def check_bf16x3_matmul(fn: Callable) -> None:
    """Only bf16 × bf16 → f32 dot_generals in the program, doing three passes' work, and 50× to MAX_GAIN×
    the accuracy of one bf16 pass."""
    for case, (shapes, a, b, scaled) in enumerate(product_cases()):
        hint = (
            SCALED_HINT
            if scaled
            else "split each operand into a bf16 high part and a bf16 low part (what the high part "
            "missed); the three largest products are high·high, high·low and low·high — "
            "low·low is the one that is too small to matter."
        )
        _check_forward(fn, "bf16x3_matmul", shapes, a, b, hint, work=case < WORK_CASES)


# ----------------------------------------------------------------------------------------------
# Exercise 9.2 — the cheapest preset within tolerance.
# ----------------------------------------------------------------------------------------------

PRESETS = ["BF16_BF16_F32", "BF16_BF16_F32_X3", "BF16_BF16_F32_X6", "BF16_BF16_F32_X9", "TF32_TF32_F32",
           "TF32_TF32_F32_X3", "F32_F32_F32", "ANY_F8_ANY_F8_F32"]  # fmt: skip


def cheapest_cases(seed: int = 0) -> list[tuple[dict[str, float], dict[str, float], float]]:
    """Hand-made tables (ties, a tolerance met exactly, NaN, none qualifies) plus random ones."""
    table_err = {"BF16_BF16_F32": 2.3e-3, "BF16_BF16_F32_X3": 4.4e-6, "BF16_BF16_F32_X6": 6e-7,
                 "BF16_BF16_F32_X9": 4e-7, "F32_F32_F32": 4e-7}  # fmt: skip
    table_cost: dict[str, float] = {"BF16_BF16_F32": 1, "BF16_BF16_F32_X3": 3, "BF16_BF16_F32_X6": 6,
                  "BF16_BF16_F32_X9": 9, "F32_F32_F32": 9}  # fmt: skip
    cases: list[tuple[dict[str, float], dict[str, float], float]] = [
        (table_err, table_cost, tol) for tol in (1e-2, 1e-4, 1e-6, 4e-7, 1e-9)
    ]
    # Same cost: the smaller error wins even when it comes later in the dict.
    cases.append(({"B": 1e-3, "A": 1e-3, "C": 1e-4}, {"B": 2, "A": 2, "C": 2}, 1e-2))
    cases.append(
        ({"TF32_TF32_F32": 5e-4, "BF16_BF16_F32_X3": 4e-6}, {"TF32_TF32_F32": 3, "BF16_BF16_F32_X3": 3}, 1e-3)
    )
    # Same cost and same error: the name decides, in Python's order of strings (uppercase first).
    cases.append(({"Z": 1e-5, "M": 1e-5, "Q": 1e-3}, {"Z": 1.5, "M": 1.5, "Q": 1.5}, 1e-4))
    cases.append(({"b": 2e-6, "a": 2e-6, "C": 2e-6}, {"b": 3, "a": 3, "C": 3}, 1e-5))
    # A NaN error never qualifies; an empty table has no answer.
    cases.append(
        ({"F16_F16_F32": float("nan"), "F32_F32_F32": 1e-7}, {"F16_F16_F32": 1, "F32_F32_F32": 6}, 1e-3)
    )
    cases.append(({}, {}, 1.0))
    rng = random.Random(seed)
    for _ in range(40):
        names = rng.sample(PRESETS, rng.randint(1, len(PRESETS)))
        errors = {n: rng.choice([1e-2, 2e-3, 5e-4, 4e-6, 1e-7]) for n in names}
        costs = {n: rng.choice([1, 2, 3, 3.0, 6]) for n in names}
        cases.append((errors, costs, rng.choice([1e-1, 1e-3, 1e-5, 4e-6, 1e-8])))
    return cases


def check_cheapest_accurate_preset(fn: Callable) -> None:
    """The oracle's answer on every hand-made and random table."""
    name = "cheapest_accurate_preset"
    for errors, costs, tol in cheapest_cases():
        where = f"{name}(errors={errors}, costs={costs}, tol={tol})"
        got = call_learner(fn, name, dict(errors), dict(costs), tol, where=where)
        expected = oracle_cheapest(errors, costs, tol)
        if got == expected and (got is None) == (expected is None):
            continue
        if expected is None:
            hint = "no preset's error is within tol here: return None."
        elif got in errors and errors[got] > tol:
            hint = f"{got!r} has error {errors[got]:g} > tol: a preset qualifies when its error <= tol."
        elif got in costs and costs[got] == costs[expected]:
            hint = (
                "several qualifying presets cost the same: break the tie by the smaller error, then by name."
            )
        else:
            hint = "among the presets whose error is <= tol, take the one of smallest cost."
        _fail(where, repr(expected), repr(got), hint)


# ----------------------------------------------------------------------------------------------
# Exercise 9.3 — one preset through a model's forward and backward pass.
# ----------------------------------------------------------------------------------------------


def model_case(batch: int, d_in: int, hidden: int, d_out: int, seed: int) -> tuple[jax.Array, ...]:
    rng = np.random.default_rng(seed)
    w1 = rng.standard_normal((d_in, hidden)) / math.sqrt(d_in)
    w2 = rng.standard_normal((hidden, d_out)) / math.sqrt(hidden)
    x = rng.standard_normal((batch, d_in))
    y = rng.standard_normal((batch, d_out))
    return tuple(jnp.asarray(v, jnp.float32) for v in (w1, w2, x, y))


def _signature(w1: jax.Array, w2: jax.Array, x: jax.Array, preset: Any) -> str:
    shapes = ", ".join(f"f32[{','.join(map(str, v.shape))}]" for v in (w1, w2, x))
    return f"mlp_value_and_grads({shapes}, y, preset={preset_name(preset)!r})"


PRESET_FORMS_HINT = (
    "preset comes as a name or as a jax.lax.DotAlgorithmPreset: jnp.dot's precision= takes both, "
    "jax.default_matmul_precision only a name (getattr(preset, 'name', preset))."
)


def _expect_model_matmuls(
    fn: Callable, w1: jax.Array, w2: jax.Array, x: jax.Array, y: jax.Array, preset: Any
) -> None:
    """The dot_generals each of loss, grad_w1 and grad_w2 depends on multiply at least the pairs of the
    model's matmuls that output needs: x·w1 and h·w2 for the loss; those, g·w2ᵀ and xᵀ·g_h for grad_w1;
    those of the loss and hᵀ·g for grad_w2."""
    (batch, d_in), hidden, d_out = x.shape, w1.shape[1], w2.shape[1]
    first, second = batch * d_in * hidden, batch * hidden * d_out
    needs = [
        (
            "the loss",
            first + second,
            f"x @ w1 and h @ w2: {batch}·{d_in}·{hidden} + {batch}·{hidden}·{d_out}",
        ),
        ("grad_w1", 2 * first + 2 * second, "those two, then the gradient through w2 and into w1"),
        ("grad_w2", first + 2 * second, "the loss's two, then hᵀ times the gradient of the output"),
    ]
    expect_matmul_work(
        lambda w1, w2, x, y: fn(w1, w2, x, y, preset),
        w1, w2, x, y,
        needs=needs,
        what=f"the program of {_signature(w1, w2, x, preset)}",
        hint="compute the model with real matmuls (jnp.dot or @ with precision=preset) and let "
        "jax.value_and_grad write the backward ones: an elementwise multiply-and-sum runs no preset, and a "
        "matmul beside the model whose result is thrown away does no work.",
    )  # fmt: skip


def check_mlp_value_and_grads(fn: Callable) -> None:
    """Every dot_general, forward and backward, names the preset, and the matmuls do the model's work;
    loss and grads match float64."""
    name = "mlp_value_and_grads"
    for seed, sizes in enumerate(MODEL_SIZES):
        w1, w2, x, y = model_case(*sizes, seed=seed)
        # every preset on the first model, one each on the others (tracing takes time)
        for preset in STRUCTURE_PRESETS if seed == 0 else STRUCTURE_PRESETS[seed : seed + 1]:
            where = _signature(w1, w2, x, preset)
            jaxpr = call_learner(
                jax.make_jaxpr(lambda w1, w2, x, y, p=preset: fn(w1, w2, x, y, p)),
                name, w1, w2, x, y, where=f"jax.make_jaxpr of {where}", hint=PRESET_FORMS_HINT,
            )  # fmt: skip
            dots = dot_generals(jaxpr)
            wanted = preset_name(preset)
            wrong = [e for e in dots if str(e.params.get("precision")) != wanted]
            if len(dots) < 5 or wrong:
                got = f"{len(dots)} dot_generals" + (
                    f", {len(wrong)} of them not {wanted}, e.g. {describe_dot(wrong[0])}" if wrong else ""
                )
                _fail(
                    f"the program of {where}",
                    f"at least 5 dot_generals (2 forward, 3 backward), every one with precision={wanted}",
                    got,
                    "pass precision=preset to every matmul of the loss (or wrap the *call* of "
                    "jax.value_and_grad in jax.default_matmul_precision, which takes the preset's name): "
                    "autodiff copies a forward "
                    "matmul's algorithm into its backward matmuls, but a setting is read when the "
                    "function is traced, not where it is defined.",
                )
        if seed == 0:  # the matmuls do the model's work: a matmul beside an elementwise model does not
            _expect_model_matmuls(fn, w1, w2, x, y, VALUE_PRESETS[0])
        # The last model's batch arrives split over 8 devices (Auto axes), as data would in training.
        mesh = make_mesh((8,), ("X",), axis_type=AxisType.Auto)
        place = NamedSharding(mesh, P("X")) if seed == len(MODEL_SIZES) - 1 else None
        for preset in VALUE_PRESETS[seed % 2 :: 1 if seed == 0 else 2]:
            where = _signature(w1, w2, x, preset)
            xs, ys = (x, y) if place is None else (jax.device_put(x, place), jax.device_put(y, place))
            got = call_learner(jax.jit(lambda *a, p=preset: fn(*a, p)), name, w1, w2, xs, ys, where=where)
            try:
                loss, (g_w1, g_w2) = got
            except (TypeError, ValueError):
                _fail(
                    where,
                    "(loss, (grad_w1, grad_w2))",
                    repr(type(got).__name__),
                    "return exactly that nesting.",
                )
            ref_loss, ref_g1, ref_g2 = oracle_mlp(w1, w2, x, y)
            for what, value, ref in [
                ("loss", loss, ref_loss),
                ("grad_w1", g_w1, ref_g1),
                ("grad_w2", g_w2, ref_g2),
            ]:
                value_np = np.asarray(value, np.float64)
                ref_np = np.asarray(ref, np.float64)
                if value_np.shape != ref_np.shape:
                    _fail(f"{where}, {what}", f"shape {ref_np.shape}", f"shape {value_np.shape}",
                          "grads have the shapes of w1 and w2; the loss is a scalar mean.")  # fmt: skip
                scale = max(float(np.abs(ref_np).max()), 1e-6)
                worst = float(np.abs(value_np - ref_np).max())
                if not worst <= 1e-4 * scale:
                    _fail(
                        f"{where}, {what}",
                        f"values within 1e-4 × {scale:.3g} of the float64 reference (first entries "
                        f"{np.ravel(ref_np)[:3].round(5).tolist()})",
                        f"a largest difference of {worst:.3g} (first entries "
                        f"{np.ravel(value_np)[:3].round(5).tolist()})",
                        "the loss is mean((tanh(x @ w1) @ w2 - y) ** 2) over every entry; differentiate "
                        "it with jax.value_and_grad in (w1, w2).",
                    )


# ----------------------------------------------------------------------------------------------
# Exercise 9.4 — three bf16 passes in the backward pass too.
# ----------------------------------------------------------------------------------------------

#: Cases (indices into product_cases) run inside jax.set_mesh on a mesh with Explicit axes, every array
#: placed on it: case -> (mesh shape, axis names, A's spec, B's spec); G is typed like C = A·B.
SHARDED_VJP_CASES: dict[int, tuple[tuple[int, ...], tuple[str, ...], P, P]] = {
    1: ((8,), ("X",), P("X", None), P(None, None)),
    3: ((2, 4), ("X", "Y"), P("X", None), P(None, "Y")),
}
SHARDING_HINT = (
    "a custom_vjp's backward must return each cotangent with its argument's type, sharding included: "
    "dA laid out like A, dB like B. With A's rows split over 'X', Aᵀ·G sums over rows that A and G both "
    "split, and JAX cannot tell where that sum should land: give the backward's matmuls "
    "out_sharding=jax.typeof(b).sharding (and jax.typeof(a).sharding for G·Bᵀ)."
)


def cotangent(m: int, n: int, seed: int) -> jax.Array:
    """The output cotangent G: f32[M, N] with N(0, 1) entries."""
    return jnp.asarray(np.random.default_rng(100 + seed).standard_normal((m, n)).astype(np.float32))


def _backward_dtype_hint(dots: list[Any]) -> str:
    """The hint that fits the backward dot_generals' operand dtypes."""
    kinds = {tuple(str(v.aval.dtype) for v in e.invars) for e in dots}
    if any(set(k) == {"float32", "bfloat16"} for k in kinds):
        return (
            "an f32 operand times a bf16 one is what autodiff through the bf16 pieces gives (the f32 "
            "cotangent times a piece): give the function a jax.custom_vjp whose backward computes G·Bᵀ and "
            "Aᵀ·G as three bf16 passes each."
        )
    return (
        "the backward's products must be built like the forward one: split G, A and B into bf16 high and "
        "low parts and multiply those, with preferred_element_type=jnp.float32."
    )


def _sharded_vjp(fn: Callable, seed: int, a: Any, b: Any, g: Any, where: str) -> tuple[Any, ...]:
    """The jitted VJP of ``fn`` on case ``seed``'s Explicit mesh (SHARDED_VJP_CASES), with its arrays
    placed there; a refused backward or a cotangent of another type fails with SHARDING_HINT."""
    shape, names, a_spec, b_spec = SHARDED_VJP_CASES[seed]
    mesh = make_mesh(shape, names)
    c_spec = P(a_spec[0], b_spec[1])
    a, b, g = (jax.device_put(x, NamedSharding(mesh, s)) for x, s in ((a, a_spec), (b, b_spec), (g, c_spec)))
    expected = f"dA typed {jax.typeof(a)} and dB typed {jax.typeof(b)}"
    # not call_learner: its generic words for a ShardingTypeError would drop the types expected here
    try:
        with jax.set_mesh(mesh):
            got = jax.jit(lambda a, b, g: jax.vjp(fn, a, b)[1](g))(a, b, g)
    except CheckFailed:
        raise
    except Exception as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else ""
        _fail(where, expected, f"{type(e).__name__}: {first[:600]}", SHARDING_HINT)
    # the shape of the answer is checked by the caller; here only the types of two arrays
    types = [jax.typeof(x) for x in got if isinstance(x, jax.Array)] if isinstance(got, tuple) else []
    if len(types) == 2 and types != [jax.typeof(a), jax.typeof(b)]:
        _fail(where, expected, f"{types[0]} and {types[1]}", SHARDING_HINT)
    return got


def check_bf16x3_matmul_vjp(fn: Callable) -> None:
    """9.1's forward; in the VJP's program only bf16 × bf16 → f32 dot_generals, those feeding dA and dB
    each three passes' worth; dA and dB each 50× to MAX_GAIN× more accurate than one bf16 pass of the
    same product, jitted; on Explicit meshes (SHARDED_VJP_CASES) dA and dB typed like A and B."""
    name = "bf16x3_matmul_vjp"
    for seed, (shapes, a, b, scaled) in enumerate(product_cases()):
        m, n = a.shape[0], b.shape[1]
        _check_forward(
            fn,
            name,
            shapes,
            a,
            b,
            SCALED_HINT
            if scaled
            else "the forward is Exercise 9.1's product: high·high + high·low + low·high of bf16 pieces.",
            work=seed < WORK_CASES,
        )
        g = cotangent(m, n, seed)
        where = f"the VJP of {name}({shapes}) for G f32[{m},{n}]"
        jaxpr = call_learner(
            jax.make_jaxpr(lambda a, b, g: jax.vjp(fn, a, b)[1](g)),
            name,
            a,
            b,
            g,
            where=f"jax.make_jaxpr of {where}",
        )
        # the VJP's program holds the forward's dots too: all of them must be bf16 × bf16 → f32
        dots = dot_generals(jaxpr)
        _expect_bf16_dots(dots, f"the program of {where}", _backward_dtype_hint(dots))
        plain_where = where
        if seed in SHARDED_VJP_CASES:
            shape, names, a_spec, b_spec = SHARDED_VJP_CASES[seed]
            where += (
                f", on an Explicit mesh {dict(zip(names, shape, strict=True))} (jax.set_mesh), A split "
                f"{a_spec}, B laid out {b_spec}, G like C"
            )
            got = _sharded_vjp(fn, seed, a, b, g, where)
        else:
            got = call_learner(jax.jit(lambda a, b, g: jax.vjp(fn, a, b)[1](g)), name, a, b, g, where=where)
        if not (isinstance(got, tuple) and len(got) == 2):
            _fail(
                where, "a pair of cotangents (dA, dB)", describe_array(got), "the backward returns (dA, dB)."
            )
        errors = []
        for what, value, x, y in (("dA = G·Bᵀ", got[0], g, b.T), ("dB = Aᵀ·G", got[1], a.T, g)):
            _expect_f32(
                value,
                (x.shape[0], y.shape[1]),
                f"{where}: {what}",
                "the cotangents are f32, shaped like A and B.",
            )
            ref = oracle_matmul(x, y)
            base = relative_error(one_bf16_pass(x, y), ref)
            err = _expect_gain(
                value,
                ref,
                base,
                f"{where}: {what}",
                SCALED_HINT
                if scaled
                else "split the cotangent G into high and low bf16 parts too, and add the three largest "
                "products (high·high, high·low, low·high); rounding G to bf16 once keeps about one pass's "
                "error.",
            )
            errors.append((what, err, base))
        if seed < WORK_CASES:
            k = a.shape[1]
            products = [("dA = G·Bᵀ", m, n, k), ("dB = Aᵀ·G", k, m, n)]
            _expect_three_passes(
                lambda a, b, g: jax.vjp(fn, a, b)[1](g), (a, b, g), products, plain_where, BACKWARD_WORK_HINT
            )
        for what, err, base in errors:
            _expect_no_f32_accuracy(err, base, f"{where}: {what}")
