"""Comparisons for self-checks and graders, with failure messages written for learners.

Every check raises :class:`CheckFailed` with one message of the form
``"<what>: expected <this>, got <that>. Hint: <one hint>"`` and never a traceback from deep inside
JAX: a learner's function that returns the wrong kind of object is described, not crashed on.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np

from .errors import JAX_ERRORS, describe_error, explain_common_errors  # noqa: F401 (their home)
from .failures import _NONE_TEXT, NONE_HINT, CheckFailed, _fail  # noqa: F401 (their home)


def _spec_text(spec: Any) -> str:
    entries = [repr(e) if not isinstance(e, tuple) else "(" + ", ".join(map(repr, e)) + ")" for e in spec]
    return "P(" + ", ".join(entries) + ")"


def describe_array(x: Any) -> str:
    """A short description of a value: dtype, shape and, for a JAX array, its sharding.

    Example:
      >>> import numpy as np
      >>> describe_array(np.zeros((2, 3), np.float32))
      'a NumPy array float32[2,3]'
    """
    import jax

    if isinstance(x, jax.Array):
        shape = ",".join(map(str, x.shape))
        text = f"{x.dtype}[{shape}]"
        sharding = getattr(x, "sharding", None)
        spec = getattr(sharding, "spec", None)
        if spec is not None and sharding is not None:
            if sharding.is_fully_replicated and x.ndim > 0:
                text += " replicated"
            else:
                text += f" sharded {_spec_text(spec)}"
        elif sharding is not None and len(sharding.device_set) == 1:
            text += " on one device"
        return text
    if isinstance(x, np.ndarray):
        return f"a NumPy array {x.dtype}[{','.join(map(str, x.shape))}]"
    if isinstance(x, (list, tuple, set, dict)):
        text = repr(x)
        return f"the {type(x).__name__} {text if len(text) <= 60 else text[:57] + '...'}"
    if x is None:
        return _NONE_TEXT
    text = repr(x)
    text = text if len(text) <= 60 else text[:57] + "..."
    kind = type(x).__name__
    if type(x).__name__ == "P" or kind == "PartitionSpec":
        return f"the PartitionSpec {text}"
    return text if text.startswith(kind) else f"{kind} {text}"


def expect_equal(got: Any, expected: Any, what: str = "the result", hint: str | None = None) -> None:
    """Checks ``got == expected`` for plain Python values (ints, tuples, sets, strings…).

    Raises:
      CheckFailed: with both values in the message.
    """
    try:
        same = bool(got == expected)
    except (TypeError, ValueError):  # an array compared with a tuple; an array's ambiguous truth value
        same = False
    if not same:
        _fail(what, repr(expected), repr(got) if _is_plain(got) else describe_array(got), hint)


def _is_plain(x: Any) -> bool:
    return isinstance(x, (int, float, str, bool, tuple, list, set, frozenset, dict))


def expect_shape(
    got: Any, expected: Sequence[int], what: str = "the result", hint: str | None = None
) -> None:
    """Checks that ``got`` is an array of the given shape."""
    shape = getattr(got, "shape", None)
    if shape is None:
        _fail(what, f"an array of shape {tuple(expected)}", describe_array(got), hint)
    if tuple(shape) != tuple(expected):
        _fail(what, f"shape {tuple(expected)}", f"shape {tuple(shape)}", hint)


def expect_allclose(
    got: Any,
    expected: Any,
    what: str = "the result",
    *,
    rtol: float = 1e-5,
    atol: float = 1e-5,
    hint: str | None = None,
    mistakes: Sequence[tuple[Any, str]] = (),
    explain: Explainer | None = None,
) -> None:
    """Checks that ``got`` has ``expected``'s shape and values within tolerance.

    The message names the first wrong position and the largest error, so a learner can see whether
    everything is off or one block is. ``mistakes`` are ``(value, hint)`` pairs: what a known mistake
    computes, and the hint to give instead of ``hint`` when ``got`` equals that value. ``explain``
    computes the hint from the failure itself, ``explain(got, expected, wrong)`` with ``wrong`` the
    mask of the entries that differ (:func:`ring_blocks`, :func:`routed_rows`); when it returns
    None, ``hint`` is given.

    Raises:
      CheckFailed: wrong type, wrong shape, or values too far apart.
    """
    expected = np.asarray(expected)
    if not hasattr(got, "shape") or not hasattr(got, "dtype"):
        _fail(what, f"an array of shape {expected.shape}", describe_array(got), hint)
    try:
        got_np = np.asarray(got)
    except Exception as e:  # e.g. a deleted or non-addressable array
        _fail(what, f"an array of shape {expected.shape}", f"an array that cannot be read ({e})", hint)
    if got_np.shape != expected.shape:
        _fail(what, f"shape {expected.shape}", f"shape {got_np.shape}", hint)
    a = got_np.astype(np.float64) if got_np.dtype != bool else got_np
    b = expected.astype(np.float64) if expected.dtype != bool else expected
    close = np.isclose(a, b, rtol=rtol, atol=atol, equal_nan=True)
    if not close.all():
        if explain is not None:
            try:
                hint = explain(a, b, ~close) or hint
            except Exception:  # noqa: BLE001 (an explanation must never hide the failure itself)
                pass
        for value, mistake_hint in mistakes:
            m = np.asarray(value)
            if m.shape == a.shape and np.allclose(
                a, m.astype(np.float64), rtol=rtol, atol=atol, equal_nan=True
            ):
                hint = mistake_hint
                break
        bad = np.argwhere(~close)
        first = tuple(int(i) for i in bad[0])
        err = np.abs(a - b)
        _fail(
            what,
            f"{b[first].item()!r} at index {first}",
            f"{a[first].item()!r} ({len(bad)} of {close.size} entries differ; "
            f"largest error {np.nanmax(err):.3g})",
            hint,
        )


#: A hint computed from a failed comparison: (got, expected, mask of the wrong entries) -> words or None.
Explainer = Callable[[np.ndarray, np.ndarray, np.ndarray], "str | None"]


def _positions(items: Sequence[int], limit: int = 6) -> str:
    shown = ", ".join(map(str, items[:limit]))
    return shown + (", …" if len(items) > limit else "")


def ring_blocks(axis: int, n: int, name: str, mesh: Any = None) -> Explainer:
    """An ``explain`` for a result whose ``axis`` is split in ``n`` blocks over a ring (mesh axis ``name``).

    It names the blocks that are wrong and, when each wrong block j holds the right values of block
    j + s, the shift: the ring ran the other way, or one step too far. ``mesh`` (the mesh of the check)
    is named in the words, so a learner knows which case failed.
    """

    def explain(got: np.ndarray, expected: np.ndarray, wrong: np.ndarray) -> str | None:
        size = got.shape[axis]
        if n < 2 or size % n:
            return None
        width = size // n
        take = lambda x, j: np.take(x, range(j * width, (j + 1) * width), axis=axis)  # noqa: E731
        bad = [j for j in range(n) if take(wrong, j).any()]
        on = f" (a ring of {n} on {_mesh_text(mesh)})" if mesh is not None else f" (a ring of {n})"
        where = f"the blocks at {name!r} positions {_positions(bad)} of 0…{n - 1} are wrong{on}"
        shifts: set[int | None] = set()
        for j in bad:
            found = [
                s for s in range(1, n) if np.allclose(take(got, j), take(expected, (j + s) % n), atol=1e-5)
            ]
            shifts.add(found[0] if len(found) == 1 else None)
        found_shifts = [s for s in shifts if s is not None]
        if len(shifts) == 1 and found_shifts:
            s = found_shifts[0]
            way = "one step the other way" if s in (1, n - 1) else f"{min(s, n - s)} steps off"
            sign = "+" if s <= n // 2 else "-"
            return (
                f"{where}: each holds the right values of the block at position j {sign} "
                f"{min(s, n - s)}, so the blocks ended {way}: check the direction of each ppermute and "
                "which block a device holds at step s."
            )
        if len(bad) == n:
            return None  # nothing particular to say: the check's own hint
        return (
            f"{where}, the others are right: the devices at those positions add a wrong block or miss "
            "one; check the steps where a stream starts or ends (n // 2 and n - 1 - n // 2 on an odd ring)."
        )

    return explain


def routed_rows(w: Any, a: Any, b: Any, experts_per_device: int | None = None) -> Explainer:
    """An ``explain`` for Out[i] = mean over j of A[i] @ W[B[i, j]] (B int[S] or int[S, k]).

    For the wrong rows it says what came back instead: zeros (a dropped token), another expert's
    result (which one, and on which device it lives when ``experts_per_device`` is given), another
    token's result (results put back in the wrong rows), the sum of the k experts instead of their
    mean, or one of them only.
    """
    w64, a64 = np.asarray(w, np.float64), np.asarray(a, np.float64)
    ids = np.asarray(b).reshape(len(a64), -1)
    by_expert = np.einsum("sd,edf->esf", a64, w64)  # row i of every expert's result

    def explain(got: np.ndarray, expected: np.ndarray, wrong: np.ndarray) -> str | None:
        rows = [int(i) for i in np.flatnonzero(wrong.reshape(len(got), -1).any(axis=1))]
        count = f"{len(rows)} of {len(got)} rows are wrong"
        close = lambda x, y: np.allclose(x, y, rtol=1e-5, atol=1e-5)  # noqa: E731
        k = ids.shape[1]
        if k > 1 and all(close(got[i], k * expected[i]) for i in rows):
            return f"{count}, each k = {k} times the right one: the mean over the k experts, not the sum."
        zeros = [i for i in rows if close(got[i], 0)]
        if zeros and len(zeros) == len(rows):
            return (
                f"{count}, all zeros (rows {_positions(zeros)}): those tokens were dropped; size the "
                "buffers so that none is ever left out, even when every token goes to one device."
            )
        for i in rows:
            if close(got[i], 0):
                continue
            want = [int(e) for e in ids[i]]
            if k > 1:
                singles = [e for e in want if close(got[i], by_expert[e, i])]
                if singles:
                    return (
                        f"{count}; row {i} (experts {want}) holds expert {singles[0]}'s result only: "
                        f"average all {k} copies of a token when they come back."
                    )
            others = [e for e in range(len(w64)) if close(got[i], by_expert[e, i])]
            if k == 1 and others:
                e, wrong_e = want[0], others[0]
                where = ""
                if experts_per_device:
                    per = experts_per_device
                    where = (
                        f" (expert {e} lives on device {e // per} as its local expert {e % per}; the row "
                        f"was multiplied by local expert {wrong_e % per} of device {wrong_e // per})"
                    )
                return (
                    f"{count}; row {i} (token {i}, expert {e}) holds expert {wrong_e}'s result{where}. "
                    "Device d holds experts d·E/n … (d+1)·E/n − 1: a token goes to device expert // (E/n) "
                    "and uses its local expert expert % (E/n)."
                )
            from_token = [j for j in range(len(got)) if j != i and close(got[i], expected[j])]
            if from_token:
                return (
                    f"{count}; row {i} holds token {from_token[0]}'s result: each result must go back to "
                    "its own token's row (the slot it was sent from)."
                )
        if zeros:
            return f"{count}, among them {len(zeros)} all zeros (rows {_positions(zeros)}): dropped tokens."
        return None

    return explain


def expect_sharding(x: Any, expected: Any, what: str = "the result", hint: str | None = None) -> None:
    """Checks how a JAX array is laid out: ``expected`` is a Sharding or a PartitionSpec.

    A PartitionSpec is compared on ``x``'s own mesh; equivalent layouts (e.g. ``P('X', None)`` and
    ``P('X')``) pass.
    """
    import jax
    from jax.sharding import NamedSharding, PartitionSpec

    if not isinstance(x, jax.Array):
        _fail(what, "a JAX array", describe_array(x), hint)
    if isinstance(expected, PartitionSpec):
        mesh = getattr(x.sharding, "mesh", None)
        if mesh is None:
            _fail(what, f"an array sharded {_spec_text(expected)} over a mesh", describe_array(x), hint)
        expected_sharding = NamedSharding(mesh, expected)
        expected_text = f"sharded {_spec_text(expected)}"
    else:
        expected_sharding = expected
        spec = getattr(expected, "spec", None)
        expected_text = f"sharded {_spec_text(spec)}" if spec is not None else str(expected)
    if not x.sharding.is_equivalent_to(expected_sharding, x.ndim):
        got_text = describe_array(x)
        given, own = getattr(expected_sharding, "mesh", None), getattr(x.sharding, "mesh", None)
        if given is not None and own is not None and _mesh_text(given) != _mesh_text(own):
            expected_text += f" on the mesh given, {_mesh_text(given)}"
            got_text += f" on another mesh, {_mesh_text(own)}"
        _fail(what, f"{x.dtype}[{','.join(map(str, x.shape))}] {expected_text}", got_text, hint)


def _meshes_in(jaxpr: Any) -> Iterator[tuple[str, Any]]:
    """(primitive, mesh) of every mesh a traced program names: a constraint's or a jit's NamedSharding,
    a shard_map's mesh, in nested programs too."""
    from jax.sharding import Mesh, NamedSharding

    for eqn in jaxpr.eqns:
        for value in eqn.params.values():
            for v in value if isinstance(value, (tuple, list)) else (value,):
                if isinstance(v, NamedSharding) and isinstance(v.mesh, Mesh):
                    yield eqn.primitive.name, v.mesh
                elif isinstance(v, Mesh):
                    yield eqn.primitive.name, v
                inner = getattr(v, "jaxpr", v)
                if hasattr(inner, "eqns"):
                    yield from _meshes_in(inner)


