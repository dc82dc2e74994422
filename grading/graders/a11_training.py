"""Graders for assignment 11_training (FSDP and a pipeline).

Each ``check_<function>(fn)`` calls the learner's function on several cases and compares with a naive
oracle; the first wrong answer raises :class:`shardbook.checks.CheckFailed` with the call, what was
expected, what came back, and a hint.
The FSDP checks live here, the pipeline ones (``pipeline_forward``, ``circular_forward``) in
grading/graders/a11_pipeline.py; the notebook calls all four from here.

* ``fsdp_shardings``: pytrees of parameter shapes (MLPs of several sizes, an Adam state, a tree of odd
  shapes, several of which divide over no mesh axis) on meshes where 'data' has 8, 4 or 2 devices,
  alone or next to a second axis 'model' (before or after it), Explicit and Auto axes, one shuffled.
  The oracle spells the rule out leaf by leaf.
* ``fsdp_train_step``: several steps on MLPs of other sizes (one whose widths do not all divide), on
  meshes ('data',) of 8, of 4 (shuffled) and ('data', 'model') of (4, 2), all with Explicit axes
  as the contract says (on Auto axes XLA's propagation may pick all-to-alls of its own); the compiled
  program is read on the first and the last (:data:`STEP_STRUCTURE_CASES`). The oracle is the
  one-device step written out: backpropagation by hand and optax.adamw's update in float64 NumPy (a
  test checks it equals ``jax.value_and_grad`` + ``optax.adamw`` on one device), so that grading
  compiles nothing of its own. Then every leaf's sharding, and the compiled step read by
  :func:`shardbook.analyze`: only all-gathers, reduce-scatters and all-reduces; all-reduces only as large
  as the loss plus the replicated parameters' gradients (a sharded parameter's gradient that is
  all-reduced shows up here); at least one all-gather and one reduce-scatter; and the bytes sent per
  device at most :data:`FSDP_BYTES_MARGIN` × the ideal of FSDP as it is run: per sharded parameter two
  all-gathers (forward, and again in the backward pass) and one reduce-scatter, per replicated one an
  all-reduce of its gradient, and the loss's all-reduce. **Memory**, on :data:`MEMORY_CASES` (MLPs of six
  equal hidden layers, compiled without running, with ``donate_argnums=(0, 1)`` as a training loop runs
  the step): the peak per device (:func:`shardbook.comms.footprint`: arguments + outputs - donated +
  temporaries, on CPU from a copy scheduled for memory) within :func:`fsdp_memory_budget`, what the device
  is given + :data:`FSDP_MEMORY_LAYERS` gathered layers + :data:`FSDP_MEMORY_ACTIVATIONS` × the
  activations. A step that saves every layer's gathered weights for the backward pass (autodiff through
  the gathers, without ``jax.checkpoint``) is right in everything else and fails here, by its name.
  XLA:CPU writes a reduce-scatter as an all-reduce followed by a dynamic-slice; the analyzer reports
  that pair as a reduce-scatter (``shardbook.comms.cpu``; ``tests/test_graders_a11_training.py`` checks
  that it does so for the FSDP step and that an all-reduced gradient used whole is still an all-reduce).
  A gradient all-reduced and then sliced for a sharded optimizer state is that same pair: XLA:GPU
  turns it into a reduce-scatter, so it is the same program and passes.
* ``pipeline_forward``: 8, 4 and 2 stages, 1 to 6 microbatches, a shuffled and a reversed device
  order, Explicit and Auto axes. The oracle runs the stages one after another in float64. The compiled
  program may hold only collective-permutes and exactly one all-reduce execution (the final broadcast:
  a psum per microbatch sends the same bytes and fails), within the bytes of one permute per step plus
  one all-reduce of the output. **Steps** are counted from the per-device
  matmul FLOPs, loop trip counts included (``Report.flops``): the contract has each device apply its
  stage once per step, so steps = FLOPs / (2 · B/n_micro · D · D) must be n_micro + S − 1. This reads
  the same for a Python loop (unrolled), ``fori_loop`` or ``scan`` (while-loops with a known trip
  count), whatever the number of permutes per step; a schedule with a step too many, or one microbatch
  at a time (n_micro · S steps), reads as such.
* ``circular_forward``: the same checks (:func:`_check_pipeline_program`) on 8, 4 and 2 stages, each
  device holding V = 1 to 3 layers S apart, n_micro = S: the oracle is 11.3's on the V · S layers in
  the order ℓ = v · S + s, and the steps must be V · n_micro + S − 1, each microbatch going round the
  ring V times; 11.3's pipeline run once per repeat (V · (n_micro + S − 1) steps) is named in the hint.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax  # type: ignore[import-untyped]  # optax ships no type information
from jax.sharding import AxisType, Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

# The pipeline half (exercises 11.3 and 11.4) is a module of its own; the notebook calls every check here.
from grading.graders.a11_pipeline import check_circular_forward, check_pipeline_forward  # noqa: F401
from grading.graders.common import (
    analyze_learner,
    call_learner,
    collectives_text,
    expect_kinds_and_bytes,
    make_mesh,
    show,
)
from shardbook.checks import CheckFailed, expect_allclose, expect_report
from shardbook.comms import Footprint, Report, footprint, format_bytes

BYTES_F32 = 4
#: The bytes an FSDP step may send per device, as a multiple of the ideal (issue 13).
FSDP_BYTES_MARGIN = 1.15
#: Per sharded parameter, FSDP as it is run sends it three times: all-gathered in the forward pass,
#: all-gathered again in the backward pass, and its gradient reduce-scattered (1.5× the two of a step that
#: saves the gathered weights, the price of holding one layer at a time).
FSDP_GATHERS_AND_SCATTERS = 3
#: The memory budget of an FSDP step, per device: what it is given (its 1/N of the parameters, of Adam's
#: moments and of the batch) + FSDP_MEMORY_LAYERS × the largest layer's gathered weights (the layer at
#: work and its whole gradient before the reduce-scatter, and as much again for XLA's scratch) +
#: FSDP_MEMORY_ACTIVATIONS × the activations (B/N rows × the sum of the widths, f32). Measured
#: (tests/test_graders_a11_training.py): the reference step needs 2.3-2.5 layers above what it is given,
#: re-gathering with nothing_saveable about 3.1, and saving every gathered layer about 7 on
#: MEMORY_CASES' MLPs of six equal hidden layers.
FSDP_MEMORY_LAYERS = 4
FSDP_MEMORY_ACTIVATIONS = 2
#: The assignment's optimizer: optax.adamw with these settings (the notebook's imports cell).
LEARNING_RATE, WEIGHT_DECAY = 1e-2, 1e-4


# ----------------------------------------------------------------------------------------------
# The assignment's model (a copy of the notebook's imports cell; a test keeps them equal).
# ----------------------------------------------------------------------------------------------


def init_params(seed: int, sizes: list[int]) -> dict:
    """An MLP's parameters {'layers': [{'w': f32[m, n], 'b': f32[n]}, ...]} for widths sizes[0] -> ..."""
    rng = np.random.default_rng(seed)
    layers = []
    for m, n in zip(sizes[:-1], sizes[1:], strict=False):
        w = rng.normal(size=(m, n)) / np.sqrt(m)
        layers.append({"w": jnp.asarray(w, jnp.float32), "b": jnp.asarray(np.full((n,), 0.1), jnp.float32)})
    return {"layers": layers}


