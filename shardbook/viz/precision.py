"""Precision: the error of each numeric format against its cost."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ._common import _fig_or_axes, _finish
from .phone import PHONE_BODY_PX, phone_width_in, set_phone_design

if TYPE_CHECKING:  # matplotlib and jax are imported on first use: shardbook.setup() must run first.
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure


__all__ = ["draw_precision_tradeoff"]


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
        plain = FuncFormatter(_plain)
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
    if created:
        set_phone_design(
            fig,
            lambda: _tradeoff_rows(
                order, costs, errors, series, reference, reference_label, budget, xlabel, title
            ),
        )
    return _finish(fig, created, path)


def _tradeoff_rows(
    order: list[str],
    costs: list[float],
    errors: list[Any],
    series: Sequence[str] | None,
    reference: float | None,
    reference_label: str,
    budget: float | None,
    xlabel: str,
    title: str | None,
) -> Figure:
    """The trade-off for a phone's column: one row per algorithm, cheapest first, its name and cost on
    a line above its error(s) on a shared logarithmic axis (names beside points do not fit a phone)."""
    import matplotlib.pyplot as plt

    size = PHONE_BODY_PX + 1
    line = 1.3 * size  # points; 1 pt is 1 CSS px in the phone's column
    n = len(order)
    n_cases = len(errors[0])
    entries = (n_cases if series is not None else 0) + (reference is not None) + (budget is not None)
    top = line * 4 + 6  # the title on up to two lines, the cost's meaning on up to two
    bottom = line * (2.4 + entries) + 6  # the ticks, the axis label, the legend
    width, height = phone_width_in() * 72, top + 0.62 * 72 * n + bottom
    fig, ax = plt.subplots(figsize=(width / 72, height / 72))
    fig.subplots_adjust(left=8 / width, right=1 - 8 / width, top=1 - top / height, bottom=bottom / height)
    for case in range(n_cases):
        label = series[case] if series is not None else None
        ax.plot([float(e[case]) for e in errors], list(range(n)), "o", ms=7, label=label)
    for i, (name, cost) in enumerate(zip(order, costs, strict=True)):
        ax.annotate(f"{name}: {cost:.3g}", (0, i - 0.42), xycoords=("axes fraction", "data"), fontsize=size,
                    ha="left", va="center", xytext=(4, 0), textcoords="offset points")  # fmt: skip
    if reference is not None:
        ax.axvline(reference, color="grey", ls="--", label=reference_label)
    if budget is not None:
        ax.axvline(budget, color="#d62728", ls=":", lw=1.5, label=f"budget {budget:g}")
    ax.set_xscale("log")
    ax.set_ylim(n - 0.6, -0.9)
    ax.set_yticks([])
    ax.tick_params(labelsize=size)
    ax.set_xlabel("relative error", fontsize=size)
    if entries:
        fig.legend(fontsize=size, loc="lower left", bbox_to_anchor=(0, 0), frameon=False, borderaxespad=0.1)
    fig.text(4 / width, 1 - 4 / height, f"{title or 'Error against cost'}\n(after each name: {xlabel})",
             fontsize=size, va="top", ha="left", wrap=True)  # fmt: skip
    return fig


def _plain(value: float, _: Any) -> str:
    """A tick label in plain numbers (a function, not a lambda: the figure stays picklable)."""
    return f"{value:g}"
