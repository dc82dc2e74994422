"""Accumulator rings (a reduce-scatter as a ring): which output block each device adds to at each step."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ._common import _PALETTE
from .phone import PHONE_BODY_PX, phone_width_in, set_phone_design

if TYPE_CHECKING:  # matplotlib and jax are imported on first use: shardbook.setup() must run first.
    from matplotlib.figure import Figure


__all__ = ["AccumulatorRing", "accumulator_ring", "draw_accumulator_ring"]

_ARROW = {-1: "←", 1: "→"}


@dataclass(frozen=True)
class AccumulatorRing:
    """What :func:`accumulator_ring` saw: the schedule of a ring of accumulators, run with real JAX.

    Attributes:
      ids: the device ids along the ring (position ``y`` is ``ids[y]``).
      streams: ``(direction, steps)`` per stream of accumulators: ``-1`` to the left neighbour,
        ``+1`` to the right, and how many times each accumulator of that stream is passed on.
      held: ``held[s][y]``: for each stream, the output block whose accumulator device ``y`` adds its
        part to at step ``s`` (``None`` once that stream has arrived).
      arrived: ``arrived[y]``: per stream, the output block of the accumulator that reached device
        ``y`` after the last step, and how many devices' parts it carries.
      complete: whether every device ends with all ``n`` parts of its own block (its own part added).
    """

    ids: list[int]
    streams: list[tuple[int, int]]
    held: list[list[list[int | None]]]
    arrived: list[list[tuple[int, int]]]
    complete: bool

    @property
    def steps(self) -> int:
        """How many steps the longest stream takes (the ring's latency in permutes)."""
        return max(length for _, length in self.streams)

    def describe(self, s: int, y: int) -> str:
        """What device ``y`` does at step ``s`` in words: ``"b2 ←"``, or ``"b3 →, b1 ←"``."""
        parts = [
            f"b{block} {_ARROW[direction]}"
            for (direction, _), block in zip(self.streams, self.held[s][y], strict=True)
            if block is not None
        ]
        return ", ".join(parts) or "-"


def accumulator_ring(
    mesh: Any, axis_name: str = "Y", *, both_ways: bool = False, where: dict[str, int] | None = None
) -> AccumulatorRing:
    """Runs a ring of accumulators along ``axis_name`` with real JAX and says which output block each
    device adds its part to at each step.

    Output block ``b`` belongs to the device at ring position ``b``. One way round (``both_ways=False``)
    every accumulator is passed to the left neighbour ``n - 1`` times, so the one a device starts must
    be for the block ``n - 1`` places to its left, ``y + 1``. Both ways round, a left stream of
    ``ceil((n-1)/2)`` steps and a right stream of ``floor((n-1)/2)`` steps share the ``n - 1`` other
    blocks. Only each stream's first block is chosen; the rest is observed: each accumulator carries
    its block number and a bit per device that added to it, moved by ``ppermute``.

    Args:
      mesh: the ``jax.sharding.Mesh``.
      axis_name: the mesh axis the ring runs along.
      both_ways: two streams, one each way, instead of one to the left.
      where: positions on the other mesh axes (default 0): which of the parallel rings to report.

    Returns:
      An :class:`AccumulatorRing`.

    Example:
      >>> import jax
      >>> ring = accumulator_ring(jax.make_mesh((4,), ('Y',), devices=jax.devices()[:4]))
      >>> [ring.describe(s, 0) for s in range(ring.steps)], ring.complete
      (['b1 ←', 'b2 ←', 'b3 ←'], True)
    """
    import jax
    import jax.numpy as jnp
    import numpy as np
    from jax.sharding import PartitionSpec as P

    names = tuple(mesh.axis_names)
    if axis_name not in names:
        raise ValueError(f"accumulator_ring: axis {axis_name!r} is not on the mesh; its axes are {names}")
    n = mesh.shape[axis_name]
    left = n // 2 if both_ways else n - 1
    streams = [(-1, left), (1, n - 1 - left)] if both_ways else [(-1, n - 1)]
    streams = [(d, k) for d, k in streams if k > 0] or [(-1, 0)]
    steps = max(k for _, k in streams)

    def body():
        y = jax.lax.axis_index(axis_name)
        others = tuple(a for a in names if a != axis_name)
        record = []
        masks = []
        for direction, length in streams:
            pairs = [(j, (j + direction) % n) for j in range(n)]
            # the block whose owner sits `length` moves away in `direction`
            block = (y + direction * length) % n
            bits = jnp.zeros((), jnp.int32)
            for s in range(steps):
                if s < length:
                    bits = bits + 2**y  # this device adds its part
                    record.append(block)
                    block = jax.lax.ppermute(block, axis_name, pairs)
                    bits = jax.lax.ppermute(bits, axis_name, pairs)
                else:
                    record.append(jnp.full((), -1, block.dtype))
            record.append(block)  # what arrived
            masks.append(bits)
        mine = 2**y + sum(masks) if streams[0][1] else 2**y
        out = jnp.stack([*record, *masks, jnp.asarray(mine, jnp.int32)]).astype(jnp.int32)
        out = jax.lax.pcast(out, others, to="varying") if others else out
        return out.reshape((1,) * len(names) + (-1,))

    out = jax.jit(jax.shard_map(body, mesh=mesh, in_specs=(), out_specs=P(*names)))()
    out = np.asarray(out).reshape(*mesh.devices.shape, -1)
    index = tuple(slice(None) if a == axis_name else (where or {}).get(a, 0) for a in names)
    got = out[index]  # (n, record)
    ids = [int(d.id) for d in np.asarray(mesh.devices)[index]]
    per_stream = steps + 1
    held: list[list[list[int | None]]] = [[[] for _ in range(n)] for _ in range(steps)]
    arrived: list[list[tuple[int, int]]] = [[] for _ in range(n)]
    for y in range(n):
        for i, (_, length) in enumerate(streams):
            row = got[y, i * per_stream : (i + 1) * per_stream]
            for s in range(steps):
                held[s][y].append(int(row[s]) if row[s] >= 0 else None)
            bits = int(got[y, len(streams) * per_stream + i])
            if length:
                arrived[y].append((int(row[steps]), bin(bits).count("1")))
    full = 2**n - 1
    complete = all(int(got[y, -1]) == full and all(block == y for block, _ in arrived[y]) for y in range(n))
    return AccumulatorRing(ids, streams if streams[0][1] else [], held, arrived, complete)


def draw_accumulator_ring(
    mesh: Any,
    axis_name: str = "Y",
    *,
    both_ways: bool = False,
    where: dict[str, int] | None = None,
    title: str | None = None,
    path: str | Path | None = None,
) -> Figure:
    """Draws the steps of a ring of accumulators (:func:`accumulator_ring`): one row per device along
    ``axis_name``, one column per step, and a last column for what the owner adds up.

    A cell names the output block(s) whose accumulator the device adds its part to at that step, each
    coloured by the device that owns the block, with an arrow for the way it is passed on. The last
    column shows each device adding its own part to what arrived: all ``n`` parts of its block.

    Returns:
      The matplotlib ``Figure`` (closed in pyplot, so a notebook shows it once, as the cell's value).

    Example:
      >>> import jax
      >>> fig = draw_accumulator_ring(jax.make_mesh((3,), ('Y',), devices=jax.devices()[:3]), both_ways=True)
      >>> print(fig.axes[0].get_title())
      accumulators along 'Y', both ways: 1 step to the left, 1 to the right
    """
    import matplotlib.pyplot as plt

    ring = accumulator_ring(mesh, axis_name, both_ways=both_ways, where=where)
    fig = _figure(ring, axis_name, title)
    set_phone_design(fig, lambda: _phone_figure(ring, axis_name, title))
    if path is not None:
        fig.savefig(path, dpi=150, bbox_inches="tight")
    plt.close(fig)
    return fig


def _title(ring: AccumulatorRing, axis_name: str) -> str:
    steps = dict((d, k) for d, k in ring.streams)

    def count(k: int) -> str:
        return f"{k} step" if k == 1 else f"{k} steps"

    if len(ring.streams) == 1:
        return f"accumulators along {axis_name!r}, one way: {count(steps[-1])} to the left"
    return (
        f"accumulators along {axis_name!r}, both ways: {count(steps[-1])} to the left, "
        f"{steps.get(1, 0)} to the right"
    )


def _cell_lines(ring: AccumulatorRing, s: int, y: int) -> list[tuple[str, int]]:
    """(text, owner) per stream the device adds to at step s."""
    return [
        (f"+ to b{block} {_ARROW[direction]}", block)
        for (direction, _), block in zip(ring.streams, ring.held[s][y], strict=True)
        if block is not None
    ]


def _figure(ring: AccumulatorRing, axis_name: str, title: str | None) -> Figure:
    import matplotlib.pyplot as plt
    from matplotlib.patches import Rectangle

    n, steps, ids = len(ring.ids), ring.steps, ring.ids
    columns = steps + 1
    w, h, gap = 1.7, 0.8, 0.3
    fig, ax = plt.subplots(figsize=(1.75 * columns + 1.0, 0.95 * n + 1.3))
    for c in range(columns):
        x0 = c * (w + gap)
        label = f"step {c}" if c < steps else "at the owner"
        ax.text(x0 + w / 2, -0.35, label, ha="center", va="center", fontsize=11)
        for y in range(n):
            if c < steps:
                lines = _cell_lines(ring, c, y)
            else:
                total = 1 + sum(parts for _, parts in ring.arrived[y])
                lines = [(f"b{y}: {total} of {n} parts", y)]
            part = h / max(len(lines), 1)
            for i, (text, owner) in enumerate(lines):
                colour = _PALETTE[ids[owner] % len(_PALETTE)]
                ax.add_patch(
                    Rectangle((x0, y + i * part), w, part, facecolor=colour, edgecolor="black", lw=0.8)
                )
                ax.text(x0 + w / 2, y + (i + 0.5) * part, text, ha="center", va="center", fontsize=10.5)
    for y in range(n):
        ax.text(-0.15, y + h / 2, f"d{ids[y]}\n{axis_name}={y}", ha="right", va="center", fontsize=10.5)
    ax.set_xlim(-0.75, columns * (w + gap) - gap + 0.05)
    ax.set_ylim(n + 0.1, -0.7)
    ax.axis("off")
    ax.set_title(title or _title(ring, axis_name), fontsize=11)
    fig.tight_layout()
    return fig


def _phone_figure(ring: AccumulatorRing, axis_name: str, title: str | None) -> Figure:
    """The same steps for a phone's column: the steps one under the other, a device a row."""
    import matplotlib.pyplot as plt
    from matplotlib.patches import Rectangle

    n, steps, ids = len(ring.ids), ring.steps, ring.ids
    size = PHONE_BODY_PX + 1  # pt; 1 pt is 1 CSS px in the phone's column
    row, head = 0.42, 0.5  # inches
    height = (steps + 1) * (head + n * row) + 0.8
    fig, ax = plt.subplots(figsize=(phone_width_in(), height))
    ax.set_xlim(-0.01, 1.01)
    ax.set_ylim((steps + 1) * (head + n * row), 0)
    ax.axis("off")
    top = 0.0
    for c in range(steps + 1):
        label = f"step {c}" if c < steps else "at the owner"
        ax.text(0, top + head * 0.55, label, fontsize=size, va="center", ha="left", weight="bold")
        top += head
        for y in range(n):
            if c < steps:
                lines = _cell_lines(ring, c, y)
                text = f"d{ids[y]}: " + ", ".join(t for t, _ in lines)
                owner = lines[0][1] if lines else y
            else:
                total = 1 + sum(parts for _, parts in ring.arrived[y])
                text, owner = f"d{ids[y]}: b{y}, {total} of {n} parts", y
            colour = _PALETTE[ids[owner] % len(_PALETTE)]
            ax.add_patch(
                Rectangle((0, top + 0.03), 1, row - 0.06, facecolor=colour, lw=0.6, edgecolor="black")
            )
            ax.text(0.03, top + row / 2, text, fontsize=size, va="center", ha="left")
            top += row
    ax.set_title(title or _title(ring, axis_name), fontsize=size, loc="left", wrap=True)
    fig.tight_layout()
    return fig