def layer_fn(layer: dict, h: jax.Array, last: bool) -> jax.Array:
    """One layer of the MLP: h @ layer['w'] + layer['b'], then tanh unless it is the last layer."""
    h = h @ layer["w"] + layer["b"]
    return h if last else jnp.tanh(h)


def loss_fn(params: dict, batch: tuple, layer: Callable = layer_fn) -> jax.Array:
    """Mean squared error of the MLP on batch = (x, y); layer(p, h, last) runs one layer."""
    x, y = batch
    h = x
    for i, p in enumerate(params["layers"]):
        h = layer(p, h, i == len(params["layers"]) - 1)
    return jnp.mean((h - y) ** 2)


def make_optimizer() -> optax.GradientTransformation:
    """The assignment's optimizer."""
    return optax.adamw(learning_rate=LEARNING_RATE, weight_decay=WEIGHT_DECAY)


def stage_fn(p: dict, h: Any) -> Any:
    """One pipeline stage: tanh(h @ p['w'] + p['b'])."""
    return jnp.tanh(h @ p["w"] + p["b"])


# ----------------------------------------------------------------------------------------------
# Oracles.
# ----------------------------------------------------------------------------------------------


def oracle_fsdp_spec(shape: tuple[int, ...], n: int) -> P:
    """The contract's rule for one leaf, spelled out: the leading dimension if n divides it, else the
    largest dimension n divides (the first on a tie), else replicated."""
    chosen = None
    if len(shape) > 0 and shape[0] % n == 0:
        chosen = 0
    else:
        for d, size in enumerate(shape):
            if size % n == 0 and (chosen is None or size > shape[chosen]):
                chosen = d
    if chosen is None:
        return P()
    return P(*["data" if d == chosen else None for d in range(len(shape))])


