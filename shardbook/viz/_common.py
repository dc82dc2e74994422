"""What every picture shares: the device colours, device labels, and a figure's start and finish."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # matplotlib and jax are imported on first use: shardbook.setup() must run first.
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure


# Light colours (matplotlib's Set3 and Pastel1) so black labels stay readable; indexed by device id.
_PALETTE = (
    "#66c2a5", "#e6c229", "#8da0cb", "#fc8d62", "#6baed6", "#fdae6b", "#a6d854", "#e78ac3",
    "#a3a3a3", "#c48ac5", "#74c476", "#f2b701", "#f4877b", "#7fa7d1", "#c49bd9", "#d9a45b",
)  # fmt: skip
# Every entry is saturated enough to stand out on a white page (contrast >= 1.6 against white) and light
# enough for black text on it (>= 7 against black); tests/test_viz.py checks both.
_DEVICES_PER_LINE = 4


def _wrap_devices(ids: Sequence[int]) -> list[str]:
    names = [f"d{i}" for i in ids]
    return [",".join(names[i : i + _DEVICES_PER_LINE]) for i in range(0, len(names), _DEVICES_PER_LINE)]


def _prod(xs: Sequence[int]) -> int:
    out = 1
    for x in xs:
        out *= x
    return out


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
