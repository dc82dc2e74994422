"""Which process holds which block of an array, in a job of several JAX processes (``shardbook.hosts``):
:func:`shard_table` in every worker, :func:`draw_process_shards` of the joined rows in the notebook.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

#: One colour per process in :func:`draw_process_shards`.
PROCESS_COLOURS = ("#4c78a8", "#f58518", "#54a24b", "#e45756", "#72b7b2", "#b279a2", "#eeca3b", "#9d755d")


def shard_table(x: Any) -> list[tuple[int, int, tuple[tuple[int, int], ...]]]:
    """(process, device id, ((start, stop) per dimension)) for each shard of ``x`` this process holds.

    Call it in every worker and join the lists: :func:`draw_process_shards` draws them.
    """
    rows = []
    for shard in x.addressable_shards:
        bounds = tuple((s.indices(n)[0], s.indices(n)[1]) for s, n in zip(shard.index, x.shape, strict=True))
        rows.append((shard.device.process_index, shard.device.id, bounds))
    return rows


def draw_process_shards(
    rows: Sequence[tuple[int, int, tuple[tuple[int, int], ...]]],
    shape: Sequence[int],
    *,
    title: str | None = None,
) -> Any:
    """Draws a 1-D or 2-D array as its blocks, each coloured by the process that holds it.

    Args:
      rows: (process, device id, bounds) per shard, from :func:`shard_table` in every process.
      shape: the array's global shape.
      title: the figure's title.

    Returns:
      The matplotlib ``Figure`` (closed in pyplot, shown once when it ends a notebook cell).

    Raises:
      ValueError: the array has more than 2 dimensions.
    """
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch, Rectangle

    if len(shape) > 2:
        raise ValueError(f"expected a 1-D or 2-D array, got shape {tuple(shape)}")
    n_rows, n_cols = (1, shape[0]) if len(shape) == 1 else (shape[0], shape[1])
    blocks: dict[tuple, list[tuple[int, int]]] = {}
    for process, device, bounds in rows:
        key = ((0, 1), *bounds) if len(shape) == 1 else tuple(bounds)
        blocks.setdefault(key, []).append((process, device))
    fig, ax = plt.subplots(figsize=(min(9.0, 1.2 + 0.5 * n_cols), min(7.0, 1.2 + 0.45 * n_rows)))
    for ((r0, r1), (c0, c1)), holders in blocks.items():
        processes = sorted({p for p, _ in holders})
        colour = PROCESS_COLOURS[processes[0] % len(PROCESS_COLOURS)] if len(processes) == 1 else "#bbbbbb"
        ax.add_patch(Rectangle((c0, r0), c1 - c0, r1 - r0, facecolor=colour, edgecolor="white", lw=2))
        label = "\n".join(f"p{p} d{d}" for p, d in sorted(holders))
        ax.text((c0 + c1) / 2, (r0 + r1) / 2, label, ha="center", va="center", fontsize=8, color="white")
    ax.set_xlim(0, n_cols)
    ax.set_ylim(n_rows, 0)
    ax.set_xlabel("column" if len(shape) == 2 else "index")
    ax.set_ylabel("row" if len(shape) == 2 else "")
    processes = sorted({p for p, _, _ in rows})
    ax.legend(
        handles=[Patch(color=PROCESS_COLOURS[p % 8], label=f"process {p}") for p in processes],
        loc="upper left",
        bbox_to_anchor=(1.01, 1.0),
        fontsize=8,
    )
    ax.set_title(title or f"which process holds which block of an array of shape {tuple(shape)}", fontsize=9)
    fig.tight_layout()
    plt.close(fig)
    return fig
