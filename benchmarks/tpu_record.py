"""Times and memory of the programs of ``benchmarks/tpu_programs.py`` on the TPU at hand, as JSON.

Run on a machine with one TPU chip: ``python -m benchmarks.tpu_record --out DIR``. It needs only JAX
and NumPy (not shardbook), so it runs on a bare TPU image with that image's own JAX. It writes

* ``DIR/tpu_<kind>.json``: the provenance (device kind, JAX, libtpu, Python, date, command, the chip's
  usable HBM) and, per program, what the chip's compiler says of it (``memory_analysis()``: arguments,
  outputs, aliased, temporaries; ``cost_analysis()``: FLOPs and bytes accessed), the median time of a
  call, or the first lines of the error the compiler raised (a program that does not fit);
* ``DIR/tpu_<kind>_programs.json.gz``: each compiled program's text (``compiled.as_text()``), the
  TPU's own program, which ``shardbook``'s cost model reads (``shardbook/data``).

``--set held_out`` records the programs of ``tpu_held_out.held_out()`` instead, which the cost model is
not fitted on, to ``tpu_<kind>_held_out.json`` and ``tpu_<kind>_held_out_programs.json.gz``.

Timing: a call is run until its outputs are ready, then repeated ``inner`` times back to back (enough
for about 50 ms, so dispatch is hidden behind the chip's work) and the batch is timed; the median of
``--repeats`` batches, divided by ``inner``, is the time of one call. A training step's updated state
is fed back as its next input (its state is donated). CI never runs this script; the chapters read the
committed record.
"""

from __future__ import annotations

import argparse
import gzip
import json
import time

import jax
import numpy as np

from benchmarks import (
    tpu_attention_sweeps,
    tpu_held_out,
    tpu_held_out_attention,
    tpu_matmul_sweeps,
    tpu_programs,
)
from benchmarks.provenance import chip_provenance

#: the names this book gives the chips JAX calls by their device kinds
KINDS = {"TPU v5 lite": "v5e", "TPU v6 lite": "v6e", "TPU v5": "v5p", "TPU v4": "v4"}

#: the two records: the programs the cost model is fitted and checked on, and those held out of the fit
SETS = {
    "fitted": tpu_programs.all_programs,
    "held_out": tpu_held_out.held_out,
    "held_out_2": tpu_held_out.held_out_second,
    "held_out_3": tpu_held_out.held_out_third,
    "held_out_4": tpu_held_out.held_out_fourth,
    "held_out_5": tpu_held_out.held_out_fifth,
    "held_out_6": tpu_held_out.held_out_sixth,
    "held_out_7": tpu_held_out.held_out_seventh,
    "held_out_8": tpu_held_out.held_out_eighth,
    "held_out_9": tpu_held_out.held_out_ninth,
    "held_out_10": tpu_held_out.held_out_tenth,
    "held_out_11": tpu_held_out.held_out_eleventh,
    "held_out_12": tpu_held_out.held_out_twelfth,
    "held_out_13": tpu_held_out_attention.held_out_thirteenth,
    "held_out_14": tpu_held_out_attention.held_out_fourteenth,
    "held_out_15": tpu_held_out_attention.held_out_fifteenth,
    "held_out_16": tpu_held_out_attention.held_out_sixteenth,
    "held_out_17": tpu_held_out_attention.held_out_seventeenth,
    "held_out_18": tpu_held_out.held_out_eighteenth,
    "held_out_19": tpu_held_out.held_out_nineteenth,
    # a fitted set recorded alone, before any rule is read off it (its names need no --only)
    "sweeps_3": tpu_programs.kernel_sweeps_third,
    "sweeps_4": tpu_programs.kernel_sweeps_fourth,
    "sweeps_5": tpu_programs.kernel_sweeps_fifth,
    "sweeps_6": tpu_programs.kernel_sweeps_sixth,
    "sweeps_7": tpu_attention_sweeps.kernel_sweeps_seventh,
    "sweeps_8": tpu_attention_sweeps.kernel_sweeps_eighth,
    "sweeps_9": tpu_attention_sweeps.kernel_sweeps_ninth,
    "sweeps_10": tpu_attention_sweeps.kernel_sweeps_tenth,
    "sweeps_11": tpu_attention_sweeps.kernel_sweeps_eleventh,
    "sweeps_12": tpu_attention_sweeps.kernel_sweeps_twelfth,
    "sweeps_13": tpu_attention_sweeps.kernel_sweeps_thirteenth,
    "sweeps_14": tpu_matmul_sweeps.kernel_sweeps_fourteenth,
    # the programs whose one result feeds back, recorded again with that result fed back whole
    "fed_back": lambda: tpu_programs.fed_back(tpu_programs.all_programs()),
    "held_out_fed_back": lambda: tpu_programs.fed_back(
        [
            p
            for name, programs in SETS.items()
            if name.startswith("held_out") and "fed" not in name
            for p in programs()
        ]
    ),
}
#: the file each set is written to (after tpu_<kind>): the second held-out set joins the first
STEMS = {name: "_held_out" if name.startswith("held_out") else "" for name in SETS}


