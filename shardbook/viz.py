"""Pictures and text tables of how an array's blocks lie on a mesh.

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

The other pictures follow the chapters, each drawn from the learner's own arrays or programs:

* where data moves — :func:`draw_collective` (every device's block before and after one collective,
  computed by running it), :func:`draw_communication` (the collectives of an analysed program),
  :func:`draw_ring_steps` and :func:`animate_ring_steps` (a ring collective matmul step by step);
* below the marker line, what chapters 6–9 look at — :func:`draw_routing` (tokens to experts to
  devices), :func:`draw_gradient_reduction` (where a backward pass reduces), :func:`draw_residuals`
  (saved state per schedule), :func:`draw_precision_tradeoff` (error against cost).
"""

from __future__ import annotations

import re
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass
from html import escape as _html_escape
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:  # matplotlib and jax are imported on first use: shardbook.setup() must run first.
    import jax
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

__all__ = [
    "animate_ring_steps",
    "animation_html",
    "describe_sharding",
    "draw_collective",
    "draw_communication",
    "draw_ring_steps",
    "draw_sharding",
]

# Light colours (matplotlib's Set3 and Pastel1) so black labels stay readable; indexed by device id.
_PALETTE = (
    "#66c2a5", "#e6c229", "#8da0cb", "#fc8d62", "#6baed6", "#fdae6b", "#a6d854", "#e78ac3",
    "#a3a3a3", "#c48ac5", "#74c476", "#f2b701", "#f4877b", "#7fa7d1", "#c49bd9", "#d9a45b",
)  # fmt: skip
# Every entry is saturated enough to stand out on a white page (contrast >= 1.6 against white) and light
# enough for black text on it (>= 7 against black); tests/test_viz.py checks both.
_DEVICES_PER_LINE = 4


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


def _wrap_devices(ids: Sequence[int]) -> list[str]:
    names = [f"d{i}" for i in ids]
    return [",".join(names[i : i + _DEVICES_PER_LINE]) for i in range(0, len(names), _DEVICES_PER_LINE)]


def _prod(xs: Sequence[int]) -> int:
    out = 1
    for x in xs:
        out *= x
    return out


# ---------------------------------------------------------------------------------------------------
# Collectives: every device's block before and after one collective, computed by running it.

# name -> (the collective on a block, the same on the provenance bits, what a cell after it holds)
_REDUCTIONS = {"psum": "sum", "pmean": "mean", "pmax": "max", "pmin": "min", "psum_scatter": "sum"}
_MOVES = ("all_gather", "all_to_all", "ppermute")
COLLECTIVES = (*_REDUCTIONS, *_MOVES)
_SUM_COLOUR = "#cfcfcf"  # a cell that combines several devices' values
_EMPTY_COLOUR = "#ffffff"  # a cell no device sent anything to (ppermute: zeros)


def _collective_fn(collective: str, axis_name: Any, params: dict[str, Any]) -> tuple[Any, Any]:
    """(function applied to the block, function applied to the provenance bits)."""
    from jax import lax

    def bits_of(fn):
        return fn

    if collective in ("psum", "pmean", "pmax", "pmin"):
        op = getattr(lax, collective)
        return (lambda b: op(b, axis_name, **params)), (lambda b: lax.psum(b, axis_name))
    if collective == "psum_scatter":
        fn = lambda b: lax.psum_scatter(b, axis_name, **params)  # noqa: E731
        return fn, bits_of(fn)
    if collective == "all_gather":
        fn = lambda b: lax.all_gather(b, axis_name, **params)  # noqa: E731
        return fn, fn
    if collective == "all_to_all":
        fn = lambda b: lax.all_to_all(b, axis_name, **params)  # noqa: E731
        return fn, fn
    if collective == "ppermute":
        fn = lambda b: lax.ppermute(b, axis_name, **params)  # noqa: E731
        return fn, fn
    raise ValueError(f"draw_collective: unknown collective {collective!r}; expected one of {COLLECTIVES}")


@dataclass(frozen=True)
class _DeviceBlocks:
    """One device's block before and after, with the set of mesh positions each after-cell came from."""

    device_id: int
    position: tuple[int, ...]  # its position on the mesh
    before: Any  # np.ndarray, the block as stored
    after: Any  # np.ndarray
    sources: Any  # np.ndarray of int bitmasks, same shape as after (bit p = mesh position p)


def run_collective(
    x: jax.Array, collective: str, axis_name: str | tuple[str, ...], **params: Any
) -> list[_DeviceBlocks]:
    """Runs ``collective`` on every device's block of ``x`` with ``jax.shard_map``; per device, returns
    the block before, the block after, and which mesh positions each value after it came from.

    The provenance is computed by running the same collective on a second array in which every element
    of the block on mesh position ``p`` is ``2**p``: a sum of such numbers names its contributors.
    """
    import jax
    import jax.numpy as jnp
    import numpy as np
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    if not isinstance(x, jax.Array) or not isinstance(x.sharding, NamedSharding):
        raise TypeError(
            "draw_collective: expected a jax.Array laid out with a NamedSharding (jax.device_put(x, "
            f"NamedSharding(mesh, spec))), got {type(x).__name__}"
            + (f" with {type(x.sharding).__name__}" if isinstance(x, jax.Array) else "")
        )
    mesh = x.sharding.mesh
    names = tuple(mesh.axis_names)
    for name in (axis_name,) if isinstance(axis_name, str) else tuple(axis_name):
        if name not in names:
            raise ValueError(f"draw_collective: axis {name!r} is not on the mesh; its axes are {names}")
    if mesh.size > 23:
        raise ValueError(f"draw_collective: draws meshes of up to 23 devices, got {mesh.size}")
    on_block, on_bits = _collective_fn(collective, axis_name, params)

    def body(block):
        pos = 0
        for name in names:
            pos = pos * mesh.shape[name] + jax.lax.axis_index(name)
        bits = jnp.exp2(jnp.full(block.shape, pos, jnp.float32))
        return on_block(block)[None], on_bits(bits)[None]

    spec = x.sharding.spec
    try:
        after, bits = jax.shard_map(body, mesh=mesh, in_specs=spec, out_specs=(P(names), P(names)))(x)
    except Exception as e:
        raise ValueError(
            f"draw_collective: {collective}({_spec_text(spec)} block, {axis_name!r}) failed: {e}"
        ) from e
    after, bits = np.asarray(after), np.rint(np.asarray(bits)).astype(np.int64)
    by_device = {shard.device.id: np.asarray(shard.data) for shard in x.addressable_shards}
    out = []
    for p, device in enumerate(mesh.devices.flat):
        position = tuple(int(i) for i in np.unravel_index(p, mesh.devices.shape))
        out.append(_DeviceBlocks(device.id, position, by_device[device.id], after[p], bits[p]))
    return out


