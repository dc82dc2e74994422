"""Pipeline schedules: which stage runs which microbatch's forward or backward pass at each tick.

A pipeline splits a model's layers into S stages on S devices and a batch into M microbatches. A
*schedule* is a table ``table[t][s]``: ``("F", m)`` (stage s runs microbatch m forward at tick t),
``("B", m)`` (backward), or ``None`` (idle). :func:`pipeline_schedule` writes the GPipe and 1F1B
tables by playing the dependencies tick by tick, with forward and backward taking one tick each:

* a forward of microbatch m on stage s needs stage s − 1's forward of m at an earlier tick;
* a backward of m on stage s needs stage s + 1's backward of m (on the last stage: its own forward)
  at an earlier tick.

GPipe (Huang et al., 2019) runs every forward as early as it can, then the backwards. 1F1B
(PipeDream-Flush, Narayanan et al., 2021) runs a backward whenever one is ready and lets stage s hold
at most S − s microbatches that went forward and not yet backward. :func:`idle_steps` counts the
bubble, :func:`held_activations` the activations a stage keeps, :func:`schedule_seconds` the time a
table takes (in lockstep, or as soon as inputs arrive), and :func:`draw_pipeline_schedule` draws it.
Nothing here needs JAX.
"""

from __future__ import annotations

from typing import Any

Action = tuple[str, int] | None
Schedule = list[list[Action]]

SCHEDULES = ("gpipe", "1f1b")


def pipeline_schedule(stages: int, microbatches: int, kind: str = "gpipe") -> Schedule:
    """The table of a GPipe or 1F1B schedule: ``table[t][s]`` is ``("F", m)``, ``("B", m)`` or None.

    Args:
      stages: S, the number of pipeline stages (at least 1).
      microbatches: M, the number of microbatches (at least 1).
      kind: "gpipe" or "1f1b".

    Returns:
      A list of ticks, each a list of one action per stage. Both schedules take 2(M + S − 1) ticks.

    Raises:
      ValueError: a kind other than those in :data:`SCHEDULES`, or fewer than one stage or microbatch.

    Example: 2 stages, 3 microbatches:

      >>> for row in zip(*pipeline_schedule(2, 3, "gpipe")):
      ...     print(" ".join(f"{a[0]}{a[1]}" if a else ".." for a in row))
      F0 F1 F2 .. .. B0 B1 B2
      .. F0 F1 F2 B0 B1 B2 ..
      >>> for row in zip(*pipeline_schedule(2, 3, "1f1b")):
      ...     print(" ".join(f"{a[0]}{a[1]}" if a else ".." for a in row))
      F0 F1 .. B0 F2 B1 .. B2
      .. F0 B0 F1 B1 F2 B2 ..
    """
    if kind not in SCHEDULES:
        raise ValueError(f"unknown schedule {kind!r}: expected one of {SCHEDULES}")
    if stages < 1 or microbatches < 1:
        raise ValueError(f"expected at least one stage and one microbatch, got {stages} and {microbatches}")
    ran_f: list[list[int | None]] = [[None] * microbatches for _ in range(stages)]
    ran_b: list[list[int | None]] = [[None] * microbatches for _ in range(stages)]
    next_f, next_b = [0] * stages, [0] * stages
    table: Schedule = []
    while any(n < microbatches for n in next_b):
        t, row = len(table), []
        for s in range(stages):
            mf, mb = next_f[s], next_b[s]
            before = ran_f[s - 1][mf] if s > 0 and mf < microbatches else None
            can_f = mf < microbatches and (s == 0 or (before is not None and before < t))
            if kind == "1f1b":
                can_f = can_f and mf - mb < stages - s
            ready = None if mb >= microbatches else ran_f[s][mb] if s == stages - 1 else ran_b[s + 1][mb]
            can_b = mb < mf and ready is not None and ready < t
            action: Action = None
            if can_b and (kind == "1f1b" or not can_f):
                action, ran_b[s][mb], next_b[s] = ("B", mb), t, mb + 1
            elif can_f:
                action, ran_f[s][mf], next_f[s] = ("F", mf), t, mf + 1
            row.append(action)
        table.append(row)
    return table


def idle_steps(table: Schedule) -> int:
    """The bubble: how many (tick, stage) slots of ``table`` run nothing.

    Example:
      >>> idle_steps(pipeline_schedule(4, 8, "gpipe")), idle_steps(pipeline_schedule(4, 8, "1f1b"))
      (24, 24)
    """
    return sum(action is None for row in table for action in row)


def held_activations(table: Schedule, stage: int) -> int:
    """The most microbatches ``stage`` has run forward and not yet backward at any tick of ``table``.

    Each is an activation the stage keeps for its backward pass.

    Example: under GPipe every stage keeps all M; under 1F1B stage s keeps S − s:

      >>> [held_activations(pipeline_schedule(4, 8, "gpipe"), s) for s in range(4)]
      [8, 8, 8, 8]
      >>> [held_activations(pipeline_schedule(4, 8, "1f1b"), s) for s in range(4)]
      [4, 3, 2, 1]
    """
    most = now = 0
    for row in table:
        action = row[stage]
        if action is not None:
            now += 1 if action[0] == "F" else -1
        most = max(most, now)
    return most


