"""Errors in words: what a learner's code raised, as one sentence and one hint, the same everywhere.

A learner meets an error in three places and reads the same words in each:

* in a notebook cell (Colab, Jupyter): :func:`explain_common_errors` makes IPython show a known mistake,
  and every failed check (``shardbook.checks.CheckFailed``), as its sentence, its hint and the notebook
  lines that led to it, each named by its cell (``Cell In[7], line 3, in f``), instead of a traceback
  through JAX's or this package's own files;
* in a check's message: :func:`describe_error` (``shardbook.checks.call``, the graders' calls);
* on the feedback page of a graded notebook: :func:`error_lines`, from the error's name and message
  alone — the lines the cell showed, without its cell lines.

Errors of a job of several processes (``shardbook.hosts``) are named too: a collective that only some
processes ran, a peer that left, arrays of different shapes in one collective, ``device_put`` of one
process's own rows. :data:`PEER_ERRORS` are those that only follow from what another process did, so
a launcher reports another process's own error before them (:func:`is_peer_error`).
"""

from __future__ import annotations

import linecache
import re
import traceback
from typing import Any

from .runtime import COMPANIONS_PIP, in_colab

_Entry = tuple[tuple[str, ...], str, str]

_VMA_HINT = (
    "start the carry from a per-device value: jax.lax.pcast(init, axis_names, to='varying'), or build "
    "it from a block (jnp.zeros_like(x_block))."
)
_DIVIDE_HINT = (
    "compute sizes from what you are given (x.shape, mesh.shape[...]) instead of writing them down: "
    "the hidden tests use other sizes and meshes, and every split dimension divides its mesh axis there."
)
_NO_MESH_HINT = "wrap the spec: NamedSharding(mesh, P(...)), or run the code under with jax.set_mesh(mesh)."

# (substrings that must all appear in the error, what went wrong in words, one hint). First match wins.
JAX_ERRORS: list[_Entry] = [
    (
        ("out_specs", "possibly varying"),
        "shard_map's out_specs say the result is the same on every device of an axis, but the value "
        "returned differs from device to device along it",
        "if every device should hold all of it, reduce or gather it over that axis first (psum / "
        "all_gather); if each device returns its own block, name the axis in out_specs. check_vma=False "
        "would only hide the mistake.",
    ),
    (
        ("carry", "must have equal types"),
        "a loop carry starts out the same on every device but comes back different per device (its "
        "type gains {V:...})",
        _VMA_HINT,
    ),
    (
        ("manual axis types do not match",),
        "two values that must have the same type differ in which devices they vary over ({V:...})",
        _VMA_HINT,
    ),
    (
        ("not evenly divisible",),
        "an array's size does not divide evenly over the mesh axis that splits it",
        _DIVIDE_HINT,
    ),
    (
        ("does not evenly divide",),
        "an array's size does not divide evenly over the mesh axis that splits it",
        _DIVIDE_HINT,
    ),
    (
        ("cannot contain axis names that are of type Auto",),
        "a sharding-in-types call (jax.reshard, out_sharding=...) was used on a mesh whose axes are Auto",
        "those calls need Explicit axes; on Auto axes use jax.lax.with_sharding_constraint, or write code "
        "that works on both kinds of mesh (the hidden tests use both).",
    ),
    (
        ("Mesh for all inputs should be equal",),
        "the inputs lie on different meshes (one with Explicit axes, one with Auto axes, or other devices)",
        "build every array on the mesh you are given, NamedSharding(mesh, spec), not on a mesh of your own.",
    ),
    (("not under a mesh context",), "a bare PartitionSpec was used where no mesh is set", _NO_MESH_HINT),
    (("non-empty mesh in context",), "a bare PartitionSpec was used where no mesh is set", _NO_MESH_HINT),
    (("set a mesh via `jax.set_mesh`",), "a bare PartitionSpec was used where no mesh is set", _NO_MESH_HINT),
    (
        ("ShardingTypeError",),
        "on a mesh with Explicit axes JAX must know each result's sharding while tracing, and here it "
        "is ambiguous",
        "say which one you want: out_sharding=P(...) on that operation, or jax.reshard an operand first.",
    ),
    (
        ("in_specs argument must be a pytree of",),
        "shard_map was called without in_specs on a mesh whose axes are Auto",
        "give in_specs: on Auto axes the arrays do not carry their layout in their type, so shard_map "
        "cannot read it from them (only on Explicit axes may in_specs be left out).",
    ),
    (
        ("does not match the specs of the input",),
        "shard_map's in_specs do not match how an argument is laid out",
        "give in_specs the layout the contract states for each argument (it is how the inputs arrive).",
    ),
]

_SAME_COLLECTIVES = (
    "every process must run the same collectives in the same order (process_allgather, and any device_put "
    "or jit of arrays that span processes): none may sit under `if jax.process_index() == 0`."
)

