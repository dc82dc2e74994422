"""The ICI part of the TPU cost model: how long a collective keeps a chip's links busy, and which of
their two directions it uses.

An ICI link between two neighbouring chips carries data both ways at once, each direction at the
one-way bandwidth ``W`` of the chip table ([HTS], whose table of chips gives ICI bandwidth both one way
and bidirectional, the second twice the first; its chapter on sharded matmuls times an all-gather on an
axis with wraparound at ``V / (2 W)`` because the ring is used in both directions). So
:mod:`shardbook.cost` has two communication streams per chip, one per direction ("+" and "-" along the
mesh axes), and a collective occupies the directions it uses:

* **an all-gather, reduce-scatter, all-reduce or all-to-all** (XLA's own algorithms) may use both
  directions: it occupies both streams and takes ``b / (links × W) + hops × latency``, ``links`` 2 on
  an axis that closes into a ring (wraparound) and 1 on a line, ``hops`` ``n - 1`` ring steps per axis
  (twice that for an all-reduce);
* **a collective-permute** does what its source–target pairs say. Each pair is routed along the mesh
  axes (the shorter way round an axis with wraparound, the only way along a line), one block per link
  it crosses; the permute takes ``(most blocks on one link direction) × b / W + (longest route) ×
  latency`` and occupies one direction if all its routes go the same way, both if they do not. A
  one-way ring's permute on a ring uses one direction, so a second permute going the other way runs
  beside it; on a line, the pair that closes the ring travels back along the links the others cross
  forward, so it uses both directions and nothing can run beside it.
"""

from __future__ import annotations

from typing import Any

from .comms import Collective

DIRECTIONS = ("+", "-")


def is_ring(n: int, chip: Any) -> bool:
    """Whether an axis of ``n`` chips closes into a ring on ``chip`` (wraparound links), else a line."""
    return n >= chip.wraparound_size and n % chip.wraparound_size == 0 and n > 2


def _coords(device: int, sizes: list[int]) -> list[int]:
    out = []
    for s in reversed(sizes):
        out.append(device % s)
        device //= s
    return out[::-1]


def permute_routes(
    pairs: list[list[int]], chip: Any, mesh_axes: dict[str, int]
) -> tuple[int, int, tuple[str, ...]] | None:
    """(blocks on the busiest link direction, hops of the longest route, directions used) of a
    collective-permute's source–target pairs, each routed one mesh axis after another; None when the
    pairs are not devices of the mesh.

    Example: a one-way ring over 4 chips, on a line and on a ring:

      >>> class V5e: wraparound_size = 16
      >>> ring4 = [[0, 1], [1, 2], [2, 3], [3, 0]]
      >>> permute_routes(ring4, V5e, {"Y": 4})
      (1, 3, ('+', '-'))
      >>> class Closed: wraparound_size = 4
      >>> permute_routes(ring4, Closed, {"Y": 4})
      (1, 1, ('+',))
    """
    sizes = list(mesh_axes.values())
    total = 1
    for s in sizes:
        total *= s
    if not sizes or any(d < 0 or d >= total for p in pairs for d in p):
        return None
    load: dict[tuple[Any, ...], int] = {}
    longest = 0
    for src, dst in pairs:
        cur, end = _coords(src, sizes), _coords(dst, sizes)
        hops = 0
        for axis, n in enumerate(sizes):
            forward = (end[axis] - cur[axis]) % n
            if forward == 0:
                continue
            if is_ring(n, chip):
                step, count = (1, forward) if forward <= n - forward else (-1, n - forward)
            else:
                step, count = (1, forward) if end[axis] > cur[axis] else (-1, cur[axis] - end[axis])
            for _ in range(count):
                nxt = (cur[axis] + step) % n
                low = cur[axis] if step == 1 else nxt  # a link is named by its lower end (ring: its start)
                link = (axis, low, tuple(cur[:axis] + cur[axis + 1 :]), "+" if step == 1 else "-")
                load[link] = load.get(link, 0) + 1
                cur[axis] = nxt
            hops += count
        longest = max(longest, hops)
    used = tuple(d for d in DIRECTIONS if any(link[-1] == d for link in load))
    return max(load.values(), default=0), longest, used


def collective_links(c: Collective, chip: Any, mesh_axes: dict[str, int]) -> tuple[float, tuple[str, ...]]:
    """(seconds of one execution, link directions it occupies) of a collective on ``chip``."""
    if c.bytes_per_execution == 0 and c.group_size <= 1:
        return 0.0, ()
    if c.kind == "collective-permute" and c.axes:
        routed = permute_routes(c.groups, chip, mesh_axes)
        if routed is not None:
            blocks, hops, used = routed
            seconds = blocks * c.bytes_per_execution / chip.ici_link_bandwidth + hops * chip.hop_latency
            return seconds, used
    axes: list[str | None] = [a for a in c.axes if a in mesh_axes] or [None]  # None: no mesh axis named
    links = 0
    hops = 0
    for a in axes:
        n = mesh_axes[a] if a is not None else c.group_size
        ring = is_ring(n, chip)
        links += 2 if ring else 1
        if c.kind == "collective-permute":  # pairs outside the mesh: the farthest pair
            hops = max(hops, (n // 2) if ring else n - 1)
        else:
            hops += n - 1
    if c.kind == "all-reduce":
        hops *= 2
    return c.bytes_per_execution / (links * chip.ici_link_bandwidth) + hops * chip.hop_latency, DIRECTIONS


def collective_seconds(c: Collective, chip: Any, mesh_axes: dict[str, int]) -> float:
    """Time of one execution of a collective on ``chip`` (see the module docstring)."""
    return collective_links(c, chip, mesh_axes)[0]
