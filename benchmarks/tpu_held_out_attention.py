"""Held-out rounds 13 on (``benchmarks/tpu_record.py --set held_out_13`` and later), written around the
rules for attention's kernels: attention and its scores alone at shapes no other program has, beside a
fair test of the rest. Each round written, and recorded on the chip, before the rules it tests (or, for
round 16, committed with its rule and recorded after it), and merged into
``shardbook/data/tpu_v5e_held_out.json`` with its ``round``. JAX and NumPy only, like
:mod:`benchmarks.tpu_held_out`, whose pieces they use.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from benchmarks.tpu_held_out import _cross_entropy, _mlp_step
from benchmarks.tpu_programs import GPT, Program, _layernorm, _scores, attention, gpt_step, program


def _attention_held(tokens: int, n: int, d: int, batch: int, dtype: str = "bfloat16") -> Program:
    """Attention over ``batch`` sequences of ``tokens``, ``n`` heads of ``d`` (rounds 13 on)."""
    kind = "bfloat16" if dtype == "bfloat16" else "float32"
    name = f"attention {kind} {tokens}, {n} heads of {d}, batch {batch}"
    return program(name, "attention", attention, *[((batch, tokens, n, d), dtype)] * 3)


def _scores_held(tokens: int, n: int, d: int, batch: int) -> Program:
    """Attention's scores q kᵀ alone, bf16 (rounds 14 on)."""
    name = f"attention scores bfloat16 {tokens}, {n} heads of {d}, batch {batch}"
    return program(name, "attention", _scores, *[((batch, tokens, n, d), "bfloat16")] * 2)


def held_out_thirteenth() -> list[Program]:
    """A thirteenth set held out of the fit, written and recorded (and sealed) before any rule for
    attention's kernels (``--set held_out_13``), opened once the rule read off
    :func:`benchmarks.tpu_attention_sweeps.kernel_sweeps_seventh` was committed: attention with heads of 64 to
    512 at shapes no other program has, an f32 MLP step and an f32 matmul near the 5632 one the model
    misses, and a fair test of the rest."""

    prog, heads = program, _attention_held
    f32, bf16 = "float32", "bfloat16"

    return [
        heads(2048, 8, 64, 8),
        heads(1024, 32, 128, 4),
        heads(3072, 12, 128, 2),
        heads(2048, 6, 192, 4),
        heads(1536, 8, 256, 4),
        heads(2048, 4, 384, 4),
        heads(1024, 4, 512, 8),
        heads(2048, 8, 128, 2, f32),
        _mlp_step("MLP SGD step float32, width 5376 from 8192 rows", 5376, 8192),
        prog("matmul float32 5632 x 8192 x 5632", "matmul", jnp.matmul, ((5632, 8192), f32),
             ((8192, 5632), f32)),
        prog("layer norm bfloat16 12288 x 3072", "memory", _layernorm, ((12288, 3072), bf16),
             ((3072,), bf16)),
        gpt_step("GPT width 1536, 6 layers, batch 4", GPT(50304, 1536, 12, 6144, 6, 1024), batch=4),
    ]  # fmt: skip


def held_out_fourteenth() -> list[Program]:
    """A fourteenth set held out of the fit, written and recorded (and sealed) before any rule for a
    step of a split contraction or a two-result product that reads a tenth or more of what it writes
    (``--set held_out_14``), opened once the rule that a batched product's window sets its write rate
    was committed: attention with heads of 256 to 512 at shapes no other program has, the scores alone
    at new windows, an f32 attention with heads of 256, an f32 MLP step and matmul past the 5632 ones,
    and a fair test of the rest."""

    prog, heads, scores = program, _attention_held, _scores_held
    f32, bf16 = "float32", "bfloat16"

    return [
        heads(1280, 16, 256, 4),
        heads(2560, 4, 256, 4),
        heads(768, 8, 384, 12),
        heads(1536, 8, 512, 4),
        heads(3072, 2, 256, 4),
        heads(1024, 8, 256, 4, f32),
        scores(1536, 8, 256, 8),
        scores(3072, 4, 384, 4),
        _mlp_step("MLP SGD step float32, width 6144 from 8192 rows", 6144, 8192),
        prog("matmul float32 6144 x 4096 x 6144", "matmul", jnp.matmul, ((6144, 4096), f32),
             ((4096, 6144), f32)),
        prog("softmax bfloat16 8192 x 8192", "memory", lambda x: jax.nn.softmax(x, -1), ((8192, 8192), bf16)),
        gpt_step("GPT width 1024, 10 layers, batch 6, bfloat16", GPT(50304, 1024, 16, 4096, 10, 1024),
                 batch=6, dtype="bfloat16"),
    ]  # fmt: skip