#: optax.adamw's defaults, which the assignment's optimizer keeps.
ADAM_B1, ADAM_B2, ADAM_EPS = 0.9, 0.999, 1e-8


def oracle_loss_and_grads(params: dict, batch: tuple) -> tuple[float, dict]:
    """loss_fn and its gradient by hand-written backpropagation, in float64 on the host."""
    x, y = (np.asarray(a, np.float64) for a in batch)
    layers = [{k: np.asarray(v, np.float64) for k, v in la.items()} for la in params["layers"]]
    inputs, h = [], x
    for i, layer in enumerate(layers):
        inputs.append(h)
        h = h @ layer["w"] + layer["b"]
        if i < len(layers) - 1:
            h = np.tanh(h)
    loss = float(np.mean((h - y) ** 2))
    g = 2 * (h - y) / h.size  # d loss / d output
    grads: list[dict] = [{} for _ in layers]
    for i in reversed(range(len(layers))):
        grads[i] = {"w": inputs[i].T @ g, "b": g.sum(axis=0)}
        if i > 0:
            g = (g @ layers[i]["w"].T) * (1 - inputs[i] ** 2)  # through tanh: inputs[i] = tanh(...)
    return loss, {"layers": grads}


def oracle_steps(params_host: dict, batch_host: tuple, steps: int) -> tuple[list[float], dict]:
    """Losses of ``steps`` AdamW steps (optax.adamw's update, written out) and the parameters after them."""
    params = jax.tree.map(lambda a: np.asarray(a, np.float64), params_host)
    mu = jax.tree.map(np.zeros_like, params)
    nu = jax.tree.map(np.zeros_like, params)
    losses = []
    for t in range(1, steps + 1):
        loss, grads = oracle_loss_and_grads(params, batch_host)
        losses.append(loss)
        mu = jax.tree.map(lambda m, g: ADAM_B1 * m + (1 - ADAM_B1) * g, mu, grads)
        nu = jax.tree.map(lambda v, g: ADAM_B2 * v + (1 - ADAM_B2) * g**2, nu, grads)
        c1, c2 = 1 - ADAM_B1**t, 1 - ADAM_B2**t  # bias corrections of step t
        params = jax.tree.map(
            lambda p, m, v, c1=c1, c2=c2: (
                p - LEARNING_RATE * ((m / c1) / (np.sqrt(v / c2) + ADAM_EPS) + WEIGHT_DECAY * p)
            ),
            params,
            mu,
            nu,
        )
    return losses, params


# ----------------------------------------------------------------------------------------------
# Helpers.
# ----------------------------------------------------------------------------------------------


def leaf_name(path: tuple) -> str:
    """A leaf's path as Python indexing, e.g. ``['layers'][0]['w']``."""
    return jax.tree_util.keystr(path) or "the leaf"


