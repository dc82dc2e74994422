"""The graders of assignment 08_vjp_objects: oracles agree with JAX, the compile log sees compilations."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from grading.graders import a08_vjp_objects as graders
from shardbook.checks import CheckFailed
from tests import submissions
from tests.notebooks import ROOT, answers


def test_compile_log_counts_a_fresh_jit_and_not_a_cached_one():
    # The pipeline check relies on JAX's compile log: one record per compiled program, none on a hit.
    f = jax.jit(lambda a, w: jnp.tanh(a) @ w)
    a, w = jnp.ones((5, 3)), jnp.ones((3, 3))
    with graders.CompileLog() as log:
        f(a, w)
    # of its two inputs only the [3, 3] one is shaped like a weight matrix
    assert len(log.programs) == 1 and graders.weight_inputs(log.programs[0][1], 3) == 1
    b = a + 1  # outside the log: an eager add compiles too
    with graders.CompileLog() as log:
        f(b, w)
    assert log.programs == []


def test_light_state_bytes_matches_a_real_light_vjp():
    # The peak-bytes oracle (from shapes only) equals the leaves of a VJP object built on real arrays.
    w, x = jnp.ones((16, 16)), jnp.ones((2, 16))
    _, f_vjp = jax.vjp(lambda w, x: jnp.tanh(x @ w), w, x, saveable_args=(False, True))
    assert graders.light_state_bytes(2, 16) == graders.state_bytes(f_vjp) == 2 * 2 * 16 * 4


def test_grads_ref_agrees_with_jax_grad_of_the_notebooks_model():
    # The hand-written backpropagation equals jax.grad of the loss built on the notebook's own predict
    # (its imports cell), per microbatch and on all rows at once (splitting does not change the loss).
    predict = _solution("predict")  # defined by the imports cell, which every learner gets
    ws = graders.make_weights(1, 3, 8)
    x = graders.make_input(1, 12, 8)
    whole = jax.grad(lambda ws: jnp.sum(predict(ws, x) ** 2))(ws)
    split = jax.grad(lambda ws: sum(jnp.sum(predict(ws, x_m) ** 2) for x_m in jnp.split(x, 3)))(ws)
    for a, b, c in zip(graders.grads_ref(ws, x, 3), whole, split, strict=True):
        assert a.dtype == np.float32
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(a, c, rtol=1e-5, atol=1e-6)


def test_light_cases_include_w_not_needed_and_w_shaped_residuals():
    # The cases cover a w that jax.vjp would not save anyway, and residuals shaped like w (cos(w)).
    kinds = {}
    for text, f, w, x in graders._light_cases():
        _, f_vjp = jax.vjp(f, w, x)
        kinds[text] = type(f_vjp.args_res[0]).__name__
    assert kinds["sum(w) * x"] == "NotNeeded"
    assert kinds["tanh(x @ w)"] == "ArrayImpl"


def test_pipeline_cases_give_no_activation_the_shape_of_a_weight():
    # The per-program weight rule counts inputs shaped [H, H]: neither x nor a microbatch may be one,
    # and one case has microbatches of more than H rows and x of more than 2H rows.
    for h, n, n_micro, _ in graders.PIPELINE_CASES:
        assert n % n_micro == 0 and n != h and n // n_micro != h
    assert any(n // n_micro > h and n > 2 * h for h, n, n_micro, _ in graders.PIPELINE_CASES)


LARGE = [(8, 64, 2, (2, 6)), (16, 96, 3, (3,))]  # microbatches of 32 rows, H = 8 and 16


def _solution(name):
    return getattr(answers(ROOT / "solutions" / "08_vjp_objects" / "08_vjp_objects.ipynb"), name)


def _submitted(submission, name):
    """The answer ``name`` of a committed wrong submission, run over the solution's namespace."""
    return submissions.submitted_answer("08_vjp_objects", submission, name)


