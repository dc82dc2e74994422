"""A learner's own chips (shardbook/chips.py, setup's device plan): measured and printed, never asserted.

No accelerator is needed: the decision is forced by pretending the runtime has 8 of them, and the
measuring runs on the 8 simulated CPU devices handed in as the "chips".
"""

from __future__ import annotations

import ast
import sys
from functools import cache, partial

import jax
import jax.numpy as jnp
import jupytext
import pytest
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

import shardbook
from shardbook import chips, claims
from tests.notebooks import ROOT

devices_setup = sys.modules["shardbook.setup"]  # the module; shardbook.setup is the function


def _build(devices):
    mesh = jax.make_mesh((2, 4), ("X", "Y"), devices=devices)
    a = jax.ShapeDtypeStruct((64, 128), jnp.float32, sharding=NamedSharding(mesh, P("X", "Y")))
    return jax.jit(lambda a: (a * 2).sum()), (a,)


@pytest.fixture
def eight_tpu_chips(monkeypatch):
    """A runtime with 8 TPU devices, as setup() would find on Kaggle's v5e-8 (started beside the CPU)."""
    monkeypatch.setattr(devices_setup, "count_accelerators", lambda: ("tpu", 8))
    monkeypatch.setattr(devices_setup, "_started_chips", lambda jax: "tpu")
    monkeypatch.setattr(devices_setup, "_PLAN", None)
    yield
    devices_setup._PLAN = None


def test_eight_chips_keep_the_reference_devices_as_the_default(eight_tpu_chips, capsys):
    # Property: with 8 accelerators the book's examples and checks still run on the 8 simulated CPU
    # devices; setup() says the chips are there and how they are used.
    summary = shardbook.setup("auto")
    lines = capsys.readouterr().out.splitlines()
    assert summary.simulated and summary.backend == "cpu" and len(jax.devices()) == 8
    assert lines[0].startswith("shardbook: 8 simulated CPU devices")
    assert lines[1].startswith("shardbook: this runtime also has 8 TPU devices. Every example and check runs")
    assert "measured on your chips and never checked against the text" in lines[1]
    assert devices_setup.on_reference_devices() and devices_setup.chips_platform() == "tpu"


def test_a_step_runs_on_the_chips_and_is_printed_as_measured(capsys):
    # Property: the step is compiled for and run on the devices handed in, its time printed with the
    # words "measured on your chips"; the result is a ChipMeasurement, not a number.
    measured = chips.on_your_chips(_build, "the doubled sum", devices=jax.devices())
    out = capsys.readouterr().out
    assert isinstance(measured, chips.ChipMeasurement) and measured.count == 8 and measured.seconds > 0
    assert out.startswith("measured on your chips (8 cpu): the doubled sum, ") and " ms a call" in out


def test_a_step_that_donates_a_tree_of_arguments_is_timed():
    # Property: a step whose arguments are pytrees of abstract arrays, and which donates them (chapter
    # 11's training step), runs every timed call on fresh arrays of the shapes and shardings it asked for.
    def build(devices):
        mesh = jax.make_mesh((8,), ("data",), devices=devices)
        row = jax.ShapeDtypeStruct((64, 16), jnp.float32, sharding=NamedSharding(mesh, P("data")))
        step = jax.jit(lambda state, x: ({"w": state["w"] + x.sum()}, x.sum()), donate_argnums=0)
        return step, ({"w": row}, row)

    measured = chips.on_your_chips(build, "a donating step", devices=jax.devices(), calls=2, quiet=True)
    assert isinstance(measured, chips.ChipMeasurement) and measured.count == 8


def test_a_step_with_a_bare_partition_spec_runs_with_its_arguments_mesh():
    # Property: a step that asks for a layout with a bare P() (chapter 3's matmul with out_sharding=)
    # runs with its arguments' mesh set, as compile_for_tpu lowers it, whatever mesh the caller has set.
    def build(devices):
        mesh = jax.make_mesh((4, 2), ("X", "Y"), devices=devices)
        x = jax.ShapeDtypeStruct((64, 32), jnp.float32, sharding=NamedSharding(mesh, P("X", "Y")))
        w = jax.ShapeDtypeStruct((32, 16), jnp.float32, sharding=NamedSharding(mesh, P()))
        return jax.jit(lambda x, w: jnp.matmul(x, w, out_sharding=P("X", "Y"))), (x, w)

    with jax.set_mesh(jax.make_mesh((8,), ("data",))):
        measured = chips.on_your_chips(build, "a matmul", devices=jax.devices(), calls=1, quiet=True)
    assert isinstance(measured, chips.ChipMeasurement) and measured.count == 8


def test_without_chips_nothing_runs_and_nothing_is_printed(capsys, monkeypatch):
    # Property: on a runtime without 8 accelerators (Colab's one chip, a laptop) the call is silent.
    monkeypatch.setattr(devices_setup, "_PLAN", None)
    assert chips.your_chips() is None
    assert chips.on_your_chips(_build, "the doubled sum") is None
    assert chips.on_your_chips(_build, "the doubled sum", devices=jax.devices()[:4]) is None
    assert capsys.readouterr().out == ""


def test_a_claim_refuses_a_value_measured_on_the_chips():
    # Property: no sentence of the book can rest on a learner's hardware.
    measured = chips.ChipMeasurement("the sum", "TPU v5 lite", 8, 1e-4)
    with pytest.raises(TypeError, match="measured on your chips"):
        claims.claim("the sum takes 0.1 ms", True, figures={"0.1": measured})
    with pytest.raises(TypeError, match="measured on your chips"):
        claims.claim("the sum is quick", measured)


