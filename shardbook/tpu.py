"""Compile for a TPU without a TPU: the TPU compiler's own program, memory and verdict.

The TPU compiler (libtpu, installed from PyPI with ``jax[tpu]``) compiles for a TPU topology on any
machine: JAX describes the topology's chips as devices (``jax.experimental.topologies``), a mesh over
them lowers and compiles as usual, and nothing is allocated. XLA:CPU, which runs the book's simulated
devices, compiles a different program: other fusions, other collectives (it never decomposes a
sharded matmul into collective-permutes) and other memory. So a sentence about a TPU reads this
program, :func:`compile_for_tpu`'s, never the CPU's.

A compile of a large training step takes about a minute on two cores, so results are kept on disk,
keyed by a fingerprint of the program (:func:`fingerprint`: the topology, the JAX version and the
program as lowered for the same number of CPU devices). A program that changed is compiled again; one
that did not is read back, also where libtpu cannot be installed. The cache lives in
``shardbook/data/tpu_compiled/`` (committed, so a fresh clone compiles nothing that is unchanged), or
in ``$SHARDBOOK_TPU_CACHE``.

Example: a matmul sharded over a v5e-8's two axes (``build`` takes the devices to build on):

  >>> import jax, jax.numpy as jnp
  >>> from jax.sharding import AxisType, NamedSharding, PartitionSpec as P
  >>> def build(devices):
  ...     mesh = jax.make_mesh((2, 4), ("X", "Y"), (AxisType.Auto,) * 2, devices=devices)
  ...     a = jax.ShapeDtypeStruct((1024, 2048), jnp.bfloat16, sharding=NamedSharding(mesh, P("X", "Y")))
  ...     w = jax.ShapeDtypeStruct((2048, 8192), jnp.bfloat16, sharding=NamedSharding(mesh, P(None, "Y")))
  ...     return jax.jit(lambda a, w: a @ w, out_shardings=NamedSharding(mesh, P("X", "Y"))), (a, w)
  >>> program = compile_for_tpu(build, "v5e-8")  # doctest: +SKIP
  >>> program.fits, program.mesh_axes  # doctest: +SKIP
  (True, {'X': 2, 'Y': 4})
"""

from __future__ import annotations

import dataclasses
import functools
import gzip
import hashlib
import importlib.util
import json
import os
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .comms.compiled import Footprint, TpuProgram, parse_hbm_oom

#: The libtpu that ``jax[tpu]==0.12.0.1`` brings; part of every fingerprint, so a new compiler
#: recompiles everything.
LIBTPU = "0.0.50.1"

#: Raise this when the cache's layout changes: every entry is then compiled again.
CACHE_VERSION = 1

#: What libtpu reads at start; without them it prints warnings meant for a TPU VM, and a second process
#: that loads it (two chapters executed side by side, a test beside them) is refused its lock file.
#: Only compiling happens here, so processes may share it. Set only where unset.
_LIBTPU_ENVIRONMENT = {
    "ALLOW_MULTIPLE_LIBTPU_LOAD": "1",
    "TPU_SKIP_MDS_QUERY": "1",
    "TPU_ACCELERATOR_TYPE": "v5litepod-8",
    "TPU_WORKER_HOSTNAMES": "localhost",
    "TPU_WORKER_ID": "0",
}


@dataclass(frozen=True)
class Topology:
    """A TPU slice the compiler can target: JAX's name for it and the chips it has."""

    name: str  # as Google names the slice: "v5e-8"
    topology_name: str  # as jax.experimental.topologies names it: "v5e:2x4"
    chips_per_host_bounds: tuple[int, int, int]
    chip: str  # the cost model's name (shardbook.cost.CHIPS)
    devices: int


#: The slices this book compiles for. (v4's topology describes each chip's two cores as two
#: devices, unlike a v4 as JAX runs it, one device per chip; it is left out.)
TOPOLOGIES = {
    "v5e-1": Topology("v5e-1", "v5e:1x1", (1, 1, 1), "v5e", 1),
    "v5e-4": Topology("v5e-4", "v5e:2x2", (2, 2, 1), "v5e", 4),
    "v5e-8": Topology("v5e-8", "v5e:2x4", (2, 2, 1), "v5e", 8),
    "v6e-8": Topology("v6e-8", "v6e:2x4", (2, 2, 1), "v6e", 8),
    "v5p-8": Topology("v5p-8", "v5p:2x2x1", (2, 2, 1), "v5p", 4),
}