def held_out_fifteenth() -> list[Program]:
    """A fifteenth set held out of the fit, written and recorded (and sealed) with
    :func:`benchmarks.tpu_attention_sweeps.kernel_sweeps_ninth` (``--set held_out_15``) and opened
    against the model unchanged, no rule having been read off that sweep or round 14: attention with
    heads of 256 to 512 at shapes no other program has, the scores alone, and a fair test of the
    rest."""

    prog, heads, scores = program, _attention_held, _scores_held
    f32, bf16 = "float32", "bfloat16"

    return [
        heads(1792, 8, 256, 4),
        heads(1024, 12, 384, 4),
        heads(2048, 2, 512, 6),
        heads(896, 16, 256, 8),
        heads(2304, 4, 384, 4),
        heads(1536, 4, 256, 4, f32),
        scores(2048, 12, 256, 3),
        scores(1280, 8, 512, 6),
        _mlp_step("MLP SGD step float32, width 4864 from 8192 rows", 4864, 8192),
        prog("matmul bfloat16 6144 x 12288 x 2048", "matmul", jnp.matmul, ((6144, 12288), bf16),
             ((12288, 2048), bf16)),
        prog("layer norm float32 12288 x 1536", "memory", _layernorm, ((12288, 1536), f32), ((1536,), f32)),
        prog("cross-entropy float32 logits, 48000, 4096 rows", "memory", jax.value_and_grad(_cross_entropy),
             ((4096, 48000), f32), ((4096,), "int32")),
    ]  # fmt: skip


def held_out_sixteenth() -> list[Program]:
    """A sixteenth set held out of the fit, written once the rule that attention's second product in small
    steps of its weights leaves part of its reads exposed (``Measured.stepped_reads_exposed``) was read off
    and fixed, committed with it and recorded after it (``--set held_out_16``): attention with heads of 256
    to 512 at shapes no other program has, five where today's compiler takes that product in such steps and
    three where it does not, a GPT step with heads of 256, the scores alone, and a fair test of the rest.
    """

    prog, heads, scores = program, _attention_held, _scores_held
    bf16 = "bfloat16"

    return [
        heads(1280, 8, 256, 8),
        heads(768, 16, 256, 8),
        heads(640, 16, 384, 8),
        heads(1024, 8, 512, 6),
        heads(1280, 8, 384, 6),
        heads(1152, 8, 256, 8),
        heads(1536, 4, 512, 4),
        heads(2560, 4, 384, 2),
        scores(1792, 8, 384, 4),
        gpt_step("GPT width 1024, 4 heads of 256, 6 layers, batch 4, bfloat16",
                 GPT(50304, 1024, 4, 4096, 6, 1024), batch=4, dtype="bfloat16"),
        _mlp_step("MLP SGD step float32, width 3584 from 8192 rows", 3584, 8192),
        prog("matmul bfloat16 3072 x 10240 x 4096", "matmul", jnp.matmul, ((3072, 10240), bf16),
             ((10240, 4096), bf16)),
    ]  # fmt: skip


def held_out_seventeenth() -> list[Program]:
    """A seventeenth set held out of the fit, written and recorded (and sealed) with
    :func:`benchmarks.tpu_attention_sweeps.kernel_sweeps_twelfth` (``--set held_out_17``) and opened
    against the model unchanged, no rule having been read off that sweep: attention with heads of 256 to
    512 at shapes no other program has (heads split across the scores kernel's steps and not), the scores
    alone, a bf16 GPT step with heads of 384, and a fair test of the rest."""

    prog, heads, scores = program, _attention_held, _scores_held
    bf16 = "bfloat16"

    return [
        heads(1536, 16, 256, 4),
        heads(1024, 12, 256, 8),
        heads(2560, 8, 256, 2),
        heads(1792, 4, 384, 6),
        heads(1280, 4, 512, 6),
        heads(3072, 4, 256, 2),
        scores(2560, 4, 256, 4),
        scores(1024, 16, 384, 4),
        scores(1792, 8, 512, 2),
        gpt_step("GPT width 1536, 4 heads of 384, 4 layers, batch 4, bfloat16",
                 GPT(50304, 1536, 4, 6144, 4, 1024), batch=4, dtype="bfloat16"),
        _mlp_step("MLP SGD step float32, width 4352 from 8192 rows", 4352, 8192),
        prog("matmul bfloat16 5120 x 6144 x 3584", "matmul", jnp.matmul, ((5120, 6144), bf16),
             ((6144, 3584), bf16)),
    ]  # fmt: skip
