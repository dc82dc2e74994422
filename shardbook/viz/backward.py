"""The backward pass: where a gradient is reduced, and which residuals stay alive after each step."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ._common import _fig_or_axes, _finish
from .phone import PHONE_BODY_PX, phone_width_in, set_phone_design

if TYPE_CHECKING:  # matplotlib and jax are imported on first use: shardbook.setup() must run first.
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure


__all__ = ["draw_gradient_reduction", "draw_residuals"]


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
    ax.xaxis.set_major_formatter(_thousands)
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
    from ..comms import source_text

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
    if created:
        set_phone_design(fig, lambda: _residuals_upright(traces, steps, unit, title))
    return _finish(fig, created, path)


def _residuals_upright(traces: dict, steps: Any, unit: str, title: str | None) -> Figure:
    """The residuals for a phone's column: the steps down the page, the bytes across, and each
    schedule's step names in a column of its colour left of the step numbers; title and legend above.
    Laid out by hand in points (1 pt is 1 CSS px in the column): tight_layout ignores the step names."""
    import matplotlib.pyplot as plt

    size = PHONE_BODY_PX + 1
    line = size * 1.3
    scale = {"bytes": 1, "KiB": 1024, "MiB": 2**20}[unit]
    n_steps = max(len(t) for t in traces.values())
    rows = [name for name in traces if steps and name in steps and len(steps[name]) <= 24]
    column = max((len(label) for name in rows for label in steps[name]), default=0) * 0.62 * size + 8
    top = line * (1.4 + 2 * len(traces)) + 8  # the title, then two lines per schedule in the legend
    bottom, left, right = 2.6 * line, 1.8 * size + column * len(rows) + 1.6 * size, 10
    width, height = phone_width_in() * 72, top + 0.34 * 72 * n_steps + bottom
    fig, ax = plt.subplots(figsize=(width / 72, height / 72))
    fig.subplots_adjust(
        left=left / width, right=1 - right / width, top=1 - top / height, bottom=bottom / height
    )
    styles = ["-", "--", "-.", ":"]
    colours = {}
    for k, (name, trace) in enumerate(traces.items()):
        values = [v / scale for v in trace]
        xs = [x for v in values for x in (v, v)]
        ys = [y for i in range(len(values)) for y in (i, i + 1)]
        (drawn,) = ax.plot(xs, ys, ls=styles[k % len(styles)], lw=2, label=f"{name}\n(peak {max(trace):,} B)")
        colours[name] = drawn.get_color()
    ax.set_ylim(n_steps, 0)
    ax.set_yticks([i + 0.5 for i in range(n_steps)], [str(i + 1) for i in range(n_steps)])
    ax.tick_params(labelsize=size, length=2)
    ax.locator_params(axis="x", nbins=3)
    for r, name in enumerate(rows):
        for i, label in enumerate(steps[name]):
            ax.annotate(label, (0, i + 0.5), xycoords=("axes fraction", "data"), textcoords="offset points",
                        xytext=(-1.8 * size - column * r, 0), ha="right", va="center", fontsize=size,
                        color=colours[name])  # fmt: skip
    ax.set_ylabel("step", fontsize=size, labelpad=4 + column * len(rows))
    ax.set_xlabel(f"saved state held ({unit})", fontsize=size)
    most = max(max(t) for t in traces.values()) / scale
    ax.set_xlim(0, max(most, 1e-9) * 1.05)
    fig.text(4 / width, 1 - 4 / height, title or "Residuals alive after each step", fontsize=size,
             va="top", ha="left", wrap=True)  # fmt: skip
    fig.legend(fontsize=size, loc="upper left", bbox_to_anchor=(0, 1 - (line + 6) / height), frameon=False,
               borderaxespad=0.2, handlelength=1.5)  # fmt: skip
    return fig


def _thousands(value: float, _: Any) -> str:
    """A tick label with thousands separators (a function, not a lambda: the figure stays picklable)."""
    return f"{value:,.0f}"
