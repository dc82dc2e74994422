"""Comparative sentences of the book, checked against the values its page printed.

A chapter that writes "FSDP keeps an eighth of the memory" places, in the cell that printed the
memories, ``claim("an eighth of the memory", fsdp * 8 <= data_parallel)``. A claim that holds prints
nothing (the reader came for the argument, not for its checks) and is listed by
:func:`checked_claims`; when a change makes the sentence false, executing the chapter stops with
:class:`ClaimFailed`, which quotes the sentence, so the book cannot be built saying it. On the built
page the claims' code is folded into one list at the page's end (tools/claim_fold.py).

The quoted sentence is part of the chapter's prose, word for word: ``tools/notebooks.py prose``
fails CI on a claim whose text the chapter does not contain, so the check and the sentence cannot
drift apart.
"""

from __future__ import annotations

from typing import Any

import numpy as np

_CHECKED: list[str] = []  # the sentences claim() found true, for checked_claims()


class ClaimFailed(AssertionError):
    """A sentence of the book that the values its page printed no longer support."""


def claim(sentence: str, holds: Any, because: str = "") -> None:
    """Checks one sentence of the prose: records it (:func:`checked_claims`) or raises ClaimFailed.

    Args:
      sentence: the words of the prose this checks, as the chapter writes them (a phrase of it will do).
      holds: whether the printed values support it: a Python or NumPy boolean (a JAX scalar boolean
        too). Anything else is refused, so that a check cannot pass by being truthy.
      because: the values that decide it, quoted in the failure ("FSDP 3.5 MiB, data parallel 1.4 MiB").

    Raises:
      ClaimFailed: the sentence does not hold; the message quotes it and ``because``.
      TypeError: ``holds`` is not a boolean.

    Example:
      >>> claim("two is less than three", 2 < 3)
      >>> checked_claims()[-1]
      'two is less than three'
      >>> claim("three is less than two", 3 < 2, because="3 >= 2")
      Traceback (most recent call last):
      ...
      shardbook.claims.ClaimFailed: the text says "three is less than two", but the values printed here
      do not support it: 3 >= 2
    """
    if not isinstance(sentence, str) or not sentence.strip():
        raise TypeError(f"claim() needs the sentence it checks, got {sentence!r}")
    value = np.asarray(holds) if not isinstance(holds, bool) else holds
    if isinstance(value, np.ndarray):
        if value.shape != () or value.dtype != np.bool_:
            raise TypeError(
                f"claim({sentence!r}, ...) needs a boolean, got {type(holds).__name__}"
                f" of dtype {value.dtype} and shape {value.shape}"
            )
        value = bool(value)
    if value is not True:
        if value is not False:
            raise TypeError(f"claim({sentence!r}, ...) needs a boolean, got {holds!r}")
        message = f'the text says "{sentence}", but the values printed here\ndo not support it'
        raise ClaimFailed(message + (f": {because}" if because else ""))
    _CHECKED.append(sentence)


def checked_claims() -> list[str]:
    """The sentences :func:`claim` found true in this process so far, oldest first (a copy).

    Example:
      >>> claim("one is less than two", 1 < 2)
      >>> "one is less than two" in checked_claims()
      True
    """
    return list(_CHECKED)