def schedule_seconds(
    table: Schedule, forward: float, backward: float, hop: float = 0.0, lockstep: bool = True
) -> float:
    """How long ``table`` takes when a forward lasts ``forward`` seconds and a backward ``backward``.

    Args:
      table: a schedule from :func:`pipeline_schedule`.
      forward, backward: the seconds of one stage's forward and backward of one microbatch.
      hop: the seconds to pass an activation or a cotangent to the neighbouring stage.
      lockstep: True for a program whose stages meet at the end of every tick (one SPMD program
        whose ticks end in a ``ppermute`` with each neighbour): a tick lasts as long as its slowest
        stage, plus a hop. False for stages that each run their actions in the table's order as soon
        as the activation or cotangent they need has arrived (an asynchronous runtime).

    Returns:
      The seconds from the first forward to the end of the last backward.

    Example: with a backward three times a forward, the lockstep 1F1B program runs more ticks at a
    backward's length than GPipe (18 against 11), while run as soon as their inputs arrive the two
    schedules take the same time:

      >>> gpipe, one_f_one_b = pipeline_schedule(4, 8, "gpipe"), pipeline_schedule(4, 8, "1f1b")
      >>> [schedule_seconds(t, 1.0, 3.0) for t in (gpipe, one_f_one_b)]
      [44.0, 58.0]
      >>> [schedule_seconds(t, 1.0, 3.0, lockstep=False) for t in (gpipe, one_f_one_b)]
      [44.0, 44.0]
    """
    cost = {"F": forward, "B": backward}
    if lockstep:
        return sum(max((cost[a[0]] for a in row if a), default=0.0) + hop for row in table)
    stages = len(table[0]) if table else 0
    done: dict[tuple[str, int, int], float] = {}
    free = [0.0] * stages
    for row in table:  # a stage's actions in the table's order; each waits for its input
        for s, action in enumerate(row):
            if action is None:
                continue
            kind, m = action
            if kind == "F":
                needed = done[("F", s - 1, m)] + hop if s > 0 else 0.0
            else:
                needed = done[("B", s + 1, m)] + hop if s + 1 < stages else done[("F", s, m)]
            free[s] = max(free[s], needed) + cost[kind]
            done[(kind, s, m)] = free[s]
    return max(free, default=0.0)


_COLOURS = {"F": "#4C72B0", "B": "#DD8452", None: "#DDDDDD"}


def draw_pipeline_schedule(table: Schedule, ax: Any = None, title: str | None = None) -> Any:
    """Draws ``table`` as a grid: one row per stage, one column per tick, each cell its microbatch.

    Forwards are blue, backwards orange, idle cells grey. Returns the matplotlib Axes.

    Example:
      >>> ax = draw_pipeline_schedule(pipeline_schedule(2, 3))
      >>> len(ax.patches), ax.get_title()
      (16, '2 stages, 8 ticks, 4 idle (grey)')
    """
    import matplotlib.pyplot as plt
    from matplotlib.patches import Rectangle

    if ax is None:
        _, ax = plt.subplots(figsize=(7.3, 2.0))
    stages = len(table[0]) if table else 0
    for t, row in enumerate(table):
        for s, action in enumerate(row):
            ax.add_patch(Rectangle((t, s), 0.95, 0.9, color=_COLOURS[action[0] if action else None]))
            if action:
                ax.text(
                    t + 0.47, s + 0.45, str(action[1]), ha="center", va="center", fontsize=8, color="white"
                )
    ax.set_xlim(0, max(len(table), 1))
    ax.set_xticks(range(0, len(table) + 1, 2))
    ax.set_ylim(stages, 0)
    ax.set_yticks([s + 0.45 for s in range(stages)], [f"stage {s}" for s in range(stages)], fontsize=10)
    ax.set_xlabel("tick", fontsize=10)
    ax.set_title(
        title or f"{stages} stages, {len(table)} ticks, {idle_steps(table)} idle (grey)",
        fontsize=11,
    )
    from .viz.phone import set_phone_panel

    return set_phone_panel(ax, lambda phone_ax: _draw_upright(table, phone_ax, title), 0.3 * len(table) + 1.6)


def _draw_upright(table: Schedule, ax: Any, title: str | None) -> None:
    """The schedule for a phone's column: one column per stage, one row per tick (down), each cell
    "F m" or "B m" (forward or backward of microbatch m), so that two schedules fit side by side, tick
    beside tick, with body-size text. The title is the part of the desktop's before a colon."""
    from matplotlib.patches import Rectangle

    from .viz.phone import PHONE_BODY_PX

    size = PHONE_BODY_PX + 1
    stages = len(table[0]) if table else 0
    for t, row in enumerate(table):
        for s, action in enumerate(row):
            ax.add_patch(Rectangle((s, t), 0.92, 0.9, color=_COLOURS[action[0] if action else None]))
            if action:
                ax.text(s + 0.46, t + 0.45, f"{action[0]}{action[1]}", ha="center", va="center",
                        fontsize=size, color="white")  # fmt: skip
    ax.set_ylim(max(len(table), 1), 0)
    ax.set_xlim(0, stages)
    ax.set_xticks([s + 0.46 for s in range(stages)], [str(s) for s in range(stages)], fontsize=size)
    ax.xaxis.tick_top()
    ax.xaxis.set_label_position("top")
    ax.set_xlabel("stage", fontsize=size)
    ax.set_yticks(range(0, len(table), 5), [str(t) for t in range(0, len(table), 5)], fontsize=size)
    ax.set_ylabel("tick", fontsize=size)
    ax.tick_params(length=2)
    for side in ("top", "right", "bottom", "left"):
        ax.spines[side].set_visible(False)
    name = (title or "").split(":")[0] if title and ":" in title else "schedule"
    ax.set_title(f"{name}\n{idle_steps(table)} idle (grey)", fontsize=size, loc="left")


__all__ = ["SCHEDULES", "draw_pipeline_schedule", "held_activations", "idle_steps", "pipeline_schedule"]
