"""What the self-check and the hidden tests call each graded function with, read while they run.

A learner who writes down a value of the self-check (the ring length 4, k = 2, the names ``w`` and
``b``, the notebook's global mesh) passes a self-check that never changes it and loses every hidden
point. The rule (tests/test_parity.py): **every dimension the tests vary, the self-check varies**.

The dimensions are not listed by hand: :func:`record_function` takes the reference solution's
namespace (``grading.mutants.base_namespace``), wraps a graded function, and runs its self-check and
then its hidden tests, noting the *features* of every call (:func:`features`): of each argument, a
mesh's shape and axis names; an array's every dimension and dtype, and the shape and axis names of
the mesh it is laid out on; a dict's keys (the tensor names) and a list's length, with the arrays
they hold; a number's or a short string's value; of the result, a dict's keys (names read from a
file); and the mesh the call runs under (``jax.set_mesh``). A call inside ``jax.jit`` is seen while
tracing (shapes are plain ints there). A check that runs the function in other processes
(assignment 12, ``shardbook.hosts``) sends it as source; the recorder adds a line to that source
that records in the worker too. Device order and axis types are not dimensions here: a value
written down cannot depend on them.

It also runs the answer cell probed (``grading.mutations.instrumented``): every value the function
reads from the mesh, its arguments or a pytree is noted, with its value in the self-check's first
call, which is what the hard-coding mutants write down (``grading.mutants.hardcoding_of``).

:func:`violations` then names each feature that takes two or more values over all the calls but one
value in every self-check call: the dimension a hard-coded answer gets away with.
"""

from __future__ import annotations

import contextlib
import functools
import io
import json
import os
import re
import tempfile
from collections.abc import Callable, Iterator
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: Where a worker process appends its calls (one JSON object a line), and the phase it records.
LOG_ENV, PHASE_ENV = "GRADING_PARITY_LOG", "GRADING_PARITY_PHASE"
PHASES = ("visible", "hidden")
_WORD = re.compile(r"[\w.\- ]{1,40}")  # strings kept as values: axis names, tensor names, not paths
_MAX_ITEMS = 16  # a list's first items only


def _mesh_features(mesh: Any, at: str) -> Iterator[tuple[str, str]]:
    yield f"{at} mesh shape", str(tuple(mesh.axis_sizes))
    yield f"{at} mesh axis names", str(tuple(mesh.axis_names))


def _array_features(x: Any, at: str) -> Iterator[tuple[str, str]]:
    shape = tuple(x.shape)
    yield f"{at} ndim", str(len(shape))
    for j, size in enumerate(shape):
        yield f"{at} shape[{j}]", str(size)
    yield f"{at} dtype", str(x.dtype)
    sharding = None
    with contextlib.suppress(Exception):
        sharding = getattr(x, "sharding", None)
    if sharding is None:
        with contextlib.suppress(Exception):
            import jax

            sharding = jax.typeof(x).sharding
    mesh = getattr(sharding, "mesh", None)
    if mesh is not None and not getattr(mesh, "empty", False) and hasattr(mesh, "axis_sizes"):
        yield from _mesh_features(mesh, at)


def _is_array(x: Any) -> bool:
    return hasattr(x, "shape") and hasattr(x, "dtype") and not isinstance(x, type)


