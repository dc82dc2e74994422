"""What the self-check and the hidden tests call each graded function with, read while they run.

A learner who writes down a value of the self-check (the ring length 4, k = 2, the names ``w`` and
``b``, the notebook's global mesh) passes a self-check that never changes it and loses every hidden
point. The rule (tests/test_parity.py): **every dimension the tests vary, the self-check varies**.

The dimensions are not listed by hand: a :class:`Recorder` wraps every graded function while the
reference solution's cells run, and notes the *features* of each call its self-check and its hidden
tests make (:func:`features`). The tests (tests/test_parity.py) read what it noted during the
reference solution's in-process grading (``python -m tests.submissions grade --parity``), which runs
every cell once, in order, as nbgrader does; :func:`record_function` runs one function's test cells
in a copy of the reference solution's namespace (``grading.mutants.base_namespace``), for
`make mutants`. The features: of each argument, a
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
import importlib.abc
import importlib.machinery
import inspect
import io
import json
import os
import re
import shutil
import sys
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
            f.write(json.dumps({"function": name, "phase": phase, "features": found}) + "\n")

    wrapped = recording(fn, sink)
    if namespace.get("__entry__") is fn:
        namespace["__entry__"] = wrapped
    namespace[name] = wrapped


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


#: The recording the probe writes into (that of the direct call running, if any), and the phase.
_ACTIVE: dict[str, Any] = {"recording": None, "phase": "visible"}


def hardcoding_probe(k: int, value: object) -> object:
    """``value``, noted as site ``k``'s (the probed answer cell calls this around each site)."""
    found = _ACTIVE["recording"]
    if found is not None:
        if _ACTIVE["phase"] == "visible":
            found.first.setdefault(k, value)
        with contextlib.suppress(Exception):
            texts = found.taken.setdefault(k, set())
            if len(texts) < 8:
                texts.add(_value_text(value))
    return value


def phase_of(grade_id: str) -> str | None:
    """The phase of a cell: "visible" (a self-check), "hidden" (a hidden test), or None (any other)."""
    return "visible" if grade_id.endswith("_visible") else "hidden" if grade_id.endswith("_hidden") else None


