"""Graders for assignment 01_meshes (devices, meshes and shardings).

Each ``check_<function>(fn)`` calls a learner's function on many cases — several array shapes, meshes
of one, two and three axes, and meshes whose devices are *not* in id order — and compares every answer
with a naive oracle. The first wrong answer raises :class:`shardbook.checks.CheckFailed` with the
call, what was expected, what came back, and a hint.
"""

from __future__ import annotations

import itertools
import math
import random
from collections.abc import Callable, Iterator
from typing import Any, cast

import jax
import numpy as np
from jax.sharding import AxisType, Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from grading.graders.common import call_learner, make_mesh, show
from shardbook.checks import CheckFailed, describe_array

Spec = tuple[Any, ...]

# Mesh layouts the hidden tests use: (axis sizes, axis names).
MESH_LAYOUTS: list[tuple[tuple[int, ...], tuple[str, ...]]] = [
    ((8,), ("X",)),
    ((4, 2), ("X", "Y")),
    ((2, 4), ("X", "Y")),
    ((2, 2, 2), ("X", "Y", "Z")),
]


# ----------------------------------------------------------------------------------------------
# Oracles: the plainest possible computations of the right answer.
# ----------------------------------------------------------------------------------------------


def _axes_of(entry: Any) -> tuple[str, ...]:
    if entry is None:
        return ()
    return tuple(entry) if isinstance(entry, tuple) else (entry,)