def _features(x: Any, at: str, top: bool = True) -> Iterator[tuple[str, str]]:
    """The dimensions of one argument: a mesh's shape and axis names; an array's every dimension and
    dtype (and its mesh); a number's or a short string's value; a dict's keys (tensor names) and a
    list's length, with the arrays and meshes they hold. Not a result's values, which follow from the
    arguments, nor the positions of list items' own numbers (a shape's entries are an array's
    dimensions only when an array carries them)."""
    from jax.sharding import AbstractMesh, Mesh

    if isinstance(x, (Mesh, AbstractMesh)):
        yield from _mesh_features(x, at)
    elif _is_array(x):
        yield from _array_features(x, at)
    elif isinstance(x, (bool, int, float)) or x is None:
        if top:
            yield f"{at} value", repr(x)
    elif isinstance(x, str):
        if top and _WORD.fullmatch(x):
            yield f"{at} value", repr(x)
    elif top and isinstance(x, dict):
        yield f"{at} keys", str(sorted(map(str, x)))
        for k in sorted(x, key=str)[:_MAX_ITEMS]:
            yield from _features(x[k], f"{at}[{k!r}]", top=False)
    elif top and isinstance(x, (list, tuple)):
        yield f"{at} length", str(len(x))
        for item in x[:_MAX_ITEMS]:  # the items together: a list of layers varies its width
            yield from _features(item, f"{at}[*]", top=False)
    elif top and not callable(x):  # another pytree (a dataclass registered with JAX…)
        with contextlib.suppress(Exception):
            import jax

            leaves, _ = jax.tree_util.tree_flatten_with_path(x)
            if leaves and not (len(leaves) == 1 and leaves[0][1] is x):
                yield f"{at} keys", str([jax.tree_util.keystr(p) for p, _ in leaves])
                for path, leaf in leaves[:_MAX_ITEMS]:
                    yield from _features(leaf, f"{at}{jax.tree_util.keystr(path)}", top=False)


def features(args: tuple, kwargs: dict, result: Any) -> dict[str, str]:
    """Feature name -> value (as text) of one call: its arguments, the mesh it ran under, and the
    names its result holds (a dict's keys: tensor names that come from a file, not an argument)."""
    import jax

    out: dict[str, str] = {}
    parts = [(f"argument {i}", a) for i, a in enumerate(args)]
    parts += [(f"argument {k}", v) for k, v in kwargs.items()]
    for at, value in parts:
        with contextlib.suppress(Exception):
            out.update(_features(value, at))
    if isinstance(result, dict):
        out["result keys"] = str(sorted(map(str, result)))
    with contextlib.suppress(Exception):
        mesh = jax.sharding.get_abstract_mesh()
        if not mesh.empty:
            out.update(_mesh_features(mesh, "the call's"))
    return out


def recording(fn: Callable, sink: Callable[[dict[str, str]], None]) -> Callable:
    """``fn``, reporting the features of each call to ``sink`` (before raising, if it raises)."""

    @functools.wraps(fn)
    def recorded(*args, **kwargs):
        result: Any = None
        try:
            result = fn(*args, **kwargs)
            return result
        finally:
            with contextlib.suppress(Exception):
                sink(features(args, kwargs, result))

    return recorded


def wrap_in_worker(namespace: dict, name: str) -> None:
    """In a worker process (code added to the source it runs): record ``name``'s calls into the log file."""
    log, phase = os.environ.get(LOG_ENV), os.environ.get(PHASE_ENV)
    fn = namespace.get(name)
    if not (log and phase and callable(fn)):
        return

    def sink(found: dict[str, str]) -> None:
        with open(log, "a") as f:
            f.write(json.dumps({"phase": phase, "features": found}) + "\n")

    wrapped = recording(fn, sink)
    if namespace.get("__entry__") is fn:
        namespace["__entry__"] = wrapped
    namespace[name] = wrapped


@contextlib.contextmanager
def _workers_record(name: str, log: Path) -> Iterator[None]:
    """While inside: a function sent to worker processes records ``name``'s calls there too."""
    from shardbook import hosts

    original = hosts.function_source

    def with_recorder(fn: Callable) -> str:
        text = original(inspect_unwrap(fn))
        return text + f"\nimport grading.parity as _parity\n_parity.wrap_in_worker(globals(), {name!r})\n"

    hosts.function_source = with_recorder
    os.environ[LOG_ENV] = str(log)
    try:
        yield
    finally:
        hosts.function_source = original
        os.environ.pop(LOG_ENV, None)
        os.environ.pop(PHASE_ENV, None)


def inspect_unwrap(fn: Callable) -> Callable:
    import inspect

    return inspect.unwrap(fn)


Calls = dict[str, list[dict[str, str]]]  # phase -> features of each call


@dataclass
class Recording:
    """What one function's self-check and hidden tests did with the reference solution."""

    calls: Calls = field(default_factory=lambda: {p: [] for p in PHASES})
    #: site -> its value the first time the self-check read it (the self-check's first configuration)
    first: dict[int, object] = field(default_factory=dict)
    #: site -> the distinct values (as text) it took, over the self-check and the hidden tests
    taken: dict[int, set[str]] = field(default_factory=dict)
    #: the names of the notebook's global meshes after the self-check ran ("mesh" first)
    meshes: list[str] = field(default_factory=list)


