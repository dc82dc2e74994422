"""A guard run before every test cell at grading time: are the checking tools still genuine?

Threat model (also in the README). The learner's kernel runs in a sandbox (``grading/sandbox.py``):
it cannot change the graders, the gradebook, other learners' files or the reports, nor read other
learners' submissions or the solutions, nor use the network. What this module guards is the learner's
*own* score, inside their own process. Test cells are restored from the instructor's copy, re-import
their tools fresh (see ``grading.preprocessors.HardenTests``) and then call :func:`assert_untampered`.
Together these defeat the accidental and the casual: a learner who redefines a check's name
(``expect_equal = lambda *a: None``), a test function's name, or a grader; who monkeypatches NumPy,
``np.testing`` or ``jax.jit`` at top level; or who edits or deletes a test cell. They do not defeat a
determined learner cheating on their own score — one who patches JAX internals, forges ``__module__``
on a fake, edits ``sys.modules`` machinery, or reads the public repository's graders and special-cases
their inputs. Grades are a teaching aid here; an instructor who needs more should read the learner's
code (the feedback shows it) for anything that looks like the above.

How IPython runs a cell is guarded the same way (:func:`reset_ipython`): before each test cell, nbgrader
asks the kernel (in an execute request with no code, whose ``user_expressions`` no input transformer,
AST transformer or cell event sees) to undo what notebook code registered there: input and AST
transformers, event callbacks, a custom exception handler, methods of the shell replaced on the
instance, trace and profile functions, a session log. What the kernel's own packages and the book
registered stays. And each test cell must end by displaying its token (:func:`prove`): the grader,
outside the kernel, scores a test cell without it 0, whatever hook kept it from running.
After each test cell, :func:`forget_tests` drops the cell's source from what later cells could read
(linecache, the last traceback); test cells are run without being stored in the input history.
"""

from __future__ import annotations

import builtins
import linecache
import os
import sys
import threading
import types
from importlib import import_module
from typing import Any

from grading.protocol import PROLOGUE_BEGIN, PROOF_MIME, Tampering
from shardbook.checks import CheckFailed

# (module, dotted attribute) pairs the graders and self-checks rely on.
CRITICAL = [
    ("numpy", "allclose"),
    ("numpy", "isclose"),
    ("numpy", "array_equal"),
    ("numpy", "asarray"),
    ("numpy", "testing.assert_allclose"),
    ("numpy", "testing.assert_array_equal"),
    ("jax", "jit"),
    ("jax", "device_put"),
    ("jax", "typeof"),
    ("jax", "shard_map"),
    ("jax.numpy", "allclose"),
]
BUILTINS = [
    "isinstance",
    "len",
    "sum",
    "abs",
    "all",
    "any",
    "set",
    "tuple",
    "sorted",
    "max",
    "min",
    "zip",
    "repr",
    "__import__",  # every import of a test cell (its graders, the checks) goes through it
]


def _package_dir(module_name: str) -> str:
    root = import_module(module_name.split(".")[0])
    return os.path.dirname(os.path.abspath(root.__file__ or ""))


def _origin(obj) -> str:
    code = getattr(obj, "__code__", None)
    if code is not None:
        return os.path.abspath(code.co_filename)
    return getattr(obj, "__module__", None) or type(obj).__module__


def is_genuine(obj, module_name: str) -> bool:
    """Whether ``obj`` was defined by the package ``module_name`` belongs to (not by notebook code)."""
    root = module_name.split(".")[0]
    code = getattr(obj, "__code__", None)
    if code is not None:
        return os.path.abspath(code.co_filename).startswith(_package_dir(root) + os.sep)
    module = getattr(obj, "__module__", None) or ""
    return module == root or module.startswith(root + ".") or module.startswith("_" + root)


def find_tampering() -> list[str]:
    """Names of checking tools that notebook code has replaced, each with where the fake came from."""
    found = []
    for module_name, dotted in CRITICAL:
        obj: Any = import_module(module_name)
        for part in dotted.split("."):
            obj = getattr(obj, part, None)
        if obj is None or not is_genuine(obj, module_name):
            found.append(f"{module_name}.{dotted} (now from {_origin(obj)})")
    for name in BUILTINS:
        obj = getattr(builtins, name, None)
        if (
            not isinstance(obj, (types.BuiltinFunctionType, type))
            or getattr(obj, "__module__", "") != "builtins"
        ):
            found.append(f"the built-in {name} (now from {_origin(obj)})")
    shell = _shell()
    own = shell.user_ns.get("__builtins__", builtins) if shell is not None else builtins
    if own is not builtins and own is not vars(builtins):  # the notebook's namespace has its own
        found.append("the notebook's __builtins__ (replaced by a notebook cell)")
    return found


def assert_untampered() -> None:
    """Raises CheckFailed naming every replaced tool; called before each test cell when grading.

    Its message is a :class:`grading.protocol.Tampering`, which the worker reads back from the graded
    notebook's error output."""
    found = find_tampering()
    if found:
        raise CheckFailed(Tampering(tuple(found)).message())


# ------------------------------------------------------------------------------------------------
# How IPython runs a cell

#: Packages whose code may hook into how IPython runs a cell: the kernel's own, plotting, the book's.
HOOK_OWNERS = ("IPython", "ipykernel", "matplotlib_inline", "matplotlib", "shardbook", "grading", "comm")
#: Methods of the shell a cell's code passes through: an instance attribute of that name is notebook code.
RUN_METHODS = (
    "run_cell",
    "run_cell_async",
    "_run_cell",
    "run_ast_nodes",
    "run_code",
    "transform_cell",
    "transform_ast",
    "should_run_async",
    "showtraceback",
    "_showtraceback",
    "showsyntaxerror",
    "user_expressions",
)


