"""The timeline of one modelled step (:func:`shardbook.cost.estimate`): its kernels and its collectives
as bars against time."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..cost import Estimate

_COLOURS = {
    "matmul": "#4C72B0",
    "memory": "#B0B0B0",
    "all-gather": "#DD8452",
    "all-reduce": "#C44E52",
    "reduce-scatter": "#8172B3",
    "all-to-all": "#937860",
    "collective-permute": "#55A868",
}


def draw_timeline(est: Estimate, ax: Any = None, title: str | None = None) -> Any:
    """Draws one step as two rows of bars — matmuls (a TPU program: all its kernels, the memory-bound
    ones grey) and collectives — against time in µs.

    A matmul that had to wait for a collective's result is hatched. The title ends with the tag of the
    estimate's source (:mod:`shardbook.sources`) unless it names one. Returns the matplotlib Axes.
    """
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    from ..sources import carries_source

    if ax is None:
        _, ax = plt.subplots(figsize=(7.3, 2.2))
    # Axes sharing x with this one that already hold a timeline: the shared limit must cover theirs too.
    drawn_before = [a for a in ax.get_shared_x_axes().get_siblings(ax) if a is not ax and a.has_data()]
    rows = {"compute": 1, "communication": 0}
    for e in est.events:
        ax.barh(
            rows[e.stream],
            e.seconds * 1e6,
            left=e.start * 1e6,
            height=0.6,
            color=_COLOURS.get(e.kind, "#999999"),
            edgecolor="black",
            linewidth=0.5,
            hatch="//" if e.blocked else None,
        )
    ax.set_yticks(
        [1, 0], ["matmuls" if est.device_seconds is None else "kernels", "collectives"], fontsize=11
    )
    ax.set_xlabel("µs", fontsize=11, loc="right")  # clear of the legend centred below
    ax.tick_params(axis="x", labelsize=10, labelbottom=True)  # numbers on every panel, shared axis or not
    end = max([est.seconds, *(e.end for e in est.events)]) * 1e6
    right = max(end, 1e-3) * 1.02
    if drawn_before:
        right = max(right, ax.get_xlim()[1])
    ax.set_xlim(0, right)
    kinds = list(dict.fromkeys(e.kind for e in est.events))
    handles = [Patch(color=_COLOURS.get(k, "#999999"), label=k) for k in kinds]
    if any(e.blocked for e in est.events):
        handles.append(Patch(facecolor="white", edgecolor="black", hatch="//", label="waited for data"))
    if handles:
        ax.legend(
            handles=handles,
            loc="upper center",
            bbox_to_anchor=(0.5, -0.5),
            ncol=len(handles),
            frameon=False,
            fontsize=10,
        )
    title = title or f"one step on TPU {est.chip.name}: {est.seconds * 1e6:.0f} µs"
    if not carries_source(title):  # the figure says where its times come from, on a line of its own
        title += f"\n{est.source}"
    ax.set_title(title, fontsize=12)
    return ax