def spec_text(spec: P) -> str:
    return "P(" + ", ".join(repr(e) for e in spec) + ")"


def fsdp_layout(tree: Any, mesh: Mesh) -> Any:
    """The contract's NamedSharding for every leaf of ``tree`` (arrays or shapes)."""
    n = mesh.shape["data"]
    return jax.tree.map(lambda a: NamedSharding(mesh, oracle_fsdp_spec(tuple(a.shape), n)), tree)


def _is_sharding(x: Any) -> bool:
    return isinstance(x, jax.sharding.Sharding)


def structure(tree: Any, is_leaf: Callable[[Any], bool] | None = None) -> Any:
    """``jax.tree.structure`` typed as Any: PyTreeDef's stub declares no comparison."""
    return jax.tree.structure(tree, is_leaf=is_leaf)


# ----------------------------------------------------------------------------------------------
# Exercise 11.1 — fsdp_shardings
# ----------------------------------------------------------------------------------------------

ODD_SHAPES = {
    "embed": (50, 16),
    "conv": (3, 3, 16, 6),
    "head": (6, 40),
    "norm": (16,),
    "odd": (7, 9),
    "wide": (5, 32, 8),  # the leading dimension does not divide; of the two that do, the first is larger
    "tie": (3, 8, 8),  # two dividing dimensions of the same size: the first
    "scale": (),
    "pair": ((9, 24), (24,)),
}

# (mesh sizes, axis names, axis type, shuffle seed) and the trees each mesh is tried on.
FSDP_MESHES: list[tuple[tuple[int, ...], tuple[str, ...], AxisType, int | None]] = [
    ((8,), ("data",), AxisType.Explicit, None),
    ((4, 2), ("data", "model"), AxisType.Explicit, None),
    ((2, 4), ("model", "data"), AxisType.Auto, 11),
    ((2,), ("data",), AxisType.Explicit, None),
]


def fsdp_trees() -> list[tuple[str, Any]]:
    """(description, pytree of ShapeDtypeStructs) for the hidden tests of fsdp_shardings."""
    mlp = jax.eval_shape(lambda: init_params(0, [12, 24, 24, 3]))
    odd = jax.tree.map(
        lambda s: jax.ShapeDtypeStruct(s, jnp.float32),
        ODD_SHAPES,
        is_leaf=lambda s: isinstance(s, tuple) and all(isinstance(d, int) for d in s),
    )
    return [
        ("the parameters of an MLP 12 -> 24 -> 24 -> 3", mlp),
        ("the Adam state of that MLP", jax.eval_shape(make_optimizer().init, mlp)),
        ("a pytree of other shapes", odd),
        (
            "the parameters of an MLP 40 -> 16 -> 6",
            jax.eval_shape(lambda: init_params(1, [40, 16, 6])),
        ),
    ]


def check_fsdp_shardings(fn: Callable) -> None:
    """Each leaf sharded over 'data' on its leading, else largest, dividing dimension; else replicated."""
    name = "fsdp_shardings"
    trees = fsdp_trees()
    for k, (sizes, names, axis_type, shuffle) in enumerate(FSDP_MESHES):
        mesh = make_mesh(sizes, names, axis_type=axis_type, shuffle=shuffle)
        for what, tree in (trees[k % len(trees)], trees[(k + 2) % len(trees)]):
            where = f"{name}({what}, {show(mesh)})"
            got = call_learner(fn, name, tree, mesh, where=where)
            want_structure = structure(tree)
            got_structure = structure(got, is_leaf=_is_sharding)
            if got_structure != want_structure:
                raise CheckFailed(
                    f"{where}: expected a pytree shaped like the input, {want_structure}, got "
                    f"{got_structure}. Hint: jax.tree.map(one_leaf, params_shapes) keeps the structure; "
                    "return one NamedSharding per leaf."
                )
            n = mesh.shape["data"]
            for (path, leaf), sharding in zip(
                jax.tree_util.tree_leaves_with_path(tree),
                jax.tree.leaves(got, is_leaf=_is_sharding),
                strict=True,
            ):
                shape = tuple(leaf.shape)
                spec = oracle_fsdp_spec(shape, n)
                call = f"{where}, leaf {leaf_name(path)} of shape {shape}"
                expected = f"NamedSharding(mesh, {spec_text(spec)})"
                if not isinstance(sharding, NamedSharding) or sharding.mesh != mesh:
                    raise CheckFailed(
                        f"{call}: expected {expected} on the mesh you were given, got {sharding!r}. Hint: "
                        "build each leaf's sharding as NamedSharding(mesh, P(...)) with the mesh argument."
                    )
                if not sharding.is_equivalent_to(NamedSharding(mesh, spec), len(shape)):
                    raise CheckFailed(
                        f"{call}: expected {expected} ('data' has {n} devices), got "
                        f"NamedSharding(mesh, {spec_text(sharding.spec)}). Hint: {_fsdp_hint(shape, n)}"
                    )


