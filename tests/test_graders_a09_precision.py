"""The graders of assignment 09_precision: oracles agree with JAX, and the cases test what they claim."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from grading.graders import a09_precision as graders
from shardbook.checks import CheckFailed
from shardbook.matmuls import FEEDS, matmul_work
from tests import submissions
from tests.notebooks import ROOT, answers


def test_matmul_oracle_agrees_with_jax_in_f32():
    # The float64 oracle and an f32 matmul differ only by f32 rounding.
    a, b = graders.normal_pair(33, 517, 65, seed=1)
    ref = graders.oracle_matmul(a, b)
    assert graders.relative_error(jnp.dot(a, b, precision="F32_F32_F32"), ref) < 1e-6


def test_one_bf16_pass_is_the_baseline_the_target_divides():
    # One bf16 pass loses about 2^-9 per operand: 1e-3 to 5e-3 on every hidden size, so 50x means < 1e-4.
    for seed, (m, k, n) in enumerate(graders.MATMUL_SIZES):
        a, b = graders.normal_pair(m, k, n, seed)
        base = graders.relative_error(graders.one_bf16_pass(a, b), graders.oracle_matmul(a, b))
        assert 1e-3 < base < 5e-3, (m, k, n, base)


def test_cpu_runs_the_bf16_presets_in_f32():
    # What the chapter shows and why 9.1 reads the program: on CPU a BF16 preset is as exact as f32.
    if jax.default_backend() != "cpu":
        pytest.skip("a CPU property")
    a, b = graders.normal_pair(64, 256, 32, seed=0)
    f32 = jnp.dot(a, b, precision="F32_F32_F32")
    for preset in ("BF16_BF16_F32", "BF16_BF16_F32_X3"):
        np.testing.assert_array_equal(np.asarray(jnp.dot(a, b, precision=preset)), np.asarray(f32))


def test_dot_generals_looks_inside_nested_programs():
    # A dot_general inside jit, scan or either branch of a cond is still a matmul of the answer (a
    # learner hid an f32 a @ b in a cond from the self-check's first walker).
    def f(a, b):
        inner = jax.jit(lambda a, b: a @ b)(a, b)
        total, _ = jax.lax.scan(lambda c, _: (c + a @ b, None), inner, length=2)
        return total + jax.lax.cond(a[0, 0] > 0, lambda: a @ b, lambda: a)

    a = jnp.ones((4, 4), jnp.bfloat16)
    assert len(graders.dot_generals(jax.make_jaxpr(f)(a, a))) == 3


def test_gain_bounds_separate_three_passes_from_f32():
    # On every hidden product, three passes (the reference) gain well inside [MIN_GAIN, MAX_GAIN]: about
    # 500x, under half of MAX_GAIN; an f32 product (a matmul or an elementwise sum) gains over MAX_GAIN.
    right = answers(ROOT / "solutions" / "09_precision" / "09_precision.ipynb").bf16x3_matmul
    for _, a, b, _ in graders.product_cases():
        ref = graders.oracle_matmul(a, b)
        base = graders.relative_error(graders.one_bf16_pass(a, b), ref)
        three = base / graders.relative_error(jax.jit(right)(a, b), ref)
        f32 = base / graders.relative_error(jnp.dot(a, b, precision="F32_F32_F32"), ref)
        assert 4 * graders.MIN_GAIN < three < graders.MAX_GAIN / 2 and f32 > graders.MAX_GAIN, (three, f32)


def test_model_matmul_needs_are_exactly_what_autodiff_multiplies():
    # The pairs 9.3 asks of the matmuls each output depends on are those value_and_grad's five matmuls
    # multiply: the rule is tight for the reference, and an elementwise model with decoys has none.
    right = answers(ROOT / "solutions" / "09_precision" / "09_precision.ipynb").mlp_value_and_grads
    w1, w2, x, y = graders.model_case(*graders.MODEL_SIZES[0], seed=0)
    work = matmul_work(lambda *a: right(*a, "F32_F32_F32"), w1, w2, x, y)
    fed = [sum(w.pairs for w in work if w.moves[k] >= FEEDS) for k in range(3)]
    (batch, d_in), hidden, d_out = x.shape, w1.shape[1], w2.shape[1]
    first, second = batch * d_in * hidden, batch * hidden * d_out
    assert fed == [first + second, 2 * first + 2 * second, first + 2 * second]
    graders._expect_model_matmuls(right, w1, w2, x, y, "F32_F32_F32")
    decoys = _submitted("wrong_preset_elementwise_with_decoys", "mlp_value_and_grads")
    with pytest.raises(CheckFailed, match=r"the dot_generals that the loss depends on .* got 0 "):
        graders._expect_model_matmuls(decoys, w1, w2, x, y, "F32_F32_F32")


def test_cheapest_oracle_on_the_contract_rules():
    # Ties in cost by error, then by name; tol inclusive; NaN and empty give no answer.
    assert graders.oracle_cheapest({"B": 1e-3, "A": 1e-3, "C": 1e-4}, {"B": 2, "A": 2, "C": 2}, 1e-2) == "C"
    assert graders.oracle_cheapest({"Z": 1e-5, "M": 1e-5}, {"Z": 1, "M": 1}, 1e-4) == "M"
    assert graders.oracle_cheapest({"X": 1e-4}, {"X": 3}, 1e-4) == "X"
    assert graders.oracle_cheapest({"X": math.nan}, {"X": 1}, 1.0) is None
    assert graders.oracle_cheapest({}, {}, 1.0) is None
    # Python's order of strings: uppercase first, as the contract says
    assert graders.oracle_cheapest({"b": 1e-5, "a": 1e-5, "C": 1e-5}, {"b": 3, "a": 3, "C": 3}, 1e-4) == "C"


def test_cheapest_cases_cover_ties_and_none():
    # The hidden tables hold ties the first-in-dict answer gets wrong, ties a comparison of lowercase
    # names gets wrong, and tables where nothing qualifies.
    cases = graders.cheapest_cases()
    first_min = [min((n for n in e if e[n] <= t), key=lambda n: c[n], default=None) for e, c, t in cases]
    lower = [
        min((n for n in e if e[n] <= t), key=lambda n: (c[n], e[n], n.lower()), default=None)
        for e, c, t in cases
    ]
    oracle = [graders.oracle_cheapest(e, c, t) for e, c, t in cases]
    assert sum(f != o for f, o in zip(first_min, oracle, strict=True)) >= 3
    assert any(f != o for f, o in zip(lower, oracle, strict=True))
    assert sum(o is None for o in oracle) >= 3


def test_mlp_oracle_agrees_with_jax_autodiff():
    # The hand-written float64 backward pass and jax.value_and_grad agree.
    w1, w2, x, y = graders.model_case(32, 24, 40, 8, seed=3)
    loss_fn = lambda w1, w2: jnp.mean((jnp.tanh(x @ w1) @ w2 - y) ** 2)  # noqa: E731
    loss, (g1, g2) = jax.value_and_grad(loss_fn, argnums=(0, 1))(w1, w2)
    ref_loss, ref_g1, ref_g2 = graders.oracle_mlp(w1, w2, x, y)
    np.testing.assert_allclose(float(loss), ref_loss, rtol=1e-5)
    np.testing.assert_allclose(np.asarray(g1), ref_g1, rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(np.asarray(g2), ref_g2, rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("preset", graders.STRUCTURE_PRESETS)
def test_a_call_time_setting_reaches_all_five_matmuls(preset):
    # The hint's claim: jax.default_matmul_precision around the *call* tags forward and backward matmuls.
    w1, w2, x, y = graders.model_case(8, 4, 16, 3, seed=0)
    name = graders.preset_name(preset)

    def grads(w1, w2):
        with jax.default_matmul_precision(name):
            return jax.grad(lambda w1, w2: jnp.mean((jnp.tanh(x @ w1) @ w2 - y) ** 2), argnums=(0, 1))(w1, w2)

    dots = graders.dot_generals(jax.make_jaxpr(grads)(w1, w2))
    assert len(dots) == 5 and {str(e.params["precision"]) for e in dots} == {name}


def test_the_self_check_names_the_accuracy_bound_and_what_came_back(tmp_path):
    # A bf16x3 missing the accuracy gain hears the bound and its own error, not "expected True, got False".
    from tests.test_graders import built, run_self_check

    wrong = built("09_precision", "wrong_x3_high_high_low_low", tmp_path)
    with pytest.raises(
        CheckFailed, match=r"expected a relative error at most \d\.\d\de-\d\d .*, got \d\.\d\de-\d\d\. Hint: "
    ):
        run_self_check("09_precision", wrong, "bf16x3_matmul")


def _submitted(submission, name):
    """The answer ``name`` of a committed wrong submission, run over the solution's namespace."""
    return submissions.submitted_answer("09_precision", submission, name)


