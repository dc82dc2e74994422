"""Graders of assignment 11_training: oracles agree with JAX and Optax, the structural targets are real."""

import functools

import jax
import numpy as np
import optax
import pytest
from jax.ad_checkpoint import checkpoint_name
from jax.sharding import AxisType, NamedSharding
from jax.sharding import PartitionSpec as P

from grading.graders import a11_pipeline as pipeline
from grading.graders import a11_training as graders
from shardbook.checks import CheckFailed
from shardbook.comms import Footprint, analyze, footprint
from tests import submissions
from tests.notebooks import ROOT, answer_sources, answers

NOTEBOOK = ROOT / "solutions" / "11_training" / "11_training.ipynb"


@functools.cache
def solution():
    return answers(NOTEBOOK)


def test_grader_model_is_the_notebooks_model():
    # The grader's copy of the imports cell computes what the notebook's does: same parameters, loss,
    # optimizer update and stage.
    ours = solution()
    params = ours.init_params(3, [6, 10, 4])
    theirs = graders.init_params(3, [6, 10, 4])
    jax.tree.map(np.testing.assert_array_equal, params, theirs)
    rng = np.random.default_rng(0)
    batch = (rng.normal(size=(8, 6)).astype(np.float32), rng.normal(size=(8, 4)).astype(np.float32))
    assert float(ours.loss_fn(params, batch)) == float(graders.loss_fn(params, batch))
    h = batch[0] @ params["layers"][0]["w"]
    for last in (False, True):
        p0 = params["layers"][0]
        np.testing.assert_array_equal(ours.layer_fn(p0, batch[0], last), graders.layer_fn(p0, batch[0], last))
    np.testing.assert_array_equal(
        graders.layer_fn({"w": params["layers"][0]["w"], "b": 0.0}, batch[0], True), h
    )

    def doubled(p, h, last):  # a layer given to loss_fn is the one it runs
        return 2 * graders.layer_fn(p, h, last)

    assert float(ours.loss_fn(params, batch, doubled)) == float(graders.loss_fn(params, batch, doubled))
    assert float(graders.loss_fn(params, batch, doubled)) != float(graders.loss_fn(params, batch))
    grads = jax.grad(ours.loss_fn)(params, batch)
    mine = ours.optimizer.update(grads, ours.optimizer.init(params), params)[0]
    copy = graders.make_optimizer().update(grads, graders.make_optimizer().init(params), params)[0]
    jax.tree.map(np.testing.assert_array_equal, mine, copy)
    p = {"w": rng.normal(size=(4, 4)).astype(np.float32), "b": np.ones(4, np.float32)}
    np.testing.assert_array_equal(ours.stage_fn(p, batch[1]), graders.stage_fn(p, batch[1]))


def test_adamw_oracle_agrees_with_optax():
    # The float64 hand-written backpropagation + AdamW equals jax.value_and_grad + optax.adamw on one device.
    params = jax.tree.map(np.asarray, graders.init_params(1, [5, 12, 7, 3]))
    rng = np.random.default_rng(1)
    batch = (rng.normal(size=(16, 5)).astype(np.float32), rng.normal(size=(16, 3)).astype(np.float32))
    losses, after = graders.oracle_steps(params, batch, 3)
    optimizer = graders.make_optimizer()
    state = optimizer.init(params)
    p = params
    for i in range(3):
        loss, grads = jax.value_and_grad(graders.loss_fn)(p, batch)
        np.testing.assert_allclose(losses[i], float(loss), rtol=1e-5)
        updates, state = optimizer.update(grads, state, p)
        p = optax.apply_updates(p, updates)
    jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6), after, p)


