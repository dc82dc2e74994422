"""What every check raises: :class:`CheckFailed`, with one message of the form
``"<what>: expected <this>, got <that>. Hint: <one hint>"`` (:mod:`shardbook.checks` compares values,
:mod:`shardbook.program_checks` compiled programs; both raise it through :func:`_fail`)."""

from __future__ import annotations

from typing import NoReturn


class CheckFailed(AssertionError):
    """A check did not pass. The message says what was expected, what came back, and a hint."""


#: The hint for a function that returned None, whatever the check's own hint was (that one is for
#: another mistake).
NONE_HINT = "a Python function that ends without a return statement returns None: return the result."
_NONE_TEXT = "None (did the function forget to return?)"


def _fail(what: str, expected: str, got: str, hint: str | None = None) -> NoReturn:
    if got == _NONE_TEXT:
        hint = NONE_HINT
    message = f"{what}: expected {expected}, got {got}."
    if hint:
        message += f" Hint: {hint}"
    raise CheckFailed(message)


# Shown, in a learner's traceback and in the docs, under the module its checks are imported from.
CheckFailed.__module__ = "shardbook.checks"
