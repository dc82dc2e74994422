"""The ring collective matmul: which block of A each device holds, and multiplies, at each step."""

from __future__ import annotations

import re
from collections.abc import Sequence
from html import escape as _html_escape
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ._common import _PALETTE
from .phone import PHONE_BODY_PX, phone_width_in, set_phone_design

if TYPE_CHECKING:  # matplotlib and jax are imported on first use: shardbook.setup() must run first.
    from matplotlib.figure import Figure


__all__ = ["animate_ring_steps", "animation_html", "draw_ring_steps", "ring_schedule"]

_PHONE_ATTR = "_shardbook_phone_animation"  # the same animation drawn for a phone's column


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
    set_phone_design(fig, lambda: _ring_phone_figure(mesh, axis_name, perm, where, title))
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

    def animate(fig: Any, columns: list[list[Any]]) -> Any:
        plt.close(fig)

        def show(frame: int):
            changed = []
            for s, artists in enumerate(columns):
                for artist in artists:
                    artist.set_alpha(1.0 if s <= frame else 0.12)
                    changed.append(artist)
            return changed

        return FuncAnimation(fig, show, frames=len(columns), interval=interval_ms, blit=False)

    animation = animate(*_ring_figure(mesh, axis_name, perm, where, title))
    # The same frames drawn for a phone's column (animation_html shows them below 700 px).
    phone_fig, phone_columns = _ring_phone_steps(mesh, axis_name, perm, where, title)
    setattr(animation, _PHONE_ATTR, animate(phone_fig, phone_columns))
    return animation


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
    import matplotlib
    from IPython.display import HTML

    def jshtml(anim: Any, dpi: float | None = None) -> str:
        with matplotlib.rc_context({"savefig.dpi": dpi} if dpi else {}):
            html = anim.to_jshtml()
        # matplotlib's buttons draw Font Awesome icons from a stylesheet on a CDN: the page would ask an
        # outside host for it. Plain characters need no stylesheet, on the book's pages and in Colab.
        html = _CDN_STYLESHEET.sub("", html)
        html = _ICON.sub(lambda m: f'<span aria-hidden="true">{_GLYPHS.get(m.group(1), "")}</span>', html)
        if alt is not None:  # the frame is one <img>: give it a text alternative for screen readers
            html = re.sub(
                r"<img (?![^>]*\balt=)", f'<img alt="{_html_escape(alt, quote=True)}" ', html, count=1
            )
        return html

    style = "<style>.shardbook-animation img { max-width: 100%; height: auto; }"
    phone = getattr(animation, _PHONE_ATTR, None)
    if phone is None:
        return HTML(f'<div class="shardbook-animation">{style}</style>{jshtml(animation)}</div>')
    # Below 700 px (a phone, as the book's CSS) the frames drawn for the column, text at body size;
    # 2 pixels per CSS px, not PHONE_DENSITY: every frame is a whole PNG, and the page carries them all.
    style += (
        " .sb-anim-phone { display: none; } @media (max-width: 699.98px) {"
        " .shardbook-animation .sb-anim-wide { display: none; }"
        " .shardbook-animation .sb-anim-phone { display: block; } }"
    )
    return HTML(
        f'<div class="shardbook-animation">{style}</style><div class="sb-anim-wide">{jshtml(animation)}</div>'
        f'<div class="sb-anim-phone">{jshtml(phone, 72 * 2)}</div></div>'
    )


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


def _ring_phone_figure(mesh: Any, axis_name: str, perm: Any, where: Any, title: str | None) -> Figure:
    """The ring's steps for a phone's column: the steps one under the other, a device a row, each row
    naming the block it holds and the product it adds (the desktop's grid has n columns of two-line
    cells, too narrow for body-size text)."""
    return _ring_phone_steps(mesh, axis_name, perm, where, title)[0]


def _ring_phone_steps(
    mesh: Any, axis_name: str, perm: Any, where: Any, title: str | None
) -> tuple[Figure, list[list[Any]]]:
    import matplotlib.pyplot as plt
    from matplotlib.patches import Rectangle

    ids, held = ring_schedule(mesh, axis_name, perm=perm, where=where)
    n = len(ids)
    size = PHONE_BODY_PX + 1  # pt; 1 pt is 1 CSS px in the phone's column
    row, head = 0.42, 0.5  # inches
    height = n * (head + n * row) + 0.8
    fig, ax = plt.subplots(figsize=(phone_width_in(), height))
    ax.set_xlim(0, 1)
    ax.set_ylim(n * (head + n * row), 0)
    ax.axis("off")
    moved = "each block one to the left" if perm is None else "each block one along the ring"
    columns: list[list[Any]] = [[] for _ in range(n)]
    y = 0.0
    for s in range(n):
        label = f"step {s}" if s == 0 else f"step {s}: {moved}"
        columns[s].append(
            ax.text(
                0, y + head * 0.55, label, fontsize=size, va="center", ha="left", wrap=True, weight="bold"
            )
        )
        y += head
        for d in range(n):
            k = held[s][d]
            columns[s].append(ax.add_patch(
                Rectangle((0, y + 0.03), 1, row - 0.06, facecolor=_PALETTE[ids[k] % len(_PALETTE)], lw=0.6,
                          edgecolor="black")
            ))  # fmt: skip
            text = f"d{ids[d]} ({axis_name}={d}): $A_{{{k}}}$ from d{ids[k]}, + $A_{{{k}}} W_{{{k},{d}}}$"
            columns[s].append(ax.text(0.03, y + row / 2, text, fontsize=size, va="center", ha="left"))
            y += row
    ax.set_title(
        title
        or f"ring along {axis_name!r}: block $A_k$ moves, W stays; after {n} steps every device has "
        f"added all {n}",
        fontsize=size,
        loc="left",
        wrap=True,
    )
    fig.tight_layout()
    return fig, columns
