"""Collectives: every device's block before and after one collective, computed by running it."""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from ._common import _PALETTE
from .phone import PHONE_BODY_PX, phone_width_in, set_phone_design
from .sharding import _spec_text

if TYPE_CHECKING:  # matplotlib and jax are imported on first use: shardbook.setup() must run first.
    import jax
    from matplotlib.figure import Figure


__all__ = ["COLLECTIVES", "draw_collective", "run_collective"]


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
    fig = _collective_figure(blocks, panels, names, id_of_position, collective, axis_name, params, title)
    set_phone_design(
        fig,
        lambda: _collective_figure(
            blocks, panels, names, id_of_position, collective, axis_name, params, title, phone=True
        ),
    )
    if path is not None:
        fig.savefig(path, dpi=150, bbox_inches="tight")
    plt.close(fig)
    return fig


def _collective_figure(
    blocks: Any,
    panels: Any,
    names: tuple,
    id_of_position: list[int],
    collective: str,
    axis_name: Any,
    params: dict,
    title: str | None,
    phone: bool = False,
) -> Any:
    """The before/after picture of draw_collective: side by side, or (``phone``) one above the other
    in a phone's column, its text at body size."""
    import matplotlib.pyplot as plt
    from matplotlib.patches import Rectangle

    # One slot per device, as tall as its taller panel, at the same height in both panels: a device's
    # "before" block sits level with its "after" block.
    slot = [max(panels[0][1][k].shape[0], panels[1][1][k].shape[0]) for k in range(len(blocks))]
    tops = [sum(slot[:k]) + 0.6 * k for k in range(len(blocks))]
    rows = sum(slot) + 0.6 * (len(blocks) - 1)
    cols = [max(a.shape[1] for a in arrays) for _, arrays, _ in panels]
    cells = sum(a.size for _, arrays, _ in panels for a in arrays)
    label_values = cells <= 400
    cell = 0.5 if label_values else 0.24
    if phone:  # the panels one above the other, cells wide enough for "1000" at body size
        cell = min(0.7, (phone_width_in() - 0.3) / (max(max(c, 2) for c in cols) + 2.8))
        label_values = label_values and cell >= 0.55
        own = [sum(a.shape[0] for a in arrays) + 0.6 * (len(arrays) - 1) for _, arrays, _ in panels]
        fig, axes = plt.subplots(
            2,
            1,
            figsize=(phone_width_in(), cell * (sum(own) + 0.8) + 3.4),
            gridspec_kw={"height_ratios": [r + 0.4 for r in own]},
        )
        fontsize = PHONE_BODY_PX + 1
    else:
        fig, axes = plt.subplots(
            1,
            2,
            figsize=(max(6.0, cell * (sum(cols) + 4) + 1.6), min(14.0, cell * rows + 1.9)),
            gridspec_kw={"width_ratios": [max(c, 2) + 2.8 for c in cols]},  # each panel's x range: one scale
        )
        fontsize = 10 if label_values else 7
    own_colour = [_PALETTE[b.device_id % len(_PALETTE)] for b in blocks]
    for ax, (name, arrays, sources), width in zip(axes, panels, cols, strict=True):
        for k, (block, arr) in enumerate(zip(blocks, arrays, strict=True)):
            top = tops[k] + (slot[k] - arr.shape[0]) / 2
            if phone:  # stacked, each panel keeps to its own blocks' heights
                top = sum(a.shape[0] for a in arrays[:k]) + 0.6 * k
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
        ax.set_ylim((own[panels.index((name, arrays, sources))] if phone else rows) + 0.2, -0.2)
        if phone:  # one x scale for both panels; the figure's height makes the cells about square
            ax.set_xlim(-2.6, max(max(c, 2) for c in cols) + 0.2)
        else:
            ax.set_xlim(-2.6, max(width, 2) + 0.2)
            ax.set_aspect("equal")
            ax.set_anchor("N")  # both panels start at the top, so their device slots line up
        ax.axis("off")
        shape = "×".join(map(str, arrays[0].shape)) if arrays else ""
        ax.set_title(f"{name}: block {shape} per device", fontsize=fontsize if phone else 11)
    call = f"{collective} over {axis_name!r}" + "".join(
        f", {k}={v!r}" for k, v in params.items() if k != "perm"
    )
    if "perm" in params:
        call += ", perm " + " ".join(f"{s}→{t}" for s, t in params["perm"])
    legend = "colour: the device a value came from;\ngrey: combined from several; white: nothing arrived"
    if phone:
        legend = "colour: the device a value came\nfrom; grey: combined from several;\nwhite: nothing arrived"
        call = "\n".join(textwrap.wrap(title or call, 30))
        height = fig.get_size_inches()[1] * 72  # points
        fig.suptitle(call, fontsize=fontsize, y=1 - 4 / height, va="top")
        fig.text(0.02, 0.005, legend, ha="left", va="bottom", fontsize=fontsize)
        lines = call.count("\n") + 1
        fig.tight_layout(
            rect=(0, 3.6 * 1.3 * fontsize / height, 1, 1 - (lines * 1.3 * fontsize + 8) / height)
        )
        return fig
    fig.suptitle(title or call, fontsize=11)
    fig.text(0.5, 0.01, legend, ha="center", va="bottom", fontsize=10)
    fig.tight_layout(rect=(0, 0.06 if label_values else 0.04, 1, 1))
    return fig


def _ndenumerate(a: Any):
    import numpy as np

    return np.ndenumerate(a)