class Recorder:
    """Records what each graded function's self-check and hidden tests call it with, while the cells run.

    ``tests``: function -> its graded cells, ``(grade_id, source)`` (``grading.mutants.Notebook.tests``);
    ``probed``: function -> its answer cell with the hard-coding sites probed. Use as a context
    manager around running the cells, in order, in one namespace (a notebook's, or a copy of the
    reference solution's): each answer cell's source is :meth:`source` (the probed one), after it
    :meth:`wrap`; each cell runs inside :meth:`cell`. Then :attr:`found` holds a :class:`Recording` per
    function.

    A call is recorded when a cell of that function's tests makes it: from the cell's code, a grader,
    or JAX tracing it, but not from inside another answer (a function's tests see the others as the
    reference has them). Its probed sites are read during such a call only. Calls in worker processes
    (``shardbook.hosts``) are recorded there: the source a check sends gains a line that wraps the
    function; this holds when the hardening prologue of grading drops ``shardbook.hosts`` before a
    test cell, as each fresh import of it is patched again.
    """

    def __init__(self, tests: dict[str, list[tuple[str, str]]], probed: dict[str, str] | None = None):
        self.found = {fn: Recording() for fn in tests}
        self.probed = dict(probed or {})
        self._of_cell: dict[str, list[str]] = {}
        for fn, cells in tests.items():
            for gid in dict.fromkeys(gid for gid, _ in cells):
                self._of_cell.setdefault(gid, []).append(fn)
        self._recording: list[str] = []  # the functions whose test cell is running
        self._phase: str | None = None
        self._depth = 0  # answers running (a call from inside one is not its tests' call)
        self._folder: str | None = None
        self._patched: list[tuple[Any, Callable]] = []  # (shardbook.hosts module, its function_source)
        self._finder: _PatchOnImport | None = None

    def source(self, grade_id: str, source: str) -> str:
        """The source to run for a cell: an answer's probed source, any other cell's own."""
        return self.probed.get(grade_id, source)

    def wrap(self, namespace: dict, function: str) -> None:
        """Puts ``function`` (an answer cell has just defined it in ``namespace``) behind the recorder."""
        answer = namespace.get(function)
        if function not in self.found or not callable(answer):
            return
        from grading.mutations import PROBE

        namespace.setdefault(PROBE, hardcoding_probe)
        found = self.found[function]

        @functools.wraps(answer)
        def recorded(*args, **kwargs):
            direct = self._depth == 0 and function in self._recording
            before = _ACTIVE["recording"]
            _ACTIVE["recording"] = found if direct else None
            self._depth += 1
            result: Any = None
            try:
                result = answer(*args, **kwargs)
                return result
            finally:
                self._depth -= 1
                _ACTIVE["recording"] = before
                if direct:
                    with contextlib.suppress(Exception):
                        found.calls[self._phase or "visible"].append(features(args, kwargs, result))

        namespace[function] = recorded

    @contextlib.contextmanager
    def cell(self, grade_id: str | None, namespace: dict) -> Iterator[None]:
        """Around running one cell: a self-check or hidden test cell records its functions' calls."""
        from jax.sharding import Mesh

        phase = phase_of(grade_id or "")
        self._recording = self._of_cell.get(grade_id or "", []) if phase else []
        self._phase = _ACTIVE["phase"] = phase
        if phase:
            os.environ[PHASE_ENV] = phase
        try:
            yield
        finally:
            if phase == "visible":
                meshes = [n for n, v in namespace.items() if isinstance(v, Mesh) and not n.startswith("_")]
                for fn in self._recording:
                    self.found[fn].meshes = sorted(meshes, key=lambda n: n != "mesh")
            self._recording, self._phase = [], None
            os.environ.pop(PHASE_ENV, None)

    def _patch(self, hosts: Any) -> None:
        """``hosts.function_source`` adds to what it sends a line recording the functions being tested."""
        original = hosts.function_source

        def with_recorder(fn: Callable) -> str:
            # The probe travels as an import of this module's (the prologue may have dropped it).
            sys.modules[__name__] = _THIS_MODULE
            text = original(inspect.unwrap(fn))
            lines = [f"_parity.wrap_in_worker(globals(), {name!r})" for name in self._recording]
            return text + "\nimport grading.parity as _parity\n" + "\n".join(lines) + "\n"

        hosts.function_source = with_recorder
        self._patched.append((hosts, original))

    def __enter__(self) -> Recorder:
        from shardbook import hosts

        self._folder = tempfile.mkdtemp(prefix="parity-")
        os.environ[LOG_ENV] = str(Path(self._folder) / "calls.jsonl")
        self._patch(hosts)
        self._finder = _PatchOnImport("shardbook.hosts", self._patch)
        sys.meta_path.insert(0, self._finder)
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._folder is not None
        if self._finder in sys.meta_path:
            sys.meta_path.remove(self._finder)
        for hosts, original in reversed(self._patched):
            hosts.function_source = original
        self._patched.clear()
        os.environ.pop(LOG_ENV, None)
        os.environ.pop(PHASE_ENV, None)
        log = Path(self._folder) / "calls.jsonl"
        if log.exists():
            for line in log.read_text().splitlines():
                entry = json.loads(line)
                if entry["function"] in self.found:
                    self.found[entry["function"]].calls[entry["phase"]].append(entry["features"])
        shutil.rmtree(self._folder, ignore_errors=True)
        _ACTIVE["recording"] = None


class _PatchOnImport(importlib.abc.MetaPathFinder):
    """Finds module ``name`` as Python would, and hands it to ``patch`` each time it is executed."""

    def __init__(self, name: str, patch: Callable[[Any], None]):
        self.name, self.patch = name, patch

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        if fullname != self.name:
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path, target)
        loader = getattr(spec, "loader", None)
        if loader is not None and hasattr(loader, "exec_module"):
            run = loader.exec_module

            def exec_module(module: Any) -> None:
                run(module)
                self.patch(module)

            loader.exec_module = exec_module  # this spec's own loader
        return spec


#: This module (the hardening prologue of grading drops it from sys.modules before each test cell).
_THIS_MODULE = sys.modules[__name__]


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
    from grading.assignment import run_cell

    namespace = fresh(base)
    namespace[probe] = hardcoding_probe  # importable: a function sent to worker processes can take it
    with Recorder({function: cells}) as recorder:
        if probed is not None:
            run_cell(probed, f"<{function}>", namespace)
        recorder.wrap(namespace, function)
        for gid, source in cells:
            if phase_of(gid) is None:
                continue
            with recorder.cell(gid, namespace):
                try:
                    with redirect_stdout(io.StringIO()), redirect_stderr(io.StringIO()):
                        run_cell(source, f"<{gid}>", namespace)
                except Exception as e:
                    raise RuntimeError(f"{gid} failed with the reference solution: {e}") from e
    return recorder.found[function]


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
