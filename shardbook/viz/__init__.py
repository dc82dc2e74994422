"""Pictures and text tables of where data lives and how it moves, one module per family of picture.

Every picture is drawn from the learner's own arrays or programs, and every public name is spelt flat
in the chapters (``shardbook.draw_sharding``, ``from shardbook import draw_sharding``); the modules are
where each family is read and maintained:

  sharding       -- which device holds which part of an array: :func:`describe_sharding` (a text
                    table, block -> devices, any rank) and :func:`draw_sharding` (the same as a grid
                    of coloured blocks, 0-, 1- and 2-D). Both take a ``jax.Array`` or a sharding and
                    the global shape.
  collectives    -- :func:`draw_collective`: every device's block before and after one collective,
                    computed by running it (:func:`run_collective`).
  communication  -- :func:`draw_communication`: the collectives of an analysed program, between which
                    devices, and the bytes.
  ring           -- :func:`draw_ring_steps`, :func:`animate_ring_steps`: a ring collective matmul step
                    by step (:func:`ring_schedule`, :func:`animation_html`).
  accumulators   -- :func:`accumulator_ring`, :func:`draw_accumulator_ring`: a ring of accumulators
                    (a reduce-scatter as a ring, one way or both): which block each device adds to.
  routing        -- :func:`route_counts`, :func:`draw_routing`: tokens to experts to devices.
  backward       -- :func:`draw_gradient_reduction` (where a backward pass reduces) and
                    :func:`draw_residuals` (saved state per schedule).
  precision      -- :func:`draw_precision_tradeoff`: error against cost.
  processes      -- :func:`shard_table` (in each process of a job) and :func:`draw_process_shards`: which
                    process holds which block.
  timeline       -- :func:`draw_timeline`: one modelled step (:func:`shardbook.estimate`), its kernels
                    and collectives against time.
  _common        -- what they share: device colours (by device id, so two pictures of the same mesh
                    compare side by side), device labels, a figure's start and finish.

matplotlib and JAX are imported on first use: ``shardbook.setup()`` must run before them.
"""

from __future__ import annotations

from .accumulators import AccumulatorRing, accumulator_ring, draw_accumulator_ring
from .backward import draw_gradient_reduction, draw_residuals
from .collectives import COLLECTIVES, draw_collective, run_collective
from .communication import draw_communication
from .phone import PHONE_BODY_PX, phone_width_in, set_phone_design
from .precision import draw_precision_tradeoff
from .processes import PROCESS_COLOURS, draw_process_shards, shard_table
from .ring import animate_ring_steps, animation_html, draw_ring_steps, ring_schedule
from .routing import draw_routing, route_counts
from .sharding import describe_sharding, draw_sharding
from .timeline import draw_timeline

__all__ = [
    "AccumulatorRing",
    "COLLECTIVES",
    "PHONE_BODY_PX",
    "PROCESS_COLOURS",
    "accumulator_ring",
    "animate_ring_steps",
    "animation_html",
    "describe_sharding",
    "draw_accumulator_ring",
    "draw_collective",
    "draw_communication",
    "draw_gradient_reduction",
    "draw_precision_tradeoff",
    "draw_process_shards",
    "draw_residuals",
    "draw_ring_steps",
    "draw_routing",
    "draw_sharding",
    "draw_timeline",
    "phone_width_in",
    "ring_schedule",
    "route_counts",
    "run_collective",
    "set_phone_design",
    "shard_table",
]
