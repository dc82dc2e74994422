"""Where a TPU figure comes from: one short tag per source, and the tag of the object that made it.

The book's TPU times and memory come from four sources, strongest first; each has one tag, written
next to every figure it gave (a table's caption or a ``source`` column, a printed line, a sentence, a
figure's title or legend):

==========================  =========================================================================
tag                         the figure is
==========================  =========================================================================
*measured on a v5e*         a real chip's record (``tpu_record``, ``shardbook/data/tpu_v5e.json``),
                            or a timing a publication measured on one
*TPU compiler*              what the TPU compiler said of a program (:class:`~shardbook.TpuProgram`:
                            its memory, its collectives, its refusal)
*model · TPU program*       the cost model (:func:`~shardbook.estimate`) playing the program the TPU
                            compiler wrote: its kernels at rates measured on the chip, its
                            collectives at the published link rates (no multi-chip step was timed)
*model · XLA:CPU program*   the cost model playing the program XLA:CPU wrote for the simulated devices,
                            at the chip's published peaks: the weakest, kept where XLA:CPU is the point
==========================  =========================================================================

A chip's published specification (197 TFLOP/s, 45 GB/s a link) is no program's figure; a sentence
that computes with one by hand says *published* (:data:`PUBLISHED`, the legend's last line).

The objects know their source, so a chapter asks them rather than retyping it: :func:`source_of`
reads an :class:`~shardbook.cost.Estimate` (its ``platform`` says which compiler wrote the program, its
``chip`` which chip it plays it on), a :class:`~shardbook.TpuProgram` (compiler and topology) or an
entry of ``tpu_record(chip)`` (measured). ``tools/notebooks.py prose`` fails the build on a TPU time or
memory figure, printed or written, that carries no tag (:data:`TAG_PATTERN`).

Example:
  >>> from shardbook.comms import TpuProgram
  >>> tag(TpuProgram("v5e-8", "v5e", "0" * 64, {}, 16911433728, needs_bytes=2**34))
  'TPU compiler'
  >>> tag({"seconds": 6.0e-3, "source": "measured on a v5e"})
  'measured on a v5e'
  >>> sourced("6.00 ms", {"seconds": 6.0e-3, "source": "measured on a v5e"})
  '6.00 ms (measured on a v5e)'
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Source:
    """One source of TPU figures: its tag and what it means (for a legend)."""

    key: str  # "measured", "compiler", "model-tpu", "model-cpu", "published"
    tag: str  # the short tag written next to a figure
    meaning: str  # one line: what a figure with this tag is


def measured(chip: str = "v5e") -> Source:
    """The source of a figure timed or read on a real ``chip``."""
    meaning = f"a real TPU {chip}'s record (or a timing published from a real chip)"
    return Source("measured", f"measured on a {chip}", meaning)


COMPILER = Source(
    "compiler",
    "TPU compiler",
    "what the TPU's own compiler, run on any machine, says of its program: memory, collectives, refusal",
)
MODEL_TPU = Source(
    "model-tpu",
    "model · TPU program",
    "the book's cost model playing the TPU compiler's program: its kernels at rates measured on the chip, "
    "its collectives at published link rates, not measured ones",
)
MODEL_CPU = Source(
    "model-cpu",
    "model · XLA:CPU program",
    "the cost model playing the simulated devices' program, at published peaks: the weakest",
)
PUBLISHED = Source(
    "published",
    "published",
    "a chip's published specification (a peak FLOP/s, a link's bandwidth), computed with by hand: "
    "no program's figure",
)

#: The four sources of a program's figure, strongest first (the legend's order).
SOURCES = (measured("v5e"), COMPILER, MODEL_TPU, MODEL_CPU)

#: The legend's rows: the four sources, then the label of a figure computed by hand from a specification.
LEGEND = (*SOURCES, PUBLISHED)

#: A tag as a reader sees it in prose or output (markup removed, any case): what the build looks for.
TAG_PATTERN = re.compile(
    r"measured on (?:a|one|eight) (?:real )?(?:TPU )?(?:v4|v5e|v5p|v6e)|TPU compiler"
    r"|model · (?:TPU|XLA:CPU) program|published",
    re.I,
)


def source_of(obj: Any) -> Source:
    """The source of a figure ``obj`` gave: an Estimate, a TpuProgram, or a record entry.

    Raises:
      TypeError: an object that carries no source (a bare number has none: ask the object it came from).
    """
    if isinstance(obj, Source):
        return obj
    if hasattr(obj, "topology") and hasattr(obj, "hbm_bytes"):  # a TpuProgram (comms reads tables)
        return COMPILER
    platform = getattr(obj, "platform", None)
    if platform is not None and hasattr(obj, "chip"):  # an Estimate
        return MODEL_TPU if platform == "tpu" else MODEL_CPU
    if isinstance(obj, dict) and isinstance(obj.get("source"), str):  # an entry of tpu_record()
        return Source("measured", obj["source"], "a real chip's record")
    raise TypeError(
        f"expected an Estimate, a TpuProgram or an entry of tpu_record(), got {type(obj).__name__}:"
        " a bare number has no source; ask the object it came from"
    )


def tag(obj: Any) -> str:
    """The short tag of ``obj``'s source (:func:`source_of`): what a reader sees next to its figure."""
    return source_of(obj).tag


