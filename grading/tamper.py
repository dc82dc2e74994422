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
"""

from __future__ import annotations

import builtins
import os
import types
from importlib import import_module
from typing import Any

from grading.protocol import Tampering
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
    return found


def assert_untampered() -> None:
    """Raises CheckFailed naming every replaced tool; called before each test cell when grading.

    Its message is a :class:`grading.protocol.Tampering`, which the worker reads back from the graded
    notebook's error output."""
    found = find_tampering()
    if found:
        raise CheckFailed(Tampering(tuple(found)).message())
