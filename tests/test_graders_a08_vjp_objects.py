"""The graders of assignment 08_vjp_objects: oracles agree with JAX, the compile log sees compilations."""

import jax
import jax.numpy as jnp
import numpy as np

from grading.graders import a08_vjp_objects as graders
from tests.notebooks import ROOT, answers


def test_compile_log_counts_a_fresh_jit_and_not_a_cached_one():
    # The pipeline check relies on JAX's compile log: one record per compiled program, none on a hit.
    f = jax.jit(lambda a: jnp.tanh(a) * 3)
    a = jnp.ones((5, 3))
    with graders.CompileLog() as log:
        f(a)
    assert len(log.programs) == 1 and graders.weight_elements(log.programs[0][1], 3) == 15
    b = a + 1  # outside the log: an eager add compiles too
    with graders.CompileLog() as log:
        f(b)
    assert log.programs == []


def test_light_state_bytes_matches_a_real_light_vjp():
    # The peak-bytes oracle (from shapes only) equals the leaves of a VJP object built on real arrays.
    w, x = jnp.ones((16, 16)), jnp.ones((2, 16))
    _, f_vjp = jax.vjp(graders.layer, w, x, saveable_args=(False, True))
    assert graders.light_state_bytes(2, 16) == graders.state_bytes(f_vjp) == 2 * 2 * 16 * 4


def test_grads_ref_agrees_with_one_big_grad():
    # Splitting into microbatches does not change the loss: the oracle equals jax.grad on all rows.
    ws = graders.make_weights(1, 3, 8)
    x = graders.make_input(1, 12, 8)
    whole = jax.grad(lambda ws: jnp.sum(graders.predict(ws, x) ** 2))(ws)
    for a, b in zip(graders.grads_ref(ws, x, 3), whole, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_light_cases_include_w_not_needed_and_w_shaped_residuals():
    # The cases cover a w that jax.vjp would not save anyway, and residuals shaped like w (cos(w)).
    kinds = {}
    for text, f, w, x in graders._light_cases():
        _, f_vjp = jax.vjp(f, w, x)
        kinds[text] = type(f_vjp.args_res[0]).__name__
    assert kinds["sum(w) * x"] == "NotNeeded"
    assert kinds["tanh(x @ w)"] == "ArrayImpl"


def test_pipeline_cases_keep_activations_below_one_weight():
    # The per-program weight rule counts inputs of H·H elements or more: x must stay smaller.
    for h, n, _, _ in graders.PIPELINE_CASES:
        assert n * h < h * h


def test_solution_pipeline_compiles_nothing_when_called_again():
    solution = answers(ROOT / "solutions" / "08_vjp_objects" / "08_vjp_objects.ipynb").pipeline_grads
    ws, x = graders.make_weights(3, 2, 8), graders.make_input(3, 8, 8)
    solution(ws, x, 2)
    with graders.CompileLog() as log:
        solution(ws, x, 2)
    assert log.programs == []