def expect_program_on_mesh(fn: Any, *args: Any, mesh: Any, what: str = "your function") -> None:
    """Checks that every mesh ``fn(*args)`` names (a NamedSharding of a constraint, a shard_map's mesh)
    is ``mesh``, the mesh of the call: the same devices in the same places.

    A function that builds a sharding on a global mesh, or on a helper's default argument, computes
    the right values on that mesh only, or moves data between two layouts; this says so by name.

    Raises:
      CheckFailed: naming the operation, the mesh it used and the mesh of the call.
    """
    import jax

    try:
        jaxpr = jax.make_jaxpr(fn)(*args).jaxpr
    except Exception:  # noqa: BLE001 (the call's own check reports an error in words)
        return
    for primitive, used in _meshes_in(jaxpr):
        if not getattr(used, "empty", True) and _mesh_text(used) != _mesh_text(mesh):
            _fail(
                what,
                f"every sharding on the mesh of the call, {_mesh_text(mesh)}",
                f"a {primitive} on another mesh, {_mesh_text(used)}",
                "build each NamedSharding (and shard_map) on the mesh argument, not on a global mesh or "
                "a helper's default argument, which stays the mesh it was when the helper was defined.",
            )


def _mesh_text(mesh: Any) -> str:
    """A mesh's axes, sizes and devices in words: "{'X': 2, 'Y': 2} of devices [4, 5, 6, 7]"."""
    devices = getattr(mesh, "devices", None)
    ids = [getattr(d, "id", d) for d in devices.flat] if devices is not None else []
    return f"{dict(mesh.shape)} of devices {ids}"


