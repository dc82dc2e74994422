"""Error and time of every matmul precision preset on the backend at hand, recorded as JSON.

Run on a machine with an accelerator: ``python -m benchmarks.precision_presets --out FILE``. It needs
only JAX and NumPy (not shardbook), so it runs on a bare GPU or TPU image.

For each ``jax.lax.DotAlgorithmPreset`` it records

* the relative error ‖C − C₆₄‖ / ‖C₆₄‖ (Frobenius) of an f32 256×512 · 512×256 product of N(0, 1)
  matrices drawn exactly as chapter 9 draws them, against the float64 product of the f32 data (so an
  F16 or F8 preset's error includes rounding the operands), and the same at K = 4096;
* the median time of an f32 ``N×N · N×N`` product (N = 8192 by default; operands cast to f16 for the
  F16 presets, to float8_e4m3fn for the ANY_F8 ones) over ``--repeats`` timed runs after warm-ups,
  and the rate in TFLOP/s;
* or the first line of the error a preset raises on this backend.

It records the same for the three ``jax.lax.Precision`` levels (``precision="default"``, ``"high"``,
``"highest"``: what most code names), under ``levels``, so a record says which preset each level runs
as on that chip. ``--only levels --merge FILE`` adds them to an earlier record without timing its
presets again (their provenance under ``levels_recorded``).

Chapter 9 reads and plots the committed record (``shardbook/data/precision_presets_<device>.json``,
shipped with the helper package so the chapter runs on Colab too); CI never runs this script.
"""

from __future__ import annotations

import argparse
import datetime
import json
import platform
import time

import jax
import jax.numpy as jnp
import numpy as np


def relative_error(c, exact) -> float:
    return float(np.linalg.norm(np.asarray(c, np.float64) - exact) / np.linalg.norm(exact))


def operands_for(preset_name: str, x):
    if preset_name.startswith("ANY_F8"):
        return x.astype(jnp.float8_e4m3fn)
    if preset_name.startswith("F16"):
        return x.astype(jnp.float16)
    return x


def product(preset):
    """jit(a @ b) under the preset, with an f32 result where the preset allows one."""
    wide = jax.jit(lambda a, b: jnp.dot(a, b, precision=preset, preferred_element_type=jnp.float32))
    narrow = jax.jit(lambda a, b: jnp.dot(a, b, precision=preset))

    def call(a, b):
        try:
            return wide(a, b)
        except Exception:  # e.g. an F16 or BF16 accumulator: let the preset choose the result type
            return narrow(a, b)

    return call


def error_at(preset, m: int, k: int, n: int, seed_a: int, seed_b: int) -> float:
    rng_a, rng_b = np.random.default_rng(seed_a), np.random.default_rng(seed_b)
    if seed_a == seed_b:  # chapter 9 draws both matrices from one generator
        a_np = rng_a.standard_normal((m, k))
        b_np = rng_a.standard_normal((k, n))
    else:
        a_np, b_np = rng_a.standard_normal((m, k)), rng_b.standard_normal((k, n))
    a32, b32 = jnp.asarray(a_np, jnp.float32), jnp.asarray(b_np, jnp.float32)
    # Against the f32 data, so the error of an F16 or F8 preset includes rounding its operands.
    exact = np.asarray(a32, np.float64) @ np.asarray(b32, np.float64)
    a, b = operands_for(preset.name, a32), operands_for(preset.name, b32)
    return relative_error(product(preset)(a, b), exact)


def time_at(preset, size: int, repeats: int) -> float:
    key_a, key_b = jax.random.split(jax.random.key(0))
    a = operands_for(preset.name, jax.random.normal(key_a, (size, size), jnp.float32))
    b = operands_for(preset.name, jax.random.normal(key_b, (size, size), jnp.float32))
    f = product(preset)
    for _ in range(3):
        f(a, b).block_until_ready()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        f(a, b).block_until_ready()
        times.append(time.perf_counter() - start)
    return float(np.median(times))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--size", type=int, default=8192)
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--only", choices=("presets", "levels"), default="", help="record one kind only")
    parser.add_argument("--merge", default="", help="an earlier record to add what is recorded now to")
    args = parser.parse_args()

    device = jax.devices()[0]
    record = {
        "device_kind": device.device_kind,
        "platform": device.platform,
        "jax": jax.__version__,
        "python": platform.python_version(),
        "date": datetime.date.today().isoformat(),
        "command": "python -m benchmarks.precision_presets --out FILE"
        + (f" --size {args.size}" if args.size != 8192 else "")
        + (f" --repeats {args.repeats}" if args.repeats != 10 else "")
        + (f" --only {args.only}" if args.only else "")
        + (" --merge FILE" if args.merge else ""),
        "size": args.size,
        "repeats": args.repeats,
        "error_shape": "f32 256x512 . 512x256, N(0,1), numpy default_rng(0); and 64x4096 . 4096x64",
        "presets": {},
        "levels": {},
    }
    kinds = {"presets": list(jax.lax.DotAlgorithmPreset), "levels": list(jax.lax.Precision)}
    for kind, settings in kinds.items():
        if args.only and args.only != kind:
            continue
        for setting in settings:
            row = measure(setting, args.size, args.repeats)
            record[kind][setting.name] = row
            print(kind, setting.name, row, flush=True)
    if args.merge:
        with open(args.merge) as f:
            earlier = json.load(f)
        if earlier["device_kind"] != record["device_kind"]:
            here = record["device_kind"]
            raise SystemExit(f"{args.merge} records a {earlier['device_kind']}, this is a {here}")
        provenance = {k: record[k] for k in ("jax", "python", "date", "command")}
        for kind in kinds:
            if record[kind]:
                earlier[kind] = record[kind]
                earlier[f"{kind}_recorded"] = provenance
        record = earlier
    with open(args.out, "w") as f:
        json.dump(record, f, indent=1)


def measure(setting, size: int, repeats: int) -> dict:
    """Errors and time of one preset or precision level, or the error it raises on this backend."""
    row: dict = {}
    try:
        row["error"] = error_at(setting, 256, 512, 256, 0, 0)
        row["error_k4096"] = error_at(setting, 64, 4096, 64, 1, 2)
        seconds = time_at(setting, size, repeats)
        row["seconds"] = seconds
        row["tflops"] = 2 * size**3 / seconds / 1e12
    except Exception as e:  # a preset this backend cannot run: record why
        row["raises"] = f"{type(e).__name__}: {str(e).splitlines()[0][:300]}"
    return row


if __name__ == "__main__":
    main()