def test_product_cases_are_9_1s_sizes_and_the_scaled_case():
    # 9.1 and 9.4 are graded on the same products: every MATMUL_SIZES entry as drawn, then SCALED_CASE.
    cases = graders.product_cases()
    assert [(a.shape[0], a.shape[1], b.shape[1]) for _, a, b, _ in cases] == [
        *graders.MATMUL_SIZES,
        graders.SCALED_CASE[0],
    ]
    assert [scaled for *_, scaled in cases] == [False] * len(graders.MATMUL_SIZES) + [True]
    # the Explicit-mesh cases: sizes as drawn, A's rows and (on the 2-D mesh) B's columns divide
    for case, (shape, names, a_spec, b_spec) in graders.SHARDED_VJP_CASES.items():
        m, _, n = graders.MATMUL_SIZES[case]
        sizes = dict(zip(names, shape, strict=True))
        assert a_spec == graders.P("X", None) and m % sizes["X"] == 0
        assert b_spec[1] is None or n % sizes[b_spec[1]] == 0
    assert any(spec[1] is not None for *_, spec in graders.SHARDED_VJP_CASES.values())


def test_autodiff_through_three_passes_is_one_pass_accurate_in_the_backward():
    # The premise of 9.4: differentiating 9.1's product gives f32 × bf16 backward dots and dA within 2× of
    # one bf16 pass, while the cotangent split into pieces gives 50× and more.
    through = _submitted("wrong_vjp_autodiff_through_x3", "bf16x3_matmul_vjp")
    a, b = graders.normal_pair(64, 256, 32, seed=0)
    g = graders.cotangent(64, 32, 0)
    ref = graders.oracle_matmul(g, b.T)
    base = graders.relative_error(graders.one_bf16_pass(g, b.T), ref)
    d_a = jax.vjp(through, a, b)[1](g)[0]
    assert base / graders.relative_error(d_a, ref) < 2
    right = answers(ROOT / "solutions" / "09_precision" / "09_precision.ipynb").bf16x3_matmul_vjp
    assert base / graders.relative_error(jax.vjp(right, a, b)[1](g)[0], ref) > graders.MIN_GAIN