def expect_type(
    got: Any, expected: type | tuple[type, ...], what: str = "the result", hint: str | None = None
) -> None:
    """Checks ``isinstance(got, expected)``."""
    if not isinstance(got, expected):
        names = (
            " or ".join(t.__name__ for t in expected) if isinstance(expected, tuple) else expected.__name__
        )
        _fail(what, f"a {names}", describe_array(got), hint)


# ---------------------------------------------------------------------------------------------------
# errors raised inside a learner's function, in one sentence (shardbook.errors)


def call(fn: Any, *args: Any, what: str = "your function", hint: str | None = None, **kwargs: Any) -> Any:
    """Runs ``fn(*args, **kwargs)`` for a self-check; an exception becomes one CheckFailed sentence.

    Raises:
      NotImplementedError: unchanged (the exercise is not attempted yet).
      CheckFailed: "<what>: expected a result, got <Error>: <words>. Hint: <hint>" (see
        :func:`describe_error`).

    Example:
      >>> import jax.numpy as jnp
      >>> call(jnp.sum, jnp.ones(4), what="jnp.sum(x)")
      Array(4., dtype=float32)
      >>> call(lambda x: x.reshape(3), jnp.ones(6), what="f(x)")  # doctest: +ELLIPSIS
      Traceback (most recent call last):
      ...
      shardbook.checks.CheckFailed: f(x): expected a result, got TypeError: cannot reshape ... first line.
    """
    try:
        return fn(*args, **kwargs)
    except (NotImplementedError, CheckFailed):  # "not attempted yet" says it all; a check's own words too
        raise
    except Exception as e:
        words, known_hint = describe_error(e)
        _fail(what, "a result", words, known_hint or hint or "read the error from its first line.")


