"""The one-chip programs recorded on a real TPU (``benchmarks/tpu_record.py``), in JAX and NumPy only.

They must build with the book's JAX and with a TPU image's own, older one (0.10.2 on the chip this
book was recorded on), so nothing here imports ``shardbook``, Flax or Optax: the GPT and its Adam
update are written out in plain JAX. Each :class:`Program` gives a jitted function, its abstract
arguments (``jax.ShapeDtypeStruct``: compiling them allocates nothing, so the same program can be
compiled for a TPU topology on a machine with no TPU, ``shardbook.compile_for_tpu``), a way to make
concrete arguments on the chip, and whether its outputs are fed back as its next inputs (a training
step that donates its state).

Families: matmuls at bf16 and at f32's default precision (one bf16 pass on a TPU), memory-bound
element-wise work, reductions and layout changes, attention written as two einsums and a softmax,
and f32 training steps of a GPT with Adam at three sizes (plus two that cannot fit one v5e chip, to
record the compiler's refusal, and one whose state is not donated, which the compiler accepts and the
chip cannot allocate).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np


@dataclass(frozen=True)
class Program:
    """A jitted program, its abstract arguments, and how it is run on a chip."""

    name: str
    family: str  # "matmul", "memory", "attention" or "training"
    fn: Callable
    shapes: tuple  # jax.ShapeDtypeStruct per argument (no sharding: one device)
    feeds_back: int = 0  # the first `feeds_back` outputs are the next call's first arguments
    about: str = ""

    def arguments(self, seed: int = 0) -> list:
        """Concrete arguments on the default device: N(0, 1) floats, tokens for integer inputs."""
        keys = jax.random.split(jax.random.key(seed), len(self.shapes))
        out = []
        for key, s in zip(keys, self.shapes, strict=True):
            if jnp.issubdtype(s.dtype, jnp.integer):
                out.append(jax.random.randint(key, s.shape, 0, 50304, s.dtype))
            else:
                out.append(_normal(key, s.shape, s.dtype))
        return out


@functools.partial(jax.jit, static_argnums=(1, 2))
def _normal(key, shape, dtype):
    return (jax.random.normal(key, shape, jnp.float32) * 0.02).astype(dtype)


def _sds(shape, dtype) -> jax.ShapeDtypeStruct:
    return jax.ShapeDtypeStruct(tuple(shape), jnp.dtype(dtype))


# ---------------------------------------------------------------------------------------------------
# matmuls, memory-bound ops, attention


def matmuls() -> list[Program]:
    """Square products at bf16 and at f32 (default precision), and a skinny one bound by HBM."""
    out = []
    for dtype in ("bfloat16", "float32"):
        for n in (1024, 2048, 4096, 8192):
            out.append(
                Program(
                    f"matmul {dtype} {n}",
                    "matmul",
                    jax.jit(jnp.matmul),
                    (_sds((n, n), dtype), _sds((n, n), dtype)),
                    about=f"{dtype}[{n},{n}] @ {dtype}[{n},{n}]",
                )
            )
    for dtype in ("bfloat16", "float32"):
        out.append(
            Program(
                f"matmul {dtype} skinny",
                "matmul",
                jax.jit(jnp.matmul),
                (_sds((32768, 8192), dtype), _sds((8192, 256), dtype)),
                about=f"{dtype}[32768,8192] @ {dtype}[8192,256]: HBM-bound",
            )
        )
    return out


def _layernorm(x, scale):
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) * jax.lax.rsqrt(var + 1e-5) * scale


def memory_bound() -> list[Program]:
    """Element-wise work, reductions and layout changes whose time is their HBM traffic."""
    rows, cols = 16384, 8192
    f32, bf16 = ((rows, cols), "float32"), ((rows, cols), "bfloat16")

    def prog(name, fn, *shapes, about=""):
        return Program(name, "memory", jax.jit(fn), tuple(_sds(*s) for s in shapes), about=about)

    return [
        prog("one small add", lambda x: x + 1, ((8, 128), "float32"), about="a call's fixed cost"),
        prog("add f32", jnp.add, f32, f32, about="x + y, f32[16384,8192]"),
        prog("add bf16", jnp.add, bf16, bf16, about="x + y, bf16[16384,8192]"),
        prog("scale and shift f32", lambda x: x * 1.5 + 0.5, f32, about="one fused element-wise op"),
        prog("gelu f32", jax.nn.gelu, f32, about="tanh GELU"),
        prog("row sums f32", lambda x: x.sum(-1), f32, about="a reduction over the last axis"),
        prog("column sums f32", lambda x: x.sum(0), f32, about="a reduction over the first axis"),
        prog("transpose f32", lambda x: x.T + 0, ((8192, 8192), "float32"), about="a layout change"),
        prog("softmax f32", lambda x: jax.nn.softmax(x, -1), f32, about="over the last axis"),
        prog("layernorm f32", _layernorm, f32, ((cols,), "float32"), about="over the last axis"),
        prog("cast f32 to bf16", lambda x: x.astype(jnp.bfloat16), f32),
    ]


def attention(q, k, v):
    """Causal softmax(q kᵀ / √d) v written out: [batch, seq, heads, head_dim] in and out."""
    d = q.shape[-1]
    scores = jnp.einsum("bqhd,bkhd->bhqk", q, k) / math.sqrt(d)
    t = q.shape[1]
    causal = jnp.tril(jnp.ones((t, t), bool))
    scores = jnp.where(causal, scores, jnp.finfo(scores.dtype).min)
    weights = jax.nn.softmax(scores.astype(jnp.float32), -1).astype(q.dtype)
    return jnp.einsum("bhqk,bkhd->bqhd", weights, v)


def attentions() -> list[Program]:
    """Attention at three sequence lengths (bf16) and one in f32: 16 heads of 128."""
    out = []
    for dtype, seq, batch in (("bfloat16", 1024, 16), ("bfloat16", 2048, 8), ("bfloat16", 4096, 2)):
        out.append(_attention_program(dtype, seq, batch))
    out.append(_attention_program("float32", 2048, 8))
    return out


def _attention_program(dtype: str, seq: int, batch: int) -> Program:
    shape = _sds((batch, seq, 16, 128), dtype)
    return Program(
        f"attention {dtype} {seq}",
        "attention",
        jax.jit(attention),
        (shape, shape, shape),
        about=f"batch {batch}, {seq} tokens, 16 heads of 128, causal",
    )


# ---------------------------------------------------------------------------------------------------
# a GPT trained with Adam, in float32


class GPT(NamedTuple):
    """A decoder's shape: vocabulary, width, heads, MLP width, layers, tokens per sequence."""

    vocab: int
    d: int
    heads: int
    ff: int
    layers: int
    seq: int


