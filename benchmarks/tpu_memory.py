"""What fits one TPU chip, asked of the chip: steps that straddle its HBM, compiled and run, as JSON.

Run on a machine with one TPU chip: ``python -m benchmarks.tpu_memory --out DIR``. Like
``benchmarks/tpu_record.py`` it needs only JAX and NumPy. Each step of :func:`memory_steps` (GPT Adam
steps of large and small state, donated and not) runs in a process of its own, so that what the chip
holds is that step's alone, and the record says

* whether the compiler accepted it, or the first lines of its refusal with the bytes it said the step
  needs (``compiler_needs_bytes``) and the bytes it said the chip has;
* every field of ``compiled.memory_analysis()`` (arguments, outputs, aliased, temporaries, ...);
* the chip's ``memory_stats()`` at the start, once the arguments are made (before the first step) and
  after each of two steps, or when a step failed, with the error's first lines: ``bytes_in_use`` (the
  arrays held), ``bytes_reserved`` (what the runtime set aside for a program's scratch, which
  ``peak_bytes_in_use`` leaves out) and the rest.

It writes ``DIR/tpu_<kind>_memory.json`` (provenance: device kind, JAX, libtpu, Python, date, command,
``bytes_limit``) after every step, so a run cut short keeps what it did. ``shardbook.hbm_verdict`` reads
the committed record (``shardbook/data``); CI never runs this script. ``--scale 16`` shrinks every shape,
to try the script on a CPU (``JAX_PLATFORMS=cpu``).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from typing import TYPE_CHECKING

from benchmarks.provenance import chip_provenance

if TYPE_CHECKING:
    from benchmarks.tpu_programs import Program

_HBM_OOM = re.compile(r"\(([\d.]+)([KMGT])\) exceeds available HBM \(([\d.]+)([KMGT])\)")
_UNITS = {"K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}


def memory_steps(scale: int = 1) -> list[Program]:
    """One-chip Adam steps that straddle a v5e's HBM: donated f32 steps of large state (width 1280,
    8 × 1024 tokens, 28 to 36 layers), donated steps of small state (GPT-2 small's shape, 24 to 40
    sequences of 1024) and steps whose state is not donated. ``scale`` > 1
    shrinks every shape (a CPU test of the script)."""
    from benchmarks import tpu_programs

    def gpt(vocab, d, heads, ff, layers, seq):
        return tpu_programs.GPT(vocab // scale, d // scale, heads, ff // scale, layers, seq // scale)

    wide = [(f"width 1280, {n} layers, donated", gpt(50304, 1280, 20, 5120, n, 1024), 8, True)
            for n in (28, 30, 32, 34, 36)]  # fmt: skip
    small = [(f"0.16B shape, batch {b}, donated", gpt(50304, 768, 12, 3072, 12, 1024), b, True)
             for b in (24, 32, 36, 37, 40)]  # fmt: skip
    kept = [
        ("0.16B shape, batch 28, not donated", gpt(50304, 768, 12, 3072, 12, 1024), 28, False),
        ("width 1280, 16 layers, not donated", gpt(50304, 1280, 20, 5120, 16, 1024), 8, False),
        ("width 1280, 20 layers, not donated", gpt(50304, 1280, 20, 5120, 20, 1024), 8, False),
        ("width 1280, 34 layers, not donated", gpt(50304, 1280, 20, 5120, 34, 1024), 8, False),
    ]
    return [tpu_programs.gpt_step(name, g, batch, donated) for name, g, batch, donated in wide + small + kept]


def first_lines(error: BaseException, n: int = 6) -> str:
    lines = str(error).strip().splitlines()
    return f"{type(error).__name__}: " + "\n".join(lines[:n])[:1500]


def memory_fields(stats) -> dict:
    """Every integer field of ``compiled.memory_analysis()``."""
    out = {}
    for name in dir(stats):
        if name.startswith("_"):
            continue
        try:
            value = getattr(stats, name)
        except Exception:
            continue
        if isinstance(value, int) and not isinstance(value, bool):
            out[name] = value
    return out


def chip_stats(device) -> dict:
    return {k: int(v) for k, v in (device.memory_stats() or {}).items() if isinstance(v, int)}


def provenance(args: argparse.Namespace) -> dict:
    return chip_provenance(
        "python -m benchmarks.tpu_memory --out DIR"
        + (f" --scale {args.scale}" if args.scale != 1 else "")
        + (f" --steps {args.steps}" if args.steps != 2 else "")
    )


def one_step(name: str, scale: int, steps: int) -> dict:
    """Compile the step ``name``, make its arguments, run it ``steps`` times; what the chip said."""
    import jax
    import jax.numpy as jnp

    from benchmarks import tpu_programs

    program = next(p for p in memory_steps(scale) if p.name == name)
    device = jax.devices()[0]
    state, _, _, tokens = program.shapes
    row: dict = {
        "about": program.about,
        "donated": "not donated" not in name,
        "state_bytes": tpu_programs.nbytes(state),
        "stats_start": chip_stats(device),
    }
    start = time.perf_counter()
    try:
        compiled = program.fn.lower(*program.shapes).compile()
    except Exception as e:
        row["compiled"] = False
        row["raises"] = first_lines(e)
        match = _HBM_OOM.search(str(e))
        if match:
            need, nu, have, hu = match.groups()
            row["compiler_needs_bytes"] = int(float(need) * _UNITS[nu])
            row["compiler_hbm_bytes"] = int(float(have) * _UNITS[hu])
        return row
    row["compiled"] = True
    row["compile_seconds"] = time.perf_counter() - start
    row["memory_analysis"] = memory_fields(compiled.memory_analysis())
    try:
        params = tpu_programs.arguments_for(
            tpu_programs.Program(name, "training", program.fn, (state,)), seed=1
        )[0]
        zeros = jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), state)
        moments = jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), state)
        toks = tpu_programs.arguments_for(
            tpu_programs.Program(name, "training", program.fn, (tokens,)), seed=2
        )[0]
        toks = toks % state["embed"].shape[0]
        args = [params, zeros, moments, toks]
        del params, zeros, moments  # the loop alone holds the state: a step's input is freed once replaced
        jax.block_until_ready(args)
    except Exception as e:
        row["ran"] = False
        row["arguments_raise"] = first_lines(e)
        row["stats_at_failure"] = chip_stats(device)
        return row
    row["stats_before"] = chip_stats(device)
    row["steps"] = []
    try:
        for _ in range(steps):
            t0 = time.perf_counter()
            out = compiled(*args)
            jax.block_until_ready(out)
            seconds = time.perf_counter() - t0
            row["steps"].append(
                {"seconds": seconds, "loss": float(out[3]), "stats_after": chip_stats(device)}
            )
            args = [*out[:3], args[3]]
            del out
        row["ran"] = True
    except Exception as e:
        row["ran"] = False
        row["run_raises"] = first_lines(e)
        row["stats_at_failure"] = chip_stats(device)
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="", help="a folder")
    parser.add_argument("--scale", type=int, default=1, help="shrink every shape (a CPU test)")
    parser.add_argument("--only", default="", help="steps whose name contains this")
    parser.add_argument("--steps", type=int, default=2, help="steps run after the compile")
    parser.add_argument("--budget", type=float, default=540.0, help="start no step after these seconds")
    parser.add_argument("--timeout", type=float, default=150.0, help="seconds one step may take")
    parser.add_argument("--child", default="", help=argparse.SUPPRESS)  # the step this process runs
    args = parser.parse_args()

    if args.child:  # one step, in its own process: its row on stdout's last line
        row = one_step(args.child, args.scale, args.steps)
        row["provenance"] = provenance(args)
        print("ROW " + json.dumps(row), flush=True)
        return
    if not args.out:
        parser.error("--out is required")

    names = [p.name for p in memory_steps(args.scale) if args.only in p.name]
    began = time.perf_counter()
    record: dict = {"programs": {}}
    path = ""
    for name in names:
        if time.perf_counter() - began > args.budget:
            print(f"budget spent: {name} not run", flush=True)
            continue
        command = [sys.executable, "-m", "benchmarks.tpu_memory", "--child", name]
        command += ["--scale", str(args.scale), "--steps", str(args.steps)]
        t0 = time.perf_counter()
        try:
            done = subprocess.run(
                command, capture_output=True, text=True, timeout=args.timeout, env=os.environ.copy()
            )
            rows = [ln[4:] for ln in done.stdout.splitlines() if ln.startswith("ROW ")]
            if rows:
                row = json.loads(rows[-1])
            else:
                tail = (done.stderr or done.stdout).strip().splitlines()[-8:]
                row = {"crashed": f"exit {done.returncode}: " + "\n".join(tail)[:1500]}
        except subprocess.TimeoutExpired:
            row = {"crashed": f"no answer in {args.timeout:.0f} s"}
        row["process_seconds"] = time.perf_counter() - t0
        record["programs"][name] = row
        brief = {k: row.get(k) for k in ("compiled", "ran", "compiler_needs_bytes", "crashed")}
        print(name, json.dumps(brief), f"{row['process_seconds']:.0f} s", flush=True)
        seen = row.pop("provenance", None)
        if (
            not path.endswith("_memory.json") and seen
        ):  # the chip's provenance, as a child saw it (this process never opens it)
            record = {**seen, "command": seen["command"].replace(" --child", ""), **record}
            kind = {"TPU v5 lite": "v5e"}.get(seen["device_kind"], seen["device_kind"].lower())
            if path and os.path.exists(path):
                os.remove(path)
            path = os.path.join(args.out, f"tpu_{kind.replace(' ', '_')}_memory.json")
        path = path or os.path.join(args.out, "tpu_memory_no_provenance_yet.json")
        with open(path, "w") as f:
            json.dump(record, f, indent=1)


if __name__ == "__main__":
    main()