def _as_2d(a: Any) -> Any:
    import numpy as np

    a = np.asarray(a)
    if a.ndim == 0:
        return a.reshape(1, 1)
    if a.ndim == 1:
        return a.reshape(1, -1)
    return a.reshape(a.shape[0], -1)


def _value_text(v: Any) -> str:
    v = float(v)
    if v == int(v) and abs(v) < 1e6:
        return str(int(v))
    return f"{v:.3g}"


def _cell_colour(mask: int, id_of_position: Sequence[int]) -> str:
    if mask == 0:
        return _EMPTY_COLOUR
    if mask & (mask - 1):  # more than one bit: several devices contributed
        return _SUM_COLOUR
    return _PALETTE[id_of_position[mask.bit_length() - 1] % len(_PALETTE)]


def _mask_devices(mask: int, id_of_position: Sequence[int]) -> list[int]:
    return [id_of_position[p] for p in range(mask.bit_length()) if mask >> p & 1]


def draw_collective(
    x: jax.Array,
    collective: str,
    axis_name: str | tuple[str, ...],
    *,
    where: dict[str, int] | None = None,
    title: str | None = None,
    path: str | Path | None = None,
    **params: Any,
) -> Figure:
    """Draws every device's block of ``x`` before and after one collective, run with real JAX.

    The collective runs inside ``jax.shard_map`` on ``x``'s own mesh and layout, exactly as
    ``jax.lax.<collective>(block, axis_name, **params)`` would in your code. Each device's block is
    drawn as a grid of its values. A value that came from one device takes that device's colour (the
    colours of :func:`draw_sharding`); a value combining several devices (a sum, mean, max) is grey;
    a cell no device sent anything to (``ppermute`` without a source) is white.

    Args:
      x: a ``jax.Array`` laid out with a ``NamedSharding``.
      collective: one of ``'psum'``, ``'pmean'``, ``'pmax'``, ``'pmin'``, ``'psum_scatter'``,
        ``'all_gather'``, ``'all_to_all'``, ``'ppermute'``.
      axis_name: the mesh axis (or tuple of axes) the collective runs over.
      where: draw only the devices at these mesh positions, e.g. ``{'Y': 0}`` for one column of the
        mesh; by default every device.
      title: the figure's title; by default the call, e.g. ``psum over 'X'``.
      path: if given, also save the figure there.
      **params: the collective's own arguments: ``axis``/``tiled`` (all_gather),
        ``scatter_dimension``/``tiled`` (psum_scatter), ``perm`` (ppermute),
        ``split_axis``/``concat_axis``/``tiled`` (all_to_all).

    Returns:
      The matplotlib ``Figure`` (closed in pyplot, so a notebook shows it once, as the cell's value).

    Raises:
      TypeError: ``x`` is not an array with a ``NamedSharding``.
      ValueError: an unknown collective or axis, or the collective refused these arguments (JAX's
        message is quoted).

    Example:
      >>> import jax, jax.numpy as jnp
      >>> from jax.sharding import NamedSharding, PartitionSpec as P
      >>> mesh = jax.make_mesh((4,), ('X',))
      >>> x = jax.device_put(jnp.arange(16.0).reshape(4, 4), NamedSharding(mesh, P('X')))
      >>> fig = draw_collective(x, 'ppermute', 'X', perm=[(i, (i + 1) % 4) for i in range(4)])
      >>> fig.get_suptitle()
      "ppermute over 'X', perm 0→1 1→2 2→3 3→0"
    """
    import matplotlib.pyplot as plt
    from matplotlib.patches import Rectangle

    if collective not in COLLECTIVES:
        raise ValueError(f"draw_collective: unknown collective {collective!r}; expected one of {COLLECTIVES}")
    blocks = run_collective(x, collective, axis_name, **params)
    mesh = cast(Any, x.sharding).mesh  # run_collective has checked it is a NamedSharding
    names = tuple(mesh.axis_names)
    id_of_position = [d.id for d in mesh.devices.flat]
    if where:
        unknown = set(where) - set(names)
        if unknown:
            raise ValueError(f"draw_collective: where= names {sorted(unknown)}, not axes of the mesh {names}")
        blocks = [b for b in blocks if all(b.position[names.index(a)] == i for a, i in where.items())]
        if not blocks:
            raise ValueError(f"draw_collective: no device of the mesh {dict(mesh.shape)} is at {where}")

    panels = [
        ("before", [_as_2d(b.before) for b in blocks], None),
        ("after", [_as_2d(b.after) for b in blocks], [_as_2d(b.sources) for b in blocks]),
    ]
    # One slot per device, as tall as its taller panel, at the same height in both panels: a device's
    # "before" block sits level with its "after" block.
    slot = [max(panels[0][1][k].shape[0], panels[1][1][k].shape[0]) for k in range(len(blocks))]
    tops = [sum(slot[:k]) + 0.6 * k for k in range(len(blocks))]
    rows = sum(slot) + 0.6 * (len(blocks) - 1)
    cols = [max(a.shape[1] for a in arrays) for _, arrays, _ in panels]
    cells = sum(a.size for _, arrays, _ in panels for a in arrays)
    label_values = cells <= 400
    cell = 0.5 if label_values else 0.24
    fig, axes = plt.subplots(
        1,
        2,
        figsize=(max(6.0, cell * (sum(cols) + 4) + 1.6), min(14.0, cell * rows + 1.9)),
        gridspec_kw={"width_ratios": [max(c, 2) + 2.8 for c in cols]},  # = each panel's x range: one scale
    )
    fontsize = 10 if label_values else 7
    own_colour = [_PALETTE[b.device_id % len(_PALETTE)] for b in blocks]
    for ax, (name, arrays, sources), width in zip(axes, panels, cols, strict=True):
        for k, (block, arr) in enumerate(zip(blocks, arrays, strict=True)):
            top = tops[k] + (slot[k] - arr.shape[0]) / 2
            for (r, c), value in _ndenumerate(arr):
                if sources is None:
                    colour = own_colour[k]
                    origin = [block.device_id]
                else:
                    mask = int(sources[k][r, c])
                    colour = _cell_colour(mask, id_of_position)
                    origin = _mask_devices(mask, id_of_position)
                rect = Rectangle((c, top + r), 1, 1, facecolor=colour, edgecolor="black", lw=0.6)
                rect.set_gid(f"{name}:d{block.device_id}:{r},{c}:" + ",".join(f"d{i}" for i in origin))
                ax.add_patch(rect)
                if label_values:
                    ax.text(
                        c + 0.5,
                        top + r + 0.5,
                        _value_text(value),
                        ha="center",
                        va="center",
                        fontsize=fontsize,
                    )
            where_text = ",".join(f"{a}={i}" for a, i in zip(names, block.position, strict=True))
            ax.text(
                -0.25,
                top + arr.shape[0] / 2,
                f"d{block.device_id}\n({where_text})",
                ha="right",
                va="center",
                fontsize=fontsize,
            )
        ax.set_xlim(-2.6, max(width, 2) + 0.2)
        ax.set_ylim(rows + 0.2, -0.2)
        ax.set_aspect("equal")
        ax.set_anchor("N")  # both panels start at the top, so their device slots line up
        ax.axis("off")
        shape = "×".join(map(str, arrays[0].shape)) if arrays else ""
        ax.set_title(f"{name}: block {shape} per device", fontsize=11)
    call = f"{collective} over {axis_name!r}" + "".join(
        f", {k}={v!r}" for k, v in params.items() if k != "perm"
    )
    if "perm" in params:
        call += ", perm " + " ".join(f"{s}→{t}" for s, t in params["perm"])
    legend = "colour: the device a value came from;\ngrey: combined from several; white: nothing arrived"
    fig.suptitle(title or call, fontsize=11)
    fig.text(0.5, 0.01, legend, ha="center", va="bottom", fontsize=10)
    fig.tight_layout(rect=(0, 0.06 if label_values else 0.04, 1, 1))
    if path is not None:
        fig.savefig(path, dpi=150, bbox_inches="tight")
    plt.close(fig)
    return fig


