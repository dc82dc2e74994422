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

A figure the sentence states is tested too: either the condition writes it (``x < 3.77``) or
``figures={"3.77": pipeline_gib}`` gives the value the cell computed, and claim() fails unless that
value, rounded as the sentence writes the figure, is the figure (3.7712 passes "3.77", 3.7751 does
not; "1.14e-07" keeps three digits; "500" one, "1,792" all four). ``tools/claim_figures.py`` fails
CI, naming file:line, on a claim sentence whose figure is neither written nor given.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from decimal import Decimal, InvalidOperation
from typing import Any

import numpy as np

from .setup import on_reference_devices

_CHECKED: list[str] = []  # the sentences claim() found true, for checked_claims()


class ClaimFailed(AssertionError):
    """A sentence of the book that the values its page printed no longer support."""


def _half_step(figure: str) -> Decimal:
    """Half the last written place of a figure: 0.005 for "3.77", 0.005e-07 for "1.14e-07", 50 for "500"."""
    number = figure.replace(",", "")
    mantissa, _, exponent = number.lower().partition("e")
    if "." in mantissa:
        step = Decimal(1).scaleb(-len(mantissa.split(".")[1]))
    else:
        step = Decimal(1).scaleb(len(mantissa) - len(mantissa.rstrip("0")) if mantissa.strip("0") else 0)
    return step.scaleb(int(exponent) if exponent else 0) / 2


def wrong_figures(sentence: str, figures: Mapping[str, Any]) -> list[str]:
    """'FIGURE (measured VALUE)' for each figure of `figures` that `sentence` does not state as its value.

    A figure is written as in the sentence ("3.77", "1,792", "1.14e-07", "52" for "52%"); its value is
    in the sentence's unit. The value must round to the figure at the figure's last written place.

    Example:
      >>> wrong_figures("3.77 GiB against 16.92 GiB", {"3.77": 3.7712, "16.92": 16.9})
      ['16.92 (measured 16.9)']
    """
    wrong = []
    for figure, value in figures.items():
        if not re.search(rf"(?<![\w.,]){re.escape(figure)}(?![\w]|[.,]\d)", sentence):
            wrong.append(f"{figure} (not a figure of the sentence)")
            continue
        try:
            measured = Decimal(repr(float(value)))
            written = Decimal(figure.replace(",", ""))
        except (TypeError, ValueError, InvalidOperation):
            wrong.append(f"{figure} (measured {value!r}, no number)")
            continue
        if not abs(measured - written) <= _half_step(figure) * (1 + Decimal("1e-9")):
            wrong.append(f"{figure} (measured {float(value):.6g})")
    return wrong


def claim(sentence: str, holds: Any, because: str = "", figures: Mapping[str, Any] | None = None) -> None:
    """Checks one sentence of the prose: records it (:func:`checked_claims`) or raises ClaimFailed.

    Args:
      sentence: the words of the prose this checks, as the chapter writes them (a phrase of it will do).
      holds: whether the printed values support it: a Python or NumPy boolean (a JAX scalar boolean
        too). Anything else is refused, so that a check cannot pass by being truthy.
      because: the values that decide it, quoted in the failure ("FSDP 3.5 MiB, data parallel 1.4 MiB").
      figures: the figures the sentence states, as written, with the values the cell computed for them
        (``{"3.77": pipeline_gib}``): each must round to its figure (:func:`wrong_figures`).

    Raises:
      ClaimFailed: the sentence does not hold; the message quotes it and ``because``.
      TypeError: ``holds`` is not a boolean.

    A figure given a value that does not round to it fails like a false condition:

      >>> claim("sends 3.77 GiB", True, figures={"3.77": 3.7712})
      >>> claim("sends 3.78 GiB", True, figures={"3.78": 3.7712})
      Traceback (most recent call last):
      ...
      shardbook.claims.ClaimFailed: the text says "sends 3.78 GiB", but the values printed here
      do not support it: figures the sentence states are not what the cell measured: 3.78 (measured 3.7712)

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
    _refuse_chip_measurements(sentence, holds, figures)
    value = np.asarray(holds) if not isinstance(holds, bool) else holds
    if isinstance(value, np.ndarray):
        if value.shape != () or value.dtype != np.bool_:
            raise TypeError(
                f"claim({sentence!r}, ...) needs a boolean, got {type(holds).__name__}"
                f" of dtype {value.dtype} and shape {value.shape}"
            )
        value = bool(value)
    if value is not True and value is not False:
        raise TypeError(f"claim({sentence!r}, ...) needs a boolean, got {holds!r}")
    wrong = wrong_figures(sentence, figures or {})
    if wrong:
        value = False
        because = (
            "figures the sentence states are not what the cell measured: "
            + ", ".join(wrong)
            + (f"; {because}" if because else "")
        )
    if value is not True:
        message = f'the text says "{sentence}", but the values printed here\ndo not support it'
        if not on_reference_devices():  # the learner made an accelerator the default: said, not raised
            print(
                f"shardbook: not on the book's reference devices, so {message}"
                + (f": {because}" if because else "")
            )
            return
        raise ClaimFailed(message + (f": {because}" if because else ""))
    _CHECKED.append(sentence)


def _refuse_chip_measurements(sentence: str, holds: Any, figures: Mapping[str, Any] | None) -> None:
    """A figure measured on a learner's chips (shardbook.on_your_chips) is printed, never claimed."""
    from .chips import ChipMeasurement

    if any(isinstance(v, ChipMeasurement) for v in [holds, *(figures or {}).values()]):
        raise TypeError(
            f"claim({sentence!r}, ...) was given a value measured on your chips: those are printed for "
            "the reader, and the book's sentences rest on its reference devices only"
        )