def _shell():
    """The running IPython shell, or None (grading in-process, outside IPython)."""
    interactiveshell = sys.modules.get("IPython.core.interactiveshell")
    if interactiveshell is None or not interactiveshell.InteractiveShell.initialized():
        return None
    return interactiveshell.InteractiveShell.instance()


def _code_file(obj) -> str | None:
    """The file the Python code of a callable comes from (a function, a method, an object's __call__)."""
    call = next((k.__dict__["__call__"] for k in type(obj).__mro__ if "__call__" in k.__dict__), None)
    for candidate in (obj, getattr(obj, "__func__", None), call):
        code = getattr(candidate, "__code__", None)
        if code is not None:
            return os.path.abspath(code.co_filename)
    return None


def _owned(obj) -> bool:
    """Whether a hook was registered by a package of HOOK_OWNERS (not by notebook code, not a built-in
    such as ``print`` or ``list.append``, which would see each cell's source)."""
    path = _code_file(obj)
    if path is not None:
        dirs = [_package_dir(name) for name in HOOK_OWNERS if name in sys.modules]
        return any(path.startswith(folder + os.sep) for folder in dirs)
    module = str(getattr(obj, "__module__", "") or "") if isinstance(obj, type) else ""
    return module.split(".")[0] in HOOK_OWNERS


def _name(obj) -> str:
    return getattr(obj, "__name__", None) or type(obj).__name__


def _keep_owned(hooks: list, what: str, undone: list[str]) -> None:
    """Removes from ``hooks`` (in place) every entry not owned, each named in ``undone``."""
    for hook in list(hooks):
        if not _owned(hook):
            hooks.remove(hook)
            undone.append(f"{what} {_name(hook)}")


def _custom_handler(shell):
    """The handler given to ``set_custom_exc``, or the replaced ``CustomTB`` itself."""
    func = getattr(shell.CustomTB, "__func__", shell.CustomTB)
    if not _owned(func):
        return func
    names, cells = func.__code__.co_freevars, func.__closure__ or ()
    return dict(zip(names, (c.cell_contents for c in cells), strict=True)).get("handler")


def reset_ipython() -> str:
    """Undoes what notebook code changed in how IPython runs a cell; returns what it undid (``; ``
    between items; empty when nothing). Run by nbgrader before each test cell (see the module's
    docstring); what it cannot undo (a method of the shell's class replaced) is named too, and the
    test's proof (:func:`prove`) decides."""
    undone: list[str] = []
    shell = _shell()
    if shell is None:
        return ""
    manager = shell.input_transformer_manager
    for attribute in ("cleanup_transforms", "line_transforms", "token_transformers"):
        _keep_owned(getattr(manager, attribute, []), "an input transformer", undone)
    _keep_owned(shell.input_transformers_post, "an input transformer", undone)
    _keep_owned(shell.ast_transformers, "an AST transformer", undone)
    for event, callbacks in getattr(shell.events, "callbacks", {}).items():
        _keep_owned(callbacks, f"a {event} callback", undone)
    if shell.custom_exceptions:
        handler = _custom_handler(shell)
        if handler is None or not _owned(handler):
            shell.set_custom_exc((), None)
            undone.append(f"a custom exception handler {_name(handler)}")
    for name in RUN_METHODS:
        if name in vars(shell) and not _owned(vars(shell)[name]):
            undone.append(f"the shell's {name} (replaced by {_name(vars(shell)[name])})")
            delattr(shell, name)
        elif getattr(type(shell), name, None) is not None and not _owned(getattr(type(shell), name)):
            undone.append(f"the shell's {name} (replaced in its class: NOT undone)")
    for name, kind in (("displayhook", "display hook"), ("display_pub", "display publisher")):
        if not _owned(type(getattr(shell, name, None))):
            undone.append(f"the shell's {kind} (replaced: NOT undone)")
    if sys.excepthook is not sys.__excepthook__ and not _owned(sys.excepthook):
        undone.append(f"sys.excepthook {_name(sys.excepthook)}")
        sys.excepthook = sys.__excepthook__
    for get, put, what in (
        (sys.gettrace, sys.settrace, "a trace function"),
        (sys.getprofile, sys.setprofile, "a profile function"),
        (threading.gettrace, threading.settrace, "a trace function for new threads"),
        (threading.getprofile, threading.setprofile, "a profile function for new threads"),
    ):
        if get() is not None:
            undone.append(f"{what} {_name(get())}")
            put(None)
    if getattr(shell.logger, "log_active", False):
        shell.logger.logstop()
        undone.append("a session log (%logstart)")
    return "; ".join(undone)


def prove(token: str) -> None:
    """The last line of every test cell when graded: displays the cell's token, which nbgrader, outside
    the kernel, requires of a test cell that ended without an error. Outside IPython, nothing."""
    shell = _shell()
    if shell is not None:
        shell.display_pub.publish(data={PROOF_MIME: token}, metadata={})


def forget_tests() -> str:
    """Drops the source of test cells already run from what a later cell could read: the lines
    IPython keeps for tracebacks (every hardened test cell's source starts with PROLOGUE_BEGIN) and the
    last traceback. Run by nbgrader after each test cell."""
    shell = _shell()
    filenames = getattr(getattr(shell, "compile", None), "_filename_map", {})
    for name, entry in list(linecache.cache.items()):
        lines = entry[2] if len(entry) > 2 else None
        if lines and str(lines[0]).startswith(PROLOGUE_BEGIN):
            del linecache.cache[name]
            filenames.pop(name, None)
    if shell is not None:
        shell._last_traceback = None
    for name in ("last_type", "last_value", "last_traceback", "last_exc"):
        if hasattr(sys, name):
            setattr(sys, name, None)
    return ""