def _fsdp_hint(shape: tuple[int, ...], n: int) -> str:
    if not any(size % n == 0 for size in shape):
        return f"no dimension of {shape} divides by {n}, so the leaf stays replicated, P()."
    if shape[0] % n == 0:
        return "the leading dimension divides, so it is the one sharded."
    return (
        "the leading dimension does not divide, so shard the largest dimension that does; read n from "
        "mesh.shape['data'] (the mesh may have other axes, in any order)."
    )


# ----------------------------------------------------------------------------------------------
# Exercise 11.2 — fsdp_train_step
# ----------------------------------------------------------------------------------------------

# (mesh sizes, axis names, axis type, shuffle seed, MLP widths, batch rows, steps)
STEP_CASES: list[tuple[tuple[int, ...], tuple[str, ...], AxisType, int | None, list[int], int, int]] = [
    ((8,), ("data",), AxisType.Explicit, None, [16, 40, 24, 5], 32, 3),
    ((4,), ("data",), AxisType.Explicit, 3, [12, 24, 6, 3], 16, 3),
    ((4, 2), ("data", "model"), AxisType.Explicit, None, [8, 16, 6], 16, 2),
]
# The compiled step is read on these cases (each analysis compiles it twice more): 'data' alone and
# next to 'model'; the shuffled 4-device mesh checks values and layouts only.
STEP_STRUCTURE_CASES = (0, 2)
LOSS_RTOL = 1e-4
PARAM_RTOL, PARAM_ATOL = 1e-3, 1e-4
# The memory budget is checked on these, compiled without running (shape-only arguments): MLPs of six
# equal hidden layers, so that one layer at a time and every layer at once are far apart.
# (mesh sizes, axis names, shuffle seed, MLP widths, batch rows); Explicit axes, as the contract says.
MEMORY_CASES: list[tuple[tuple[int, ...], tuple[str, ...], int | None, list[int], int]] = [
    ((8,), ("data",), 5, [24] + [320] * 6 + [12], 32),
    ((4, 2), ("data", "model"), None, [48] + [192] * 6 + [6], 16),
]


def step_case(k: int) -> tuple[Mesh, Any, tuple, int]:
    """(mesh, host parameters, host batch, steps) of STEP_CASES[k]."""
    sizes, names, axis_type, shuffle, widths, rows, steps = STEP_CASES[k]
    mesh = make_mesh(sizes, names, axis_type=axis_type, shuffle=shuffle)
    rng = np.random.default_rng(k)
    params = jax.tree.map(np.asarray, init_params(10 + k, widths))
    x = rng.normal(size=(rows, widths[0])).astype(np.float32)
    y = np.sin(x[:, : widths[-1]] + rng.normal(size=(rows, widths[-1]))).astype(np.float32)
    return mesh, params, (x, y), steps