def _ndenumerate(a: Any):
    import numpy as np

    return np.ndenumerate(a)


# ---------------------------------------------------------------------------------------------------
# Communication: which collectives a compiled program runs, between which devices, and the bytes.

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

    from .comms import Report, format_bytes

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


# ---------------------------------------------------------------------------------------------------
# The ring collective matmul: which block of A each device holds, and multiplies, at each step.


def ring_schedule(
    mesh: Any,
    axis_name: str,
    *,
    perm: Sequence[tuple[int, int]] | None = None,
    where: dict[str, int] | None = None,
) -> tuple[list[int], list[list[int]]]:
    """Runs the ring's ``ppermute``\\ s with real JAX and returns (device ids along the ring,
    ``held[s][y]``: the ring position whose block device ``y`` holds at step ``s``).

    At step 0 every device holds its own block; between steps each block moves along ``perm``
    (default: to the left neighbour, ``y → y - 1``). ``where`` fixes the position on the other mesh
    axes (default 0).
    """
    import jax
    import jax.numpy as jnp
    import numpy as np
    from jax.sharding import PartitionSpec as P

    names = tuple(mesh.axis_names)
    if axis_name not in names:
        raise ValueError(f"draw_ring_steps: axis {axis_name!r} is not on the mesh; its axes are {names}")
    n = mesh.shape[axis_name]
    perm = [(s, (s - 1) % n) for s in range(n)] if perm is None else [(int(p[0]), int(p[1])) for p in perm]

    def body():
        tag = jax.lax.axis_index(axis_name).astype(jnp.float32).reshape(1)
        tag = jax.lax.pcast(tag, tuple(a for a in names if a != axis_name), to="varying")
        held = [tag]
        for _ in range(n - 1):
            tag = jax.lax.ppermute(tag, axis_name, perm)
            held.append(tag)
        return jnp.stack(held, axis=1)[None]  # (1, 1, n)

    out = jax.jit(jax.shard_map(body, mesh=mesh, in_specs=(), out_specs=P(names)))()
    out = np.asarray(out).reshape(*mesh.devices.shape, n)
    index = tuple(slice(None) if a == axis_name else (where or {}).get(a, 0) for a in names)
    held = out[index]  # (n, steps): position y, step s
    ids = [int(d.id) for d in np.asarray(mesh.devices)[index]]
    return ids, [[int(round(held[y, s])) for y in range(n)] for s in range(n)]