@pytest.mark.parametrize(
    ("submission", "message"),
    [
        (
            "wrong_x3_elementwise_with_decoy",
            r"C = A·B depends on .* got 0 \(0 of the program's 1 dot_generals",
        ),
        ("wrong_x3_f32_inside_cond", r"got dot_general\(float32\[16,64\], float32\[64,8\]\)"),
        (
            "wrong_x3_six_passes",
            r"at most 2000× below one bf16 pass .*some of the product was computed in f32",
        ),
    ],
)
def test_x3_cheats_fail_with_their_hint(submission, message):
    # An f32 product behind a decoy matmul, in a cond's branch, or more passes than three: none is graded
    # as three bf16 passes.
    with pytest.raises(CheckFailed, match=message):
        graders.check_bf16x3_matmul(_submitted(submission, "bf16x3_matmul"))


@pytest.mark.parametrize(
    ("submission", "message"),
    [
        ("wrong_vjp_elementwise_backward", r"dA = G·Bᵀ depends on .*the backward's products must be matmuls"),
        ("wrong_vjp_f32_inside_cond", r"float32\[16,8\], float32\[8,64\].*split G, A and B"),
        ("wrong_vjp_autodiff_through_x3", "what autodiff through the bf16 pieces gives"),
        ("wrong_vjp_f32_backward", "split G, A and B into bf16 high and low parts"),
        ("wrong_vjp_cotangent_rounded_once", r"dA = G·Bᵀ: expected a relative error .*split the cotangent G"),
        ("wrong_vjp_ignores_sharding", r"\{'X': 8\}.*got ShardingTypeError.*out_sharding=jax\.typeof"),
        ("wrong_vjp_layouts_of_one_mesh", r"'Y': 4.*dB typed float32\[1024,96@Y\].*got ValueError"),
    ],
)
def test_vjp_mistakes_fail_with_their_hint(submission, message):
    with pytest.raises(CheckFailed, match=message):
        graders.check_bf16x3_matmul_vjp(_submitted(submission, "bf16x3_matmul_vjp"))


def test_backward_dtype_hint_fits_the_operands():
    # f32 × bf16 (autodiff's transpose of a bf16 dot: the f32 cotangent times a piece) names autodiff
    # through the pieces; f32 × f32 asks for pieces of every operand.
    a, b = jnp.ones((4, 8)), jnp.ones((8, 2), jnp.bfloat16)

    def bf16_dot(a):
        return jnp.dot(a.astype(jnp.bfloat16), b, preferred_element_type=jnp.float32)

    mixed = graders.dot_generals(jax.make_jaxpr(lambda a, g: jax.vjp(bf16_dot, a)[1](g))(a, jnp.ones((4, 2))))
    assert any({str(v.aval.dtype) for v in e.invars} == {"float32", "bfloat16"} for e in mixed)
    plain = graders.dot_generals(jax.make_jaxpr(lambda a: a.T @ a)(a))
    assert "autodiff through the bf16 pieces" in graders._backward_dtype_hint(mixed)
    assert "split G, A and B" in graders._backward_dtype_hint(plain)
