"""What a compiler says of a program: its memory per device (:class:`Footprint`) and, for a program
compiled for a TPU, its text or its refusal (:class:`TpuProgram`).

:func:`shardbook.compile_for_tpu` makes these; :func:`~shardbook.comms.analyze` and
:func:`~shardbook.comms.footprint` read them like a function and its arguments. A program whose memory
exceeds the chip's HBM is not an exception here but a verdict: the compiler's ``CompileTimeHbmOom``
says how much the program needs and how much the chip has, and :attr:`TpuProgram.compiled` is False.
A program the compiler accepts can still exceed the chip at its peak (its arguments and outputs count
too): :attr:`TpuProgram.fits` says whether it runs.
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

    @classmethod
    def of(cls, stats: Any) -> Footprint:
        """The footprint that ``compiled.memory_analysis()`` reports, as it reports it."""
        return cls(
            arguments=int(stats.argument_size_in_bytes),
            outputs=int(stats.output_size_in_bytes),
            aliased=int(stats.alias_size_in_bytes),
            temporaries=int(stats.temp_size_in_bytes),
        )

    @property
    def peak(self) -> int:
        """Bytes a device holds at the program's peak: arguments + outputs - aliased + temporaries."""
        return self.arguments + self.outputs - self.aliased + self.temporaries

    def __str__(self) -> str:
        return (
            f"peak {format_bytes(self.peak)} per device: arguments {format_bytes(self.arguments)}, outputs "
            f"{format_bytes(self.outputs)} ({format_bytes(self.aliased)} of them in donated buffers), "
            f"temporaries {format_bytes(self.temporaries)}"
        )


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

    @property
    def compiled(self) -> bool:
        """Whether the compiler accepted the program (it refuses one whose temporaries exceed HBM)."""
        return self.memory is not None

    @property
    def fits(self) -> bool:
        """Whether the program runs on one chip: compiled, and its peak (arguments, outputs that are
        not donated buffers, temporaries, all held at once) within the chip's HBM."""
        return self.compiled and self.peak_bytes <= self.hbm_bytes

    @property
    def peak_bytes(self) -> int:
        """Bytes per chip at the peak: the compiled program's, or what the compiler said it needs."""
        if self.memory is not None:
            return self.memory.peak
        return int(self.needs_bytes or 0)

    def verdict(self) -> str:
        """One line: whether it fits one chip of the topology, with the figures.

        Example:
          >>> p = TpuProgram("v5e-8", "v5e", "0" * 64, {}, 16911433728, needs_bytes=26562378874)
          >>> p.verdict()
          'does not fit a TPU v5e chip: needs 24.74 GiB of 15.75 GiB (TPU compiler, v5e-8)'
          >>> p.memory, p.needs_bytes = Footprint(4 * 2**30, 4 * 2**30, 0, 9 * 2**30), None
          >>> p.verdict()
          'does not fit a TPU v5e chip: compiles, but its peak is 17 GiB of 15.75 GiB (TPU compiler, v5e-8)'
        """
        need = format_bytes(self.peak_bytes)
        have = format_bytes(self.hbm_bytes)
        where = f"(TPU compiler, {self.topology})"
        if self.fits:
            return f"fits a TPU {self.chip} chip: peak {need} of {have} {where}"
        if self.compiled:
            return f"does not fit a TPU {self.chip} chip: compiles, but its peak is {need} of {have} {where}"
        return f"does not fit a TPU {self.chip} chip: needs {need} of {have} {where}"

    def require_compiled(self) -> None:
        """Raises :class:`DoesNotFit` with the verdict when the compiler refused the program."""
        if not self.compiled:
            raise DoesNotFit(f"{self.verdict()}; the compiler said: {self.error.splitlines()[0][:300]}")

    def __str__(self) -> str:
        return self.verdict()