class TpuCompilerUnavailable(RuntimeError):
    """The TPU compiler (libtpu) is not installed, and the program is not in the cache."""


def topology(name: str) -> Topology:
    """The :class:`Topology` called ``name``, or a ValueError that lists the known ones."""
    if name not in TOPOLOGIES:
        raise ValueError(f"unknown TPU topology {name!r}: expected one of {sorted(TOPOLOGIES)}")
    return TOPOLOGIES[name]


def tpu_compiler_problem() -> str | None:
    """Why the TPU compiler cannot run here (a sentence), or None when it can."""
    if importlib.util.find_spec("libtpu") is None:
        return (
            "the TPU compiler is not installed (libtpu, from PyPI: pip install 'jax[tpu]==0.12.0.1'); "
            "programs not in the cache cannot be compiled for a TPU here"
        )
    return None


@functools.cache
def tpu_devices(name: str = "v5e-8") -> tuple:
    """The devices of a TPU topology, to build a mesh on: they compile, they never run.

    Raises:
      ValueError: an unknown topology.
      TpuCompilerUnavailable: libtpu is not installed.
    """
    t = topology(name)
    problem = tpu_compiler_problem()
    if problem:
        raise TpuCompilerUnavailable(problem)
    for key, value in _LIBTPU_ENVIRONMENT.items():
        os.environ.setdefault(key, value)
    from jax.experimental import topologies

    desc = topologies.get_topology_desc(
        platform="tpu",
        topology_name=t.topology_name,
        chip_config_name="default",
        chips_per_host_bounds=t.chips_per_host_bounds,
        num_slices=1,
    )
    return tuple(desc.devices)


#: A file that, when this variable names it, gets the fingerprint of every program compiled or read,
#: a line each: `make tpu-cache` keeps only the entries a whole run of the book and its tests used.
USED_LOG_VARIABLE = "SHARDBOOK_TPU_USED"


def _note_use(key: str) -> None:
    log = os.environ.get(USED_LOG_VARIABLE)
    if log:
        with open(log, "a") as f:
            f.write(key + "\n")


def cache_folder() -> Path:
    """Where compiled programs are kept: ``$SHARDBOOK_TPU_CACHE``, else ``shardbook/data/tpu_compiled``."""
    override = os.environ.get("SHARDBOOK_TPU_CACHE")
    return Path(override) if override else Path(__file__).parent / "data" / "tpu_compiled"


def _lowered(build: Callable, devices: Sequence) -> tuple[Any, dict[str, int]]:
    """``build(devices)``'s program lowered, and its mesh's axes.

    The caller's mesh in context (``jax.set_mesh``) is set aside while ``build`` runs, since the
    program is built on other devices; it is lowered with its own arguments' mesh in context (an
    Explicit mesh's program may need it).
    """
    import jax

    from .comms.compiling import lower

    with jax.set_mesh(None):
        out = build(list(devices))
    if not isinstance(out, tuple) or len(out) not in (2, 3):
        got = type(out).__name__
        raise TypeError(f"build(devices) must return (fn, args) or (fn, args, kwargs), got {got}")
    fn, args = out[0], tuple(out[1])
    kwargs = dict(out[2]) if len(out) == 3 else {}
    with jax.set_mesh(_mesh_of(args)):
        return lower(fn, args, kwargs), mesh_axes_of(args)


def fingerprint(build: Callable, name: str = "v5e-8") -> tuple[str, dict[str, int]]:
    """(the program's fingerprint for topology ``name``, its mesh's axes), computed on CPU devices.

    The program is lowered (not compiled) for as many CPU devices as the topology has chips, so the
    fingerprint is the same where libtpu is missing; it changes with the program, the topology, JAX,
    :data:`LIBTPU` and :data:`CACHE_VERSION`.
    """
    key, axes, _ = _fingerprint(build, name)
    return key, axes