def oracle_per_device_shape(global_shape: tuple[int, ...], mesh_axes: dict[str, int], spec: Spec):
    """Block shape per device, or the string 'ValueError' when a dimension does not divide."""
    shape = []
    for i, size in enumerate(global_shape):
        entry = spec[i] if i < len(spec) else None
        parts = math.prod(mesh_axes[a] for a in _axes_of(entry))
        if size % parts:
            return "ValueError"
        shape.append(size // parts)
    return tuple(shape)


def _normalise(index: tuple[slice, ...], shape: tuple[int, ...]) -> tuple[tuple[int, int], ...]:
    return tuple((s.indices(n)[0], s.indices(n)[1]) for s, n in zip(index, shape, strict=True))


def oracle_layout(sharding: NamedSharding, shape: tuple[int, ...]) -> dict[int, tuple[tuple[int, int], ...]]:
    """device id -> ((start, stop) per dimension), from JAX's own devices_indices_map."""
    placed: Any = sharding.devices_indices_map(shape)  # Device -> index (jax.Device has no stub attributes)
    return {d.id: _normalise(idx, shape) for d, idx in placed.items()}


def oracle_devices_holding(
    mesh: Mesh, spec: Spec, shape: tuple[int, ...], index: tuple[int, ...]
) -> set[int]:
    layout = oracle_layout(NamedSharding(mesh, P(*spec)), shape)
    return {
        d for d, box in layout.items() if all(lo <= i < hi for i, (lo, hi) in zip(index, box, strict=True))
    }


def oracle_shard_sums(x: jax.Array) -> np.ndarray:
    mesh = cast(NamedSharding, x.sharding).mesh  # the grader's own arrays: always a NamedSharding
    full = np.asarray(x)
    layout = x.sharding.devices_indices_map(x.shape)
    out = np.zeros(mesh.devices.shape, dtype=np.result_type(full.dtype, np.float64))
    for pos in np.ndindex(mesh.devices.shape):
        out[pos] = full[layout[mesh.devices[pos]]].sum()
    return out


# ----------------------------------------------------------------------------------------------
# Case generators.
# ----------------------------------------------------------------------------------------------


def all_specs(ndim: int, names: tuple[str, ...]) -> list[Spec]:
    """Every PartitionSpec of ``ndim`` entries using each mesh axis at most once (orders matter)."""
    specs = []
    # Assign each mesh axis to a dimension or to none (-1), then order the axes within a dimension.
    for owners in itertools.product(range(-1, ndim), repeat=len(names)):
        groups = [[n for n, o in zip(names, owners, strict=True) if o == d] for d in range(ndim)]
        for orders in itertools.product(*[list(itertools.permutations(g)) for g in groups]):
            spec = tuple(None if not g else (g[0] if len(g) == 1 else tuple(g)) for g in orders)
            specs.append(spec)
    return specs


def _sample(rng: random.Random, items: list, k: int) -> list:
    return rng.sample(items, min(k, len(items)))


def layout_cases(
    layouts: list[tuple[tuple[int, ...], tuple[str, ...]]],
    first_seed: int,
    rng: random.Random,
    ndims: tuple[int, ...],
    per_ndim: int,
) -> Iterator[tuple[Mesh, bool, Spec]]:
    """(mesh, shuffled?, spec): each layout's mesh (Auto axes) in id order and shuffled (seed
    ``first_seed + k`` for the k-th layout), then ``per_ndim`` specs drawn with ``rng`` per rank.

    Lazy: a check draws its own shapes from the same ``rng`` between two cases.
    """
    for k, (sizes, names) in enumerate(layouts):
        for shuffle in (None, first_seed + k):
            mesh = make_mesh(sizes, names, axis_type=AxisType.Auto, shuffle=shuffle)
            for ndim in ndims:
                for spec in _sample(rng, all_specs(ndim, names), per_ndim):
                    yield mesh, shuffle is not None, spec


# ----------------------------------------------------------------------------------------------
# Checks.
# ----------------------------------------------------------------------------------------------


def per_device_shape_cases(seed: int = 0) -> list[tuple[tuple[int, ...], dict[str, int], Spec]]:
    rng = random.Random(seed)
    cases = []
    for sizes, names in MESH_LAYOUTS:
        axes = dict(zip(names, sizes, strict=True))
        for ndim in (1, 2, 3):
            specs = all_specs(ndim, names)
            for spec in _sample(rng, specs, 6):
                shape = tuple(rng.choice([8, 16, 24, 48]) for _ in range(ndim))
                cases.append((shape, axes, spec))
                # A shorter spec: trailing dimensions are replicated.
                if len(spec) > 1 and spec[-1] is None:
                    cases.append((shape, axes, spec[:-1]))
    # Dimensions that do not divide: the contract says ValueError.
    cases += [((6, 4), {"X": 4, "Y": 2}, ("X", "Y")), ((12,), {"X": 2, "Y": 4}, (("X", "Y"),))]
    cases += [((8, 3), {"X": 4, "Y": 2}, (None, "Y")), ((2, 2, 2), {"X": 2, "Y": 2, "Z": 2}, (("X", "Y"),))]
    return cases


def check_per_device_shape(fn: Callable) -> None:
    """Compares ``fn(global_shape, mesh_axes, spec)`` with the oracle on about 90 cases."""
    for shape, axes, spec in per_device_shape_cases():
        expected = oracle_per_device_shape(shape, axes, spec)
        call = f"per_device_shape({shape}, {axes}, {spec})"
        if expected == "ValueError":
            try:
                got = fn(shape, axes, spec)
            except ValueError:
                continue
            except NotImplementedError:
                raise CheckFailed(
                    "per_device_shape is not written yet (it raised NotImplementedError)."
                ) from None
            except Exception as e:
                raise CheckFailed(
                    f"{call}: expected a ValueError (a dimension does not divide evenly), "
                    f"got {type(e).__name__}: {e}."
                ) from None
            raise CheckFailed(
                f"{call}: expected a ValueError because a dimension does not divide evenly over its mesh "
                f"axes, got {got!r}. Hint: check size % (product of the axis sizes) for every dimension."
            )
        got = call_learner(fn, "per_device_shape", shape, axes, spec)
        if not isinstance(got, tuple) or tuple(got) != expected:
            if isinstance(got, (list, np.ndarray)) and tuple(int(g) for g in got) == expected:
                hint = "the values are right; return them as a tuple, not a list."
            elif any(isinstance(e, tuple) for e in spec):
                hint = "a tuple entry like ('X', 'Y') splits a dimension over both axes (4×2 = 8 ways)."
            elif len(spec) < len(shape):
                hint = "a spec shorter than the shape leaves the remaining dimensions whole."
            else:
                hint = "each dimension is divided by the size of the mesh axis named for it."
            raise CheckFailed(f"{call}: expected {expected!r}, got {got!r}. Hint: {hint}")
        if not all(isinstance(g, (int, np.integer)) and not isinstance(g, bool) for g in got):
            raise CheckFailed(
                f"{call}: expected {expected!r}, a tuple of ints, got {got!r} "
                f"({', '.join(sorted({type(g).__name__ for g in got}))}). "
                "Hint: a block size is a whole number; // divides into ints, / into floats."
            )


def check_devices_holding(fn: Callable) -> None:
    """Compares ``fn(mesh, spec, shape, index)`` with the oracle on shuffled and ordered meshes."""
    rng = random.Random(1)
    for mesh, shuffled, spec in layout_cases(MESH_LAYOUTS, 100, rng, (1, 2), 4):
        shape = tuple(rng.choice([8, 16]) for _ in spec)
        for _ in range(3):
            index = tuple(rng.randrange(n) for n in shape)
            expected = oracle_devices_holding(mesh, spec, shape, index)
            got = call_learner(fn, "devices_holding", mesh, spec, shape, index)
            try:
                got_set = {int(d) for d in got}
            except Exception:
                raise CheckFailed(
                    f"devices_holding: expected a set of device ids (ints), got {describe_array(got)}."
                ) from None
            if got_set != expected:
                if shuffled:
                    hint = (
                        "the device at mesh position (i, j) is mesh.devices[i, j]; its id need "
                        "not be i * columns + j."
                    )
                elif any(isinstance(e, tuple) for e in spec):
                    hint = (
                        "in a tuple entry the first axis is the major one, like the tens digit of a number."
                    )
                else:
                    hint = (
                        "an element is on every device whose block contains it; mesh axes not "
                        "named in the spec replicate."
                    )
                raise CheckFailed(
                    f"devices_holding({show(mesh)}, {spec}, {shape}, {index}): expected "
                    f"{sorted(expected)}, got {sorted(got_set)}. Hint: {hint}"
                )


# Meshes with an axis of size 1 (it splits nothing, so no layout can name it): sharding_for_layout only.
SIZE_ONE_LAYOUTS: list[tuple[tuple[int, ...], tuple[str, ...]]] = [((8, 1), ("X", "Y")), ((1, 8), ("X", "Y"))]
# The one hint on those meshes, whether the answer raises or builds a wrong layout (the self-check's words).
SIZE_ONE_HINT = "a mesh axis of size 1 splits nothing: leave it out, and don't step along it."


def check_sharding_for_layout(fn: Callable) -> None:
    """Asks ``fn`` to rebuild the sharding of many layouts and compares the layouts it produces."""
    rng = random.Random(2)
    for mesh, _, spec in layout_cases(MESH_LAYOUTS + SIZE_ONE_LAYOUTS, 200, rng, (1, 2, 3), 5):
        sizes = mesh.devices.shape
        shape = tuple(rng.choice([8, 16]) for _ in spec)
        target = NamedSharding(mesh, P(*spec))
        expected = oracle_layout(target, shape)
        layout = {d: tuple(slice(lo, hi) for lo, hi in box) for d, box in expected.items()}
        where = f"sharding_for_layout({show(mesh)}, {shape}, <layout of P{spec}>)"
        got = call_learner(
            fn,
            "sharding_for_layout",
            mesh,
            shape,
            layout,
            where=where,
            hint=SIZE_ONE_HINT if 1 in sizes else None,
        )
        if not isinstance(got, NamedSharding):
            raise CheckFailed(f"{where}: expected a NamedSharding, got {describe_array(got)}.")
        if got.mesh.devices.shape != mesh.devices.shape or any(
            a.id != b.id for a, b in zip(got.mesh.devices.flat, mesh.devices.flat, strict=True)
        ):
            raise CheckFailed(
                f"{where}: expected a NamedSharding on the mesh you were given, got one on "
                f"{show(got.mesh)}. Hint: build it with NamedSharding(mesh, spec)."
            )
        try:
            got_layout = oracle_layout(got, shape)
        except Exception as e:
            raise CheckFailed(f"{where}: your sharding {got.spec} does not fit shape {shape}: {e}") from None
        if got_layout != expected:
            wrong = next(d for d in expected if got_layout.get(d) != expected[d])
            hint = (
                SIZE_ONE_HINT
                if 1 in sizes
                else "within a tuple entry the first mesh axis is the major one: ('X', 'Y') and "
                "('Y', 'X') give the same blocks to different devices."
                if any(isinstance(e, tuple) for e in spec)
                else "a dimension split into n blocks is sharded over mesh axes whose sizes multiply to n."
            )
            raise CheckFailed(
                f"{where}: expected device {wrong} to hold {_box(expected[wrong])}, got "
                f"{_box(got_layout[wrong])} from your {got.spec}. Hint: {hint}"
            )


def _box(box: tuple[tuple[int, int], ...]) -> str:
    return "[" + ", ".join(f"{lo}:{hi}" for lo, hi in box) + "]"


def check_shard_sums(fn: Callable) -> None:
    """Compares ``fn(x)`` with the oracle on arrays of several shardings, dtypes and meshes."""
    rng = np.random.default_rng(3)
    pyrng = random.Random(3)
    for mesh, _, spec in layout_cases(MESH_LAYOUTS, 300, pyrng, (1, 2), 3):
        shape = tuple(int(pyrng.choice([8, 16])) for _ in spec)
        dtype = pyrng.choice([np.float32, np.int32])
        host = rng.integers(-9, 10, size=shape).astype(dtype)
        x = jax.device_put(host, NamedSharding(mesh, P(*spec)))
        expected = oracle_shard_sums(x)
        got = call_learner(fn, "shard_sums", x)
        where = f"shard_sums({describe_array(x)} on {show(mesh)})"
        got_shape = getattr(got, "shape", None)
        if got_shape is None or tuple(got_shape) != expected.shape:
            raise CheckFailed(
                f"{where}: expected an array of the mesh's shape {expected.shape}, got "
                f"{describe_array(got)}. Hint: one entry per device, arranged like mesh.devices."
            )
        got_np = np.asarray(got, dtype=np.float64)
        if not np.allclose(got_np, expected):
            pos = tuple(int(i) for i in np.argwhere(~np.isclose(got_np, expected))[0])
            raise CheckFailed(
                f"{where}: at mesh position {pos} (device {mesh.devices[pos].id}) expected "
                f"{expected[pos]:g}, got {got_np[pos]:g}. Hint: find each shard's mesh position "
                "by looking its device up in mesh.devices; a device's id is not its position."
            )
