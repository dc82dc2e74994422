"""The records a reader sees: :class:`Collective`, :class:`Report`, and how bytes are counted and shown.

Nothing here reads a program: :mod:`shardbook.comms.analysis` fills these records in.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from ..hlo import Module
from ..tables import Table

COLLECTIVE_KINDS = ("all-gather", "all-reduce", "reduce-scatter", "all-to-all", "collective-permute")


@dataclass
class Collective:
    """One collective in the compiled program (an async ``-start``/``-done`` pair counts once, and so do
    the parts of an asynchronous collective fusion)."""

    kind: str  # one of COLLECTIVE_KINDS
    name: str  # the HLO instruction name
    dtype: str  # the element type the program means (after correcting for the CPU backend)
    operand_shapes: tuple[tuple[int, ...], ...]  # per device
    result_shapes: tuple[tuple[int, ...], ...]  # per device
    group_size: int
    axes: tuple[str, ...]  # mesh axes the groups span
    groups: list[list[int]]  # device groups (or [source, target] pairs for collective-permute)
    executions: int  # loop trip counts multiplied
    bytes_per_execution: int  # per device
    source: str = ""  # "file.py:12 (function)" when metadata records it
    op_name: str = ""
    upcast_by_backend: bool = False  # the CPU program ran it in f32; dtype is the intended one
    emitted_as: str = ""  # e.g. "all-reduce + dynamic-slice" when reported as reduce-scatter
    unknown_trip_count: bool = False  # inside a loop whose trip count XLA does not know
    computation: str = ""
    # fusions of the TPU program that each hold this collective (an asynchronous collective the compiler
    # runs in parts: a start, continuations, a done, on one channel), counted once
    parts: int = 1

    @property
    def bytes(self) -> int:
        """Bytes moved per device over the whole program (all executions)."""
        return self.bytes_per_execution * self.executions

    @property
    def operand_text(self) -> str:
        return ", ".join(f"{self.dtype}[{','.join(map(str, s))}]" for s in self.operand_shapes)

    @property
    def result_text(self) -> str:
        return ", ".join(f"{self.dtype}[{','.join(map(str, s))}]" for s in self.result_shapes)

    def describe(self) -> str:
        """One line for a learner: the kind, the per-device result, the axes, the bytes and the source.

        Example:
          >>> c = Collective("all-gather", "ag", "bf16", ((512, 512),), ((512, 2048),), 4, ("Y",),
          ...                [[0, 1, 2, 3]], executions=1, bytes_per_execution=1572864)
          >>> c.describe()
          "all-gather bf16[512,2048] over 'Y' (groups of 4), 1.5 MiB per device"
        """
        axes = ",".join(repr(a) for a in self.axes) or "no mesh axis"
        times = f" ×{self.executions}" if self.executions != 1 else ""
        where = f" at {source_text(self.source)}" if self.source else ""
        return (
            f"{self.kind} {self.result_text} over {axes} (groups of {self.group_size}){times}, "
            f"{format_bytes(self.bytes)} per device{where}"
        )


def source_text(source: str) -> str:
    """A source location as a reader of a notebook knows it.

    The temporary file of a notebook cell becomes ``cell line N``; anything else comes back unchanged.

    Example:
      >>> source_text("3418627298.py:4 (f)")
      'cell line 4 (f)'
      >>> source_text("model.py:42 (layer)")
      'model.py:42 (layer)'
    """
    match = re.fullmatch(r"\d+\.py:(\d+)(.*)", source)
    return f"cell line {match.group(1)}{match.group(2)}" if match else source


@dataclass
class Report:
    """What the compiled program communicates and computes, per device, for one call.

    ``notes`` says what was corrected for the CPU backend and what could not be (printed under the
    table): a figure the analyzer could not make right is never changed silently.
    """

    collectives: list[Collective]
    flops: int  # per-device matmul FLOPs, loop-aware
    temp_bytes: int | None  # compiled.memory_analysis().temp_size_in_bytes (of the executed program)
    mesh_axes: dict[str, int]
    notes: list[str] = field(default_factory=list)
    module: Module | None = field(default=None, repr=False)  # the parsed (corrected) program
    text: str = field(default="", repr=False)  # the executed program's text
    platform: str = ""
    seconds: float = 0.0  # how long the analysis took (compilation included)
    executions: dict[str, int] = field(default_factory=dict, repr=False)  # computation -> times run
    memory: Any = field(default=None, repr=False)  # a Footprint of the executed program (comms.memory)

    @property
    def peak_bytes(self) -> int | None:
        """Bytes a device holds at the executed program's peak (``memory.peak``; None without analysis)."""
        return None if self.memory is None else int(self.memory.peak)

    def count(self, kind: str | None = None) -> int:
        """How many collective ops of ``kind`` (all kinds when None) the program contains."""
        check_kind(kind)
        return sum(1 for c in self.collectives if kind is None or c.kind == kind)

    @property
    def total_bytes(self) -> int:
        """Bytes moved per device by all collectives, loop trip counts included."""
        return sum(c.bytes for c in self.collectives)

    def bytes_of(self, kind: str) -> int:
        """Bytes moved per device by the collectives of one kind."""
        check_kind(kind)
        return sum(c.bytes for c in self.collectives if c.kind == kind)

    def rows(self) -> list[list[str]]:
        """The table's rows as text, one per collective (``*``: corrected for the CPU backend)."""
        out = []
        for c in self.collectives:
            flag = "*" if (c.upcast_by_backend or c.emitted_as or c.unknown_trip_count) else ""
            out.append(
                [
                    c.kind + flag,
                    c.result_text,
                    ",".join(c.axes) or "-",
                    str(c.group_size),
                    ("?" if c.unknown_trip_count else "") + str(c.executions),
                    format_bytes(c.bytes),
                    source_text(c.source) if c.source else "-",
                ]
            )
        return out

    _HEADER = ["collective", "per-device result", "axes", "group", "runs", "bytes/device", "source"]

    def summary(self) -> str:
        """One line: collectives by kind, bytes, FLOPs and temporary memory per device."""
        kinds = ", ".join(f"{self.count(k)} {k}" for k in COLLECTIVE_KINDS if self.count(k))
        temp = "unknown" if self.temp_bytes is None else format_bytes(self.temp_bytes)
        return (
            f"{kinds or 'no collectives'}; {format_bytes(self.total_bytes)} moved per device; "
            f"{self.flops / 1e9:.3g} GFLOP of matmul per device; temporary memory {temp}"
        )

    def __repr__(self) -> str:
        rows = [self._HEADER, *self.rows()]
        widths = [max(len(r[i]) for r in rows) for i in range(len(self._HEADER))]
        lines = ["  ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=True)).rstrip() for r in rows]
        lines.insert(1, "  ".join("-" * w for w in widths))
        lines.append(self.summary())
        lines += [f"* {n}" for n in self.notes]
        return "\n".join(lines)

    def table(self) -> Table:
        """The report as a :class:`~shardbook.tables.Table`: a row per collective, the summary and the
        notes under it (its text is this report's ``repr`` with its lines laid out by the table)."""
        return Table(
            self._HEADER,
            self.rows(),
            align={"group": "right", "runs": "right", "bytes/device": "right"},
            notes=[self.summary(), *(f"* {n}" for n in self.notes)],
        )

    def _repr_html_(self) -> str:
        return self.table()._repr_html_()


def check_kind(kind: str | None) -> None:
    """Raises ValueError for a name that is not one of :data:`COLLECTIVE_KINDS` (None means all).

    Example:
      >>> check_kind("allgather")  # doctest: +ELLIPSIS
      Traceback (most recent call last):
        ...
      ValueError: unknown collective kind 'allgather': expected one of ('all-gather', 'all-reduce', ...)
    """
    if kind is not None and kind not in COLLECTIVE_KINDS:
        raise ValueError(f"unknown collective kind {kind!r}: expected one of {COLLECTIVE_KINDS}")


def format_bytes(n: float) -> str:
    """A byte count in binary units, four significant digits.

    Example:
      >>> format_bytes(1572864), format_bytes(3 * 2**30), format_bytes(100)
      ('1.5 MiB', '3 GiB', '100 B')
    """
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if abs(n) >= size:
            return f"{n / size:.4g} {unit}"
    return f"{int(n)} B"


def ring_bytes(kind: str, n: int, operand_bytes: int, result_bytes: int) -> int:
    """Bytes one device sends for one collective of group size ``n`` (ring algorithms).

    ======================  =====================================
    all-gather              (n-1)/n × B(result)
    reduce-scatter          (n-1)/n × B(operand)
    all-reduce              2(n-1)/n × B(operand)  (reduce-scatter then all-gather)
    all-to-all              (n-1)/n × B(operand)
    collective-permute      B(operand)  (each device sends its block once)
    ======================  =====================================

    Example: gathering a 1 MiB block from each of 4 devices sends 3 MiB, and an all-reduce of a 4 MiB
    array over 4 devices sends twice that:

      >>> MiB = 2**20
      >>> ring_bytes("all-gather", 4, MiB, 4 * MiB) // MiB
      3
      >>> ring_bytes("all-reduce", 4, 4 * MiB, 4 * MiB) // MiB
      6
    """
    if kind == "collective-permute":
        return operand_bytes
    if n <= 1:
        return 0
    if kind == "all-gather":
        return result_bytes * (n - 1) // n
    if kind in ("reduce-scatter", "all-to-all"):
        return operand_bytes * (n - 1) // n
    if kind == "all-reduce":
        return 2 * operand_bytes * (n - 1) // n
    raise ValueError(f"unknown collective kind {kind!r}")