#: Mistakes of one process in a job of several.
PROCESS_ERRORS: list[_Entry] = [
    (
        ("passed to device_put is not the same on each process",),
        "device_put got different data in each process (each process's own rows?), but onto a mesh that "
        "spans processes it takes the same whole array in every process",
        "to make one global array of the rows each process holds, use "
        "jax.make_array_from_process_local_data, then lay that out on the mesh.",
    ),
    (
        ("Received data size doesn't match expected size",),
        "the processes gave one collective arrays of different shapes",
        "every process must give each collective the same global shape: compute shapes from what all "
        "processes know (jax.process_count(), the mesh), not from one process's own data.",
    ),
]

#: How a hint about a peer that left begins; a launcher that knows what the others did says it instead.
READ_THE_OTHER = "read what the other process reported; "

#: Errors that follow from what another process did: it never joined a collective, it left, it died.
PEER_ERRORS: list[_Entry] = [
    (
        ("Gloo context initialization failed",),
        "this process started a collective that the other processes never joined (JAX waited for them, "
        "then gave up)",
        _SAME_COLLECTIVES,
    ),
    (
        ("GetKeyValue() timed out",),
        "this process started a collective that the other processes never joined (JAX waited for them, "
        "then gave up)",
        _SAME_COLLECTIVES,
    ),
    (
        ("Gloo", "Connection closed by peer"),
        "another process left while this one waited for it in a collective: it failed, finished, or "
        "skipped that collective",
        READ_THE_OTHER + _SAME_COLLECTIVES,
    ),
    (
        ("Gloo", "Connection reset by peer"),
        "another process left while this one waited for it in a collective: it failed, finished, or "
        "skipped that collective",
        READ_THE_OTHER + _SAME_COLLECTIVES,
    ),
    (
        ("DEADLINE_EXCEEDED",),
        "the processes timed out waiting for each other (a coordination deadline passed)",
        _SAME_COLLECTIVES,
    ),
    (
        ("detected fatal errors",),
        "JAX ended this process because another process of the job died",
        "read what the other process reported.",
    ),
    # Last, the catch-alls: any other failure of a collective between processes (Gloo's words vary with
    # the moment the others left) or of the processes' contact with each other.
    (
        ("Gloo",),
        "a collective between the processes failed, as one does when not every process runs it",
        _SAME_COLLECTIVES,
    ),
    (
        ("coordination service",),
        "the processes lost contact with each other (JAX's coordination service), as they do when one "
        "waits in a collective that another skipped or left",
        _SAME_COLLECTIVES,
    ),
]

#: Packages of the training and many-hosts chapters that the setup cell installs only on Colab:
#: import name -> distribution.
COMPANION_MODULES = {"flax": "flax", "optax": "optax", "orbax": "orbax-checkpoint"}
_MISSING_MODULE = re.compile(r"No module named '([\w.]+)'")


def first_line(text: str, limit: int = 300) -> str:
    """The first line of an error's message, at most ``limit`` characters, never cut inside an array
    print: a bracket left open is dropped with what follows it, and ``…`` says something was.

    Example:
      >>> first_line("not the same. Expected: [[ 0.  1.]\\n [ 2.  3.]]; got: [[4. 5.]]")
      'not the same. Expected: …'
    """
    lines = text.strip().splitlines()
    line = lines[0] if lines else ""
    cut = len(line) > limit
    line = line[:limit]
    opened: list[int] = []
    for i, ch in enumerate(line):
        if ch in "([{":
            opened.append(i)
        elif ch in ")]}" and opened:
            opened.pop()
    if opened:
        line, cut = line[: opened[0]], True
    return (line.rstrip(" ,;") + " …").lstrip() if cut else line


def describe_text(ename: str, message: str) -> tuple[str, str | None]:
    """:func:`describe_error` from an error's type name and message (as a feedback page holds them)."""
    text = message.strip()
    missing = _MISSING_MODULE.search(text)
    if ename == "ModuleNotFoundError" and missing and missing.group(1).split(".")[0] in COMPANION_MODULES:
        why = (
            "this Colab runtime does not have it"
            if in_colab()
            else "outside Colab the setup cell installs only JAX and the book's helper"
        )
        return (
            f"{ename}: No module named {missing.group(1)!r}: {why}",
            f"install the versions this book runs with, `{COMPANIONS_PIP}`, then restart the kernel and "
            "run the notebook again.",
        )
    searched = f"{ename}: {text}"
    for needles, words, hint in (*JAX_ERRORS, *PROCESS_ERRORS, *PEER_ERRORS):
        if all(n in searched for n in needles):
            return f"{ename}: {words}", hint
    first = first_line(text)
    return (f"{ename}: {first}" if first else ename), None


def describe_error(e: BaseException) -> tuple[str, str | None]:
    """An exception from a learner's code in words: ``(text, hint)``.

    A common JAX mistake (out_specs on a value that differs per device, a loop carry whose {V:...}
    type changes, a size that does not divide over the mesh, Explicit/Auto mesh mix-ups, a bare
    PartitionSpec without a mesh), a mistake of a job of several processes (a collective only some
    processes ran, arrays of different shapes in one collective, device_put of one process's own
    data, a peer that left) or a missing Flax/Optax/Orbax gets one sentence and its own hint; any
    other error is described by its type and first line (never cut inside an array print), with no
    hint (None).

    Example:
      >>> describe_error(KeyError("Z"))
      ("KeyError: 'Z'", None)
    """
    return describe_text(type(e).__name__, str(e))