def ideal_fsdp_bytes(params_host: Any, mesh: Mesh) -> tuple[int, int]:
    """(ideal bytes sent per device by one FSDP step as it is run, bytes the all-reduces may hold).

    FSDP as it is run gathers each sharded parameter twice (forward, and again in the backward pass)
    and reduce-scatters its gradient once; a replicated parameter's gradient and the loss are
    all-reduced. Ring formulas, as :func:`shardbook.comms.ring_bytes`: an all-gather and a
    reduce-scatter send (n-1)/n of the full array, an all-reduce 2(n-1)/n of it.
    """
    n = mesh.shape["data"]
    sharded = replicated = 0
    for leaf in jax.tree.leaves(params_host):
        size = int(np.prod(leaf.shape)) * BYTES_F32
        if oracle_fsdp_spec(tuple(leaf.shape), n) == P():
            replicated += size
        else:
            sharded += size
    reducible = replicated + BYTES_F32  # the replicated parameters' gradients and the loss
    return (FSDP_GATHERS_AND_SCATTERS * sharded + 2 * reducible) * (n - 1) // n, reducible


def _all_reduced_bytes(report: Report) -> int:
    """Bytes of all all-reduce results (per device, executions counted)."""
    return sum(
        math.prod(c.result_shapes[0]) * 4 * c.executions
        for c in report.collectives
        if c.kind == "all-reduce" and c.result_shapes
    )


def check_fsdp_train_step(fn: Callable) -> None:
    """One Optax step equal to one-device Optax, layouts kept, gathers + reduce-scatters within 1.15×."""
    name = "fsdp_train_step"
    for k in range(len(STEP_CASES)):
        mesh, params_host, batch_host, steps = step_case(k)
        with jax.set_mesh(mesh):
            params = jax.device_put(params_host, fsdp_layout(params_host, mesh))
            # Adam's state starts at zeros; built on the host, so that no eager JAX op compiles
            opt_state = jax.tree.map(
                lambda a: np.zeros(a.shape, a.dtype), jax.eval_shape(make_optimizer().init, params_host)
            )
            opt_state = jax.device_put(opt_state, fsdp_layout(opt_state, mesh))
            batch = jax.device_put(batch_host, NamedSharding(mesh, P("data", None)))
        layouts = jax.tree.map(lambda a: a.sharding, (params, opt_state))
        widths = [params_host["layers"][0]["w"].shape[0]] + [la["b"].shape[0] for la in params_host["layers"]]
        where = (
            f"{name}(MLP {' -> '.join(map(str, widths))}, its Adam state, batch of {len(batch_host[0])} rows "
            f"P('data', None), {show(mesh)})"
        )
        losses, params_ref = oracle_steps(params_host, batch_host, steps)
        step = jax.jit(fn, static_argnums=3)
        new_params, new_state = params, opt_state
        for i in range(steps):
            got = call_learner(step, name, new_params, new_state, batch, mesh, mesh=mesh, where=where)
            if not (isinstance(got, tuple) and len(got) == 3):
                raise CheckFailed(
                    f"{where}: expected a tuple (params, opt_state, loss), got {show(got)}. Hint: return "
                    "the new parameters, the new optimizer state and the loss, in that order."
                )
            new_params, new_state, loss = got
            expect_allclose(
                loss,
                np.float32(losses[i]),
                f"{where}: the loss of step {i}",
                rtol=LOSS_RTOL,
                atol=1e-6,
                hint="return loss_fn(params, batch) for the parameters before the update (value_and_grad "
                "gives it with the gradient).",
            )
        _check_params_after(new_params, params_ref, params, where, steps)
        _check_layouts(new_params, new_state, layouts, where)
        if k not in STEP_STRUCTURE_CASES:
            continue
        with jax.set_mesh(mesh):
            report = analyze_learner(
                step,
                name,
                params,
                opt_state,
                batch,
                mesh,
                where=f"{where} compiled",
                hint="the step must compile for these layouts.",
            )
        _check_fsdp_program(report, params_host, mesh, f"the compiled {where}")
    for k in range(len(MEMORY_CASES)):
        mesh, given, widths, rows = memory_case(k)
        where = (
            f"{name}(MLP {' -> '.join(map(str, widths))}, its Adam state, batch of {rows} rows, "
            f"{show(mesh)}) compiled with donate_argnums=(0, 1)"
        )
        memory = call_learner(
            footprint,
            name,
            jax.jit(fn, static_argnums=3, donate_argnums=(0, 1)),
            *given,
            mesh,
            mesh=mesh,
            where=where,
            hint="the step must compile for these layouts.",
        )
        check_fsdp_memory(memory, given, widths, rows, mesh.shape["data"], where)


