"""Attention's kernels swept on a real TPU v5e and kept out of the fitted record (their records and
kernels in ``benchmarks/pending/``, ``benchmarks/tpu_record.py --set sweeps_7`` to ``sweeps_10``): each
sweep written and recorded before any rule read off it, beside a held-out round recorded sealed. JAX
and NumPy only, like :mod:`benchmarks.tpu_programs`, whose :class:`Program` and pieces they use.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp

from benchmarks.tpu_programs import Program, _scores, _values, attention, program


def kernel_sweeps_seventh() -> list[Program]:
    """Attention's kernels with only the heads' width changing (64 to 512; 3 x 16 heads of 2048 tokens,
    bf16), the whole attention and its scores alone (recorded with the thirteenth held-out set sealed,
    before any rule read off them): where the scores' kernel writes at the rate of a product that
    mostly writes, and where its MXU time and its writes add up."""
    qkv = lambda d: [((3, 2048, 16, d), "bfloat16")] * 3  # noqa: E731
    whole = [program(f"attention sweep bf16, 16 heads of {d}, batch 3", "attention", attention, *qkv(d))
             for d in (64, 128, 192, 256, 384, 512)]  # fmt: skip
    alone = [program(f"attention scores sweep bf16, 16 heads of {d}, batch 3", "attention", _scores,
                     *qkv(d)[:2]) for d in (64, 128, 256, 512)]  # fmt: skip
    return whole + alone


def kernel_sweeps_eighth() -> list[Program]:
    """The scores q kᵀ alone at widths 128 to 512, heads 2 to 32 and 1,024 to 4,096 tokens (bf16): the
    windows the compiler picks, for what sets the time of a step of a split contraction (recorded after
    :func:`kernel_sweeps_seventh` showed it is not the split alone, before any rule read off it)."""
    shapes = [(16, 2048, 2, 256), (8, 2048, 4, 256), (2, 2048, 16, 256), (1, 2048, 32, 256),
              (2, 4096, 4, 256), (8, 1024, 16, 256), (16, 2048, 2, 512), (4, 2048, 8, 512),
              (2, 2048, 16, 384), (1, 2048, 32, 128)]  # fmt: skip
    return [program(f"attention scores window sweep bf16, {h} heads of {d}, {t} long, batch {b}", "attention",
                    _scores, *[((b, t, h, d), "bfloat16")] * 2) for b, t, h, d in shapes]  # fmt: skip


def kernel_sweeps_ninth() -> list[Program]:
    """Attention's second product (the weights times the values) alone, its contraction over the keys
    in steps, and the scores alone in one step, with heads of 256 to 512 (bf16): recorded after
    held-out round 14 was opened (four of its six attentions with heads of 256 or more 12% to 27%
    short) and before any rule read off them, with round 15 sealed."""
    values = [(2, 2048, 16, 256), (16, 768, 8, 256), (8, 1024, 8, 384), (4, 2048, 4, 384),
              (4, 1024, 8, 512), (2, 2048, 8, 512)]  # fmt: skip
    scores = [(4, 1536, 16, 256), (8, 1024, 8, 384), (16, 768, 8, 512), (8, 2048, 2, 384)]
    bf16 = "bfloat16"
    return [program(f"attention values sweep bf16, {h} heads of {d}, {t} long, batch {b}", "attention",
                    _values, ((b, h, t, t), bf16), ((b, t, h, d), bf16)) for b, t, h, d in values] + [
        program(f"attention scores sweep bf16, {h} heads of {d}, {t} long, batch {b}", "attention", _scores,
                *[((b, t, h, d), bf16)] * 2) for b, t, h, d in scores]  # fmt: skip


#: (batch, heads, queries, head width, keys) of sweeps 10 and 11.
TENTH_SHAPES = [(4, 4, 2048, 384, k) for k in (1024, 1536, 2048, 3072)]
TENTH_SHAPES += [(2, 8, 2048, 512, k) for k in (1024, 2048, 3072)]
TENTH_SHAPES += [(2, 16, 1024, 256, k) for k in (1024, 2048, 3072)]


def kernel_sweeps_tenth() -> list[Program]:
    """Attention's second product (the weights times the values) alone with only the number of keys
    changing (1,024 to 3,072) at three fixed widths and head counts (bf16): how its time follows the
    compiler's steps over the keys when nothing else moves (recorded after sweep 9 found no rule
    across shapes that changed several things at once, before any rule read off it)."""
    bf16 = "bfloat16"
    return [program(f"attention values keys sweep bf16, {h} heads of {d}, {q} queries, {k} keys, batch {b}",
                    "attention", _values, ((b, h, q, k), bf16), ((b, k, h, d), bf16))
            for b, h, q, d, k in TENTH_SHAPES]  # fmt: skip


def _values_heads_first(p, v):
    """The second product with the values' heads before their keys: [b, h, q, k] x [b, h, k, d]."""
    return jnp.einsum("bhqk,bhkd->bhqd", p, v)


