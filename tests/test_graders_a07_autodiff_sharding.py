"""The graders of assignment 07_autodiff_sharding: oracles agree with JAX, structural targets match."""

import jax
import numpy as np
from jax.sharding import PartitionSpec as P

from grading.graders import a07_autodiff_sharding as graders
from shardbook import analyze
from tests.notebooks import ROOT, answers

SOLUTION = answers(ROOT / "solutions" / "07_autodiff_sharding" / "07_autodiff_sharding.ipynb")


def numpy_grad(ws: np.ndarray, x: np.ndarray) -> np.ndarray:
    """Backpropagation of sum(predict(ws, x) ** 2) by hand, in float64."""
    ws, h = ws.astype(np.float64), x.astype(np.float64)
    inputs = []
    for w in ws:
        inputs.append(h)
        h = np.tanh(h @ w)
    grads = np.zeros_like(ws)
    g = 2 * h
    for layer in reversed(range(len(ws))):
        g = g * (1 - h**2)
        grads[layer] = inputs[layer].T @ g
        g, h = g @ ws[layer].T, inputs[layer]
    return grads


def test_oracle_agrees_with_numpy_backprop():
    # The jax.grad oracle on one device equals hand-written float64 backpropagation.
    rng = np.random.default_rng(0)
    ws = (rng.normal(size=(3, 8, 8)) / 3).astype(np.float32)
    xs = rng.normal(size=(2, 16, 8)).astype(np.float32)
    np.testing.assert_allclose(graders.oracle_grad(ws, xs[0]), numpy_grad(ws, xs[0]), rtol=1e-4, atol=1e-5)
    expected = ws - 0.1 * (numpy_grad(ws, xs[0]) + numpy_grad(ws, xs[1]))
    np.testing.assert_allclose(graders.oracle_step(ws, xs, 0.1), expected, rtol=1e-4, atol=1e-5)


def test_cases_cover_one_and_two_dimensional_meshes():
    # Each grader sees a shuffled 1-D mesh and a 2-D mesh; between them, 'X' has sizes 8, 4 and 2.
    for which in (graders.GRAD_MESHES, graders.STEP_MESHES, graders.SHARDED_MESHES):
        meshes = [mesh for mesh, _, _ in graders.cases(which)]
        assert any(len(m.axis_names) == 2 for m in meshes)
        assert any([d.id for d in m.devices.flat] != sorted(d.id for d in m.devices.flat) for m in meshes)
        assert all(m.size == 8 and m.axis_types[0] == jax.sharding.AxisType.Explicit for m in meshes)
    sizes = {
        m.shape["X"]
        for which in (graders.GRAD_MESHES, graders.STEP_MESHES, graders.SHARDED_MESHES)
        for m, _, _ in graders.cases(which)
    }
    assert sizes == {8, 4, 2}


def test_replicated_accumulation_all_reduces_once_per_layer_per_microbatch():
    # The structural target is real: replicated weights give L * M executions, reduced ones give 1.
    layers, width, micro, rows = 3, 8, 4, 2
    mesh = graders.make_mesh((8,), ("X",))
    ws = graders.place(np.ones((layers, width, width), np.float32) / 8, mesh, P(None, None, None))
    xs = graders.place(np.ones((micro, rows * 8, width), np.float32), mesh, P(None, "X", None))

    def replicated(ws, xs):
        def add(g, x):
            return g + jax.grad(graders.microbatch_loss)(ws, x), None

        return ws - 0.1 * jax.lax.scan(add, jax.numpy.zeros_like(ws), xs)[0]

    with jax.set_mesh(mesh):
        assert graders.runs_of(analyze(replicated, ws, xs)) == [("all-reduce", layers * micro)]
        report = analyze(SOLUTION.sgd_step_accumulated, ws, xs, 0.1)
    assert graders.runs_of(report) == [("all-reduce", 1)]
    (c,) = report.collectives
    assert c.result_shapes == ((layers, width, width),) and c.axes == ("X",)


def test_sharded_cases_split_the_weights_evenly_over_x():
    # 7.3's weights are split by rows over 'X': every width divides by every size of 'X' the cases use.
    for _, n_x, k in graders.cases(graders.SHARDED_MESHES):
        _, width, _, _ = graders.SHARDED_SHAPES[k % len(graders.SHARDED_SHAPES)]
        assert width % n_x == 0


def test_split_weights_gather_and_reduce_scatter_in_every_layer_unless_gathered_once():
    # The structural target of 7.3 is real: gradients taken with respect to the split weights run an
    # all-gather and a reduce-scatter L * M times; the solution runs each once, over 'X' only, also on a
    # 2-D mesh, and its result keeps the layout of ws.
    layers, width, micro, rows = 2, 16, 3, 2
    for sizes, names in (((8,), ("X",)), ((4, 2), ("X", "Y"))):
        mesh = graders.make_mesh(sizes, names)
        n_x = mesh.shape["X"]
        ws = graders.place(np.ones((layers, width, width), np.float32) / 8, mesh, P(None, "X", None))
        xs = graders.place(np.ones((micro, rows * n_x, width), np.float32), mesh, P(None, "X", None))

        def as_they_come(ws, xs):
            def add(g, x):
                return g + jax.grad(graders.microbatch_loss)(ws, x), None

            return ws - 0.1 * jax.lax.scan(add, jax.numpy.zeros_like(ws), xs)[0]

        with jax.set_mesh(mesh):
            naive = graders.runs_of(analyze(as_they_come, ws, xs))
            report = analyze(SOLUTION.sgd_step_sharded, ws, xs, 0.1)
            result = SOLUTION.sgd_step_sharded(ws, xs, 0.1)
        assert naive and all(executions == layers * micro for _, executions in naive)
        assert sorted(graders.runs_of(report)) == [("all-gather", 1), ("reduce-scatter", 1)]
        assert all(c.axes == ("X",) for c in report.collectives)
        assert graders.type_text(result) == f"float32[{layers},{width}@X,{width}]"


def test_sharded_hint_fits_what_came_back():
    # Each way of getting 7.3's collectives wrong gets the hint about that way.
    assert "all-reduces its gradient" in graders._sharded_hint([("all-gather", 1), ("all-reduce", 6)])
    assert "split weights gather them" in graders._sharded_hint([("all-gather", 6), ("reduce-scatter", 6)])
    assert "twice the bytes" in graders._sharded_hint([("all-gather", 1), ("all-reduce", 1)])
    assert "gathered once" in graders._sharded_hint([("reduce-scatter", 1)])
