"""What a compiler says of a program: its memory per device (:class:`Footprint`) and, for a program
compiled for a TPU, its text or its refusal (:class:`TpuProgram`).

:func:`shardbook.compile_for_tpu` makes these; :func:`~shardbook.comms.analyze` and
:func:`~shardbook.comms.footprint` read them like a function and its arguments. A program whose memory
exceeds the chip's HBM is not an exception here but a verdict: the compiler's ``CompileTimeHbmOom``
says how much the program needs and how much the chip has, and :attr:`TpuProgram.compiled` is False.
Whether an accepted program runs is :func:`hbm_verdict`'s rule, drawn from steps run on a real v5e
(``shardbook/data/tpu_v5e_memory.json``, ``benchmarks/tpu_memory.py``): :attr:`TpuProgram.fits` follows
it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from .report import format_bytes

# "the total memory required for HLO temporaries (16.35G) exceeds available HBM (15.75G)"
_HBM_OOM = re.compile(r"\(([\d.]+)([KMGT])\) exceeds available HBM \(([\d.]+)([KMGT])\)")
_UNITS = {"K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}


@dataclass(frozen=True)
class Footprint:
    """Per-device bytes of a compiled program, from ``compiled.memory_analysis()``."""

    arguments: int
    outputs: int
    aliased: int  # outputs written into donated arguments' buffers
    temporaries: int
    # the compiler's own peak (``peak_memory_in_bytes``), where its memory_analysis() has one: it knows
    # which buffers are live together; None in records made without it
    compiler_peak: int | None = None

    @classmethod
    def of(cls, stats: Any) -> Footprint:
        """The footprint that ``compiled.memory_analysis()`` reports, as it reports it."""
        peak = getattr(stats, "peak_memory_in_bytes", None)
        return cls(
            arguments=int(stats.argument_size_in_bytes),
            outputs=int(stats.output_size_in_bytes),
            aliased=int(stats.alias_size_in_bytes),
            temporaries=int(stats.temp_size_in_bytes),
            compiler_peak=int(peak) if peak else None,
        )

    @property
    def peak(self) -> int:
        """The four fields' sum, arguments + outputs - aliased + temporaries: every buffer held at once.
        XLA:CPU's peak; on a TPU an upper bound, which a real v5e's steps undercut by up to 2.15 GiB
        (:func:`hbm_verdict`)."""
        return self.arguments + self.outputs - self.aliased + self.temporaries

    def __str__(self) -> str:
        return (
            f"peak {format_bytes(self.peak)} per device: arguments {format_bytes(self.arguments)}, outputs "
            f"{format_bytes(self.outputs)} ({format_bytes(self.aliased)} of them in donated buffers), "
            f"temporaries {format_bytes(self.temporaries)}"
        )


#: The most by which a step's ``memory_analysis()`` sum (:attr:`Footprint.peak`) exceeded the compiler's
#: own peak among the steps run on a real v5e (shardbook/data/tpu_v5e_memory.json: 2.15 GiB, GPT-2
#: small's shape at 24 sequences, donated; 2.13 GiB for a donated step of 0.80 billion parameters). What
#: the chip held there (``bytes_in_use`` + ``bytes_reserved``) was within 0.06 GiB of the compiler's peak,
#: or (that step at 24 sequences) above it, never below. Every step the compiler accepted ran there, each
#: with its peak under the chip's HBM, and every refused one needed more than the HBM by its figure.
SUM_OVERCOUNT = 2_309_682_176


@dataclass(frozen=True)
class HbmVerdict:
    """Whether a program fits one chip's HBM: ``answer`` is "fits", "does not fit" or "undecided", with
    the bytes it needs between ``low`` and ``high`` (equal where a compiler's figure says it)."""

    answer: str
    low: int
    high: int
    hbm: int
    basis: str  # where the figures come from

    @property
    def fits(self) -> bool:
        return self.answer == "fits"


def hbm_verdict(memory: Footprint | None, hbm: int, needs: int | None = None) -> HbmVerdict:
    """The chip's answer, by the rule read off steps run on a real v5e (``tpu_v5e_memory.json``):

    * the compiler refused the program (``memory`` None): it does not fit, needing ``needs`` bytes;
    * it compiled, and the compiler gave its own peak (``memory.compiler_peak``): it fits when that peak
      is within ``hbm`` (on the chip, every such step ran: donated or not, large state or small);
    * it compiled, with only the four fields known: the sum (:attr:`Footprint.peak`) is an upper bound,
      and the compiler's peak was at most :data:`SUM_OVERCOUNT` below it on the chip. A sum within
      ``hbm`` fits; one whose lower end is still over ``hbm`` does not; otherwise it is undecided,
      with the range.

    Example:
      >>> G = 2**30
      >>> hbm_verdict(Footprint(2 * G, 2 * G, 2 * G, 14 * G), int(15.75 * G)).answer
      'undecided'
      >>> hbm_verdict(Footprint(9 * G, 9 * G, 9 * G, 9 * G, compiler_peak=15 * G), int(15.75 * G)).answer
      'fits'
    """
    if memory is None:
        need = int(needs or 0)
        return HbmVerdict("does not fit", need, need, hbm, "the compiler's refusal")
    if memory.compiler_peak is not None:
        peak = memory.compiler_peak
        answer = "fits" if peak <= hbm else "does not fit"
        return HbmVerdict(answer, peak, peak, hbm, "the compiler's peak")
    high = memory.peak
    low = max(high - SUM_OVERCOUNT, memory.arguments + memory.outputs - memory.aliased)
    answer = "fits" if high <= hbm else "does not fit" if low > hbm else "undecided"
    return HbmVerdict(answer, low, high, hbm, "memory_analysis sum")


class DoesNotFit(ValueError):
    """A program that the TPU compiler refused for lack of HBM was asked for what only a compiled one has."""


def parse_hbm_oom(message: str) -> tuple[int, int] | None:
    """(bytes needed, bytes available) from the TPU compiler's out-of-HBM message, else None.

    The compiler prints both in binary units with two decimals, so each is exact to 0.005 of its unit.

    Example:
      >>> parse_hbm_oom("RESOURCE_EXHAUSTED: ... required for HLO temporaries (16.35G) exceeds "
      ...               "available HBM (15.75G). HLO module: jit_step.")
      (17555678822, 16911433728)
      >>> parse_hbm_oom("INVALID_ARGUMENT: something else") is None
      True
    """
    match = _HBM_OOM.search(message)
    if match is None:
        return None
    need, need_unit, have, have_unit = match.groups()
    return int(float(need) * _UNITS[need_unit]), int(float(have) * _UNITS[have_unit])


@dataclass
class TpuProgram:
    """One program compiled for a TPU topology: its text and memory, or the compiler's refusal.

    ``text`` is the compiled program (``compiled.as_text()``) that :func:`~shardbook.comms.analyze`
    reads; ``memory`` its ``memory_analysis()``; when the compiler refused the program for lack of HBM,
    both are None and ``needs_bytes`` is the compiler's own figure. ``hbm_bytes`` is what one chip of
    the topology makes available to a program (the compiler's figure, 15.75 GiB on a v5e).
    """

    topology: str  # e.g. "v5e-8"
    chip: str  # the cost model's name for the chip, e.g. "v5e"
    fingerprint: str
    mesh_axes: dict[str, int]
    hbm_bytes: int
    text: str | None = field(default=None, repr=False)
    memory: Footprint | None = None
    needs_bytes: int | None = None
    error: str = ""  # the compiler's message when it refused the program
    compile_seconds: float = 0.0  # of the compile that made it (0 when read from the cache)
    from_cache: bool = False
    # the same program lowered for as many simulated CPU devices (what the fingerprint hashed):
    # ``cpu_lowered.compile()`` is XLA:CPU's program of it, without tracing the step again
    cpu_lowered: Any = field(default=None, repr=False, compare=False)

    @property
    def compiled(self) -> bool:
        """Whether the compiler accepted the program (it refuses one whose temporaries exceed HBM)."""
        return self.memory is not None

    @property
    def hbm(self) -> HbmVerdict:
        """Whether it fits one chip, by :func:`hbm_verdict`'s rule (the real v5e's answer)."""
        return hbm_verdict(self.memory, self.hbm_bytes, self.needs_bytes)

    @property
    def fits(self) -> bool:
        """Whether the program runs on one chip by :func:`hbm_verdict` (False where undecided)."""
        return self.hbm.fits

    @property
    def peak_bytes(self) -> int:
        """Bytes per chip: the compiler's own peak where it gave one, else the ``memory_analysis()`` sum
        (an upper bound: :attr:`Footprint.peak`), or what the compiler said it needs when it refused."""
        if self.memory is not None:
            return self.memory.compiler_peak or self.memory.peak
        return int(self.needs_bytes or 0)

    def verdict(self) -> str:
        """One line: whether it fits one chip of the topology, with the figures.

        Example:
          >>> p = TpuProgram("v5e-8", "v5e", "0" * 64, {}, 16911433728, needs_bytes=26562378874)
          >>> p.verdict()
          'does not fit a TPU v5e chip: needs 24.74 GiB of 15.75 GiB (TPU compiler, v5e-8)'
          >>> p.memory, p.needs_bytes = Footprint(4 * 2**30, 4 * 2**30, 0, 9 * 2**30), None
          >>> p.verdict()[:77]
          'undecided on a TPU v5e chip: compiles; needs 14.85 GiB to 17 GiB of 15.75 GiB'
        """
        v = self.hbm
        have = format_bytes(self.hbm_bytes)
        where = f"(TPU compiler, {self.topology})"
        if self.compiled:
            where = f"({v.basis}; TPU compiler, {self.topology})"
        if v.answer == "undecided":
            span = f"{format_bytes(v.low)} to {format_bytes(v.high)}"
            return f"undecided on a TPU {self.chip} chip: compiles; needs {span} of {have} {where}"
        need = format_bytes(self.peak_bytes)
        if v.fits:
            return f"fits a TPU {self.chip} chip: peak {need} of {have} {where}"
        if self.compiled:
            return f"does not fit a TPU {self.chip} chip: compiles, but needs {need} of {have} {where}"
        return f"does not fit a TPU {self.chip} chip: needs {need} of {have} {where}"

    def require_compiled(self) -> None:
        """Raises :class:`DoesNotFit` with the verdict when the compiler refused the program."""
        if not self.compiled:
            raise DoesNotFit(f"{self.verdict()}; the compiler said: {self.error.splitlines()[0][:300]}")

    def __str__(self) -> str:
        return self.verdict()
