"""Where an array's blocks lie on a mesh: a text table and a picture (block -> devices).

Two functions answer the question "which device holds which part of this array?":

* :func:`describe_sharding` returns a short text table (block → devices). It works for arrays of any
  rank and in text-only places: tests, graders, a terminal.
* :func:`draw_sharding` draws the same thing with matplotlib: the array as a grid of blocks, each
  coloured and labelled by the device(s) holding it. It draws 0-, 1- and 2-D arrays.

Both accept a ``jax.Array`` (its own sharding and shape are used) or a sharding plus the global shape::

  mesh = jax.make_mesh((4, 2), ('X', 'Y'))
  sharding = NamedSharding(mesh, P('X', 'Y'))
  print(describe_sharding(sharding, (8, 4)))
  draw_sharding(sharding, (8, 4))

Colours follow the devices, not the blocks: the block that device 0 holds is always the same colour,
so two pictures of the same mesh can be compared side by side.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ._common import _PALETTE, _prod, _wrap_devices

if TYPE_CHECKING:  # matplotlib and jax are imported on first use: shardbook.setup() must run first.
    import jax
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure


__all__ = ["describe_sharding", "draw_sharding"]


@dataclass(frozen=True)
class _Block:
    """One block of the array: its [start, stop) range per dimension and the devices holding it."""

    bounds: tuple[tuple[int, int], ...]
    device_ids: tuple[int, ...]

    @property
    def label(self) -> str:
        return ",".join(f"d{i}" for i in self.device_ids)

    @property
    def index_text(self) -> str:
        return "[" + ", ".join(f"{a}:{b}" for a, b in self.bounds) + "]"


@dataclass(frozen=True)
class _Layout:
    """Everything both functions print: what was passed in, resolved into blocks."""

    sharding: Any
    shape: tuple[int, ...]
    dtype: Any
    blocks: tuple[_Block, ...]
    block_shape: tuple[int, ...]

    @property
    def spec_text(self) -> str:
        spec = getattr(self.sharding, "spec", None)
        return _spec_text(spec) if spec is not None else type(self.sharding).__name__

    @property
    def mesh_text(self) -> str:
        mesh = getattr(self.sharding, "mesh", None)
        if mesh is None:
            return f"{len(self.sharding.device_set)} device(s)"
        return "mesh (" + ", ".join(f"{name!r}: {size}" for name, size in mesh.shape.items()) + ")"

    @property
    def array_text(self) -> str:
        dtype = str(self.dtype) if self.dtype is not None else "array"
        return f"{dtype}[{','.join(map(str, self.shape))}]"

    @property
    def copies(self) -> int:
        """How many devices hold each block."""
        return len(self.blocks[0].device_ids)

    @property
    def replication_text(self) -> str | None:
        """'replicated over 'Y' (×2)', 'fully replicated (×8)', or None when every block is on one device."""
        if self.copies == 1:
            return None
        if len(self.blocks) == 1:
            return f"fully replicated (×{self.copies}): every device holds the whole array"
        mesh = getattr(self.sharding, "mesh", None)
        spec = getattr(self.sharding, "spec", None)
        if mesh is None or spec is None:
            return f"replicated (×{self.copies}): each block is on {self.copies} devices"
        used = {name for entry in spec if entry is not None for name in _names(entry)}
        over = [name for name, size in mesh.shape.items() if name not in used and size > 1]
        names = ", ".join(repr(n) for n in over)
        return f"replicated over {names} (×{self.copies})"


def _names(entry: Any) -> tuple[str, ...]:
    return tuple(entry) if isinstance(entry, tuple) else (entry,)


def _spec_text(spec: Any) -> str:
    """P('X', None) rather than the P('X',) or PartitionSpec(...) that repr gives."""

    def one(entry: Any) -> str:
        if entry is None:
            return "None"
        if isinstance(entry, tuple):
            return "(" + ", ".join(repr(n) for n in entry) + ")"
        return repr(entry)

    return "P(" + ", ".join(one(e) for e in spec) + ")"


def _resolve(x_or_sharding: Any, shape: Sequence[int] | None, caller: str) -> _Layout:
    """Turns (array) or (sharding, shape) into blocks, with an error that quotes any bad input."""
    import jax

    if isinstance(x_or_sharding, jax.Array):
        sharding, dtype = x_or_sharding.sharding, x_or_sharding.dtype
        if shape is not None and tuple(shape) != tuple(x_or_sharding.shape):
            raise ValueError(
                f"{caller}: shape={tuple(shape)} does not match the array's shape {x_or_sharding.shape}; "
                "leave shape out when passing an array"
            )
        shape = tuple(x_or_sharding.shape)
    elif isinstance(x_or_sharding, jax.sharding.Sharding):
        sharding, dtype = x_or_sharding, None
        if shape is None:
            raise TypeError(
                f"{caller}: a {type(sharding).__name__} does not know the array's shape; pass it too, "
                f"e.g. {caller}(sharding, (8, 4))"
            )
        if not (
            isinstance(shape, Sequence)
            and all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape)
        ):
            raise TypeError(f"{caller}: expected shape to be a tuple of non-negative ints, got {shape!r}")
        shape = tuple(shape)
    else:
        raise TypeError(
            f"{caller}: expected a jax.Array or NamedSharding, got {type(x_or_sharding).__name__}"
            + (
                " (convert it with jnp.asarray and jax.device_put first)"
                if _looks_like_data(x_or_sharding)
                else ""
            )
        )

    spec = getattr(sharding, "spec", None)
    if spec is not None and len(spec) > len(shape):
        raise ValueError(
            f"{caller}: the spec {_spec_text(spec)} has {len(spec)} entries but the shape {shape} has "
            f"only {len(shape)} dimension(s); a spec needs at most one entry per dimension"
        )
    try:
        block_shape = tuple(sharding.shard_shape(shape))
        index_map: dict[Any, Any] = dict(sharding.devices_indices_map(shape))
    except Exception as e:  # IndivisibleError, DuplicateSpecError, unknown axis name …
        what = _spec_text(spec) if spec is not None else str(sharding)
        raise ValueError(f"{caller}: cannot lay out shape {shape} with {what}: {e}") from e

    by_bounds: dict[tuple[tuple[int, int], ...], list[int]] = {}
    for device, index in index_map.items():
        bounds = tuple(s.indices(n)[:2] for s, n in zip(index, shape, strict=True))
        by_bounds.setdefault(bounds, []).append(device.id)
    blocks = tuple(_Block(b, tuple(sorted(ids))) for b, ids in sorted(by_bounds.items()))
    return _Layout(sharding, shape, dtype, blocks, block_shape)


def _looks_like_data(x: Any) -> bool:
    return isinstance(x, (list, tuple, int, float)) or hasattr(x, "__array__")


def describe_sharding(
    x_or_sharding: jax.Array | jax.sharding.Sharding, shape: Sequence[int] | None = None
) -> str:
    """Returns a short text table of which device holds which block of an array.

    Works for arrays of any rank. Blocks are listed in row-major order of their position in the array;
    each row gives the block's index ranges (``[start:stop, …]``) and the ids of the devices holding it.

    Args:
      x_or_sharding: a ``jax.Array``, or a sharding (usually a ``NamedSharding``) together with ``shape``.
      shape: the global shape of the array; only with a sharding.

    Returns:
      A multi-line string: a header with the spec, mesh and block shape, one line per block, and a line
      saying over which mesh axes the blocks are replicated (if any).

    Raises:
      TypeError: ``x_or_sharding`` is neither an array nor a sharding, or a sharding came without a shape.
      ValueError: the shape does not fit the sharding (a dimension not divisible by its mesh axes, a spec
        with more entries than dimensions, an unknown mesh axis).

    Example:
      >>> import jax
      >>> from jax.sharding import NamedSharding, PartitionSpec as P
      >>> mesh = jax.make_mesh((4, 2), ('X', 'Y'))
      >>> print(describe_sharding(NamedSharding(mesh, P('X')), (8, 4)))
      array[8,4] · P('X') · mesh ('X': 4, 'Y': 2) · block (2, 4) per device
        block        devices
        [0:2, 0:4]   d0,d1
        [2:4, 0:4]   d2,d3
        [4:6, 0:4]   d4,d5
        [6:8, 0:4]   d6,d7
        replicated over 'Y' (×2)
    """
    layout = _resolve(x_or_sharding, shape, "describe_sharding")
    lines = [
        f"{layout.array_text} · {layout.spec_text} · {layout.mesh_text} · "
        f"block {layout.block_shape} per device"
    ]
    width = max(len("block"), *(len(b.index_text) for b in layout.blocks)) + 3
    lines.append(f"  {'block':<{width}}devices")
    lines += [f"  {b.index_text:<{width}}{b.label}" for b in layout.blocks]
    if layout.replication_text:
        lines.append(f"  {layout.replication_text}")
    return "\n".join(lines)


def draw_sharding(
    x_or_sharding: jax.Array | jax.sharding.Sharding,
    shape: Sequence[int] | None = None,
    *,
    ax: Axes | None = None,
    title: str | None = None,
    path: str | Path | None = None,
) -> Figure:
    """Draws an array as a grid of blocks, each coloured and labelled by the device(s) holding it.

    A 2-D array is drawn rows × columns, a 1-D array as a single row, a scalar as one box. The tick
    marks give the array indices where blocks start and end. A block held by several devices lists them
    all ("d0,d1") and carries a "×2" badge; the title says over which mesh axes it is replicated.

    In a notebook, make the call the last line of a cell (or pass the result to ``display``): the
    figure is shown once, through the returned ``Figure``. To keep Jupyter from showing it a second
    time, a figure this function creates is closed in pyplot before it is returned (so ``plt.show()``
    will not show it; it can still be displayed and saved). When you pass ``ax``, the figure is yours
    and is left open.

    Args:
      x_or_sharding: a ``jax.Array``, or a sharding (usually a ``NamedSharding``) together with ``shape``.
      shape: the global shape of the array; only with a sharding.
      ax: matplotlib Axes to draw into; by default a new figure sized to the grid.
      title: first title line; by default the array's type and spec, e.g. ``float32[8,4] · P('X', 'Y')``.
      path: if given, also save the figure there (the format follows the suffix: ``.png``, ``.svg`` …).

    Returns:
      The matplotlib ``Figure``.

    Raises:
      TypeError: ``x_or_sharding`` is neither an array nor a sharding, or a sharding came without a shape.
      ValueError: the array has more than 2 dimensions (use :func:`describe_sharding`, or draw a 2-D
        reshape), or the shape does not fit the sharding.

    Example:
      >>> import jax, jax.numpy as jnp
      >>> from jax.sharding import NamedSharding, PartitionSpec as P
      >>> mesh = jax.make_mesh((4, 2), ('X', 'Y'))
      >>> x = jax.device_put(jnp.zeros((8, 4)), NamedSharding(mesh, P('X', 'Y')))
      >>> fig = draw_sharding(x)  # draw_sharding(x, path="x.png") also saves it
      >>> [t.get_text() for t in fig.axes[0].texts][:4]  # each block: its device, the slice it holds
      ['d0', '[0:2, 0:2]', 'd1', '[0:2, 2:4]']
    """
    layout = _resolve(x_or_sharding, shape, "draw_sharding")
    if len(layout.shape) > 2:
        raise ValueError(
            f"draw_sharding: draws 0-, 1- and 2-D arrays, got a {len(layout.shape)}-D shape {layout.shape}. "
            "Use describe_sharding for any rank, or draw a 2-D view, e.g. the array reshaped to "
            f"({layout.shape[0]}, {_prod(layout.shape[1:])}) with the matching spec"
        )

    import matplotlib.pyplot as plt

    # Work in 2-D: a scalar is 1×1, a vector one row.
    shape2 = (1,) * (2 - len(layout.shape)) + layout.shape
    blocks2 = [((0, 1),) * (2 - len(layout.shape)) + b.bounds for b in layout.blocks]
    row_edges = sorted({r for (r0, r1), _ in blocks2 for r in (r0, r1)})
    col_edges = sorted({c for _, (c0, c1) in blocks2 for c in (c0, c1)})
    n_rows, n_cols = len(row_edges) - 1, len(col_edges) - 1

    # Size each grid cell for its label: device ids wrap after _DEVICES_PER_LINE per line.
    label_lines = [_wrap_devices(b.device_ids) for b in layout.blocks]
    chars = max(max(len(line) for line in lines) for lines in label_lines)
    lines_per_label = max(len(lines) for lines in label_lines) + 1  # + the index range line
    cell_w = max(0.8, 0.1 * chars + 0.3)
    cell_h = max(0.6, 0.2 * lines_per_label + 0.2)
    grid_w = max(n_cols * cell_w, 2.6)
    grid_h = n_rows * cell_h
    if len(layout.shape) == 2:  # roughly the array's proportions, within limits
        grid_h = max(grid_h, grid_w * min(max(shape2[0] / max(shape2[1], 1), 0.35), 1.2))
    scale = min(1.0, 11.0 / (grid_w + 1.0), 9.0 / (grid_h + 1.4))
    fontsize = max(6.0, 10.0 * scale)

    created = ax is None
    fig: Any  # a Figure, or the SubFigure an ax passed in belongs to
    if ax is None:
        fig, ax = plt.subplots(figsize=(grid_w * scale + 1.2, grid_h * scale + 1.5))
    else:
        fig = ax.figure

    from matplotlib.patches import Rectangle

    for block, bounds, lines in zip(layout.blocks, blocks2, label_lines, strict=True):
        (r0, r1), (c0, c1) = bounds
        colour = _PALETTE[block.device_ids[0] % len(_PALETTE)]
        ax.add_patch(Rectangle((c0, r0), c1 - c0, r1 - r0, facecolor=colour, edgecolor="black", lw=1.2))
        text = "\n".join(lines)
        ax.text(
            (c0 + c1) / 2,
            (r0 + r1) / 2,
            text,
            ha="center",
            va="bottom",
            fontsize=fontsize,
            fontweight="bold",
            linespacing=1.1,
        )
        ax.text(
            (c0 + c1) / 2,
            (r0 + r1) / 2,
            block.index_text if layout.shape else "scalar",
            ha="center",
            va="top",
            fontsize=fontsize * 0.8,
            color="#333333",
        )
        if len(block.device_ids) > 1:
            ax.text(
                c1 - 0.03 * (c1 - c0),
                r0 + 0.04 * (r1 - r0),
                f"×{len(block.device_ids)}",
                ha="right",
                va="top",
                fontsize=fontsize * 0.75,
                color="#555555",
            )

    ax.set_xlim(0, shape2[1])
    ax.set_ylim(shape2[0], 0)  # row 0 at the top, as the array is printed
    ax.set_aspect("auto")
    ax.set_xticks(col_edges)
    ax.tick_params(labelsize=fontsize * 0.8, length=3)
    if len(layout.shape) == 2:
        ax.set_yticks(row_edges)
        ax.set_ylabel("row", fontsize=fontsize * 0.8)
        ax.set_xlabel("column", fontsize=fontsize * 0.8)
    else:
        ax.set_yticks([])
        ax.set_xlabel("index" if layout.shape else "", fontsize=fontsize * 0.8)
        if not layout.shape:
            ax.set_xticks([])
    for side in ("top", "right", "bottom", "left"):
        ax.spines[side].set_visible(False)

    heading = [
        title or f"{layout.array_text} · {layout.spec_text}",
        f"{layout.mesh_text} · block {layout.block_shape} per device",
    ]
    if layout.replication_text:
        heading.append(layout.replication_text)
    ax.set_title("\n".join(heading), fontsize=fontsize, loc="left")

    if created:
        fig.tight_layout()
    if path is not None:
        fig.savefig(path, dpi=150, bbox_inches="tight")
    if created:
        plt.close(fig)  # shown once, by the returned Figure (see docstring)
    return fig