def draw_ring_steps(
    mesh: Any,
    axis_name: str = "Y",
    *,
    perm: Sequence[tuple[int, int]] | None = None,
    where: dict[str, int] | None = None,
    title: str | None = None,
    path: str | Path | None = None,
) -> Figure:
    """Draws the steps of the ring collective matmul ``A[B, D_axis] · W[D, F_axis]``.

    One row per device along ``axis_name``, one column per step. A cell shows the block of A the device
    holds at that step (coloured by the device it started on) and the partial product it adds:
    ``A_k · W_k`` is A's columns of block k times the rows k of the device's own W block. Arrows show
    where each block goes before the next step. Which block is where is computed by running the
    ``ppermute``\\ s with real JAX, so a wrong ``perm`` shows up as a wrong picture.

    Args:
      mesh: the ``jax.sharding.Mesh``.
      axis_name: the mesh axis the ring runs along (the axis A's contracting dimension is split over).
      perm: the ``(source, target)`` pairs of the ``ppermute``, as positions along the axis; by default
        every block moves to the left neighbour, ``(y, y - 1 mod n)``.
      where: positions on the other mesh axes (default 0): which of the parallel rings to draw.
      title: the figure's title.
      path: if given, also save the figure there.

    Returns:
      The matplotlib ``Figure`` (closed in pyplot, so a notebook shows it once, as the cell's value).

    Example:
      >>> import jax
      >>> fig = draw_ring_steps(jax.make_mesh((2, 4), ('X', 'Y')), 'Y')
      >>> print(fig.axes[0].get_title())
      ring along 'Y': block $A_k$ moves, W stays;
      after 4 steps every device has added all 4
    """
    fig = _ring_figure(mesh, axis_name, perm, where, title)[0]
    import matplotlib.pyplot as plt

    if path is not None:
        fig.savefig(path, dpi=150, bbox_inches="tight")
    plt.close(fig)
    return fig


def animate_ring_steps(
    mesh: Any,
    axis_name: str = "Y",
    *,
    perm: Sequence[tuple[int, int]] | None = None,
    where: dict[str, int] | None = None,
    title: str | None = None,
    interval_ms: int = 1200,
) -> Any:
    """The picture of :func:`draw_ring_steps`, one step at a time, as a matplotlib animation.

    In a notebook (and on a static web page) show it with
    ``animation_html(animate_ring_steps(mesh, 'Y'))``: frame s shows steps 0 … s, the later steps
    faded.

    Returns:
      A ``matplotlib.animation.FuncAnimation`` with one frame per step.
    """
    import matplotlib.pyplot as plt
    from matplotlib.animation import FuncAnimation

    fig, columns = _ring_figure(mesh, axis_name, perm, where, title)
    plt.close(fig)

    def show(frame: int):
        changed = []
        for s, artists in enumerate(columns):
            for artist in artists:
                artist.set_alpha(1.0 if s <= frame else 0.12)
                changed.append(artist)
        return changed

    return FuncAnimation(fig, show, frames=len(columns), interval=interval_ms, blit=False)


_CDN_STYLESHEET = re.compile(r'<link rel="stylesheet"\s+href="https?://[^"]*font-awesome[^"]*">\n?')
_ICON = re.compile(r'<i class="fa (fa-[a-z-]+(?: fa-flip-horizontal)?)"></i>')
_GLYPHS = {
    "fa-minus": "−",
    "fa-plus": "+",
    "fa-fast-backward": "⏮",
    "fa-step-backward": "◀︎|",
    "fa-play fa-flip-horizontal": "◀︎",
    "fa-pause": "⏸︎",
    "fa-play": "▶︎",
    "fa-step-forward": "|▶︎",
    "fa-fast-forward": "⏭",
}


def animation_html(animation: Any, alt: str | None = None) -> Any:
    """Wraps ``animation.to_jshtml()`` for a notebook or a static web page, its frames shrunk to fit
    a narrow screen (a phone) instead of running off its edge. ``alt`` becomes the frame image's
    ``alt`` text (say what the animation shows, for readers who cannot see it).

    Returns:
      An ``IPython.display.HTML`` object; make it the last line of a cell.

    Example:
      >>> import jax
      >>> html = animation_html(animate_ring_steps(jax.make_mesh((4, 2), ('X', 'Y')), 'Y'), alt="A ring.")
      >>> html.data.startswith('<div class="shardbook-animation">'), '<img alt="A ring." ' in html.data
      (True, True)
      >>> "://" in html.data  # no stylesheet or font from another host
      False
    """
    from IPython.display import HTML

    html = animation.to_jshtml()
    # matplotlib's buttons draw Font Awesome icons from a stylesheet on a CDN: the page would ask an
    # outside host for it. Plain characters need no stylesheet, on the book's pages and in Colab.
    html = _CDN_STYLESHEET.sub("", html)
    html = _ICON.sub(lambda m: f'<span aria-hidden="true">{_GLYPHS.get(m.group(1), "")}</span>', html)
    if alt is not None:  # the frame is one <img>: give it a text alternative for screen readers
        html = re.sub(r"<img (?![^>]*\balt=)", f'<img alt="{_html_escape(alt, quote=True)}" ', html, count=1)
    style = "<style>.shardbook-animation img { max-width: 100%; height: auto; }</style>"
    return HTML(f'<div class="shardbook-animation">{style}{html}</div>')


