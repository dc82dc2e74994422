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
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # matplotlib and jax are imported on first use: shardbook.setup() must run first.
    import jax
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

__all__ = ["describe_sharding", "draw_sharding"]

# Light colours (matplotlib's Set3 and Pastel1) so black labels stay readable; indexed by device id.
_PALETTE = (
    "#8dd3c7", "#ffffb3", "#bebada", "#fb8072", "#80b1d3", "#fdb462", "#b3de69", "#fccde5",
    "#d9d9d9", "#bc80bd", "#ccebc5", "#ffed6f", "#fbb4ae", "#b3cde3", "#decbe4", "#fed9a6",
)  # fmt: skip
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
        index_map = sharding.devices_indices_map(shape)
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
      >>> mesh = jax.make_mesh((4, 2), ('X', 'Y'))  # doctest: +SKIP
      >>> print(describe_sharding(NamedSharding(mesh, P('X')), (8, 4)))  # doctest: +SKIP
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
      >>> x = jax.device_put(jnp.zeros((8, 4)), NamedSharding(mesh, P('X', 'Y')))  # doctest: +SKIP
      >>> draw_sharding(x, path="x.png")  # doctest: +SKIP
      <Figure size 380x462 with 1 Axes>
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


# --- pictures for chapters 6-10 below ---


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
      >>> route_counts([0, 3, 1, 2], n_devices=2, n_experts=4)  # doctest: +SKIP
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
      title: the figure's title; by default it says how many token rows leave their device.
      path: if given, also save the figure there.

    Returns:
      The matplotlib ``Figure`` (closed in pyplot, so a notebook shows it once).

    Example:
      >>> b = np.random.default_rng(0).integers(0, 16, 64)  # doctest: +SKIP
      >>> draw_routing(b, n_devices=4, n_experts=16)  # doctest: +SKIP
    """
    import matplotlib.pyplot as plt
    import numpy as np
    from matplotlib.colors import ListedColormap

    b, experts = _routing_layout(routing, n_devices, n_experts, "draw_routing")
    counts = route_counts(b, n_devices, experts)
    per_device = b.shape[0] // n_devices
    dest = (b // (experts // n_devices)).reshape(n_devices, per_device * b.shape[1])
    leaving = int(counts.sum() - np.trace(counts))

    fig, (left, right) = plt.subplots(
        1, 2, figsize=(10.0, 0.4 * n_devices + 2.0), gridspec_kw={"width_ratios": [1.7, 1]}
    )
    colours = ListedColormap([_PALETTE[d % len(_PALETTE)] for d in range(n_devices)])
    left.imshow(dest, cmap=colours, vmin=-0.5, vmax=n_devices - 0.5, aspect="auto", interpolation="nearest")
    if dest.shape[1] <= 128:  # thin white lines between tokens
        for x in range(1, dest.shape[1]):
            left.axvline(x - 0.5, color="white", lw=0.4)
    left.set_yticks(range(n_devices), [f"d{d}" for d in range(n_devices)])
    left.set_ylabel("device holding the tokens")
    left.set_xlabel(f"its {per_device} tokens" + (f" × {b.shape[1]} choices" if b.shape[1] > 1 else ""))
    left.set_xticks([])
    left.set_title("each token, coloured by its expert's device", fontsize=9, loc="left")

    right.imshow(counts, cmap="Greys", vmin=0, vmax=max(int(counts.max()), 1) * 1.6)
    for i in range(n_devices):
        for j in range(n_devices):
            right.text(
                j, i, str(counts[i, j]), ha="center", va="center", fontsize=8,
                fontweight="bold" if i == j else "normal",
            )  # fmt: skip
    right.set_xticks(range(n_devices), [f"d{d}" for d in range(n_devices)], fontsize=8)
    right.set_yticks(range(n_devices), [f"d{d}" for d in range(n_devices)], fontsize=8)
    for label in [*left.get_yticklabels(), *right.get_xticklabels(), *right.get_yticklabels()]:
        device = int(label.get_text()[1:])  # the device's colour, as in the token rows
        label.set_bbox({"facecolor": _PALETTE[device % len(_PALETTE)], "edgecolor": "none", "pad": 1.5})
    right.set_xlabel("device holding the expert")
    right.set_title("token rows from → to (diagonal stays)", fontsize=9, loc="left")
    fig.suptitle(
        title or f"{b.size} token rows, {experts} experts on {n_devices} devices: {leaving} rows leave home",
        fontsize=10,
    )
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
      >>> draw_gradient_reduction({"replicated": analyze(step_a, ws, xs),
      ...                          "reduced": analyze(step_b, ws, xs)})  # doctest: +SKIP
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
    fig, ax, created = _fig_or_axes(None, (9.0, 0.75 * max(len(lanes), 1) + 0.45 * len(reports) + 1.1))
    y = 0.0
    for label in reports:
        mine = [c for lab, c in lanes if lab == label]
        if label:
            ax.text(0, y, label, fontsize=10, fontweight="bold", va="top")
            y += 0.5
        if not mine:
            ax.text(0, y + 0.25, "no reduction in this program", fontsize=8, color="#555555", va="center")
            y += 0.8
        for c in mine:
            # What is summed, over which axes, from which line: written above the bar.
            axes = ",".join(repr(a) for a in c.axes) or "no mesh axis"
            backward = ", in the backward pass" if "transpose(" in c.op_name else ""
            where = f" · {_source_text(c.source)}" if c.source else ""
            ax.text(
                0, y, f"{c.kind} {c.result_text} summed over {axes}{backward}{where}", fontsize=8, va="top"
            )
            y += 0.32
            step = c.bytes_per_execution
            for k in range(c.executions):
                ax.add_patch(
                    Rectangle((k * step, y), step, 0.4, facecolor="#80b1d3", edgecolor="black", lw=0.6)
                )
            runs = f"{c.executions} runs × {step:,} B" if c.executions != 1 else "1 run"
            ax.text(c.bytes + widest * 0.01, y + 0.2, f"{runs} = {c.bytes:,} B", va="center", fontsize=8)
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
    ax.set_title(title or f"Where the gradient is summed — {totals}", fontsize=10, loc="left")
    return _finish(fig, created, path)


def _source_text(source: str) -> str:
    """'3418627298.py:4 (f)' (a notebook cell's temporary file) reads better as 'cell line 4 (f)'."""
    import re

    match = re.fullmatch(r"\d+\.py:(\d+)(.*)", source)
    return f"cell line {match.group(1)}{match.group(2)}" if match else source


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
        lengths as the traces; the first schedule's labels become the x ticks when there are at most 24.
      unit: ``"bytes"``, ``"KiB"`` or ``"MiB"`` for the y axis.
      title: the axes' title; by default each schedule's peak.
      ax: matplotlib Axes to draw into; by default a new figure.
      path: if given, also save the figure there.

    Returns:
      The matplotlib ``Figure`` (closed in pyplot when this function created it).

    Example:
      >>> draw_residuals({"GPipe": [256, 512, 768, 512, 256, 0],
      ...                 "one in flight": [256, 0, 256, 0, 256, 0]})  # doctest: +SKIP
    """
    scale = {"bytes": 1, "KiB": 1024, "MiB": 2**20}
    if unit not in scale:
        raise ValueError(f"draw_residuals: unit must be one of {list(scale)}, got {unit!r}")
    if not isinstance(traces, dict) or not traces:
        raise TypeError(
            f"draw_residuals: expected a non-empty dict {{name: [bytes, …]}}, got {type(traces).__name__}"
        )
    fig, ax, created = _fig_or_axes(ax, (8.0, 3.4))
    styles = ["-", "--", "-.", ":"]
    for k, (name, trace) in enumerate(traces.items()):
        values = [v / scale[unit] for v in trace]
        peak = max(trace)
        # Step i holds values[i] over [i, i + 1); the last value is repeated to close the staircase.
        ax.step(
            range(len(values) + 1), [*values, values[-1]], where="post", ls=styles[k % len(styles)], lw=2,
            label=f"{name} (peak {peak:,} B)",
        )  # fmt: skip
        at = list(trace).index(peak)
        ax.annotate(f"peak {peak:,} B", (at + 0.5, peak / scale[unit]), textcoords="offset points",
                    xytext=(0, 4), fontsize=8, ha="center")  # fmt: skip
    if steps:
        labels = next(iter(steps.values()))
        if len(labels) <= 24:
            ax.set_xticks([i + 0.5 for i in range(len(labels))], labels, rotation=90, fontsize=7)
    ax.set_xlabel("step of the schedule")
    ax.set_ylabel(f"saved state held ({unit})")
    ax.set_ylim(bottom=0)
    ax.legend(fontsize=8, loc="upper left")
    ax.set_title(title or "Residuals alive after each step", fontsize=10, loc="left")
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
      ax: matplotlib Axes to draw into; by default a new figure.
      path: if given, also save the figure there.

    Returns:
      The matplotlib ``Figure`` (closed in pyplot when this function created it).

    Example:
      >>> draw_precision_tradeoff({"BF16_BF16_F32": (1, 2e-3), "BF16_BF16_F32_X3": (3, 4e-6)},
      ...                         reference=1e-7, budget=1e-5)  # doctest: +SKIP
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
        ax.plot(costs, [e[case] for e in errors], "o-", label=label, lw=1.2, ms=5)
    if reference is not None:
        ax.axhline(reference, color="grey", ls="--", label=reference_label)
    if budget is not None:
        ax.axhline(budget, color="#d62728", ls=":", lw=1.5, label=f"budget {budget:g}")
    ax.set_yscale("log")
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