def kernel_sweeps_eleventh() -> list[Program]:
    """Sweep 10's products with the values laid out heads first ([batch, heads, keys, width]) and the
    result likewise: the same arithmetic in a form where the compiler need not move the values' heads
    (XLA's kernel for the plain product, timed beside benchmarks/tpu_pallas_values.py's, took 31% less
    time than sweep 10's at one of its shapes); recorded before any rule read off either sweep."""
    bf16 = "bfloat16"
    name = "attention values heads-first sweep bf16, {} heads of {}, {} queries, {} keys, batch {}"
    return [program(name.format(h, d, q, k, b), "attention", _values_heads_first, ((b, h, q, k), bf16),
                    ((b, h, k, d), bf16))
            for b, h, q, d, k in TENTH_SHAPES]  # fmt: skip


def kernel_sweeps_twelfth() -> list[Program]:
    """Attention's scores kernel (beside the softmax's running max, and alone) with one thing changing
    at a time (bf16): the heads at a fixed amount of work (the batch times the heads fixed), the heads'
    width at a fixed batch and head count, and six held-out programs (rounds 4, 7 and 12 to 15) again
    under new names (how far a fresh reading on the chip moves). Written after round 16 was opened,
    recorded with held-out round 17 sealed and before any rule read off either."""
    bf16 = "bfloat16"
    whole = [(16, 1024, 8, 256), (8, 1024, 16, 256), (4, 1024, 32, 256), (16, 1024, 8, 384),
             (8, 1024, 16, 384), (8, 2048, 2, 256), (4, 2048, 4, 256), (2, 2048, 8, 256),
             (1, 2048, 16, 256), (4, 2048, 4, 192), (4, 2048, 4, 384), (4, 2048, 4, 512)]  # fmt: skip
    alone = [(16, 1536, 4, 256), (8, 1536, 8, 256), (4, 1536, 16, 256), (6, 2048, 6, 256), (3, 2048, 12, 256)]
    return [program(f"attention heads sweep bf16, {h} heads of {d}, {t} long, batch {b}", "attention",
                    attention, *[((b, t, h, d), bf16)] * 3) for b, t, h, d in whole] + [
        program(f"attention scores heads sweep bf16, {h} heads of {d}, {t} long, batch {b}", "attention",
                _scores, *[((b, t, h, d), bf16)] * 2) for b, t, h, d in alone]  # fmt: skip


def _attention_heads_first(q, k, v):
    """:func:`benchmarks.tpu_programs.attention` with its inputs and result laid out heads first:
    [batch, heads, tokens, width]."""
    scores = jnp.einsum("bhqd,bhkd->bhqk", q, k) / math.sqrt(q.shape[-1])
    t = q.shape[2]
    scores = jnp.where(jnp.tril(jnp.ones((t, t), bool)), scores, jnp.finfo(scores.dtype).min)
    weights = jax.nn.softmax(scores.astype(jnp.float32), -1).astype(q.dtype)
    return jnp.einsum("bhqk,bhkd->bhqd", weights, v)


def kernel_sweeps_thirteenth() -> list[Program]:
    """Sweep 12's attention with only the heads changing at a fixed amount of work (8, 16 and 32 heads
    of 256 at 1,024 tokens, batches of 16, 8 and 4), its inputs laid out heads first ([batch, heads,
    tokens, width]), whole and its scores alone: whether the heads' cost sweep 12 found belongs to the
    [batch, tokens, heads, width] form, as sweep 11 found for the second product. Recorded after sweep
    12 and round 17 were opened, before any rule read off it."""
    bf16 = "bfloat16"
    shapes = [(16, 1024, 8, 256), (8, 1024, 16, 256), (4, 1024, 32, 256)]
    return [program(f"attention heads-first sweep bf16, {h} heads of {d}, {t} long, batch {b}", "attention",
                    _attention_heads_first, *[((b, h, t, d), bf16)] * 3) for b, t, h, d in shapes] + [
        program(f"attention scores heads-first sweep bf16, {h} heads of {d}, {t} long, batch {b}",
                "attention", lambda q, k: jnp.einsum("bhqd,bhkd->bhqk", q, k), *[((b, h, t, d), bf16)] * 2)
        for b, t, h, d in shapes]  # fmt: skip