def held_out_round(name: str) -> int:
    """The held-out round (``held_out_N``'s N) a program was written for."""
    rounds = {s: int(s.rsplit("_", 1)[1]) for s in SETS if s.startswith("held_out_") and s[-1].isdigit()}
    return next(r for s, r in rounds.items() if any(p.name == name for p in SETS[s]()))


def first_lines(error: BaseException, n: int = 6) -> str:
    """The error's type and its first n lines (an HBM error's verdict is in its first lines)."""
    lines = str(error).strip().splitlines()
    return f"{type(error).__name__}: " + "\n".join(lines[:n])[:1500]


def compiler_view(compiled) -> dict:
    """memory_analysis() and cost_analysis() of a compiled program, as plain numbers."""
    stats = compiled.memory_analysis()
    out = {
        "arguments": int(stats.argument_size_in_bytes),
        "outputs": int(stats.output_size_in_bytes),
        "aliased": int(stats.alias_size_in_bytes),
        "temporaries": int(stats.temp_size_in_bytes),
    }
    cost = compiled.cost_analysis()
    if isinstance(cost, list):  # older JAX: one dict per program
        cost = cost[0] if cost else {}
    cost = cost or {}
    out["flops"] = float(cost.get("flops", 0.0))
    out["bytes_accessed"] = float(cost.get("bytes accessed", 0.0))
    return out


def caller(program: tpu_programs.Program):
    """``call(args) -> (outputs, the next call's args)``: a training step's updated state (its first
    ``feeds_back`` outputs) is its next call's first arguments. A program whose result is one array
    feeds that array back whole (before 2026-12-07 its first row went back instead, and the calls after
    the first ran another program: see ``benchmarks/pending/README.md``)."""
    fn, keep = program.fn, program.feeds_back

    def call(args):
        out = fn(*args)
        if keep:
            outs = out if isinstance(out, (tuple, list)) else (out,)
            args = list(outs[:keep]) + list(args[keep:])
        return out, args

    return call