def memory_case(k: int) -> tuple[Mesh, tuple, list[int], int]:
    """(mesh, shape-only (params, opt_state, batch) laid out as the contract says, widths, rows) of
    MEMORY_CASES[k]."""
    sizes, names, shuffle, widths, rows = MEMORY_CASES[k]
    mesh = make_mesh(sizes, names, shuffle=shuffle)
    params = jax.eval_shape(lambda: init_params(0, widths))
    state = jax.eval_shape(make_optimizer().init, params)
    batch = (
        jax.ShapeDtypeStruct((rows, widths[0]), jnp.float32, sharding=NamedSharding(mesh, P("data", None))),
        jax.ShapeDtypeStruct((rows, widths[-1]), jnp.float32, sharding=NamedSharding(mesh, P("data", None))),
    )
    placed = jax.tree.map(
        lambda a, s: jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=s),
        (params, state),
        fsdp_layout((params, state), mesh),
    )
    return mesh, (*placed, batch), widths, rows


def device_bytes(tree: Any) -> int:
    """Bytes one device holds of a pytree of placed arrays or shape-only arguments."""
    return sum(
        math.prod(a.sharding.shard_shape(a.shape)) * np.dtype(a.dtype).itemsize for a in jax.tree.leaves(tree)
    )


def fsdp_memory_budget(given: Any, widths: list[int], rows: int, n: int) -> tuple[int, str]:
    """(the peak an FSDP step may reach per device, how it is made up in words); see FSDP_MEMORY_LAYERS."""
    given_bytes = device_bytes(given)
    largest = max((m + 1) * k for m, k in zip(widths[:-1], widths[1:], strict=True)) * BYTES_F32
    activations = rows // n * sum(widths) * BYTES_F32
    budget = given_bytes + FSDP_MEMORY_LAYERS * largest + FSDP_MEMORY_ACTIVATIONS * activations
    text = (
        f"what it is given, {format_bytes(given_bytes)} (its 1/{n} of the parameters, of Adam's moments "
        f"and of the batch), + {FSDP_MEMORY_LAYERS} × the largest layer's gathered weights, "
        f"{format_bytes(largest)}, + {FSDP_MEMORY_ACTIVATIONS} × the activations, {format_bytes(activations)}"
    )
    return budget, text


def check_fsdp_memory(memory: Footprint, given: Any, widths: list[int], rows: int, n: int, call: str) -> None:
    """The step's peak per device within :func:`fsdp_memory_budget`; else say what it keeps."""
    budget, text = fsdp_memory_budget(given, widths, rows, n)
    if memory.peak <= budget:
        return
    every = sum((m + 1) * k for m, k in zip(widths[:-1], widths[1:], strict=True)) * BYTES_F32
    if memory.peak - device_bytes(given) >= every:
        kept = (
            f"It keeps every layer's gathered weights ({format_bytes(every)} in all) for the backward pass, "
            "as data parallelism does."
        )
    else:
        kept = "It holds more gathered weights or activations at once than one layer at a time needs."
    raise CheckFailed(
        f"{call}: expected a peak of at most {format_bytes(budget)} per device ({text}), got {memory}. "
        f"{kept} Hint: gather each layer again in the backward pass: pass loss_fn a layer that gathers its "
        "shards, wrapped in jax.checkpoint with a policy that does not save the gathered weights (a policy "
        "that saves everything but a checkpoint_name still saves them: the gather's own result has no name)."
    )


