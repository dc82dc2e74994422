"""Mixture of experts: tokens routed to experts, and so from the devices holding them to others."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from ._common import _PALETTE, _finish

if TYPE_CHECKING:  # matplotlib and jax are imported on first use: shardbook.setup() must run first.
    from matplotlib.figure import Figure


__all__ = ["draw_routing", "route_counts"]


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