def _ring_figure(
    mesh: Any, axis_name: str, perm: Any, where: Any, title: str | None
) -> tuple[Any, list[list[Any]]]:
    import matplotlib.pyplot as plt
    from matplotlib.patches import FancyArrowPatch, Rectangle

    ids, held = ring_schedule(mesh, axis_name, perm=perm, where=where)
    n = len(ids)
    perm = [(s, (s - 1) % n) for s in range(n)] if perm is None else [tuple(p) for p in perm]
    # Narrow enough (7.3 in for n = 4) to be shown near its natural size in a 730 px column, so
    # 10-11 pt text stays 10-11 pt on the page.
    fig, ax = plt.subplots(figsize=(1.6 * n + 0.9, 0.95 * n + 1.4))
    columns: list[list[Any]] = [[] for _ in range(n)]
    w, h, gap = 1.6, 0.78, 0.45
    for s in range(n):
        x0 = s * (w + gap)
        columns[s].append(ax.text(x0 + w / 2, -0.35, f"step {s}", ha="center", va="center", fontsize=11))
        for y in range(n):
            k = held[s][y]
            rect = Rectangle(
                (x0, y), w, h, facecolor=_PALETTE[ids[k] % len(_PALETTE)], edgecolor="black", lw=0.8
            )
            rect.set_gid(f"step{s}:d{ids[y]}:holds{k}")
            ax.add_patch(rect)
            columns[s].append(rect)
            columns[s].append(
                ax.text(
                    x0 + w / 2,
                    y + h / 2,
                    # W never moves: W_{k,y} is rows k of the device's own column block y of W
                    f"$A_{{{k}}}$ (from d{ids[k]})\n+ $A_{{{k}}} W_{{{k},{y}}}$",
                    ha="center",
                    va="center",
                    fontsize=10.5,
                )
            )
        if s + 1 < n:
            for src, dst in perm:
                arrow = FancyArrowPatch(
                    (x0 + w, src + h / 2),
                    (x0 + w + gap, dst + h / 2),
                    arrowstyle="-|>",
                    mutation_scale=9,
                    lw=1.0,
                    color="#444444",
                )
                ax.add_patch(arrow)
                columns[s + 1].append(arrow)
    for y in range(n):
        ax.text(-0.15, y + h / 2, f"d{ids[y]}\n{axis_name}={y}", ha="right", va="center", fontsize=10.5)
    ax.set_xlim(-0.75, n * (w + gap) - gap + 0.05)
    ax.set_ylim(n + 0.1, -0.7)
    ax.axis("off")
    ax.set_title(
        title
        or f"ring along {axis_name!r}: block $A_k$ moves, W stays;\n"
        f"after {n} steps every device has added all {n}",
        fontsize=11,
    )
    fig.tight_layout()
    return fig, columns


# --- pictures for chapters 6-9 below ---


def _fig_or_axes(ax: Any, figsize: tuple[float, float]) -> tuple[Figure, Axes, bool]:
    """A new figure of figsize (created=True), or the figure of the Axes passed in."""
    import matplotlib.pyplot as plt

    if ax is None:
        fig, ax = plt.subplots(figsize=figsize)
        return fig, ax, True
    return ax.figure, ax, False


def _finish(fig: Figure, created: bool, path: str | Path | None) -> Figure:
    """Lays out, saves and (if this module made it) closes a figure, as draw_sharding does."""
    import matplotlib.pyplot as plt

    if created:
        fig.tight_layout()
    if path is not None:
        fig.savefig(path, dpi=150, bbox_inches="tight")
    if created:
        plt.close(fig)  # shown once, by the returned Figure
    return fig