def test_a_false_claim_is_printed_not_raised_off_the_reference_devices(monkeypatch, capsys):
    # Property: a learner who made the accelerators the default (SHARDBOOK_DEVICES=accelerator) is told
    # that a sentence does not hold there; the chapter goes on. On the reference devices it stops.
    with pytest.raises(claims.ClaimFailed):
        claims.claim("three is less than two", 3 < 2)
    monkeypatch.setattr(devices_setup, "_PLAN", devices_setup.DevicePlan("tpu", False, None))
    claims.claim("three is less than two", 3 < 2, because="3 >= 2")
    out = capsys.readouterr().out
    assert out.startswith("shardbook: not on the book's reference devices, so the text says")
    assert "three is less than two" in out and out.rstrip().endswith(": 3 >= 2")
    assert "three is less than two" not in claims.checked_claims()


# --- the chapters that call it ---------------------------------------------------------------------

#: The chapters that time a step on a learner's chips (README's "What runs where" names them).
CALLERS = ("03_explicit_sharding", "05_collective_matmul", "11_training_a_transformer")


@cache
def _code(stem: str) -> list[ast.Module]:
    """Each code cell of a chapter's MyST source, parsed."""
    nb = jupytext.read(ROOT / "book" / f"{stem}.md", fmt="md:myst")
    return [ast.parse(c.source) for c in nb.cells if c.cell_type == "code"]


def _calls(cell: ast.Module, name: str) -> list[ast.Call]:
    """The cell's calls of `name`, or of `shardbook.name`."""
    calls = [n for n in ast.walk(cell) if isinstance(n, ast.Call)]
    return [n for n in calls if getattr(n.func, "id", getattr(n.func, "attr", None)) == name]


def _names_behind(expr: ast.AST, cell: ast.Module) -> set[str]:
    """The names an expression reads, and those read by what the cell assigns to them (a loop's
    iterable for its target): `partial(build, dtype=dtype)` with `build` from a loop over builders."""
    assigned: dict[str, list[ast.AST]] = {}
    for node in ast.walk(cell):
        pairs = [(t, node.value) for t in node.targets] if isinstance(node, ast.Assign) else []
        pairs += [(node.target, node.iter)] if isinstance(node, ast.For) else []
        for target, value in pairs:
            for t in ast.walk(target):
                if isinstance(t, ast.Name):
                    assigned.setdefault(t.id, []).append(value)
    seen: set[str] = set()
    todo = [expr]
    while todo:
        for n in ast.walk(todo.pop()):
            if isinstance(n, ast.Name) and n.id not in seen:
                seen.add(n.id)
                todo += assigned.get(n.id, [])
    return seen


def _builders(stem: str) -> dict[str, ast.FunctionDef]:
    """A chapter's functions that take the devices to build on."""
    return {
        n.name: n
        for cell in _code(stem)
        for n in ast.walk(cell)
        if isinstance(n, ast.FunctionDef) and "devices" in [a.arg for a in n.args.args]
    }


def test_the_chapters_that_call_it_are_the_ones_the_readme_names():
    # Property: the list of chapters that time a step on the learner's chips is the one the README
    # and chips.py's docstring give.
    chapters = sorted(p.stem for p in (ROOT / "book").glob("[0-9][0-9]_*.md"))
    callers = [c for c in chapters if any(_calls(cell, "on_your_chips") for cell in _code(c))]
    assert tuple(callers) == CALLERS, f"expected {CALLERS}, got {callers}: update README and this list"


@pytest.mark.parametrize("stem", CALLERS)
def test_each_chapter_times_its_own_builders(stem):
    # Property: every on_your_chips call is handed a chapter function that takes the devices to build
    # on, and at least one of them is a builder the chapter also gives compile_for_tpu: the same steps.
    builders, cells = _builders(stem), _code(stem)
    timed, compiled = set(), set()
    for cell in cells:
        for call in _calls(cell, "on_your_chips"):
            names = _names_behind(call.args[0], cell) & builders.keys()
            assert names, f"{stem}: on_your_chips({ast.unparse(call.args[0])}) names no build(devices)"
            timed |= names
        for call in _calls(cell, "compile_for_tpu"):
            compiled |= _names_behind(call.args[0], cell) & builders.keys()
    assert timed & compiled, f"{stem}: timed {sorted(timed)}, given compile_for_tpu {sorted(compiled)}"


def _definitions(stem: str) -> dict:
    """A chapter's imports and functions, defined without running the chapter (a function whose
    defaults need the chapter's run, such as `mesh=mesh`, is left out)."""
    namespace: dict = {"shardbook": shardbook}
    for cell in _code(stem):
        for node in cell.body:
            if isinstance(node, (ast.Import, ast.ImportFrom, ast.FunctionDef)):
                try:
                    exec(compile(ast.Module([node], []), stem, "exec"), namespace)
                except NameError:
                    continue
    return namespace


@pytest.mark.parametrize("builder", ["plain_on", "ring_on"])
def test_a_chapter_builder_runs_on_the_devices_it_is_given(builder):
    # Property: chapter 5's plain jit and ring, as the chapter hands them to on_your_chips, build
    # their mesh over the devices handed in (here the 8 simulated ones, in reverse order), not over
    # the default devices, and run there: a ChipMeasurement comes back.
    build = partial(_definitions("05_collective_matmul")[builder], dtype=jnp.bfloat16)
    given = jax.devices("cpu")[::-1]
    _, args = build(given)
    assert all(list(a.sharding.mesh.devices.flat) == given for a in args)
    measured = chips.on_your_chips(build, builder, devices=given, calls=1, quiet=True)
    assert isinstance(measured, chips.ChipMeasurement) and measured.count == 8