def test_pipeline_oracle_agrees_with_jax():
    rng = np.random.default_rng(2)
    w, b = rng.normal(size=(3, 4, 4)).astype(np.float32), rng.normal(size=(3, 4)).astype(np.float32)
    x = rng.normal(size=(6, 4)).astype(np.float32)
    h = x
    for s in range(3):
        h = graders.stage_fn({"w": w[s], "b": b[s]}, h)
    np.testing.assert_allclose(pipeline.oracle_pipeline(w, b, x), np.asarray(h), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(
    ("shape", "n", "spec"),
    [
        ((16, 32), 8, P("data", None)),  # the leading dimension divides
        ((12, 24), 8, P(None, "data")),  # it does not: the largest that does
        ((3, 3, 16, 8), 8, P(None, None, "data", None)),  # two divide: the larger
        ((3, 8, 8), 8, P(None, "data", None)),  # a tie: the first
        ((6, 5), 8, P()),  # none divides
        ((), 8, P()),  # a scalar (Adam's step count)
        ((6, 5), 2, P("data", None)),
    ],
)
def test_fsdp_rule_oracle(shape, n, spec):
    assert graders.oracle_fsdp_spec(shape, n) == spec


def test_cases_cover_what_the_contracts_promise():
    # Shapes that divide over no axis, 'data' of 8, 4 and 2, a second axis before and after 'data',
    # shuffled and reversed device orders, Explicit and Auto axes where the contract allows both.
    shapes = [tuple(s.shape) for _, tree in graders.fsdp_trees() for s in jax.tree.leaves(tree)]
    assert any(graders.oracle_fsdp_spec(s, 8) == P() and len(s) > 0 for s in shapes)
    assert any(len(s) > 0 and s[0] % 4 and graders.oracle_fsdp_spec(s, 4) != P() for s in shapes)
    meshes = [graders.make_mesh(s, n, axis_type=t, shuffle=sh) for s, n, t, sh in graders.FSDP_MESHES]
    assert {m.shape["data"] for m in meshes} == {8, 4, 2}
    assert {m.axis_names for m in meshes} >= {("data", "model"), ("model", "data")}
    assert {m.axis_types[0] for m in meshes} == {AxisType.Explicit, AxisType.Auto}
    step_meshes = [graders.step_case(k)[0] for k in range(len(graders.STEP_CASES))]
    assert {m.shape["data"] for m in step_meshes} == {8, 4} and any(
        len(m.axis_names) == 2 for m in step_meshes
    )
    assert any(tuple(d.id for d in m.devices.flat) != tuple(range(m.size)) for m in step_meshes)
    assert any(  # a width that divides over no mesh: a replicated parameter whose gradient is all-reduced
        graders.oracle_fsdp_spec(s.shape, m.shape["data"]) == P()
        for k, m in enumerate(step_meshes)
        for s in jax.tree.leaves(graders.step_case(k)[1])
    )
    pipeline_meshes = [pipeline.pipeline_case(k)[0] for k in range(len(pipeline.PIPELINE_CASES))]
    assert {m.size for m in pipeline_meshes} == {8, 4, 2}
    assert {m.axis_types[0] for m in pipeline_meshes} == {AxisType.Explicit, AxisType.Auto}
    assert sum(tuple(d.id for d in m.devices.flat) != tuple(range(m.size)) for m in pipeline_meshes) >= 2
    assert {c[1] for c in pipeline.PIPELINE_CASES} >= {1, 3, 4, 6}


def _fsdp_case(k: int = 0):
    mesh, params_host, batch_host, _ = graders.step_case(k)
    with jax.set_mesh(mesh):
        params = jax.device_put(params_host, graders.fsdp_layout(params_host, mesh))
        state = jax.jit(graders.make_optimizer().init)(params)
        batch = jax.device_put(batch_host, NamedSharding(mesh, P("data", None)))
    return mesh, params_host, params, state, batch


def _analyze_step(fn, k: int = 0):
    mesh, params_host, params, state, batch = _fsdp_case(k)
    with jax.set_mesh(mesh):
        return analyze(jax.jit(fn, static_argnums=3), params, state, batch, mesh), params_host, mesh


def test_cpu_reduce_scatter_is_reported_and_the_fsdp_step_sends_the_ideal_bytes():
    # XLA:CPU emits the gradients' reduce-scatters as all-reduce + dynamic-slice; the analyzer reports
    # them as reduce-scatters (one per sharded parameter), and the solution sends exactly the ideal bytes.
    report, params_host, mesh = _analyze_step(solution().fsdp_train_step)
    n = mesh.shape["data"]
    sharded = [a for a in jax.tree.leaves(params_host) if graders.oracle_fsdp_spec(a.shape, n) != P()]
    scatters = [c for c in report.collectives if c.kind == "reduce-scatter"]
    assert len(scatters) == len(sharded) and all(
        c.emitted_as == "all-reduce + dynamic-slice" for c in scatters
    )
    # FSDP as it is run: each sharded parameter gathered in the forward pass and again in the backward
    # pass, but the first layer's weight (no gradient is taken with respect to the input x)
    assert report.count("all-gather") == 2 * len(sharded) - 1
    first = params_host["layers"][0]["w"].size * 4 * (n - 1) // n
    assert report.total_bytes == graders.ideal_fsdp_bytes(params_host, mesh)[0] - first
    assert any("reduce-scatter" in note for note in report.notes)


def _oracle_ideal_bytes(params_host, n: int, gathers: int) -> int:
    """The ideal written out leaf by leaf: per sharded leaf `gathers` all-gathers and a reduce-scatter,
    (n-1)/n of it each; per replicated leaf, and for the loss, an all-reduce, 2(n-1)/n."""
    total = 2 * 4 * (n - 1) / n  # the loss
    for leaf in jax.tree.leaves(params_host):
        size = leaf.size * 4
        total += (
            (gathers + 1) * size * (n - 1) / n
            if graders.oracle_fsdp_spec(leaf.shape, n) != P()
            else (2 * size * (n - 1) / n)
        )
    return int(total)


@pytest.mark.parametrize("k", range(len(graders.STEP_CASES)))
def test_ideal_bytes_are_fsdp_as_it_is_run(k):
    # Two all-gathers and a reduce-scatter per sharded parameter (1.5× the two of a step that saves the
    # gathered weights), an all-reduce per replicated one and the loss.
    mesh, params_host, _, _ = graders.step_case(k)
    n = mesh.shape["data"]
    ideal, reducible = graders.ideal_fsdp_bytes(params_host, mesh)
    assert abs(ideal - _oracle_ideal_bytes(params_host, n, 2)) <= 1
    replicated = [a for a in jax.tree.leaves(params_host) if graders.oracle_fsdp_spec(a.shape, n) == P()]
    assert reducible == 4 * (1 + sum(a.size for a in replicated))


def _data_parallel_step(optimizer):
    def step(params, opt_state, batch, mesh):  # everything whole on every device, layouts restored at the end
        specs = jax.tree.map(lambda a: jax.typeof(a).sharding.spec, (params, opt_state))
        whole_params, whole_state = jax.tree.map(lambda a: jax.reshard(a, P()), (params, opt_state))
        loss, grads = jax.value_and_grad(graders.loss_fn)(whole_params, batch)
        updates, whole_state = optimizer.update(grads, whole_state, whole_params)
        new = jax.tree.map(jax.reshard, (optax.apply_updates(whole_params, updates), whole_state), specs)
        return *new, loss

    return step


def test_an_all_reduced_gradient_used_whole_stays_an_all_reduce():
    # The CPU correction does not hide a real all-reduce: a gradient all-reduced and then used whole
    # (a data-parallel update) is reported as all-reduce, and the grader names it.
    report, params_host, mesh = _analyze_step(_data_parallel_step(graders.make_optimizer()))
    widest = max(jax.tree.leaves(params_host), key=lambda a: a.size)
    # (XLA may hold the gradient transposed: compare sizes)
    assert any(
        c.kind == "all-reduce" and np.prod(c.result_shapes[0]) == widest.size for c in report.collectives
    )
    with pytest.raises(CheckFailed, match="a sharded parameter's gradient was all-reduced"):
        graders._check_fsdp_program(report, params_host, mesh, "the step")


def test_gradient_all_reduced_then_sliced_is_a_reduce_scatter():
    # A gradient taken with respect to gathered parameters is all-reduced; used by a sharded optimizer
    # state it is sliced at once, the pair XLA:GPU fuses into a reduce-scatter. Same program: it passes.
    optimizer = graders.make_optimizer()

    def step(params, opt_state, batch, mesh):
        whole = jax.tree.map(lambda w: jax.reshard(w, P()), params)
        loss, grads = jax.value_and_grad(graders.loss_fn)(whole, batch)
        updates, opt_state = optimizer.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, loss

    report, params_host, mesh = _analyze_step(step)
    graders._check_fsdp_program(report, params_host, mesh, "the step")
    # it gathers once: the ideal of FSDP as it is run less one gather of each sharded parameter
    assert report.total_bytes == pytest.approx(_oracle_ideal_bytes(params_host, mesh.shape["data"], 1), abs=1)


def _solution_variant(old: str, new: str, name: str = "pipeline_forward"):
    """The solution's answer ``name`` with one piece of text replaced."""
    source = answer_sources(NOTEBOOK)[name]
    assert old in source
    namespace = dict(vars(solution()))
    exec(compile(source.replace(old, new), "variant", "exec"), namespace)
    return namespace[name]


def _submitted(submission: str, name: str):
    """The answer ``name`` of a committed wrong submission, run over the solution's namespace."""
    return submissions.submitted_answer("11_training", submission, name, vars(solution()))


def _pipeline_steps(fn, k: int) -> float:
    mesh, w, b, x, n_micro = pipeline.pipeline_case(k)
    with jax.set_mesh(mesh):
        stage_params = jax.device_put({"w": w, "b": b}, NamedSharding(mesh, P("stage")))
        x_placed = jax.device_put(x, NamedSharding(mesh, P()))
        report = analyze(jax.jit(fn, static_argnums=(2, 3)), stage_params, x_placed, mesh, n_micro)
    return pipeline.pipeline_steps(report, x.shape[0], x.shape[1], n_micro)


@pytest.mark.parametrize("k", range(len(pipeline.PIPELINE_CASES)))
def test_step_count_reads_the_schedule_whatever_the_loop(k):
    # FLOPs per device / FLOPs of one stage on one microbatch = the schedule's steps, for fori_loop (a
    # while loop with a known trip count) and for the same schedule as a Python loop (unrolled).
    stages, n_micro = pipeline.PIPELINE_CASES[k][:2]
    assert _pipeline_steps(solution().pipeline_forward, k) == n_micro + stages - 1
    unrolled = _solution_variant(
        "_, outputs = jax.lax.fori_loop(0, steps, step, start)",
        "carry = start\n        for t in range(steps):\n            carry = step(t, carry)\n"
        "        _, outputs = carry",
    )
    assert _pipeline_steps(unrolled, k) == n_micro + stages - 1


def test_one_step_too_many_fails_even_though_values_are_right():
    extra = _solution_variant("steps = n_micro + n_stages - 1", "steps = n_micro + n_stages")
    with pytest.raises(CheckFailed, match=r"expected n_micro \+ S - 1 = 4 \+ 8 - 1 = 11 steps, got 12"):
        graders.check_pipeline_forward(extra)


def test_one_psum_per_microbatch_fails_even_though_bytes_are_the_same():
    # The target is one all-reduce: n_micro psums of one microbatch each send the bytes of one psum of
    # the output, and are counted (and the analyzer reads them apart, though XLA:CPU combines them).
    per_micro = _solution_variant(
        'outputs = jax.lax.psum(jnp.where(stage == n_stages - 1, outputs, 0.0), "stage")',
        "outputs = jnp.stack([jax.lax.psum(jnp.where(stage == n_stages - 1, o, 0.0), 'stage') "
        "for o in outputs])",
    )
    with pytest.raises(
        CheckFailed, match=r"expected one all-reduce \(the output, once\), got 4: all-reduce f32\[4,8\]"
    ):
        graders.check_pipeline_forward(per_micro)


def test_circular_oracle_runs_layer_v_times_s_plus_s_in_order():
    # Layer ℓ = v · S + s is (w[v, s], b[v, s]): repeat 0's S stages, then repeat 1's, ...
    rng = np.random.default_rng(4)
    w, b = rng.normal(size=(2, 3, 4, 4)).astype(np.float32), rng.normal(size=(2, 3, 4)).astype(np.float32)
    x = rng.normal(size=(6, 4)).astype(np.float32)
    h = x
    for v in range(2):
        for s in range(3):
            h = graders.stage_fn({"w": w[v, s], "b": b[v, s]}, h)
    np.testing.assert_allclose(pipeline.oracle_circular(w, b, x), np.asarray(h), rtol=1e-5, atol=1e-6)


def test_circular_cases_cover_what_the_contract_promises():
    # n_micro = S divides the batch; 8, 4 and 2 stages; V = 1 (GPipe with n_micro = S) to 3; shuffled and
    # reversed device orders; Explicit and Auto axes.
    meshes = [pipeline.circular_case(k)[0] for k in range(len(pipeline.CIRCULAR_CASES))]
    assert {m.size for m in meshes} == {8, 4, 2}
    assert {m.axis_types[0] for m in meshes} == {AxisType.Explicit, AxisType.Auto}
    assert sum(tuple(d.id for d in m.devices.flat) != tuple(range(m.size)) for m in meshes) >= 2
    assert {c[1] for c in pipeline.CIRCULAR_CASES} == {1, 2, 3}
    assert all(rows % stages == 0 for stages, _, rows, *_ in pipeline.CIRCULAR_CASES)


def _circular_steps(fn, k: int) -> float:
    mesh, w, b, x = pipeline.circular_case(k)
    with jax.set_mesh(mesh):
        stage_params = jax.device_put({"w": w, "b": b}, NamedSharding(mesh, P(None, "stage")))
        x_placed = jax.device_put(x, NamedSharding(mesh, P()))
        report = analyze(jax.jit(fn, static_argnums=2), stage_params, x_placed, mesh)
    return pipeline.pipeline_steps(report, x.shape[0], x.shape[1], mesh.size)


@pytest.mark.parametrize("k", [0, 1])
def test_circular_steps_are_v_n_micro_plus_s_minus_1_and_gpipe_per_repeat_takes_more(k):
    # The solution's schedule takes V · S + S - 1 steps; 11.3's pipeline once per repeat V · (2S - 1).
    stages, repeats = pipeline.CIRCULAR_CASES[k][:2]
    assert _circular_steps(solution().circular_forward, k) == repeats * stages + stages - 1
    per_repeat = _submitted("wrong_circular_gpipe_per_repeat", "circular_forward")
    assert _circular_steps(per_repeat, k) == repeats * (2 * stages - 1)


def test_circular_gpipe_per_repeat_fails_on_steps_with_its_hint():
    per_repeat = _submitted("wrong_circular_gpipe_per_repeat", "circular_forward")
    with pytest.raises(
        CheckFailed,
        match=r"expected V · n_micro \+ S - 1 = 2 · 8 \+ 8 - 1 = 23 steps, got 30.*"
        r"one GPipe pass per repeat",
    ):
        graders.check_circular_forward(per_repeat)


def test_steps_hint_fits_what_came_back():
    # 11.3's hints are unchanged; 11.4 names GPipe per repeat only when the steps are V · (n_micro + S - 1).
    assert "n_micro · S steps" in pipeline._steps_hint(32, 8, 4, None)
    assert "range(n_micro + n_stages - 1)" in pipeline._steps_hint(12, 8, 4, None)
    assert "one GPipe pass per repeat" in pipeline._steps_hint(30, 8, 8, 2)
    assert "range(V * n_micro + n_stages - 1)" in pipeline._steps_hint(24, 8, 8, 2)
    assert "range(V * n_micro + n_stages - 1)" in pipeline._steps_hint(8, 4, 4, 1)  # V = 1: none per repeat


def test_circular_psum_per_microbatch_fails_on_the_all_reduce_count():
    # Right values and V · S + S - 1 steps, but one psum per microbatch (S of them) instead of one, once.
    per_step = _solution_variant(
        'outputs = jax.lax.psum(jnp.where(stage == n_stages - 1, outputs, 0.0), "stage")',
        "outputs = jnp.stack([jax.lax.psum(jnp.where(stage == n_stages - 1, o, 0.0), 'stage') "
        "for o in outputs])",
        name="circular_forward",
    )
    with pytest.raises(
        CheckFailed, match=r"expected one all-reduce \(the output, once\), got 8.*permute S - 1 -> 0"
    ):
        graders.check_circular_forward(per_step)


# ----------------------------------------------------------------------------------------------
# The memory budget of fsdp_train_step
# ----------------------------------------------------------------------------------------------


def _finish(loss, grads, params, opt_state):
    optimizer = graders.make_optimizer()
    updates, opt_state = optimizer.update(grads, opt_state, params)
    return optax.apply_updates(params, updates), opt_state, loss


def _save_every_gathered_layer(params, opt_state, batch, mesh):
    # autodiff through the gathers: each layer's gathered weights saved for the backward pass
    def loss_of_shards(shards):
        return graders.loss_fn(jax.tree.map(lambda w: jax.reshard(w, P()), shards), batch)

    return _finish(*jax.value_and_grad(loss_of_shards)(params), params, opt_state)


def _regathering(policy, named=False):
    def step(params, opt_state, batch, mesh):
        def gather(w):
            whole = jax.reshard(w, P())
            return checkpoint_name(whole, "gathered") if named else whole

        def layer(shards, h, last):
            return graders.layer_fn(jax.tree.map(gather, shards), h, last)

        layer = jax.checkpoint(layer, policy=policy, static_argnums=2)
        return _finish(*jax.value_and_grad(graders.loss_fn)(params, batch, layer), params, opt_state)

    return step


def _custom_vjp_regathering(params, opt_state, batch, mesh):
    # a layer whose backward pass gathers the shards again, with no optimization barrier: XLA merges that
    # gather with the forward's identical one, which then stays alive until the backward pass
    def run(shards, h, last):
        return graders.layer_fn(jax.tree.map(lambda w: jax.reshard(w, P()), shards), h, last)

    layer = jax.custom_vjp(run, nondiff_argnums=(2,))
    layer.defvjp(
        lambda shards, h, last: (run(shards, h, last), (shards, h)),
        lambda last, saved, g: jax.vjp(lambda s, x: run(s, x, last), *saved)[1](g),
    )
    return _finish(*jax.value_and_grad(graders.loss_fn)(params, batch, layer), params, opt_state)


def _memory(fn, k):
    mesh, given, widths, rows = graders.memory_case(k)
    with jax.set_mesh(mesh):
        memory = footprint(jax.jit(fn, static_argnums=3, donate_argnums=(0, 1)), *given, mesh)
    return memory, given, widths, rows, mesh.shape["data"]


@pytest.mark.parametrize("k", range(len(graders.MEMORY_CASES)))
def test_memory_budget_holds_one_layer_at_a_time_and_not_every_layer(k):
    # The reference (dots_saveable) and nothing_saveable re-gather each layer in the backward pass and fit;
    # saving every gathered layer does not, nor does a policy that saves all but a name (the gather's
    # own, unnamed result is saved: the same weights), nor a custom_vjp that gathers again without an
    # optimization barrier (XLA merges the two gathers). The failure names the memory it costs.
    cp = jax.checkpoint_policies
    for fn in (solution().fsdp_train_step, _regathering(cp.nothing_saveable)):
        memory, given, widths, rows, n = _memory(fn, k)
        graders.check_fsdp_memory(memory, given, widths, rows, n, "the step")
        assert memory.arguments == graders.device_bytes(given)  # what the device is given, as XLA counts it
    for fn in (
        _save_every_gathered_layer,
        _regathering(cp.save_anything_except_these_names("gathered"), True),
        _custom_vjp_regathering,
    ):
        memory, given, widths, rows, n = _memory(fn, k)
        budget = graders.fsdp_memory_budget(given, widths, rows, n)[0]
        assert memory.peak > 1.2 * budget
        with pytest.raises(
            CheckFailed, match=r"keeps every layer's gathered weights \(.* in all\) for the backward"
        ):
            graders.check_fsdp_memory(memory, given, widths, rows, n, "the step")


def test_memory_cases_have_six_equal_hidden_layers_on_two_meshes():
    meshes = [graders.memory_case(k)[0] for k in range(len(graders.MEMORY_CASES))]
    assert {m.shape["data"] for m in meshes} == {8, 4} and any(len(m.axis_names) == 2 for m in meshes)
    assert any(tuple(d.id for d in m.devices.flat) != tuple(range(m.size)) for m in meshes)
    for _, _, _, widths, _ in graders.MEMORY_CASES:
        assert len(set(widths[1:-1])) == 1 and len(widths) == 8


@pytest.mark.parametrize("k", range(len(graders.MEMORY_CASES)))
def test_memory_budget_oracle(k):
    # Written out: each leaf's elements divided by n where the contract shards it, the batch's rows
    # divided by n; then 4 gathered layers (w and b) of the widest and twice the activations.
    mesh, given, widths, rows = graders.memory_case(k)
    n = mesh.shape["data"]
    params = graders.init_params(0, widths)
    leaves = jax.tree.leaves((params, graders.make_optimizer().init(params)))
    held = sum(a.size * 4 // (n if graders.oracle_fsdp_spec(a.shape, n) != P() else 1) for a in leaves)
    held += rows // n * (widths[0] + widths[-1]) * 4
    assert graders.device_bytes(given) == held
    layer = max(widths[i] * widths[i + 1] + widths[i + 1] for i in range(len(widths) - 1)) * 4
    budget, text = graders.fsdp_memory_budget(given, widths, rows, n)
    assert budget == held + 4 * layer + 2 * (rows // n) * sum(widths) * 4
    assert f"its 1/{n} of the parameters" in text and "4 × the largest layer's gathered weights" in text


def test_memory_check_at_the_budget_and_what_the_message_says():
    mesh, given, widths, rows = graders.memory_case(1)
    n = mesh.shape["data"]
    budget, _ = graders.fsdp_memory_budget(given, widths, rows, n)
    held = graders.device_bytes(given)
    every = sum((widths[i] + 1) * widths[i + 1] for i in range(len(widths) - 1)) * 4

    def at(peak):
        return Footprint(arguments=held, outputs=held, aliased=held, temporaries=peak - held)

    graders.check_fsdp_memory(at(budget), given, widths, rows, n, "the step")  # the budget itself passes
    with pytest.raises(CheckFailed) as over:
        graders.check_fsdp_memory(at(budget + 1), given, widths, rows, n, "the step")
    assert "the step: expected a peak of at most 1.163 MiB per device (what it is given, 574.7 KiB" in str(
        over.value
    )
    assert "holds more gathered weights or activations at once than one layer at a time needs" in str(
        over.value
    )
    assert "pass loss_fn a layer that gathers its shards" in str(over.value)
    with pytest.raises(CheckFailed, match=r"keeps every layer's gathered weights \(765 KiB in all\)"):
        graders.check_fsdp_memory(at(held + every), given, widths, rows, n, "the step")
    with pytest.raises(CheckFailed, match="holds more gathered weights"):
        graders.check_fsdp_memory(at(held + every - 1), given, widths, rows, n, "the step")