def _value_text(value: object) -> str:
    from jax.sharding import Mesh

    if isinstance(value, Mesh):
        return f"Mesh{tuple(value.axis_sizes)}{tuple(value.axis_names)}{[d.id for d in value.devices.flat]}"
    if isinstance(value, dict):
        return f"keys {sorted(map(str, value))}"
    text = repr(value)
    return text if len(text) < 200 else text[:200]


#: The recording the probe writes into (this process's), and the phase running.
_ACTIVE: dict[str, Any] = {"recording": None, "phase": ["visible"]}


def hardcoding_probe(k: int, value: object) -> object:
    """``value``, noted as site ``k``'s (the probed answer cell calls this around each site)."""
    found = _ACTIVE["recording"]
    if found is not None:
        if _ACTIVE["phase"][0] == "visible":
            found.first.setdefault(k, value)
        with contextlib.suppress(Exception):
            texts = found.taken.setdefault(k, set())
            if len(texts) < 8:
                texts.add(_value_text(value))
    return value


def record_function(
    base: dict,
    function: str,
    cells: list[tuple[str, str]],
    fresh: Callable[[dict], dict],
    probed: str | None = None,
    probe: str = "__hardcoding_probe__",
) -> Recording:
    """Runs ``function``'s self-check and hidden test cells (``cells``: (grade_id, source)) in a copy of
    ``base`` (the reference solution's namespace) with the function wrapped; what they did.

    ``probed``: the answer cell with its sites wrapped in calls of ``probe`` (``grading.mutations``'s
    hard-coding sites), run first, so that each site's values are recorded too.

    Raises:
      RuntimeError: a cell failed (the reference must pass, or the calls would stop early).
    """
    from jax.sharding import Mesh

    from grading.assignment import run_cell

    found = Recording()
    namespace = fresh(base)
    phase = _ACTIVE["phase"] = ["visible"]
    _ACTIVE["recording"] = found
    namespace[probe] = hardcoding_probe  # importable: a function sent to worker processes can take it
    if probed is not None:
        run_cell(probed, f"<{function}>", namespace)
    answer = namespace[function] if probed is not None else base[function]
    with tempfile.TemporaryDirectory(prefix="parity-") as folder:
        log = Path(folder) / "calls.jsonl"
        with _workers_record(function, log):
            for gid, source in cells:
                kind = (
                    "visible" if gid.endswith("_visible") else "hidden" if gid.endswith("_hidden") else None
                )
                if kind is None:
                    continue
                phase[0] = kind
                os.environ[PHASE_ENV] = kind
                namespace[function] = recording(answer, found.calls[kind].append)
                try:
                    with redirect_stdout(io.StringIO()), redirect_stderr(io.StringIO()):
                        run_cell(source, f"<{gid}>", namespace)
                except Exception as e:
                    raise RuntimeError(f"{gid} failed with the reference solution: {e}") from e
                if kind == "visible":
                    meshes = [
                        n for n, v in namespace.items() if isinstance(v, Mesh) and not n.startswith("_")
                    ]
                    found.meshes = sorted(meshes, key=lambda n: n != "mesh")
        if log.exists():
            for line in log.read_text().splitlines():
                entry = json.loads(line)
                found.calls[entry["phase"]].append(entry["features"])
    _ACTIVE["recording"] = None
    return found


def violations(calls: Calls) -> list[str]:
    """Each dimension the calls vary but the self-check never does, in words, with its values."""
    seen: dict[str, dict[str, set[str]]] = {}
    for phase, found in calls.items():
        for call in found:
            for name, value in call.items():
                seen.setdefault(name, {p: set() for p in PHASES})[phase].add(value)
    out = []
    for name, by_phase in seen.items():
        tried = by_phase["visible"]
        if not tried:
            continue  # a part only some hidden calls have: its parent's length or keys tell it
        everything = tried | by_phase["hidden"]
        if len(everything) > 1 and len(tried) == 1:
            others = sorted(everything - tried)
            out.append(
                f"{name}: the self-check tries only {next(iter(tried))}, the hidden tests also {others}"
            )
    return out