def sourced(text: str, obj: Any) -> str:
    """``text`` (a printed figure) followed by its source's tag in parentheses."""
    return f"{text} ({tag(obj)})"


def legend() -> str:
    """The four tags and what each means, strongest first, then *published*: one line each (the
    intro's legend, and the table of "Where the numbers come from")."""
    return "\n".join(f"{s.tag}: {s.meaning}" for s in LEGEND)


# What the build calls a TPU figure: a time, or a memory size said of a TPU.
_TIME = re.compile(r"(?<![\w.])\d[\d,]*(?:\.\d+)?\s?(?:µs|ms)(?!\w)")
_MEMORY = re.compile(r"(?<![\w.])\d[\d,]*(?:\.\d+)?\s?(?:GiB|MiB|GB|G)(?![\w/])")
_NAMES_TPU = re.compile(r"\bTPU|\bv5e|\bv5p|\bv6e|\bv4\b|\bchip", re.I)
_HOLDS = re.compile(
    r"\bpeak|HBM|\bhold|\bkeep|\bneed|\bfit|memory|temporar|bytes_limit|allocat|\bstor|\bstate\b", re.I
)
_NOT_TPU = re.compile(r"XLA:CPU's (?:peak|memory|program)|\bon (?:the )?CPU\b|this machine|\bwall", re.I)


def is_tpu_figure(text: str, context: str = "", *, printed: bool = False) -> bool:
    """Whether ``text`` (a sentence, or a printed line) states a TPU time or memory figure.

    A time (µs, ms) is a TPU figure unless the text says it is the CPU's; a memory size (GiB, MiB)
    when the text, or its ``context`` (a table's caption and header), names a TPU or a chip and speaks
    of memory (a peak, HBM, what a chip holds, keeps, needs or fits), not of bytes sent. A ``printed``
    line (a cell's output, where the simulator's own timings are printed too) counts a time only when
    it, or its context, names a TPU.
    """
    names = _NAMES_TPU.search(text) or _NAMES_TPU.search(context)
    if _TIME.search(text) and (names or not (printed or _NOT_TPU.search(text))):
        return True
    held = _HOLDS.search(text) or _HOLDS.search(context)
    return bool(_MEMORY.search(text) and names and held and not _NOT_TPU.search(text))


_UNIT_COLUMN = re.compile(r"(?<!\w)(?:µs|ms|GiB|MiB)(?!\w)")


def is_tpu_table(head: str, body: str) -> bool:
    """Whether a printed table (its caption and header ``head``, its rows ``body``) holds TPU figures:
    a column in a time or memory unit under a head that names a TPU, or a row that is one."""
    if _UNIT_COLUMN.search(head) and _NAMES_TPU.search(head):
        return True
    return any(is_tpu_figure(line, head, printed=True) for line in body.splitlines())


def carries_source(text: str) -> bool:
    """Whether ``text`` (markup removed) names one of the sources' tags."""
    return bool(TAG_PATTERN.search(re.sub(r"[*_`]", "", text)))


__all__ = [
    "COMPILER",
    "LEGEND",
    "MODEL_CPU",
    "MODEL_TPU",
    "PUBLISHED",
    "SOURCES",
    "TAG_PATTERN",
    "Source",
    "carries_source",
    "is_tpu_figure",
    "is_tpu_table",
    "legend",
    "measured",
    "source_of",
    "sourced",
    "tag",
]