def test_weight_rule_passes_a_correct_answer_whose_activations_outgrow_the_weights():
    # At these sizes the solution's backward takes w, x_m, 1 - y² and ct: counting every input of
    # H·H elements or more would total far above 2·H·H; counting weight-shaped inputs it takes one.
    solution = _solution("pipeline_grads")
    h, n, n_micro, _ = LARGE[0]
    with graders.CompileLog() as log:
        solution(graders.make_weights(5, 2, h), graders.make_input(5, n, h), n_micro)
    sizes = [[int(np.prod(a.shape)) for a in avals] for _, avals in log.programs]
    assert max(sum(k for k in ks if k >= h * h) for ks in sizes) > 2 * h * h  # what the old rule counted
    assert max(graders.weight_inputs(avals, h) for _, avals in log.programs) <= graders.MAX_WEIGHT_INPUTS
    graders.check_pipeline_grads(solution, cases=LARGE)


def test_weight_rule_still_fails_one_program_over_the_whole_model_at_large_sizes():
    # The wrong submission that jits one grad of the whole model takes L weight-shaped inputs.
    whole = _submitted("wrong_pipeline_whole_model", "pipeline_grads")
    with pytest.raises(CheckFailed, match="at most one layer's weights"):
        graders.check_pipeline_grads(whole, cases=LARGE)


def test_peak_check_names_the_weights_when_they_are_kept_at_large_sizes():
    # A schedule right in every way but keeping w in each VJP object: the hint says the weights are
    # the cause, not the number of microbatches in flight.
    kept = _submitted("wrong_one_f_one_b_keeps_weights", "one_f_one_b")
    with pytest.raises(CheckFailed, match="that counts the weights too"):
        graders.check_one_f_one_b(kept)


def test_solution_pipeline_compiles_nothing_when_called_again():
    solution = answers(ROOT / "solutions" / "08_vjp_objects" / "08_vjp_objects.ipynb").pipeline_grads
    ws, x = graders.make_weights(3, 2, 8), graders.make_input(3, 8, 8)
    solution(ws, x, 2)
    with graders.CompileLog() as log:
        solution(ws, x, 2)
    assert log.programs == []


def test_checkpoint_cases_give_no_activation_the_shape_of_a_weight_and_cover_every_extreme():
    # The weight rule applies to 8.4 too; every runs from 1 (a checkpoint per layer) to L (one segment).
    for h, n, n_layers, every in graders.CHECKPOINT_CASES:
        assert n != h and n_layers % every == 0
    assert {1} <= {every for *_, every in graders.CHECKPOINT_CASES}
    assert any(every == n_layers for _, _, n_layers, every in graders.CHECKPOINT_CASES)


def test_checkpoint_peak_is_what_the_solution_measures_and_less_than_keeping_every_state():
    # The peak oracle (from shapes only) equals the solution's measured peak, and for every < L it is
    # below what keeping every layer's light state would hold.
    solution = _solution("checkpointed_grads")
    for h, n, n_layers, every in graders.CHECKPOINT_CASES:
        ws, x = graders.make_weights(2, n_layers, h), graders.make_input(2, n, h)
        grads, peak = solution(ws, x, every)
        assert peak == graders.checkpoint_peak(n, h, n_layers, every)
        if every < n_layers:
            assert peak < n_layers * graders.light_state_bytes(n, h)
        for a, b in zip(grads, graders.grads_ref(ws, x, 1), strict=True):
            np.testing.assert_allclose(a, b, rtol=2e-4, atol=2e-5)


def test_checkpoint_hint_fits_what_came_back():
    # Each way of getting 8.4's peak wrong gets the hint about that way (H=8, 6 rows, L=4, every=2).
    inputs, state = 2 * 6 * 8 * 4, graders.light_state_bytes(6, 8)
    hint = graders._checkpoint_hint
    assert "every layer's VJP object" in hint(inputs + 4 * state, 6, 8, 4, 2)
    assert "every layer's VJP object" in hint(4 * state, 6, 8, 4, 2)
    assert "counts the weights" in hint(inputs + 2 * state + 2 * 8 * 8 * 4, 6, 8, 4, 2)
    assert "count both" in hint(inputs, 6, 8, 4, 2)
    assert "measure after each layer" in hint(7, 6, 8, 4, 2)


def test_checkpointed_submission_keeping_every_state_fails_with_its_hint():
    kept = _submitted("wrong_checkpointed_keeps_every_state", "checkpointed_grads")
    with pytest.raises(CheckFailed, match="every layer's VJP object at once"):
        graders.check_checkpointed_grads(kept)