def time_calls(program: tpu_programs.Program, args: list, repeats: int) -> dict:
    """Median seconds of one call (see the module docstring), with the batches' spread."""
    call = caller(program)
    for _ in range(2):  # warm-up: the first call may still load the program
        out, args = call(args)
        jax.block_until_ready(out)
    start = time.perf_counter()
    out, args = call(args)
    jax.block_until_ready(out)
    once = time.perf_counter() - start
    inner = int(min(200, max(1, 0.05 // max(once, 1e-6))))
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(inner):
            out, args = call(args)
        jax.block_until_ready(out)
        samples.append((time.perf_counter() - start) / inner)
    del out, args
    return {
        "seconds": float(np.median(samples)),
        "min_seconds": float(min(samples)),
        "max_seconds": float(max(samples)),
        "inner": inner,
        "repeats": repeats,
    }


def record_program(program: tpu_programs.Program, repeats: int, texts: dict) -> dict:
    """What the chip's compiler says of a program and how long it takes (or why it cannot run)."""
    row: dict = {"family": program.family, "about": program.about}
    start = time.perf_counter()
    try:
        compiled = program.fn.lower(*program.shapes).compile()
    except Exception as e:  # e.g. a program whose memory exceeds the chip's HBM
        row["raises"] = first_lines(e)
        return row
    row["compile_seconds"] = time.perf_counter() - start
    row.update(compiler_view(compiled))
    texts[program.name] = compiled.as_text()
    try:
        args = tpu_programs.arguments_for(program)
        row.update(time_calls(program, args, repeats))
    except Exception as e:
        row["run_raises"] = first_lines(e)
    # the most this process has held so far: a program's own peak when it is the only one run (--only).
    # It leaves out the runtime's scratch for a program, which bytes_reserved counts.
    stats = jax.devices()[0].memory_stats() or {}
    row["peak_bytes_in_use"] = int(stats.get("peak_bytes_in_use", 0))
    row["bytes_reserved"] = int(stats.get("bytes_reserved", 0))
    return row


def merged(path: str, new: dict, new_texts: dict) -> tuple[dict, dict]:
    """The record at ``path`` and its programs' texts, with ``new``'s programs added (or replaced), each
    carrying the provenance of the run that recorded it (``recorded``: JAX, libtpu, date, command)."""
    with open(path) as f:
        record = json.load(f)
    with gzip.open(path.replace(".json", "_programs.json.gz"), "rt") as f:
        texts = json.load(f)
    if new["device_kind"] != record["device_kind"]:
        raise SystemExit(f"{path} records a {record['device_kind']}, this chip is a {new['device_kind']}")
    provenance = {k: new[k] for k in ("jax", "libtpu", "python", "date", "command")}
    for name, row in new["programs"].items():
        record["programs"][name] = {**row, "recorded": provenance}
    texts.update(new_texts)
    return record, texts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="a folder")
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument(
        "--only",
        default="",
        help="record programs whose name contains this (or one of these, comma-separated)",
    )
    parser.add_argument("--family", default="", help="record programs of this family only")
    parser.add_argument(
        "--set",
        choices=SETS,
        default="fitted",
        help="fitted: the programs the cost model's rates are read off and checked on (tpu_<kind>.json); "
        "held_out: programs it is not fitted on (tpu_<kind>_held_out.json)",
    )
    parser.add_argument(
        "--merge",
        default="",
        help="an earlier record (tpu_<kind>.json, its programs beside it): write it back with the programs "
        "recorded now added, each with the provenance of this run",
    )
    args = parser.parse_args()

    device = jax.devices()[0]
    kind = KINDS.get(device.device_kind, device.device_kind.lower().replace(" ", "_"))
    record = {
        **chip_provenance(
            "python -m benchmarks.tpu_record --out DIR"
            + (f" --repeats {args.repeats}" if args.repeats != 7 else "")
            + (f" --set {args.set}" if args.set != "fitted" else "")
            + (f" --only {args.only!r}" if args.only else "")
            + (f" --family {args.family}" if args.family else "")
            + (" --merge RECORD" if args.merge else "")
        ),
        "timing": f"median of {args.repeats} batches of back-to-back calls, each batch about 50 ms",
        "programs": {},
    }
    texts: dict[str, str] = {}
    for program in SETS[args.set]():
        if not any(part in program.name for part in args.only.split(",")) or args.family not in (
            "",
            program.family,
        ):
            continue
        row = record_program(program, args.repeats, texts)
        if args.set.startswith("held_out_"):
            row["round"] = held_out_round(program.name)  # appendix A: what each round came before
        record["programs"][program.name] = row
        shown = {k: v for k, v in row.items() if k not in ("about",)}
        print(program.name, json.dumps(shown)[:400], flush=True)
        if not args.merge:  # written after each program, so a run cut short keeps what it did
            write(args, kind, record, texts)
    if args.merge:
        record, texts = merged(args.merge, record, texts)
        write(args, kind, record, texts)


def write(args: argparse.Namespace, kind: str, record: dict, texts: dict) -> None:
    stem = f"{args.out}/tpu_{kind}{STEMS[args.set]}"
    with open(f"{stem}.json", "w") as f:
        json.dump(record, f, indent=1)
    with gzip.open(f"{stem}_programs.json.gz", "wt") as f:
        json.dump(texts, f)


if __name__ == "__main__":
    main()