def _fingerprint(build: Callable, name: str) -> tuple[str, dict[str, int], Any]:
    """:func:`fingerprint`, and the program lowered for the CPU devices it hashed."""
    import jax

    t = topology(name)
    cpus = jax.devices("cpu")
    if len(cpus) < t.devices:
        raise ValueError(
            f"a fingerprint for {name} lowers the program for {t.devices} CPU devices, and this process "
            f"has {len(cpus)}: call shardbook.setup() first (it gives 8)"
        )
    lowered, axes = _lowered(build, cpus[: t.devices])
    return _digest(lowered, name), axes, lowered


def _digest(lowered: Any, name: str) -> str:
    import jax

    digest = hashlib.sha256()
    for part in (f"v{CACHE_VERSION}", name, jax.__version__, LIBTPU, lowered.as_text()):
        digest.update(part.encode())
        digest.update(b"\0")
    return digest.hexdigest()


def _mesh_of(args: Any) -> Any:
    """The concrete mesh of the first named sharding among ``args``, else None."""
    import jax

    for leaf in jax.tree_util.tree_leaves(args):
        mesh = getattr(getattr(leaf, "sharding", None), "mesh", None)
        if isinstance(mesh, jax.sharding.Mesh) and mesh.axis_names:
            return mesh
    return None


def mesh_axes_of(args: Any) -> dict[str, int]:
    """The axes of the mesh of the first named sharding among ``args`` ({} when none has one)."""
    mesh = _mesh_of(args)
    if mesh is None:
        return {}
    return {str(a): int(n) for a, n in zip(mesh.axis_names, mesh.axis_sizes, strict=True)}


def compile_for_tpu(build: Callable, name: str = "v5e-8", *, cache: bool = True) -> TpuProgram:
    """Compiles the program ``build`` makes for the TPU topology ``name`` (nothing is allocated).

    Args:
      build: ``build(devices) -> (fn, args)`` or ``(fn, args, kwargs)``: the jitted function and its
        abstract arguments (``jax.ShapeDtypeStruct`` with shardings over a mesh of ``devices``). It is
        called with the topology's devices to compile, and with as many CPU devices to fingerprint.
      name: a topology of :data:`TOPOLOGIES` ("v5e-1", "v5e-4", "v5e-8", "v6e-8", "v5p-8").
      cache: read and write the cache (:func:`cache_folder`).

    Returns:
      A :class:`~shardbook.comms.compiled.TpuProgram`: the compiled text and ``memory_analysis()``, or,
      when the program needs more HBM than a chip has, ``fits`` False and the compiler's figures;
      either way, ``cpu_lowered``: the program as lowered for as many CPU devices to fingerprint it.

    Raises:
      TpuCompilerUnavailable: the program is not in the cache and libtpu is not installed.
      jax.errors.JaxRuntimeError: the compiler refused the program for another reason than HBM.
      ValueError: ``build``'s program runs on other devices than the topology's (its arguments carry no
        sharding on them); nothing is cached.
    """
    t = topology(name)
    key, axes, cpu_lowered = _fingerprint(build, name)
    path = cache_folder() / f"{key}.json.gz"
    _note_use(key)
    if cache and path.exists():
        return dataclasses.replace(_read(path, t, key), cpu_lowered=cpu_lowered)
    devices = tpu_devices(name)
    lowered, _ = _lowered(build, devices)
    start = time.perf_counter()
    entry: dict[str, Any] = {"topology": name, "jax": _jax_version(), "libtpu": LIBTPU, "mesh_axes": axes}
    try:
        compiled = lowered.compile()
    except Exception as e:  # jax.errors.JaxRuntimeError: the compiler's refusal
        figures = parse_hbm_oom(str(e))
        if figures is None:
            raise
        entry.update(needs_bytes=figures[0], hbm_bytes=figures[1], error=str(e).strip()[:2000])
    else:
        _refuse_other_platforms(compiled)
        stats = compiled.memory_analysis()
        entry.update(text=compiled.as_text(), memory=dataclasses.asdict(Footprint.of(stats)))
        entry["hbm_bytes"] = usable_hbm(name)
    entry["compile_seconds"] = time.perf_counter() - start
    if cache:
        _write(path, entry)
    return dataclasses.replace(_program(entry, t, key, from_cache=False), cpu_lowered=cpu_lowered)


