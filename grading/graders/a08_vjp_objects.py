"""Graders for assignment 08_vjp_objects (first-class VJP objects and split forward/backward passes).

``check_light_vjp`` differentiates several functions (a tanh layer, a linear map, an elementwise
product, a dict of weights, a function that never needs ``w``) and checks that the saved state holds
no copy of ``w`` and, once ``w`` is put back, gives ``jax.vjp``'s cotangents. ``check_pipeline_grads``
compares with :func:`grads_ref` (backpropagation through the tanh layers written out in float64 NumPy,
not the notebook's model; a test holds it equal to ``jax.grad`` of the notebook's own ``predict``) and
watches every XLA compilation (see :class:`CompileLog`). ``check_one_f_one_b`` and
``check_checkpointed_grads`` compare gradients with it too, and the reported peak of saved bytes with
what the schedule must hold. The first wrong answer raises
:class:`shardbook.checks.CheckFailed` with the call, what was expected, what came back, and a hint.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from grading.graders.common import call_learner
from shardbook.checks import CheckFailed, CompileLog, describe_array, expect_allclose

# ----------------------------------------------------------------------------------------------
# Oracles and helpers.
# ----------------------------------------------------------------------------------------------


def grads_ref(ws: list[jax.Array], x: jax.Array, n_micro: int) -> list[np.ndarray]:
    """The gradients of the assignment's loss, sum over microbatches of sum(predict(ws, x_m) ** 2) with
    ``predict`` the notebook's tanh layers, by backpropagation written out in float64 NumPy (float32
    results): an oracle of its own, not the notebook's model, and nothing compiled.

    Per microbatch, forward h_{i+1} = tanh(h_i @ w_i); backward from 2 h_L, each layer's d = g (1 - h_{i+1}²)
    gives dw_i = h_iᵀ d and the next g = d w_iᵀ.
    """
    weights = [np.asarray(w, np.float64) for w in ws]
    grads = [np.zeros_like(w) for w in weights]
    for x_m in np.split(np.asarray(x, np.float64), n_micro):
        hs = [x_m]
        for w in weights:
            hs.append(np.tanh(hs[-1] @ w))
        g = 2 * hs[-1]
        for i in reversed(range(len(weights))):
            d = g * (1 - hs[i + 1] ** 2)
            grads[i] += hs[i].T @ d
            g = d @ weights[i].T
    return [grad.astype(np.float32) for grad in grads]


def state_bytes(tree: Any) -> int:
    """Bytes held by the array leaves of a pytree (a VJP object's leaves are its saved state)."""
    return sum(int(leaf.nbytes) for leaf in jax.tree.leaves(tree) if hasattr(leaf, "nbytes"))


def light_state_bytes(n_rows: int, h: int) -> int:
    """Bytes of one tanh layer's saved state on one microbatch of n_rows rows, weights kept out: its input
    x_m and tanh's derivative 1 - y², two f32[n_rows, H] (a test holds it to a real light VJP object)."""
    return 2 * n_rows * h * 4


def _normal(seed: int, shape: tuple[int, ...], scale: float = 1.0) -> jax.Array:
    return jnp.asarray(np.random.default_rng(seed).normal(size=shape).astype(np.float32) * scale)


def make_weights(seed: int, n_layers: int, h: int) -> list[jax.Array]:
    return [_normal(seed * 100 + i, (h, h), 1 / np.sqrt(h)) for i in range(n_layers)]


def make_input(seed: int, n: int, h: int) -> jax.Array:
    return _normal(seed + 1000, (n, h))


def weight_inputs(avals: tuple, h: int) -> int:
    """How many of a program's inputs are shaped like one weight matrix, [H, H].

    Only weights have that shape in the cases the grader runs (no microbatch has H rows and x does
    not either), so activations and cotangents, however large, are not counted: a correct answer's
    backward, which receives a VJP object holding x_m and 1 - y² besides w, stays within the rule
    whatever the microbatch size.
    """
    return sum(1 for aval in avals if tuple(getattr(aval, "shape", ())) == (h, h))


# ----------------------------------------------------------------------------------------------
# Exercise 8.1 — light_vjp.
# ----------------------------------------------------------------------------------------------


def _light_cases() -> list[tuple[str, Callable, Any, jax.Array]]:
    return [
        ("tanh(x @ w)", lambda w, x: jnp.tanh(x @ w), _normal(1, (16, 16), 0.25), _normal(2, (4, 16))),
        ("x @ w", lambda w, x: x @ w, _normal(3, (8, 24)), _normal(4, (6, 8))),
        ("sin(w) * x", lambda w, x: jnp.sin(w) * x, _normal(5, (5, 7)), _normal(6, (5, 7))),
        (
            "tanh(x @ w['a']) @ w['b']",
            lambda w, x: jnp.tanh(x @ w["a"]) @ w["b"],
            {"a": _normal(7, (8, 12), 0.3), "b": _normal(8, (12, 4), 0.3)},
            _normal(9, (3, 8)),
        ),
        ("sum(w) * x", lambda w, x: jnp.sum(w) * x, _normal(10, (6, 6)), _normal(11, (4, 6))),
    ]


@jax.jit
def _apply(f_vjp: Any, ct: Any) -> Any:
    return f_vjp(ct)


def _restore(f_vjp: Any, w: Any) -> Any:
    """Puts w back the way the contract says the hidden tests do."""
    return f_vjp.replace(args_res=[w, *f_vjp.args_res[1:]])


def _compiled(log: CompileLog) -> str:
    """'N (first names, …)': how many programs a CompileLog saw, and which."""
    names = ", ".join(name for name, _ in log.programs[:4])
    return f"{len(log.programs)} ({names}{', …' if len(log.programs) > 4 else ''})"


def _pair(got: Any, call: str, names: str, hint: str) -> tuple:
    """``got`` when it is a pair (a tuple of two), else a CheckFailed naming what came back."""
    if not (isinstance(got, tuple) and len(got) == 2):
        raise CheckFailed(f"{call}: expected a pair {names}, got {type(got).__name__}. Hint: {hint}")
    return got


def check_light_vjp(fn: Callable) -> None:
    for text, f, w, x in _light_cases():
        call = f"light_vjp(f, w, x) with f(w, x) = {text}"
        got = call_learner(fn, "light_vjp", f, w, x, where=call)
        y, f_vjp = _pair(got, call, "(y, f_vjp)", "return exactly what jax.vjp returns.")
        y_ref, vjp_ref = jax.vjp(f, w, x)
        expect_allclose(y, y_ref, f"{call}: y", hint="y is f(w, x), the first thing jax.vjp returns.")
        if not (hasattr(f_vjp, "args_res") and hasattr(f_vjp, "replace")):
            raise CheckFailed(
                f"{call}: expected f_vjp to be the VJP object jax.vjp returns (it has args_res and "
                f"replace), got {type(f_vjp).__name__}. Hint: return jax.vjp's second result itself."
            )
        for w_leaf in jax.tree.leaves(w):
            for leaf in jax.tree.leaves(f_vjp):
                same = (
                    getattr(leaf, "shape", None) == w_leaf.shape
                    and getattr(leaf, "dtype", None) == w_leaf.dtype
                    and np.array_equal(np.asarray(leaf), np.asarray(w_leaf))
                )
                if same:
                    raise CheckFailed(
                        f"{call}: expected no copy of w ({describe_array(w_leaf)}) among f_vjp's leaves, "
                        f"got one among {[describe_array(a) for a in jax.tree.leaves(f_vjp)]}. Hint: "
                        "jax.vjp saves arguments verbatim unless saveable_args marks them False."
                    )
        ct = _normal(12, jnp.shape(y_ref))
        expected = vjp_ref(ct)
        restored = call_learner(
            _restore,
            "light_vjp",
            f_vjp,
            w,
            where=f"{call}, then f_vjp.replace(args_res=[w, *f_vjp.args_res[1:]])",
            hint="f_vjp must be jax.vjp's VJP object, whose args_res has one entry per argument (w, x).",
        )
        got_ct = call_learner(
            restored,
            "light_vjp",
            ct,
            where=f"{call}, then f_vjp.replace(args_res=[w, *f_vjp.args_res[1:]])(ct)",
            hint="the hidden tests put w back into args_res[0]; f_vjp must come from jax.vjp(f, w, x, …) "
            "with w first.",
        )
        got_jit = call_learner(
            _apply,
            "light_vjp",
            restored,
            ct,
            where=f"{call}, restored, then applied under jax.jit",
            hint="f_vjp is a pytree of arrays: it should pass through jax.jit unchanged.",
        )
        for label, cts in (("f_vjp(ct)", got_ct), ("jax.jit(f_vjp)(ct)", got_jit)):
            got_tree: Any = jax.tree.structure(cts)  # PyTreeDef's stub declares no comparison
            if got_tree != jax.tree.structure(expected):
                raise CheckFailed(
                    f"{call}: expected {label} to return cotangents for (w, x) like jax.vjp(f, w, x), got "
                    f"the structure {jax.tree.structure(cts)}. Hint: differentiate f with respect to both "
                    "w and x, in that order."
                )
            for a, b in zip(jax.tree.leaves(cts), jax.tree.leaves(expected), strict=True):
                expect_allclose(
                    a,
                    b,
                    f"{call}: {label} after restoring w",
                    rtol=1e-5,
                    atol=1e-5,
                    hint="differentiate f itself at (w, x), with w first; only what is saved changes.",
                )


# ----------------------------------------------------------------------------------------------
# Exercise 8.2 — pipeline_grads.
# ----------------------------------------------------------------------------------------------

# (H, N, n_micro, layer counts): the first shape is called twice, L=2 then L=6, to count compilations.
# The last has microbatches of more than H rows and x of more than 2H rows (sizes where counting every
# large input, activations included, failed a correct answer); no case has H rows in a microbatch or x.
PIPELINE_CASES = [(24, 12, 2, (2, 6)), (40, 16, 4, (3,)), (16, 96, 2, (3,))]
MAX_RECOMPILES = 2
# At most this many inputs shaped like a weight matrix in one compiled program: one layer's w, which a
# backward may receive twice (inside a VJP object and beside it).
MAX_WEIGHT_INPUTS = 2


def _expect_grads(got: Any, ws: list[jax.Array], x: jax.Array, n_micro: int, call: str, hint: str) -> None:
    expected = grads_ref(ws, x, n_micro)
    if not isinstance(got, (list, tuple)) or len(got) != len(ws):
        raise CheckFailed(
            f"{call}: expected a list of {len(ws)} gradients, one per weight matrix, got "
            f"{describe_array(got) if hasattr(got, 'shape') else type(got).__name__}. Hint: {hint}"
        )
    for i, (g, e) in enumerate(zip(got, expected, strict=True)):
        expect_allclose(g, e, f"{call}: gradient of ws[{i}]", rtol=2e-4, atol=2e-5, hint=hint)


def check_pipeline_grads(
    fn: Callable, cases: list[tuple[int, int, int, tuple[int, ...]]] = PIPELINE_CASES
) -> None:
    hint = "run the layers forward keeping each layer's VJP object, then apply them in reverse order."
    for h, n, n_micro, layer_counts in cases:
        x = make_input(h, n, h)
        for n_layers in layer_counts:
            ws = make_weights(h + n_layers, n_layers, h)
            call = f"pipeline_grads(ws (L={n_layers} of f32[{h},{h}]), x f32[{n},{h}], n_micro={n_micro})"
            with CompileLog() as log:
                got = call_learner(fn, "pipeline_grads", ws, x, n_micro, where=call)
            for name, avals in log.programs:
                weights_in = weight_inputs(avals, h)
                if weights_in > MAX_WEIGHT_INPUTS:
                    raise CheckFailed(
                        f"{call}: expected every compiled program to take at most one layer's weights "
                        f"(at most {MAX_WEIGHT_INPUTS} inputs shaped like a weight, f32[{h},{h}]), got "
                        f"{name} taking {weights_in}. Hint: compile one layer's forward and one "
                        "layer's backward, and call them once per layer and microbatch."
                    )
            if n_layers == 6 and len(log.programs) > MAX_RECOMPILES:
                raise CheckFailed(
                    f"{call}: expected at most {MAX_RECOMPILES} compilations on a second call with shapes "
                    f"already seen (more layers only), got {_compiled(log)}. Hint: build "
                    "the jitted forward and backward once, outside the loop over layers; a new jax.jit "
                    "(or a new closure) per layer compiles again."
                )
            _expect_grads(got, ws, x, n_micro, call, hint)
            if n_layers == 6:  # the same call again: everything it needs is compiled already
                with CompileLog() as log:
                    call_learner(fn, "pipeline_grads", ws, x, n_micro, where=f"{call}, called again")
                if log.programs:
                    raise CheckFailed(
                        f"{call}, called again with the same arguments: expected no compilation, got "
                        f"{_compiled(log)}. Hint: build the jitted forward and backward "
                        "once, outside pipeline_grads; a jax.jit or jax.fwd_and_bwd of a function made "
                        "inside it is new on every call, so it is traced and compiled again."
                    )


# ----------------------------------------------------------------------------------------------
# Exercise 8.3 — one_f_one_b.
# ----------------------------------------------------------------------------------------------

SCHEDULE_CASES = [  # (H, N, n_micro, in_flight, L)
    (16, 8, 4, 1, 3),
    (16, 8, 4, 2, 3),
    (8, 12, 3, 3, 2),
]


def check_one_f_one_b(fn: Callable) -> None:
    for h, n, n_micro, in_flight, n_layers in SCHEDULE_CASES:
        ws = make_weights(7 * h + n_layers, n_layers, h)
        x = make_input(3 * h, n, h)
        call = (
            f"one_f_one_b(ws (L={n_layers} of f32[{h},{h}]), x f32[{n},{h}], n_micro={n_micro}, "
            f"in_flight={in_flight})"
        )
        got = call_learner(fn, "one_f_one_b", ws, x, n_micro, in_flight, where=call)
        grads, peak = _pair(
            got,
            call,
            "(grads, peak_bytes)",
            "return the list of gradients and the largest number of saved bytes you held.",
        )
        _expect_grads(
            grads, ws, x, n_micro, call, "each microbatch's backward runs the layers' VJP objects in reverse."
        )
        per_state = light_state_bytes(n // n_micro, h)
        expected = in_flight * n_layers * per_state
        if not isinstance(peak, (int, np.integer)) or int(peak) != expected:
            afab = n_micro * n_layers * per_state
            heavy = in_flight * n_layers * (per_state + h * h * 4)
            why = (
                "that is what running every forward first holds — start a microbatch's backward before "
                "more than in_flight microbatches are in flight"
                if peak == afab
                else "that counts the weights too — keep them out of the saved state with saveable_args"
                if peak == heavy
                else "add up leaf.nbytes over jax.tree.leaves of every VJP object you hold, right after "
                "each forward, and keep the largest total"
            )
            raise CheckFailed(
                f"{call}: expected peak_bytes = {expected} (in_flight={in_flight} microbatches × "
                f"L={n_layers} layers × {per_state} bytes of light saved state each), got {peak!r}. "
                f"Hint: {why}."
            )


# ----------------------------------------------------------------------------------------------
# Exercise 8.4 — checkpointed_grads.
# ----------------------------------------------------------------------------------------------

CHECKPOINT_CASES = [  # (H, N, L, every): no batch has H rows, so only weights are shaped [H, H]
    (16, 4, 6, 3),
    (8, 10, 6, 1),
    (16, 8, 3, 3),
    (8, 12, 6, 2),
]


def checkpoint_peak(n_rows: int, h: int, n_layers: int, every: int) -> int:
    """The bytes checkpointed_grads must hold at its peak: every segment input and one segment's states.

    The peak comes while the last segment's VJP objects are rebuilt: all L / every segment inputs are
    still kept, f32[n_rows, h] each, and the segment's ``every`` light states are held.
    """
    return (n_layers // every) * n_rows * h * 4 + every * light_state_bytes(n_rows, h)


def _checkpoint_hint(peak: Any, n_rows: int, h: int, n_layers: int, every: int) -> str:
    """The hint that fits the peak a learner's checkpointed_grads reported."""
    inputs = (n_layers // every) * n_rows * h * 4
    state = light_state_bytes(n_rows, h)
    expected = inputs + every * state
    if peak in (n_layers * state, inputs + n_layers * state):
        return (
            "that is every layer's VJP object at once: in the first pass keep only each segment's input, "
            "and build a segment's VJP objects again just before its backward"
        )
    if peak == expected + every * h * h * 4:
        return "that counts the weights too — keep them out of the saved state with saveable_args"
    if peak in (inputs, every * state):
        return "count both the segment inputs you keep and the VJP objects you hold"
    return (
        "measure after each layer's forward, in both passes: the peak comes while the last segment's "
        "states are rebuilt and every segment input is still kept"
    )


def check_checkpointed_grads(fn: Callable) -> None:
    for h, n, n_layers, every in CHECKPOINT_CASES:
        ws = make_weights(11 * h + n_layers, n_layers, h)
        x = make_input(5 * h + every, n, h)
        call = f"checkpointed_grads(ws (L={n_layers} of f32[{h},{h}]), x f32[{n},{h}], every={every})"
        with CompileLog() as log:
            got = call_learner(fn, "checkpointed_grads", ws, x, every, where=call)
        grads, peak = _pair(
            got,
            call,
            "(grads, peak_bytes)",
            "return the list of gradients and the largest number of bytes you held.",
        )
        _expect_grads(
            grads,
            ws,
            x,
            1,
            call,
            "rebuild each segment's VJP objects from its input, then run them in reverse, passing the "
            "cotangent on to the segment before.",
        )
        for name, avals in log.programs:
            weights_in = weight_inputs(avals, h)
            if weights_in > MAX_WEIGHT_INPUTS:
                raise CheckFailed(
                    f"{call}: expected every compiled program to take at most one layer's weights "
                    f"(at most {MAX_WEIGHT_INPUTS} inputs shaped like a weight, f32[{h},{h}]), got "
                    f"{name} taking {weights_in}. Hint: run the layers one by one with a jitted "
                    "forward and backward of one layer."
                )
        expected = checkpoint_peak(n, h, n_layers, every)
        if not isinstance(peak, (int, np.integer)) or int(peak) != expected:
            raise CheckFailed(
                f"{call}: expected peak_bytes = {expected} ({n_layers // every} segment inputs × "
                f"{n * h * 4} bytes + {every} layers × {light_state_bytes(n, h)} bytes of light saved "
                f"state), got {peak!r}. Hint: {_checkpoint_hint(peak, n, h, n_layers, every)}."
            )