def checked_claims() -> list[str]:
    """The sentences :func:`claim` found true in this process so far, oldest first (a copy).

    Example:
      >>> claim("one is less than two", 1 < 2)
      >>> "one is less than two" in checked_claims()
      True
    """
    return list(_CHECKED)


def model_error() -> float:
    """The cost model's stated error on programs it was not fitted on, as a fraction.

    Two estimates closer than this tie: :func:`claim_faster` and :func:`claim_tie` read it. It is
    :data:`shardbook.records.OUT_OF_SAMPLE_ERROR`, measured on programs recorded on a real v5e that the
    model was not fitted on (appendix A).
    """
    from .records import OUT_OF_SAMPLE_ERROR

    return OUT_OF_SAMPLE_ERROR


def _seconds(value: Any) -> float:
    """An estimate's seconds (an Estimate, or a number already in one unit)."""
    seconds = getattr(value, "seconds", value)
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float, np.floating, np.integer)):
        raise TypeError(f"expected an Estimate or a time, got {value!r}")
    return float(seconds)


def claim_faster(
    sentence: str,
    faster: Any,
    slower: Any,
    figures: Mapping[str, Any] | None = None,
    error: float | None = None,
) -> None:
    """Checks a sentence that names a winner between two estimates: ``faster`` must beat ``slower`` by
    more than the model's error (:func:`model_error`), else the sentence should say they tie.

    Args:
      sentence: the words of the prose, as :func:`claim` takes them.
      faster, slower: the two estimates (:class:`~shardbook.cost.Estimate` objects, or times in one
        unit) the sentence ranks.
      figures: as :func:`claim`.
      error: the relative error two estimates must differ by; default :func:`model_error`.

    Raises:
      ClaimFailed: ``slower`` is not above ``faster`` by more than the error (the message says whether
        they tie or rank the other way), or a figure is not what the cell measured (as :func:`claim`).

    Example:
      >>> claim_faster("the pipeline wins", 2.16, 5.94)
      >>> claim_faster("FSDP wins the small batch", 147.5, 152.1)
      Traceback (most recent call last):
      ...
      shardbook.claims.ClaimFailed: the text says "FSDP wins the small batch", but the values printed here
      do not support it: 152.1 / 147.5 = 1.031, within the model's error of 11%: say they tie
    """
    margin = model_error() if error is None else error
    fast, slow = _seconds(faster), _seconds(slower)
    ratio = slow / fast if fast > 0 else float("inf")
    if ratio <= 1:
        why = f"{slow:.4g} / {fast:.4g} = {ratio:.3f}: the other one is lower"
    elif ratio <= 1 + margin:
        why = f"{slow:.4g} / {fast:.4g} = {ratio:.3f}, within the model's error of {margin:.0%}: say they tie"
    else:  # the ranking holds; a figure may not
        why = f"{slow:.4g} / {fast:.4g} = {ratio:.3f}, beyond the model's error of {margin:.0%}"
    claim(sentence, ratio > 1 + margin, because=why, figures=figures)


def claim_tie(
    sentence: str, a: Any, b: Any, figures: Mapping[str, Any] | None = None, error: float | None = None
) -> None:
    """Checks a sentence that says two estimates tie within the model's accuracy: they must be within
    the model's error (:func:`model_error`) of each other, else the sentence should name the winner.

    Example:
      >>> claim_tie("FSDP and data parallel tie", 147.5, 152.1)
      >>> claim_tie("the two tie", 2.16, 5.94)
      Traceback (most recent call last):
      ...
      shardbook.claims.ClaimFailed: the text says "the two tie", but the values printed here
      do not support it: 5.94 / 2.16 = 2.750, outside the model's error of 11%: one wins
    """
    margin = model_error() if error is None else error
    low, high = sorted((_seconds(a), _seconds(b)))
    ratio = high / low if low > 0 else float("inf")
    why = f"{high:.4g} / {low:.4g} = {ratio:.3f}, outside the model's error of {margin:.0%}: one wins"
    claim(sentence, ratio <= 1 + margin, because=why, figures=figures)