def _refuse_other_platforms(compiled: Any) -> None:
    """Raises ValueError when ``compiled`` runs on other devices than a TPU's: a builder whose arguments
    carry no sharding on the devices it is given is lowered for the default backend (XLA:CPU here), and
    that program must not be cached, or read, as the TPU compiler's."""
    import jax

    shardings = jax.tree.leaves(compiled.input_shardings) + jax.tree.leaves(compiled.output_shardings)
    platforms = {d.platform for s in shardings for d in s.device_set}
    if platforms - {"tpu"}:
        raise ValueError(
            f"build(devices) gave a program for {', '.join(sorted(platforms))} devices, not the TPU "
            "topology's: give each argument a sharding on the devices build is given "
            "(jax.ShapeDtypeStruct(shape, dtype, sharding=...))"
        )


def usable_hbm(name: str = "v5e-8") -> int:
    """Bytes of HBM one chip of the topology makes available to a program, as its compiler says.

    Read from the compiler's refusal of a program far too large for any chip (kept in the cache like
    any program): 15.75 GiB on a v5e, the figure a real v5e's ``memory_stats()['bytes_limit']`` gives.
    """
    import jax
    import jax.numpy as jnp
    from jax.sharding import SingleDeviceSharding

    def build(devices: list) -> tuple:
        huge = jax.ShapeDtypeStruct((2**40 // 4,), jnp.float32, sharding=SingleDeviceSharding(devices[0]))
        return _double, (huge,)

    key, _ = fingerprint(build, name)
    path = cache_folder() / f"{key}.json.gz"
    _note_use(key)
    if path.exists():
        return int(json.loads(gzip.decompress(path.read_bytes()))["hbm_bytes"])
    lowered, _ = _lowered(build, tpu_devices(name))
    try:
        lowered.compile()
    except Exception as e:  # jax.errors.JaxRuntimeError
        figures = parse_hbm_oom(str(e))
        if figures is None:
            raise
        _write(path, {"topology": name, "hbm_bytes": figures[1], "probe": "a 4 TiB array"})
        return figures[1]
    raise RuntimeError(f"the TPU compiler for {name} accepted a 4 TiB program: no HBM limit to read")


def _double(x: Any) -> Any:
    return x * 2


def _jax_version() -> str:
    import jax

    return jax.__version__


def _program(entry: dict, t: Topology, key: str, from_cache: bool) -> TpuProgram:
    memory = Footprint(**entry["memory"]) if entry.get("memory") else None
    return TpuProgram(
        topology=t.name,
        chip=t.chip,
        fingerprint=key,
        mesh_axes=dict(entry.get("mesh_axes", {})),
        hbm_bytes=int(entry["hbm_bytes"]),
        text=entry.get("text"),
        memory=memory,
        needs_bytes=entry.get("needs_bytes"),
        error=entry.get("error", ""),
        compile_seconds=0.0 if from_cache else float(entry.get("compile_seconds", 0.0)),
        from_cache=from_cache,
    )


def _read(path: Path, t: Topology, key: str) -> TpuProgram:
    return _program(json.loads(gzip.decompress(path.read_bytes())), t, key, from_cache=True)


def _write(path: Path, entry: dict) -> None:
    """Writes the entry whole or not at all (chapters run side by side may write the same one)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    data = gzip.compress(json.dumps(entry, sort_keys=True).encode(), mtime=0)
    fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    os.chmod(tmp, 0o644)
    os.replace(tmp, path)


__all__ = [
    "CACHE_VERSION",
    "USED_LOG_VARIABLE",
    "LIBTPU",
    "TOPOLOGIES",
    "Topology",
    "TpuCompilerUnavailable",
    "cache_folder",
    "compile_for_tpu",
    "fingerprint",
    "topology",
    "tpu_compiler_problem",
    "tpu_devices",
    "usable_hbm",
]
