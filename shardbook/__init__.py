"""shardbook: the helper package of the *Sharding in JAX* textbook.

Every notebook starts with ``shardbook.setup()``, which must run before JAX starts a backend. So this
package imports nothing heavy itself: each public name below is loaded from its module on first use.

One spelling per name: a chapter uses every public name flat, ``shardbook.analyze`` or
``from shardbook import analyze``, never from the module that defines it (tests/test_chapters.py checks the
chapters). The modules are where a maintainer reads them:

  setup   -- choose devices (8 simulated CPU devices, the reference, on any runtime), install on Colab.
  chips   -- on_your_chips(): a chapter's step also run on 8 or more accelerators, printed, never claimed.
  runtime -- whether this is Colab, and the pins of Flax, Optax and Orbax: what setup and errors share.
  viz     -- pictures, a module per family: sharding (where an array's blocks lie), collectives,
             communication (what a program moves), ring, accumulators (rings of partial sums), routing,
             backward (gradient reductions, saved state), precision (error against cost), processes
             (which process holds which block).
  checks  -- comparisons for self-checks and graders, with messages written for learners; program_checks
             the checks on a compiled program (collectives, bytes, overlap, work and traffic); failures
             CheckFailed, which both raise.
  matmuls -- the matmuls of a traced program (dot_generals), and which of them do its work
             (expect_matmul_work: an elementwise product beside a matmul thrown away fails).
  errors  -- errors in words (describe_error): one sentence and one hint per mistake, in a notebook
             cell, in every process of a job, and on the feedback page.
  comms   -- the communication analyzer (collectives and bytes of a compiled program), a package by
             concern: report, queries, cpu (the simulator's differences), compiling, analysis,
             memory (footprint: a compiled program's peak memory per device).
  hlo     -- the parser of XLA's program text that comms and cost read.
  tpu     -- compile for a TPU topology on any machine (compile_for_tpu): the TPU compiler's program,
             its memory and its fits/does-not-fit verdict, cached by the program's fingerprint.
  cost    -- the TPU cost model (estimate; viz.timeline draws a step). Its parts: links (collectives on
             the ICI links, one stream per direction), hbm (a TPU program's HBM traffic), vector (its
             vector-unit ops) and measured (the rates read off a real chip, V5E_MEASURED).
  records -- the cost model against a real chip: the records of one-chip programs timed on a v5e
             (tpu_record), the fitted ones (calibration) and those held out (held_out, OUT_OF_SAMPLE_ERROR),
             and the fitted ones kernel by kernel (kernel_calibration).
  pipeline -- pipeline schedules (GPipe, 1F1B): the table, its bubble, the activations kept, a picture.
  hosts   -- many JAX processes on one machine (run_workers): multi-host programs on localhost.
  workers -- hosts' processes: the program each runs, and how they start (forked from one Python
             that imported JAX, on Linux).
  claims  -- claim(): a comparative sentence of a chapter checked against the values its page printed;
             claim_faster/claim_tie: a winner between two estimates only outside the model's error.
  sources -- where a TPU figure comes from: one tag per source (measured, TPU compiler, model on a
             TPU program, model on an XLA:CPU program), read off the object that made the figure.
  tables  -- Table: results as rows under named columns, an HTML table on the page, aligned text elsewhere.
"""

from __future__ import annotations

import importlib

# setup.py imports only the standard library when loaded, so it is safe to load eagerly. The
# function shadows the module of the same name on purpose: ``shardbook.setup()`` is the call to make.
from .setup import NUM_DEVICES, PINNED_JAX, REPOSITORY, DeviceSummary, SetupError, setup

__version__ = "0.1.0"

# public name -> module that defines it
_EXPORTS = {
    "draw_sharding": "viz",
    "describe_sharding": "viz",
    "draw_collective": "viz",
    "draw_communication": "viz",
    "draw_ring_steps": "viz",
    "animate_ring_steps": "viz",
    "animation_html": "viz",
    "accumulator_ring": "viz",
    "draw_accumulator_ring": "viz",
    "CheckFailed": "failures",
    "expect_equal": "checks",
    "expect_allclose": "checks",
    "expect_shape": "checks",
    "expect_sharding": "checks",
    "expect_type": "checks",
    "describe_array": "checks",
    "expect_no_collectives": "program_checks",
    "expect_collectives": "program_checks",
    "expect_no_intermediate_larger_than": "program_checks",
    "analyze": "comms",
    "analyze_text": "comms",
    "collectives_fused_whole": "comms",
    "Report": "comms",
    "Collective": "comms",
    "footprint": "comms",
    "Footprint": "comms",
    "format_bytes": "comms",
    "TpuProgram": "comms",
    "DoesNotFit": "comms",
    "hbm_verdict": "comms",
    "SUM_OVERCOUNT": "comms",
    "compile_for_tpu": "tpu",
    "LIBTPU": "tpu",
    "tpu_devices": "tpu",
    "TOPOLOGIES": "tpu",
    "TpuCompilerUnavailable": "tpu",
    "estimate": "cost",
    "ASYNC_STARTS": "cost",
    "draw_timeline": "viz",
    "CHIPS": "cost",
    "MODEL_MARGIN": "cost",
    "INT32_MATMUL_SLOWDOWN": "cost",
    "V5E_MEASURED": "measured",
    "tpu_record": "records",
    "calibration": "records",
    "Calibrated": "records",
    "CALIBRATION_TARGET": "records",
    "held_out": "records",
    "OUT_OF_SAMPLE_ERROR": "records",
    "MISSED": "records",
    "kernel_calibration": "records",
    "kernel_summary": "records",
    "KernelTime": "records",
    "SHORTEST_KERNEL": "records",
    "tiled_rereads": "hbm",
    "parse_module": "hlo",
    "route_counts": "viz",
    "draw_routing": "viz",
    "draw_gradient_reduction": "viz",
    "draw_residuals": "viz",
    "draw_precision_tradeoff": "viz",
    "set_phone_design": "viz",
    "phone_width_in": "viz",
    "PHONE_BODY_PX": "viz",
    "pipeline_schedule": "pipeline",
    "draw_pipeline_schedule": "pipeline",
    "held_activations": "pipeline",
    "idle_steps": "pipeline",
    "schedule_seconds": "pipeline",
    "run_workers": "hosts",
    "WorkersFailed": "hosts",
    "print_outputs": "hosts",
    "shard_table": "viz",
    "draw_process_shards": "viz",
    "claim": "claims",
    "claim_faster": "claims",
    "claim_tie": "claims",
    "model_error": "claims",
    "SOURCES": "sources",
    "tag": "sources",
    "sourced": "sources",
    "source_of": "sources",
    "LEGEND": "sources",
    "collective_links": "links",
    "checked_claims": "claims",
    "ClaimFailed": "claims",
    "Table": "tables",
    "on_your_chips": "chips",
    "your_chips": "chips",
}

# modules reachable as attributes without an import statement (``shardbook.comms.analyze``)
_MODULES = (
    "viz",
    "checks",
    "comms",
    "hlo",
    "tpu",
    "cost",
    "records",
    "pipeline",
    "hosts",
    "claims",
    "tables",
    "sources",
    "chips",
)

__all__ = [
    "NUM_DEVICES",
    "PINNED_JAX",
    "REPOSITORY",
    "DeviceSummary",
    "SetupError",
    "setup",
    *_EXPORTS,
]


def __getattr__(name: str):
    if name in _EXPORTS:
        module = importlib.import_module(f".{_EXPORTS[name]}", __name__)
        value = getattr(module, name)
        globals()[name] = value
        return value
    if name in _MODULES:
        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module 'shardbook' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(__all__))