#: GPT-2's small and medium shapes (untied head), a width of 1,536 at 16 layers (the largest of these
#: whose step fits one v5e chip, 12.3 GiB), and two that do not fit: GPT-2 large's shape and GPT-3's 1.3B.
GPTS = {
    "0.16B": GPT(50304, 768, 12, 3072, 12, 1024),
    "0.41B": GPT(50304, 1024, 16, 4096, 24, 1024),
    "0.61B": GPT(50304, 1536, 12, 6144, 16, 1024),
    "0.84B": GPT(50304, 1280, 20, 5120, 36, 1024),
    "1.42B": GPT(50304, 2048, 16, 8192, 24, 1024),
}
BATCH = 8  # sequences per step

#: A step whose state is not donated: its arguments, new state and temporaries add up to 16.34 GiB, over
#: the 15.75 GiB a v5e lets a program use, yet the compiler, which knows which buffers are live together,
#: accepts it. Run alone (``--only 'not donated'``), the chip's peak_bytes_in_use says which is right.
NOT_DONATED = {"0.52B": GPT(50304, 1280, 20, 5120, 20, 1024)}


def gpt_shapes(g: GPT) -> dict:
    """The parameters as shapes: embedding, positions, stacked blocks, final norm, head."""
    L, d, ff = g.layers, g.d, g.ff
    return {
        "embed": (g.vocab, d),
        "pos": (g.seq, d),
        "blocks": {
            "ln1": (L, d),
            "qkv": (L, d, 3 * d),
            "out": (L, d, d),
            "ln2": (L, d),
            "up": (L, d, ff),
            "down": (L, ff, d),
        },
        "ln_f": (d,),
        "head": (d, g.vocab),
    }