def route_counts(routing: Any, n_devices: int, n_experts: int | None = None) -> Any:
    """Counts tokens by (device holding the token, device holding its expert).

    Tokens are split over the devices in order (token i on device ``i // (S / n_devices)``), experts
    likewise (expert e on device ``e // (n_experts / n_devices)``), as ``P('X')`` lays them out.

    Args:
      routing: int array [S] (one expert per token) or [S, k] (top-k: k rows per token).
      n_devices: devices of the mesh axis that splits both tokens and experts.
      n_experts: number of experts E; by default ``routing.max() + 1``.

    Returns:
      An int numpy array [n_devices, n_devices]: entry [i, j] counts the token rows that start on device
      i and need an expert on device j. The diagonal stays on its device.

    Example:
      >>> route_counts([0, 3, 1, 2], n_devices=2, n_experts=4)
      array([[1, 1],
             [1, 1]])
    """
    import numpy as np

    b, experts = _routing_layout(routing, n_devices, n_experts, "route_counts")
    counts = np.zeros((n_devices, n_devices), np.int64)
    source = np.repeat(np.arange(n_devices), b.shape[0] // n_devices)
    for col in b.T:
        np.add.at(counts, (source, col // (experts // n_devices)), 1)
    return counts


def _routing_layout(routing: Any, n_devices: int, n_experts: int | None, caller: str) -> tuple[Any, int]:
    import numpy as np

    b = np.asarray(routing)
    if b.ndim == 1:
        b = b[:, None]
    if b.ndim != 2 or not np.issubdtype(b.dtype, np.integer):
        raise TypeError(
            f"{caller}: expected an int array [S] or [S, k] of expert ids, got {b.dtype}{list(b.shape)}"
        )
    experts = int(b.max()) + 1 if n_experts is None else int(n_experts)
    if b.size and (b.min() < 0 or b.max() >= experts):
        raise ValueError(
            f"{caller}: expert ids must lie in [0, {experts}), got {int(b.min())} … {int(b.max())}"
        )
    if n_devices < 1 or b.shape[0] % n_devices or experts % n_devices:
        raise ValueError(
            f"{caller}: {b.shape[0]} tokens and {experts} experts must both split evenly over "
            f"n_devices={n_devices}"
        )
    return b, experts


def draw_routing(
    routing: Any,
    n_devices: int,
    n_experts: int | None = None,
    *,
    capacity: int | None = None,
    title: str | None = None,
    path: str | Path | None = None,
) -> Figure:
    """Draws where each token's expert lives: every token, then the device-to-device counts.

    Left: one row per device, one square per token it holds (tokens split over the devices in order),
    coloured by the device that holds the token's expert — a row of its own colour stays home. Right:
    the [source device, expert's device] table of counts (:func:`route_counts`), which is what an
    all_to_all has to move; the diagonal never leaves its device. Top-k routings ([S, k]) draw k
    squares per token, side by side.

    Args:
      routing: int array [S] (one expert id per token) or [S, k].
      n_devices: devices of the mesh axis that splits tokens and experts.
      n_experts: number of experts E (default ``routing.max() + 1``); must divide by ``n_devices``.
      capacity: if given, each expert's buffer holds this many token rows, filled in token order; the
        rows past it (dropped) are crossed out on the left and counted in the title.
      title: the figure's title; by default it says how many token rows leave their device.
      path: if given, also save the figure there.

    Returns:
      The matplotlib ``Figure`` (closed in pyplot, so a notebook shows it once).

    Example:
      >>> import numpy as np
      >>> b = np.random.default_rng(0).integers(0, 16, 64)
      >>> draw_routing(b, n_devices=4, n_experts=16).get_suptitle()
      '64 token rows, 16 experts on 4 devices: 48 rows leave home'
    """
    import matplotlib.pyplot as plt
    import numpy as np
    from matplotlib.colors import ListedColormap

    b, experts = _routing_layout(routing, n_devices, n_experts, "draw_routing")
    counts = route_counts(b, n_devices, experts)
    per_device = b.shape[0] // n_devices
    dest = (b // (experts // n_devices)).reshape(n_devices, per_device * b.shape[1])
    leaving = int(counts.sum() - np.trace(counts))
    dropped = np.zeros(b.shape, bool)
    if capacity is not None:
        flat = b.ravel()
        seen = np.zeros(experts, int)
        for i, e in enumerate(flat):  # token order: row i goes to row seen[e] of expert e's buffer
            dropped.flat[i] = seen[e] >= capacity
            seen[e] += 1
    dropped = dropped.reshape(n_devices, per_device * b.shape[1])

    # 7.3 in: shown near natural size in a 730 px column, so the 10-11 pt text stays legible.
    fig, (left, right) = plt.subplots(
        1, 2, figsize=(7.3, 0.35 * n_devices + 2.3), gridspec_kw={"width_ratios": [1.6, 1]}
    )
    colours = ListedColormap([_PALETTE[d % len(_PALETTE)] for d in range(n_devices)])
    left.imshow(dest, cmap=colours, vmin=-0.5, vmax=n_devices - 0.5, aspect="auto", interpolation="nearest")
    if dest.shape[1] <= 128:  # thin white lines between tokens
        for x in range(1, dest.shape[1]):
            left.axvline(x - 0.5, color="white", lw=0.4)
    if dropped.any():
        rows, cols = np.nonzero(dropped)
        left.scatter(cols, rows, marker="x", s=9, linewidths=0.8, color="black", label="dropped")
        left.legend(
            loc="upper right", bbox_to_anchor=(1.02, 0.0), fontsize=10, frameon=False, handletextpad=0.2
        )
    left.set_yticks(range(n_devices), [f"d{d}" for d in range(n_devices)], fontsize=10)
    left.set_ylabel("device holding the tokens", fontsize=10)
    left.set_xlabel(
        f"its {per_device} tokens" + (f" × {b.shape[1]} choices" if b.shape[1] > 1 else ""),
        fontsize=10,
        loc="left",
    )
    left.set_xticks([])
    left.set_title("each token, coloured by its expert's device", fontsize=10.5, loc="left")

    vmax = max(int(counts.max()), 1) * 1.6
    right.imshow(counts, cmap="Greys", vmin=0, vmax=vmax)
    for i in range(n_devices):
        for j in range(n_devices):
            right.text(
                j, i, str(counts[i, j]), ha="center", va="center", fontsize=10 if n_devices <= 8 else 8,
                fontweight="bold" if i == j else "normal",
                color="white" if counts[i, j] / vmax > 0.45 else "black",  # readable on dark cells
            )  # fmt: skip
    right.set_xticks(range(n_devices), [f"d{d}" for d in range(n_devices)], fontsize=10)
    right.set_yticks(range(n_devices), [f"d{d}" for d in range(n_devices)], fontsize=10)
    for label in [*left.get_yticklabels(), *right.get_xticklabels(), *right.get_yticklabels()]:
        device = int(label.get_text()[1:])  # the device's colour, as in the token rows
        label.set_bbox({"facecolor": _PALETTE[device % len(_PALETTE)], "edgecolor": "none", "pad": 1.5})
    right.set_xlabel("device holding the expert", fontsize=10)
    right.set_title("rows from → to\n(diagonal stays)", fontsize=10.5, loc="left")
    default = f"{b.size} token rows, {experts} experts on {n_devices} devices: {leaving} rows leave home"
    if capacity is not None:
        default += f"\ncapacity {capacity} rows per expert: {int(dropped.sum())} rows dropped (×)"
    fig.suptitle(title or default, fontsize=11)
    return _finish(fig, True, path)


_REDUCING = ("all-reduce", "reduce-scatter")


def draw_gradient_reduction(
    reports: Any,
    *,
    kinds: Sequence[str] = _REDUCING,
    title: str | None = None,
    path: str | Path | None = None,
) -> Figure:
    """Draws the reductions of compiled programs: what is summed, over which mesh axes, how often.

    One lane per reducing collective (all-reduce and reduce-scatter by default) of each program. The
    lane is a bar as long as the bytes it sends per device over the whole call, cut into one segment
    per execution — an all-reduce inside two loops shows as many thin segments, one after the loops as
    a single long one. The label names the kind, the summed array (the gradient's shape), the mesh
    axes it is summed over and the source line JAX recorded.

    Args:
      reports: a :class:`shardbook.Report` (from :func:`shardbook.analyze`, e.g. of ``jax.grad(loss)``)
        or a dict ``{label: Report}`` to compare programs on one byte axis.
      kinds: which collective kinds to draw.
      title: the figure's title; by default the total bytes per program.
      path: if given, also save the figure there.

    Returns:
      The matplotlib ``Figure`` (closed in pyplot, so a notebook shows it once).

    Example:
      >>> import jax, jax.numpy as jnp, shardbook
      >>> from jax.sharding import AxisType, NamedSharding, PartitionSpec as P
      >>> mesh = jax.make_mesh((8,), ('X',), axis_types=(AxisType.Auto,))
      >>> x = jax.device_put(jnp.ones((16, 4)), NamedSharding(mesh, P('X')))  # a batch, split
      >>> grad = jax.jit(jax.grad(lambda w, x: ((x @ w) ** 2).sum()))  # of replicated weights
      >>> fig = draw_gradient_reduction(shardbook.analyze(grad, jnp.ones((4, 4)), x))
      >>> [t.get_text() for t in fig.axes[0].texts]  # doctest: +ELLIPSIS
      ["all-reduce f32[4,4] summed over 'X', in the backward pass · ...", '1 run = 112 B']
    """
    from matplotlib.patches import Rectangle

    if not isinstance(reports, dict):
        reports = {"": reports}
    for label, report in reports.items():
        if not hasattr(report, "collectives"):
            raise TypeError(
                f"draw_gradient_reduction: expected a shardbook Report (from shardbook.analyze) for "
                f"{label!r}, got {type(report).__name__}"
            )
    lanes = [(label, c) for label, report in reports.items() for c in report.collectives if c.kind in kinds]
    widest = max([c.bytes for _, c in lanes] or [1])
    fig, ax, created = _fig_or_axes(None, (7.3, 0.8 * max(len(lanes), 1) + 0.5 * len(reports) + 1.1))
    y = 0.0
    for label in reports:
        mine = [c for lab, c in lanes if lab == label]
        if label:
            ax.text(0, y, label, fontsize=11, fontweight="bold", va="top")
            y += 0.5
        if not mine:
            ax.text(0, y + 0.25, "no reduction in this program", fontsize=10, color="#555555", va="center")
            y += 0.8
        for c in mine:
            # What is summed, over which axes, from which line: written above the bar.
            axes = ",".join(repr(a) for a in c.axes) or "no mesh axis"
            backward = ", in the backward pass" if "transpose(" in c.op_name else ""
            where = f" · {_source_text(c.source)}" if c.source else ""
            ax.text(
                0, y, f"{c.kind} {c.result_text} summed over {axes}{backward}{where}", fontsize=10, va="top"
            )
            y += 0.32
            step = c.bytes_per_execution
            for k in range(c.executions):
                ax.add_patch(
                    Rectangle((k * step, y), step, 0.4, facecolor="#80b1d3", edgecolor="black", lw=0.6)
                )
            runs = f"{c.executions} runs × {step:,} B" if c.executions != 1 else "1 run"
            ax.text(c.bytes + widest * 0.01, y + 0.2, f"{runs} = {c.bytes:,} B", va="center", fontsize=10)
            y += 0.7
        y += 0.15
    ax.set_ylim(y, -0.1)
    ax.set_xlim(0, widest * 1.3)
    ax.set_yticks([])
    ax.xaxis.set_major_formatter(lambda value, _: f"{value:,.0f}")
    ax.set_xlabel("bytes sent per device (one segment per execution)")
    for side in ("top", "right", "left"):
        ax.spines[side].set_visible(False)
    totals = ", ".join(
        f"{label or 'program'}: {sum(c.bytes for lab, c in lanes if lab == label):,} B" for label in reports
    )
    ax.set_title(title or f"Where the gradient is summed — {totals}", fontsize=11, loc="left")
    return _finish(fig, created, path)


def _source_text(source: str) -> str:
    """'3418627298.py:4 (f)' (a notebook cell's temporary file) reads better as 'cell line 4 (f)'."""
    from .comms import source_text

    return source_text(source)


def draw_residuals(
    traces: Any,
    *,
    steps: Any = None,
    unit: str = "bytes",
    title: str | None = None,
    ax: Axes | None = None,
    path: str | Path | None = None,
) -> Figure:
    """Draws the saved state (residual bytes) a schedule holds after each of its steps, one line each.

    Args:
      traces: a dict ``{schedule name: [bytes held after step 0, after step 1, …]}``.
      steps: optional dict ``{schedule name: [step label, …]}`` (e.g. ``"F0 L2"``, ``"B1"``), same
        lengths as the traces. The x ticks number the steps 1, 2, …; under them each schedule named here
        gets its own row of step labels, in its line's colour (when there are at most 24 steps).
      unit: ``"bytes"``, ``"KiB"`` or ``"MiB"`` for the y axis.
      title: the axes' title; by default each schedule's peak.
      ax: matplotlib Axes to draw into; by default a new figure.
      path: if given, also save the figure there.

    Returns:
      The matplotlib ``Figure`` (closed in pyplot when this function created it).

    Example:
      >>> fig = draw_residuals({"GPipe": [256, 512, 768, 512, 256, 0],
      ...                       "one in flight": [256, 0, 256, 0, 256, 0]})
      >>> [t.get_text() for t in fig.axes[0].get_legend().texts]
      ['GPipe (peak 768 B)', 'one in flight (peak 256 B)']
    """
    scale = {"bytes": 1, "KiB": 1024, "MiB": 2**20}
    if unit not in scale:
        raise ValueError(f"draw_residuals: unit must be one of {list(scale)}, got {unit!r}")
    if not isinstance(traces, dict) or not traces:
        raise TypeError(
            f"draw_residuals: expected a non-empty dict {{name: [bytes, …]}}, got {type(traces).__name__}"
        )
    fig, ax, created = _fig_or_axes(ax, (7.3, 3.2 + 0.25 * len(steps or {})))
    styles = ["-", "--", "-.", ":"]
    colours = {}
    for k, (name, trace) in enumerate(traces.items()):
        values = [v / scale[unit] for v in trace]
        peak = max(trace)
        # Step i holds values[i] over [i, i + 1); the last value is repeated to close the staircase.
        (line,) = ax.step(
            range(len(values) + 1), [*values, values[-1]], where="post", ls=styles[k % len(styles)], lw=2,
            label=f"{name} (peak {peak:,} B)",
        )  # fmt: skip
        colours[name] = line.get_color()
        at = list(trace).index(peak)
        ax.annotate(f"peak {peak:,} B", (at + 0.5, peak / scale[unit]), textcoords="offset points",
                    xytext=(0, 4), fontsize=10, ha="center")  # fmt: skip
    n_steps = max(len(t) for t in traces.values())
    rows = [name for name in traces if steps and name in steps and len(steps[name]) <= 24]
    if n_steps <= 24:
        ax.set_xticks([i + 0.5 for i in range(n_steps)], [str(i + 1) for i in range(n_steps)])
    ax.tick_params(labelsize=10)
    # one row of labels per schedule, under the step numbers: each schedule's own step names, in the
    # colour of its line (the legend names the schedule)
    for r, name in enumerate(rows):
        for i, label in enumerate(steps[name]):
            ax.annotate(label, (i + 0.5, 0), xycoords=("data", "axes fraction"), xytext=(0, -20 - 13 * r),
                        textcoords="offset points", ha="center", va="top", fontsize=9.5,
                        color=colours[name])  # fmt: skip
    below = " (under each number, each schedule's own step, in its line's colour)" if rows else ""
    ax.set_xlabel("step" + below, fontsize=10, labelpad=4 + 13 * len(rows))
    ax.set_ylabel(f"saved state held ({unit})", fontsize=10)
    top = max(max(t) for t in traces.values()) / scale[unit]
    ax.set_ylim(0, max(top, 1e-9) * 1.15)  # room for the peak labels inside the frame
    # the legend above the plot, where it hides no line
    ax.legend(fontsize=10, loc="lower left", bbox_to_anchor=(0, 1.0), frameon=False, borderaxespad=0.2)
    ax.set_title(
        title or "Residuals alive after each step", fontsize=11, loc="left", pad=8 + 17 * len(traces)
    )
    return _finish(fig, created, path)


def draw_precision_tradeoff(
    points: Any,
    *,
    series: Sequence[str] | None = None,
    reference: float | None = None,
    reference_label: str = "f32 matmul",
    budget: float | None = None,
    xlabel: str = "cost (bf16 passes)",
    title: str | None = None,
    measured: bool = False,
    ax: Axes | None = None,
    path: str | Path | None = None,
) -> Figure:
    """Draws relative error against cost for matmul algorithms (presets, or your own schemes).

    Args:
      points: a dict ``{name: (cost, error)}``, or ``{name: (cost, [error per case, …])}`` when each
        algorithm was measured on several cases (e.g. contraction sizes K); the error axis is
        logarithmic.
      series: names of the cases, one per entry of the error lists; the points of one case are joined
        across algorithms, cheapest first.
      reference: an error to draw as a dashed horizontal line (e.g. an f32 matmul's).
      reference_label: the legend entry of that line.
      budget: an error budget, drawn as a red dotted line: algorithms below it qualify.
      xlabel: what the cost counts.
      title: the axes' title.
      measured: the costs are measurements (milliseconds, say) rather than counts: each point is
        labelled with its name instead of a tick, points are not joined, and both axes are logarithmic.
      ax: matplotlib Axes to draw into; by default a new figure.
      path: if given, also save the figure there.

    Returns:
      The matplotlib ``Figure`` (closed in pyplot when this function created it).

    Example:
      >>> fig = draw_precision_tradeoff({"BF16_BF16_F32": (1, 2e-3), "BF16_BF16_F32_X3": (3, 4e-6)},
      ...                               reference=1e-7, budget=1e-5)
      >>> fig.axes[0].get_xlabel(), fig.axes[0].get_ylabel()
      ('cost (bf16 passes)', 'relative error')
    """
    import numpy as np

    if not isinstance(points, dict) or not points:
        raise TypeError(f"draw_precision_tradeoff: expected a dict {{name: (cost, error)}}, got {points!r}")
    order = sorted(points, key=lambda name: points[name][0])
    costs = [float(points[name][0]) for name in order]
    errors = [np.atleast_1d(np.asarray(points[name][1], float)) for name in order]
    n_cases = len(errors[0])
    if any(len(e) != n_cases for e in errors) or (series is not None and len(series) != n_cases):
        raise ValueError(
            f"draw_precision_tradeoff: every entry needs the same number of errors ({n_cases})"
            + (f" as series has names ({len(series)})" if series is not None else "")
        )
    if np.any(np.stack(errors) <= 0):
        raise ValueError("draw_precision_tradeoff: errors must be positive (the axis is logarithmic)")
    fig, ax, created = _fig_or_axes(ax, (7.0, 3.8))
    for case in range(n_cases):
        label = series[case] if series is not None else (None if n_cases == 1 else f"case {case}")
        ax.plot(costs, [e[case] for e in errors], "o" if measured else "o-", label=label, lw=1.2, ms=5)
    if reference is not None:
        ax.axhline(reference, color="grey", ls="--", label=reference_label)
    if budget is not None:
        ax.axhline(budget, color="#d62728", ls=":", lw=1.5, label=f"budget {budget:g}")
    ax.set_yscale("log")
    if measured:  # a name beside each point, alternately above and below, leftwards near the right edge
        from matplotlib.ticker import FuncFormatter

        ax.set_xscale("log")
        plain = FuncFormatter(lambda value, _: f"{value:g}")
        ax.xaxis.set_major_formatter(plain)
        ax.xaxis.set_minor_formatter(plain)
        ax.tick_params(axis="x", which="minor", labelsize=7)
        low, high = np.log(min(costs)), np.log(max(costs))
        for i, (name, cost, error) in enumerate(zip(order, costs, errors, strict=True)):
            above = i % 2 == 0
            leftwards = high > low and (np.log(cost) - low) / (high - low) > 0.7
            ax.annotate(
                name,
                (cost, float(error[0])),
                xytext=(-4 if leftwards else 4, 5 if above else -5),
                textcoords="offset points",
                fontsize=6.5,
                ha="right" if leftwards else "left",
                va="bottom" if above else "top",
            )
        # Room above the highest point and below the lowest for their names: a name is never cut off
        # by the frame (the axis otherwise ends just past the points).
        all_errors = np.concatenate(errors)
        ax.set_ylim(float(all_errors.min()) / 3, float(all_errors.max()) * 3)
    else:
        ticks = sorted(set(costs))
        names = {c: "\n".join(n for n in order if float(points[n][0]) == c) for c in ticks}
        ax.set_xticks(ticks, [f"{c:g}\n{names[c]}" for c in ticks], fontsize=7)
    ax.set_xlabel(xlabel)
    ax.set_ylabel("relative error")
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=8)
    ax.set_title(title or "Error against cost", fontsize=10, loc="left")
    return _finish(fig, created, path)


__all__ += [
    "route_counts",
    "draw_routing",
    "draw_gradient_reduction",
    "draw_residuals",
    "draw_precision_tradeoff",
]
