"""Communication: which collectives a compiled program runs, between which devices, and the bytes."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ._common import _PALETTE

if TYPE_CHECKING:  # matplotlib and jax are imported on first use: shardbook.setup() must run first.
    from matplotlib.figure import Figure


__all__ = ["draw_communication"]


_KIND_COLOURS = {
    "all-gather": "#1f77b4", "all-reduce": "#d62728", "reduce-scatter": "#ff7f0e",
    "all-to-all": "#9467bd", "collective-permute": "#2ca02c",
}  # fmt: skip


def _grid_positions(mesh_axes: dict[str, int], n: int) -> tuple[list[tuple[float, float]], str, str]:
    """(x, y) of mesh positions 0..n-1 (row-major over the axes), and the row and column axis names."""
    sizes = list(mesh_axes.values()) or [n]
    names = list(mesh_axes) or ["devices"]
    if len(sizes) == 1:
        return [(float(p), 0.0) for p in range(n)], "", names[0]
    rows = sizes[0]
    cols = n // rows if rows else n  # further axes are folded into the columns
    return [(float(p % cols), float(p // cols)) for p in range(n)], names[0], "×".join(names[1:])


def draw_communication(
    report: Any,
    *,
    mesh: Any = None,
    title: str | None = None,
    path: str | Path | None = None,
) -> Figure:
    """Draws the communication of a compiled program: one small mesh per collective, with its groups.

    Each panel shows the devices as boxes laid out like the mesh (first axis down, the others across)
    and links the devices of each group of one collective: a closed loop for all-gather, all-reduce,
    reduce-scatter and all-to-all (the devices that exchange data), arrows for a collective-permute
    (source → target). The panel's title gives the collective, its per-device result, the mesh axes,
    how often it runs and the bytes each device sends, as ``shardbook.analyze`` reports them.

    Args:
      report: a :class:`shardbook.Report`, from ``shardbook.analyze(fn, *args)``.
      mesh: the ``jax.sharding.Mesh`` the program ran on, to label boxes with device ids; without it
        boxes are labelled by mesh position (the same on a ``jax.make_mesh`` mesh).
      title: the figure's title; by default the report's summary of bytes.
      path: if given, also save the figure there.

    Returns:
      The matplotlib ``Figure`` (closed in pyplot, so a notebook shows it once, as the cell's value).

    Example:
      >>> import jax, jax.numpy as jnp, shardbook
      >>> from jax.sharding import AxisType, NamedSharding, PartitionSpec as P
      >>> mesh = jax.make_mesh((4, 2), ('X', 'Y'), axis_types=(AxisType.Auto,) * 2)
      >>> a = jax.device_put(jnp.ones((8, 16)), NamedSharding(mesh, P('X', 'Y')))
      >>> fig = draw_communication(shardbook.analyze(jax.jit(lambda a: a.sum(axis=1)), a))
      >>> print(fig.axes[0].get_title())
      all-reduce over 'Y'
      f32[2] per device
      8 B sent
    """
    import matplotlib.pyplot as plt
    from matplotlib.patches import FancyArrowPatch, Rectangle

    from ..comms import Report, format_bytes

    if not isinstance(report, Report):
        raise TypeError(
            "draw_communication: expected a shardbook.Report (from shardbook.analyze), "
            f"got {type(report).__name__}"
        )
    mesh_axes = dict(report.mesh_axes)
    n = 1
    for size in mesh_axes.values():
        n *= size
    if mesh is not None:
        mesh_axes = dict(mesh.shape)
        n = mesh.size
        labels = [f"d{d.id}" for d in mesh.devices.flat]
    else:
        n = max(n, 1 + max((i for c in report.collectives for g in c.groups for i in g), default=0))
        labels = [f"d{p}" for p in range(n)]
    xy, row_axis, col_axis = _grid_positions(mesh_axes, n)
    width = max(x for x, _ in xy) + 1
    height = max(y for _, y in xy) + 1

    collectives: list[Any] = report.collectives or [None]  # None: an empty panel saying so
    per_row = min(len(collectives), 3)
    n_rows = -(-len(collectives) // per_row)
    panel_w, panel_h = 1.0 * width + 1.2, 0.85 * height + 1.6
    fig, axes = plt.subplots(
        n_rows, per_row, figsize=(max(4.2, panel_w * per_row), panel_h * n_rows), squeeze=False
    )
    for ax in axes.flat[len(collectives) :]:
        ax.axis("off")
    for ax, c in zip(axes.flat, collectives, strict=False):
        for p, (x, y) in enumerate(xy):
            ax.add_patch(
                Rectangle(
                    (x - 0.3, y - 0.25),
                    0.6,
                    0.5,
                    facecolor=_PALETTE[p % len(_PALETTE)],
                    edgecolor="black",
                    lw=0.8,
                    zorder=3,
                )
            )
            ax.text(x, y, labels[p], ha="center", va="center", fontsize=10, zorder=4)
        if c is None:
            ax.set_title("no collectives:\nevery device works on its own blocks", fontsize=10.5)
        else:
            colour = _KIND_COLOURS.get(c.kind, "#555555")
            thickness = _bytes_linewidth(c.bytes)
            if c.kind == "collective-permute":
                for k, (src, dst) in enumerate(c.groups):
                    (x0, y0), (x1, y1) = xy[src], xy[dst]
                    arrow = FancyArrowPatch(
                        (x0, y0),
                        (x1, y1),
                        arrowstyle="-|>",
                        mutation_scale=12,
                        color=colour,
                        lw=thickness,
                        shrinkA=12,
                        shrinkB=12,
                        connectionstyle="arc3,rad=0.25",
                        zorder=2,
                    )
                    arrow.set_gid(f"pair:{k}:{src}->{dst}")
                    ax.add_patch(arrow)
            else:
                for k, group in enumerate(c.groups):
                    pts = [xy[p] for p in group]
                    if len(pts) > 2:
                        pts = pts + pts[:1]
                    (line,) = ax.plot(
                        [x for x, _ in pts],
                        [y for _, y in pts],
                        "-",
                        color=colour,
                        lw=thickness,
                        alpha=0.75,  # the kind's colour still reads as itself (red stays red)
                        solid_capstyle="round",
                        zorder=2,
                    )
                    line.set_gid(f"group:{k}:" + ",".join(map(str, group)))
            axes_text = ",".join(repr(a) for a in c.axes) or "no mesh axis"
            runs = f" ×{c.executions}" if c.executions != 1 else ""
            ax.set_title(
                f"{c.kind}{runs} over {axes_text}\n"
                + textwrap.fill(f"{c.result_text} per device", 30, break_long_words=False)
                + f"\n{format_bytes(c.bytes)} sent",
                fontsize=10.5,
                color=colour,
            )
        ax.set_xlim(-0.6, width - 0.4)
        ax.set_ylim(height - 0.4, -0.6)
        ax.set_aspect("equal")
        ax.set_xticks([])
        ax.set_yticks([])
        ax.set_xlabel(f"→ {col_axis}" if col_axis else "", fontsize=10)
        ax.set_ylabel(f"{row_axis} ↓" if row_axis else "", fontsize=10, rotation=0, labelpad=12)
        for side in ax.spines.values():
            side.set_visible(False)
    total = format_bytes(report.total_bytes)
    heading = f"communication per device: {total} in {len(report.collectives)} collective(s)"
    if report.collectives:
        heading += "\n(line width grows with the bytes sent)"
    fig.suptitle(title or heading, fontsize=11)
    fig.tight_layout()
    if path is not None:
        fig.savefig(path, dpi=150, bbox_inches="tight")
    plt.close(fig)
    return fig


def _bytes_linewidth(n_bytes: int) -> float:
    """Line width (points) for a collective sending n_bytes per device: 1 pt at 1 KiB or less, +1.5 pt
    per factor of 10, at most 9 pt. Absolute, so figures of different reports compare: 32 KiB draws
    about 3.3 pt, 4 MiB about 6.4 pt."""
    import math

    return min(9.0, 1.0 + 1.5 * math.log10(max(n_bytes, 1024) / 1024))