def _check_params_after(new_params: Any, params_ref: Any, params: Any, where: str, steps: int) -> None:
    if structure(new_params) != structure(params):
        raise CheckFailed(
            f"{where}: expected new parameters shaped like the old ones, {structure(params)}, got "
            f"{show(new_params)}. Hint: optax.apply_updates(params, updates) returns them."
        )
    for (path, got), want in zip(
        jax.tree_util.tree_leaves_with_path(new_params), jax.tree.leaves(params_ref), strict=True
    ):
        expect_allclose(
            got,
            want,
            f"{where}: params{leaf_name(path)} after {steps} steps",
            rtol=PARAM_RTOL,
            atol=PARAM_ATOL,
            hint="one optimizer.update(grads, opt_state, params) and optax.apply_updates per step, with the "
            "gradient of loss_fn with respect to all parameters (adamw's weight decay needs params).",
        )


def _check_layouts(new_params: Any, new_state: Any, layouts: tuple, where: str) -> None:
    for part, tree, old in (("params", new_params, layouts[0]), ("opt_state", new_state, layouts[1])):
        if structure(tree) != structure(old, is_leaf=_is_sharding):
            raise CheckFailed(
                f"{where}: expected the new {part} shaped like the old, got {show(tree)}. Hint: return what "
                "optimizer.update and optax.apply_updates give back."
            )
        for (path, got), sharding in zip(
            jax.tree_util.tree_leaves_with_path(tree), jax.tree.leaves(old, is_leaf=_is_sharding), strict=True
        ):
            if not isinstance(got, jax.Array) or not got.sharding.is_equivalent_to(sharding, got.ndim):
                hint = (
                    "the optimizer state stays sharded like the parameters: never gather it (its moments "
                    "are as large as the parameters, twice over)."
                    if part == "opt_state"
                    else "update the shards: apply the updates to the params you were given, not to "
                    "gathered copies."
                )
                raise CheckFailed(
                    f"{where}: expected {part}{leaf_name(path)} to keep its layout, sharded "
                    f"{spec_text(sharding.spec)}, got {show(got)}. Hint: {hint}"
                )


def _check_fsdp_program(report: Report, params_host: Any, mesh: Mesh, call: str) -> None:
    ideal, reducible = ideal_fsdp_bytes(params_host, mesh)
    hint = (
        "gather each parameter with jax.reshard(w, P()) inside the function you differentiate: its "
        "gradient then comes back reduce-scattered to the parameter's shards, and the update runs on shards."
    )
    expect_report(report, ("all-gather", "reduce-scatter", "all-reduce"), None, call, hint)
    reduced = _all_reduced_bytes(report)
    if reduced > reducible:
        biggest = max((c for c in report.collectives if c.kind == "all-reduce"), key=lambda c: c.bytes)
        raise CheckFailed(
            f"{call}: expected all-reduces of at most {format_bytes(reducible)} (the loss and the gradients "
            f"of the replicated parameters), got {format_bytes(reduced)}, e.g. {biggest.describe()}. Hint: a "
            "sharded parameter's gradient was all-reduced: every device then holds all of it and updates "
            f"all of it. {hint[0].upper()}{hint[1:]}"
        )
    if report.count("all-gather") == 0 or report.count("reduce-scatter") == 0:
        raise CheckFailed(
            f"{call}: expected all-gathers of the sharded parameters and reduce-scatters of their gradients, "
            f"got {collectives_text(report)}. Hint: {hint}"
        )
    expect_kinds_and_bytes(
        report,
        call,
        ("all-gather", "reduce-scatter", "all-reduce"),
        int(FSDP_BYTES_MARGIN * ideal),
        f"{FSDP_BYTES_MARGIN}× the ideal {format_bytes(ideal)}: two all-gathers (forward and backward) and "
        "one reduce-scatter per sharded parameter, an all-reduce per replicated one",
        "gather each layer once per pass (in the forward pass, and again in the backward pass), and never "
        "gather the optimizer state: update the shards.",
    )