def expect_float32_close(
    got: Any, expected: Any, what: str, *, hint: str | None = None, **kwargs: Any
) -> None:
    """:func:`expect_allclose` for float inputs that bfloat16 cannot hold: within float32's rounding
    (a relative 1e-4 of the largest entry), with a hint of its own when the values are only within
    bfloat16's (about 1%: a block cast to bf16 on its way, or a bf16 matmul)."""
    expected = np.asarray(expected, np.float64)
    scale = float(np.abs(expected).max()) or 1.0
    try:
        got_np = np.asarray(got, np.float64) if hasattr(got, "shape") else None
    except Exception:  # noqa: BLE001 (expect_allclose describes what cannot be read)
        got_np = None
    if got_np is not None and got_np.shape == expected.shape:
        err = float(np.abs(got_np - expected).max())
        if 1e-4 * scale < err <= 3e-2 * scale:
            hint = (
                "the values are close, but only to bfloat16's 3 significant digits: keep every block, "
                "product and sum in float32 (no astype, no bf16 matmul)."
            )
            kwargs.pop("explain", None)  # every block is a little off: no block is the wrong one
    expect_allclose(got, expected, what, rtol=1e-4, atol=1e-4 * scale, hint=hint, **kwargs)


# ---------------------------------------------------------------------------------------------------
# counting compilations


