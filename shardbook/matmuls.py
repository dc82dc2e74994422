"""The matmuls of a traced program: which there are, and which of them do the work.

A self-check or grader that asks *how* a result is computed reads the program (``jax.make_jaxpr``):
:func:`dot_generals` finds every ``dot_general``, those inside ``jax.jit``, each branch of a
``lax.cond``, a loop's body and a ``jax.custom_vjp`` function included. Reading dtypes alone lets an
elementwise multiply-and-sum beside a matmul whose result is thrown away pass for a matmul:
:func:`matmul_work` runs the program with each matmul's result doubled in turn and measures which
outputs move, and :func:`expect_matmul_work` asks that the matmuls an output depends on multiply as
many numbers as the computation needs. Failures are :class:`shardbook.checks.CheckFailed` sentences
(expected, got, hint).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .checks import CheckFailed

#: Primitives whose one program runs once on the equation's own operands, so a probe may run it
#: equation by equation: jit, calls, remat, custom_jvp and custom_vjp functions.
_INLINED = {"jit", "pjit", "closed_call", "core_call", "remat", "remat2", "checkpoint", "custom_jvp_call",
            "custom_vjp_call", "custom_vjp_call_jaxpr"}  # fmt: skip
#: A dot_general "feeds" an output when doubling its result moves that output by at least this much of
#: the output's norm: the smallest term of a three-pass product moves it by about 2e-3.
FEEDS = 1e-5


def _programs(eqn: Any) -> Iterator[tuple[Any, list]]:
    """(jaxpr, consts) of every program among an equation's params: a jit's, each branch of a cond, a
    loop's body, a custom_vjp's."""
    for value in eqn.params.values():
        for v in value if isinstance(value, (tuple, list)) else (value,):
            if hasattr(getattr(v, "jaxpr", None), "eqns"):  # a ClosedJaxpr
                yield v.jaxpr, list(v.consts)
            elif hasattr(v, "eqns"):  # a Jaxpr (in newer JAX it holds its own consts)
                yield v, list(getattr(v, "consts", None) or ())


def _dots_in(jaxpr: Any) -> list[Any]:
    found = []
    for eqn in jaxpr.eqns:
        if eqn.primitive.name == "dot_general":
            found.append(eqn)
        for inner, _ in _programs(eqn):
            found += _dots_in(inner)
    return found


def _traced(program: Any, args: tuple) -> Any:
    """The jaxpr of ``program``: a function traced with ``args``, or a (closed) jaxpr as it is."""
    import jax

    if hasattr(program, "eqns") or hasattr(getattr(program, "jaxpr", None), "eqns"):
        return program
    return jax.make_jaxpr(program)(*args)


def dot_generals(program: Any, *args: Any) -> list[Any]:
    """The dot_general equations of ``jax.make_jaxpr(program)(*args)`` (or of ``program``, a jaxpr
    already traced), with those of every program inside it: under ``jax.jit``, in each branch of a
    ``lax.cond``, in a loop's body, in a ``jax.custom_vjp`` function.

    Example:
      >>> import jax, jax.numpy as jnp
      >>> f = lambda a: jax.lax.cond(a[0, 0] > 0, lambda: a @ a, lambda: a)
      >>> [(str(e.invars[0].aval.dtype), e.invars[0].aval.shape) for e in dot_generals(f, jnp.ones((2, 2)))]
      [('float32', (2, 2))]
    """
    jaxpr = _traced(program, args)
    return _dots_in(getattr(jaxpr, "jaxpr", jaxpr))


@dataclass(frozen=True)
class DotWork:
    """What one dot_general of a program does for its outputs."""

    eqn: Any  #: the dot_general equation
    pairs: int  #: numbers multiplied: the size of its result times the length of each sum
    #: per output of the program (its pytree leaves, in order): how far that output moves, as a fraction
    #: of its norm, when this dot's result is doubled; None where the dot cannot be probed (in a loop).
    moves: tuple[float, ...] | None


def _pairs(eqn: Any) -> int:
    (contracting, _), _ = eqn.params["dimension_numbers"]
    lhs = eqn.invars[0].aval.shape
    return int(np.prod(eqn.outvars[0].aval.shape, dtype=np.int64)) * int(
        np.prod([lhs[d] for d in contracting], dtype=np.int64)
    )


def _run(jaxpr: Any, consts: list, args: list, doubled: Any, seen: list, skipped: list) -> list:
    """Evaluates ``jaxpr`` one equation at a time, entering jits, calls and the branch a cond takes, with
    the result of the dot_general ``doubled`` (or none) multiplied by 2; notes the dot_generals it
    evaluated in ``seen`` and those of the branches a cond did not take in ``skipped``."""
    env: dict = {}

    def read(v: Any) -> Any:
        return env[v] if not hasattr(v, "val") else v.val  # a Literal holds its value

    env.update(zip(jaxpr.constvars, consts, strict=True))
    env.update(zip(jaxpr.invars, args, strict=True))
    for eqn in jaxpr.eqns:
        ins = [read(v) for v in eqn.invars]
        program = None
        if eqn.primitive.name == "cond":
            branches = list(_programs(eqn))
            taken = min(max(int(ins[0]), 0), len(branches) - 1)
            program, ins = branches[taken], ins[1:]
            for k, (branch, _) in enumerate(branches):
                skipped += _dots_in(branch) if k != taken else []
        elif eqn.primitive.name in _INLINED:
            program = next(
                (
                    p
                    for p in _programs(eqn)
                    if len(p[0].invars) == len(ins) and len(p[0].outvars) == len(eqn.outvars)
                ),
                None,
            )
        if program is not None:
            outs = _run(*program, ins, doubled, seen, skipped)
        else:
            params = eqn.primitive.get_bind_params(eqn.params)
            subfuns, params = params if isinstance(params, tuple) else ((), params)  # JAX < 0.7: a pair
            manager = getattr(getattr(eqn, "ctx", None), "manager", None) or contextlib.nullcontext()
            with manager:
                outs = eqn.primitive.bind(*subfuns, *ins, **params)
            outs = outs if eqn.primitive.multiple_results else [outs]
            if eqn.primitive.name == "dot_general":
                seen.append(eqn)
                if eqn is doubled:
                    outs = [2 * outs[0]]
        env.update(zip(eqn.outvars, outs, strict=True))
    return [read(v) for v in jaxpr.outvars]


def matmul_work(fn: Any, *args: Any) -> list[DotWork]:
    """Every dot_general of ``fn``'s program (in :func:`dot_generals`' order), the numbers it multiplies,
    and how far each output moves when its result alone is doubled: a matmul whose result is thrown
    away, multiplied by zero or left in a branch not taken moves nothing. It runs the program once per
    dot_general, one equation at a time: for small arguments.

    Example:
      >>> import jax.numpy as jnp
      >>> a = jnp.ones((2, 3))
      >>> [(w.pairs, w.moves) for w in matmul_work(lambda a: (a @ a.T, 0 * (a @ a.T).sum()), a)]
      [(12, (1.0, 0.0)), (12, (0.0, 0.0))]
    """
    import jax

    closed = jax.make_jaxpr(fn)(*args)
    jaxpr, consts, leaves = closed.jaxpr, list(closed.consts), jax.tree.leaves(args)
    seen: list = []
    skipped: list = []
    base = [np.asarray(x, np.float64) for x in _run(jaxpr, consts, leaves, None, seen, skipped)]
    moves: dict[int, tuple[float, ...]] = {id(e): (0.0,) * len(base) for e in skipped}
    for eqn in list(seen):
        outs = _run(jaxpr, consts, leaves, eqn, [], [])
        moves[id(eqn)] = tuple(
            float(np.linalg.norm(np.asarray(o, np.float64) - b) / max(float(np.linalg.norm(b)), 1e-30))
            for o, b in zip(outs, base, strict=True)
        )
    return [DotWork(e, _pairs(e), moves.get(id(e))) for e in _dots_in(jaxpr)]


def expect_matmul_work(
    fn: Any,
    *args: Any,
    needs: Sequence[tuple[str, int, str] | None],
    what: str = "your function",
    hint: str | None = None,
) -> None:
    """Checks that the matmuls do the work: for each output of ``fn(*args)`` (its pytree leaves, in
    order) with a need ``(name, pairs, how)``, the dot_generals that output depends on
    (:func:`matmul_work`) multiply at least ``pairs`` numbers. An elementwise multiply-and-sum, or a
    matmul next to the real computation whose result is multiplied by zero, does not count; a
    dot_general in a loop's body is taken to count. A program that does not run one equation at a time
    here is not judged (the caller's other checks, of values and dtypes, still are).

    Raises:
      CheckFailed: naming the output, the pairs needed and how they arise, and the pairs multiplied.
    """
    try:
        work = matmul_work(fn, *args)
    except (NotImplementedError, CheckFailed):
        raise
    except Exception:  # noqa: BLE001 (a limit of the probe, not the learner's mistake)
        return
    for k, need in enumerate(needs):
        if need is None:
            continue
        name, pairs, how = need
        feeding = [w for w in work if w.moves is None or w.moves[k] >= FEEDS]
        got = sum(w.pairs for w in feeding)
        if got < pairs:
            message = (
                f"{what}: expected the dot_generals that {name} depends on to multiply at least "
                f"{pairs:,} pairs of numbers ({how}), got {got:,} ({len(feeding)} of the program's "
                f"{len(work)} dot_generals feed {name})."
            )
            raise CheckFailed(message + (f" Hint: {hint}" if hint else ""))
