"""Each kernel's time on the TPU at hand, read from JAX's profiler, for the programs of the fitted record.

Run on a machine with one TPU chip: ``python -m benchmarks.tpu_kernels --out DIR``. Like
``benchmarks/tpu_record.py`` it needs only JAX and NumPy. Each program is called three times to warm up,
then five times back to back inside ``jax.profiler.trace``; the trace's ``XLA Ops`` line on the device
gives every kernel (an instruction of the compiled program, named as in its text) its time, and the
``XLA Modules`` line the whole call's. It writes ``DIR/tpu_<kind>_kernels.json``: the provenance (device
kind, JAX, libtpu, Python, date, command) and, per program, ``module_seconds`` (one call) and
``kernels``: instruction name -> [runs per call, seconds per call] (an instruction inside a loop runs
more than once a call).

Whole-program times stay ``tpu_record``'s (medians of many batches); this record says where a call's
time goes, kernel by kernel, so that each of the cost model's kernels can be set against the chip's
(``python -m benchmarks.tpu_kernel_calibration``). CI never runs this script.
"""

from __future__ import annotations

import argparse
import collections
import glob
import json
import tempfile

import jax

from benchmarks import tpu_programs
from benchmarks.provenance import chip_provenance
from benchmarks.tpu_record import KINDS, SETS, STEMS, caller

WARM_UP, TRACED = 3, 5
TIMING = (
    f"{WARM_UP} calls to warm up, then {TRACED} back to back inside jax.profiler.trace: each kernel's time "
    "per call from the trace's XLA Ops line on the device, the whole call's from its XLA Modules line"
)


def kernel_times(program: tpu_programs.Program, folder: str) -> dict:
    """``module_seconds`` and ``kernels`` (see the module docstring) of one program, traced in ``folder``."""
    args = tpu_programs.arguments_for(program)
    call = caller(program)
    for _ in range(WARM_UP):
        out, args = call(args)
        jax.block_until_ready(out)
    with jax.profiler.trace(folder):
        for _ in range(TRACED):
            out, args = call(args)
        jax.block_until_ready(out)
    del out, args
    (path,) = glob.glob(f"{folder}/**/*.xplane.pb", recursive=True)
    totals: dict[tuple[str, str], list[float]] = collections.defaultdict(lambda: [0, 0.0])
    for plane in jax.profiler.ProfileData.from_file(path).planes:
        if not plane.name.startswith("/device:TPU:0"):
            continue
        for line in plane.lines:
            if line.name in ("XLA Ops", "XLA Modules"):
                for event in line.events:
                    name = event.name.split(" = ")[0].lstrip("%")
                    totals[line.name, name][0] += 1
                    totals[line.name, name][1] += event.duration_ns * 1e-9
    modules = [s for (line, _), (_, s) in totals.items() if line == "XLA Modules"]
    return {
        "module_seconds": sum(modules) / TRACED,
        "kernels": {
            name: [runs / TRACED, seconds / TRACED]
            for (line, name), (runs, seconds) in sorted(totals.items(), key=lambda kv: -kv[1][1])
            if line == "XLA Ops"
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="a folder")
    parser.add_argument("--only", default="", help="programs whose name contains one of these (a,b,...)")
    parser.add_argument("--merge", default="", help="an earlier tpu_<kind>_kernels.json, to add these to")
    parser.add_argument(
        "--set",
        choices=SETS,
        default="fitted",
        help="the programs to trace (as benchmarks.tpu_record's --set); a held-out set's go to "
        "tpu_<kind>_held_out_kernels.json, where they say where a miss goes, not what to fit",
    )
    args = parser.parse_args()
    device = jax.devices()[0]
    kind = KINDS.get(device.device_kind, device.device_kind.lower().replace(" ", "_"))
    provenance = chip_provenance(
        "python -m benchmarks.tpu_kernels --out DIR"
        + (f" --set {args.set}" if args.set != "fitted" else "")
        + (f" --only {args.only!r}" if args.only else "")
        + (" --merge RECORD" if args.merge else "")
    )
    record = {**provenance, "timing": TIMING, "programs": {}}
    if args.merge:
        with open(args.merge) as f:
            record = json.load(f)
        if record["device_kind"] != device.device_kind:
            raise SystemExit(f"{args.merge}: a {record['device_kind']}; this chip: a {device.device_kind}")
    print(json.dumps(provenance), flush=True)
    for program in SETS[args.set]():
        if not any(part in program.name for part in args.only.split(",")):
            continue
        with tempfile.TemporaryDirectory() as folder:
            try:
                row = kernel_times(program, folder)
            except Exception as e:  # a program that does not fit the chip
                print(f"{program.name}: {type(e).__name__}: {str(e).splitlines()[0][:200]}", flush=True)
                continue
        record["programs"][program.name] = {**row, "recorded": provenance} if args.merge else row
        ms = row["module_seconds"] * 1e3
        print(f"{program.name}: {ms:.3f} ms, {len(row['kernels'])} kernels", flush=True)
        # after each program: a cut run keeps what it did
        with open(f"{args.out}/tpu_{kind}{STEMS[args.set]}_kernels.json", "w") as f:
            json.dump(record, f, indent=1)


if __name__ == "__main__":
    main()