def is_peer_error(text: str) -> bool:
    """Whether an error's text (raw, or a check's message that put it in words) only says that another
    process failed, left or never joined."""
    if any(words in text for _, words, _ in PEER_ERRORS):
        return True
    # Raw text: a peer error only if no entry before the peer ones describes it (a Gloo error about
    # arrays of different shapes is this process's own mistake, whatever Gloo's catch-all says).
    first = next(
        (entry for entry in (*JAX_ERRORS, *PROCESS_ERRORS, *PEER_ERRORS) if all(n in text for n in entry[0])),
        None,
    )
    return any(first is entry for entry in PEER_ERRORS)


def error_lines(ename: str, evalue: str) -> list[str] | None:
    """What a learner reads of an error, without its cell lines: a failed check's message on one line,
    a known mistake's sentence and hint on two; None for any other error (shown as it is)."""
    if ename == "CheckFailed":
        return [f"{ename}: {evalue}"]
    words, hint = describe_text(ename, evalue)
    return [f"{words}.", f"Hint: {hint}"] if hint else None


# ---------------------------------------------------------------------------------------------------
# in a notebook


#: At most this many notebook lines follow an error's sentence (the first and the last ones).
MAX_CELL_LINES = 4


def _cell_label(filename: str, shell: Any) -> str | None:
    """'Cell In[7]' for a notebook cell's code (its execution count, as IPython names it), else None."""
    counts = getattr(getattr(shell, "compile", None), "_filename_map", None) or {}
    if filename in counts:
        return f"Cell In[{counts[filename]}]"
    if "ipykernel_" in filename or filename.startswith("<ipython-input"):
        return "Cell"
    return None


def notebook_lines(error: BaseException, shell: Any = None) -> list[str]:
    """The frames of an error that are notebook cells, outermost first, each as
    ``'  Cell In[7], line 3, in f: <source>'``; those of the error it was raised from follow (a check
    that caught the learner's error), then, for a check run in several processes
    (``shardbook.hosts.run_check``), the lines of the function sent that led to it there
    (``'  process 0 of 2, in global_batch: <source>'``). At most :data:`MAX_CELL_LINES`."""
    chain: list[BaseException] = []
    seen: BaseException | None = error
    while seen is not None and seen not in chain:
        chain.append(seen)
        seen = seen.__cause__ or (None if seen.__suppress_context__ else seen.__context__)
    lines: list[str] = []
    for exc in chain:
        for frame, lineno in traceback.walk_tb(exc.__traceback__):
            filename = frame.f_code.co_filename
            label = _cell_label(filename, shell)
            if label is None:
                continue
            name = frame.f_code.co_name
            where = f"{label}, line {lineno}" + ("" if name == "<module>" else f", in {name}")
            line = f"  {where}: {linecache.getline(filename, lineno).strip()}"
            if line not in lines:
                lines.append(line)
    lines += [line for line in getattr(error, "worker_lines", []) if line not in lines]  # shardbook.hosts
    if len(lines) > MAX_CELL_LINES:
        lines = [lines[0], "  …", *lines[-(MAX_CELL_LINES - 1) :]]
    return lines


def _explain_or_show(shell: Any, etype: type, value: BaseException, tb: Any, tb_offset: int | None = None):
    """IPython's custom-exception handler: a failed check or a common mistake in words, anything else
    as usual."""
    shown = error_lines(etype.__name__, str(value)) if _is_check(value) else None
    if shown is None:
        words, hint = describe_error(value)
        shown = [f"{words}.", f"Hint: {hint}"] if hint else None
    if shown is None:
        shell.showtraceback((etype, value, tb), tb_offset=tb_offset)
        return None
    stb = [*shown, *notebook_lines(value, shell)]
    shell._showtraceback(etype, value, stb)  # an error output all the same: the cell failed
    return stb


def _is_check(value: BaseException) -> bool:
    return any(
        k.__name__ == "CheckFailed" and k.__module__.startswith("shardbook") for k in type(value).__mro__
    )


def explain_common_errors(shell: Any) -> None:
    """Makes an IPython shell show a failed check, or a common mistake, as one sentence, a hint and the
    notebook lines that led to it (named by cell), instead of a traceback through JAX's internals or
    this package's own files.

    The mistakes are those :func:`describe_error` knows (out_specs on a varying value, a size that does
    not divide over the mesh, Explicit/Auto mix-ups, a collective only some processes ran …). Any other
    exception keeps IPython's traceback, and either way the cell fails with an error output, as before.
    ``shardbook.setup()`` calls this when it runs in a notebook.

    Example:
      >>> class Shell:  # stands in for get_ipython(), the shell of a notebook
      ...     def set_custom_exc(self, types, handler):
      ...         print(types, handler.__name__)
      >>> explain_common_errors(Shell())
      (<class 'Exception'>,) _explain_or_show
    """
    shell.set_custom_exc((Exception,), _explain_or_show)