class CompileLog(logging.Handler):
    """Records every program JAX compiles while active, with its input types.

    Use it to see whether a second call of a function compiles again:

      >>> import jax, jax.numpy as jnp
      >>> f, x = jax.jit(lambda a: jnp.sin(a) * 3), jnp.ones(5)
      >>> with CompileLog() as log:
      ...     _ = f(x), f(x)
      >>> [name for name, _ in log.programs]  # compiled once: the second call hit the cache
      ['jit(<lambda>)']

    JAX has no public hook for this. It logs "Compiling <name> with global shapes and types <avals>"
    (at DEBUG level) once per XLA compilation, eager operations included, from its internal logger
    :attr:`LOGGER` (``jax._src.interpreters.pxla`` in JAX 0.12); this handler lowers that logger's level
    while it is active and keeps ``(name, avals)`` per record. Because a silent logger would read as
    "nothing was compiled", entering checks once per process, with a small program of its own, that the
    record still arrives, and raises :class:`RuntimeError` saying so when a JAX has renamed the logger
    or reworded the message.
    """

    LOGGER = "jax._src.interpreters.pxla"

    def __init__(self) -> None:
        super().__init__(level=logging.DEBUG)
        self.programs: list[tuple[str, tuple]] = []

    def emit(self, record: logging.LogRecord) -> None:
        if (
            isinstance(record.msg, str)
            and record.msg.startswith("Compiling ")
            and isinstance(record.args, tuple)
            and len(record.args) >= 2
        ):
            self.programs.append((str(record.args[0]), tuple(record.args[1])))  # type: ignore[arg-type]

    def __enter__(self) -> CompileLog:
        _check_compile_log_hears_jax(self.LOGGER)
        self._attach()
        return self

    def _attach(self) -> None:
        self._logger = logging.getLogger(self.LOGGER)
        self._level, self._propagate = self._logger.level, self._logger.propagate
        self._logger.setLevel(logging.DEBUG)
        self._logger.propagate = False  # keep the notebook quiet
        self._logger.addHandler(self)

    def __exit__(self, *exc: Any) -> None:
        self._logger.removeHandler(self)
        self._logger.setLevel(self._level)
        self._logger.propagate = self._propagate


_LOGGERS_HEARD: set[str] = set()


def _check_compile_log_hears_jax(logger: str) -> None:
    """Compiles a fresh small program under a CompileLog on ``logger``; RuntimeError if none is heard."""
    if logger in _LOGGERS_HEARD:
        return
    import jax
    import jax.numpy as jnp

    probe = CompileLog()
    probe.LOGGER = logger
    probe._attach()
    try:
        jax.jit(lambda a: a * 2 + 1)(jnp.zeros(3)).block_until_ready()  # a new function: always compiled
    finally:
        probe.__exit__()
    if not probe.programs:
        raise RuntimeError(
            f"CompileLog cannot see compilations in JAX {jax.__version__}: it listens to JAX's internal "
            f"logger {logger!r} for 'Compiling <name> ...' records, and none arrived for a program that "
            "was compiled (a JAX that renamed the logger or reworded the message); update "
            "shardbook.checks.CompileLog.LOGGER"
        )
    _LOGGERS_HEARD.add(logger)


from .program_checks import (  # noqa: E402, F401 (their home; importable from here too)
    analyze_for_check,
    expect_collectives,
    expect_estimate_within,
    expect_flops_and_bytes,
    expect_no_collectives,
    expect_no_intermediate_larger_than,
    expect_overlap,
    expect_report,
    list_collectives,
    matmul_seconds_beside_communication,
    overlap_seconds,
)