def gpt_parameter_count(g: GPT) -> int:
    """How many parameters :func:`gpt_shapes` holds."""
    return sum(math.prod(s) for s in jax.tree.leaves(gpt_shapes(g), is_leaf=lambda x: isinstance(x, tuple)))


def gpt_loss(params, tokens, g: GPT):
    """Mean next-token cross-entropy; each block is rematerialized in the backward pass."""
    inputs, targets = tokens[:, :-1], tokens[:, 1:]
    x = params["embed"][inputs] + params["pos"][: inputs.shape[1]]
    heads, dh = g.heads, g.d // g.heads

    def block(x, p):
        h = _layernorm(x, p["ln1"])
        q, k, v = jnp.split((h @ p["qkv"]).reshape(*h.shape[:2], 3 * heads, dh), 3, axis=2)
        x = x + attention(q, k, v).reshape(h.shape) @ p["out"]
        h = _layernorm(x, p["ln2"])
        return x + jax.nn.gelu(h @ p["up"]) @ p["down"], None

    x, _ = jax.lax.scan(jax.checkpoint(block), x, params["blocks"])
    logits = _layernorm(x, params["ln_f"]) @ params["head"]
    logp = jax.nn.log_softmax(logits, -1)
    return -jnp.take_along_axis(logp, targets[..., None], -1).mean()


def adam_step(params, m, v, tokens, g: GPT, lr=3e-4, b1=0.9, b2=0.95, eps=1e-8):
    """One step: gradients of :func:`gpt_loss`, then Adam's moments and update (no bias correction)."""
    loss, grads = jax.value_and_grad(gpt_loss)(params, tokens, g)
    m = jax.tree.map(lambda m, g_: b1 * m + (1 - b1) * g_, m, grads)
    v = jax.tree.map(lambda v, g_: b2 * v + (1 - b2) * g_ * g_, v, grads)
    params = jax.tree.map(lambda p, m, v: p - lr * m / (jnp.sqrt(v) + eps), params, m, v)
    return params, m, v, loss


def training_steps() -> list[Program]:
    """An f32 Adam step of each size in :data:`GPTS`, its state donated (updated in place), then the
    steps of :data:`NOT_DONATED`, whose state is not."""
    sizes = [(name, g, True) for name, g in GPTS.items()]
    sizes += [(name, g, False) for name, g in NOT_DONATED.items()]
    out = []
    for name, g, donated in sizes:
        state = jax.tree.map(
            lambda s: _sds(s, "float32"), gpt_shapes(g), is_leaf=lambda x: isinstance(x, tuple)
        )
        tokens = _sds((BATCH, g.seq + 1), "int32")
        step = jax.jit(
            lambda p, m, v, t, g=g: adam_step(p, m, v, t, g), donate_argnums=(0, 1, 2) if donated else ()
        )
        out.append(
            Program(
                f"GPT {name} Adam step" + ("" if donated else ", not donated"),
                "training",
                step,
                (state, state, state, tokens),
                feeds_back=3,
                about=f"{gpt_parameter_count(g) / 1e9:.2f}B parameters, width {g.d}, {g.layers} layers, "
                f"{BATCH} sequences of {g.seq}, f32, per-layer remat"
                + ("" if donated else ", state not donated"),
            )
        )
    return out


def arguments_for(program: Program, seed: int = 0) -> list:
    """Concrete arguments for any program, pytrees of parameters included."""
    leaves, tree = jax.tree.flatten(program.shapes)
    flat = Program(program.name, program.family, program.fn, tuple(leaves)).arguments(seed)
    return jax.tree.unflatten(tree, flat)


def all_programs() -> list[Program]:
    """Every recorded program, cheapest family first."""
    return matmuls() + memory_bound() + attentions() + training_steps()


def flops_of_matmul(program: Program) -> float:
    """2·M·K·N of a matmul program."""
    (m, k), (_, n) = program.shapes[0].shape, program.shapes[1].shape
    return 2.0 * m * k * n


def nbytes(tree: Any) -> int:
    """Bytes of the arrays (or shapes) in a pytree."""
    return sum(int(np.prod(x.shape)) * jnp.dtype(x.dtype).itemsize for x in jax.tree.leaves(tree))
