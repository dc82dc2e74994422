"""The one-chip programs recorded on a real TPU (``benchmarks/tpu_record.py``), in JAX and NumPy only.

They must build with the book's JAX and with a TPU image's own, older one (0.10.2 on the chip this
book was recorded on), so nothing here imports ``shardbook``, Flax or Optax: the GPT and its Adam
update are written out in plain JAX. Each :class:`Program` gives a jitted function, its abstract
arguments (``jax.ShapeDtypeStruct``: compiling them allocates nothing, so the same program can be
compiled for a TPU topology on a machine with no TPU, ``shardbook.compile_for_tpu``), a way to make
concrete arguments on the chip, and whether its outputs are fed back as its next inputs (a training
step that donates its state).

Families: matmuls at bf16 and at f32's default precision (one bf16 pass on a TPU) and at the other
precisions (:func:`precision_matmuls`), memory-bound
element-wise work, reductions and layout changes, attention written as two einsums and a softmax,
and f32 training steps of a GPT with Adam at three sizes (plus two that cannot fit one v5e chip, to
record the compiler's refusal, and one whose state is not donated, which the compiler accepts and the
chip cannot allocate). ``benchmarks/tpu_held_out.py`` gives programs the cost model is not fitted on,
recorded apart (``--set held_out``), and ``benchmarks/tpu_memory.py`` the steps it runs to see what
fits one chip.
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


def _repeat(f: Callable, times: int) -> Callable:
    def run(x):
        for _ in range(times):
            x = f(x)
        return x

    return run


#: element-wise functions the vector unit computes as a sequence of operations (range reduction, a
#: polynomial): each applied once and four times in a row on f32[16384,8192], to see which of them
#: outlast the HBM traffic of their kernel and by how much per element
VECTOR_FUNCTIONS = {
    "sin": jnp.sin,
    "cos": jnp.cos,
    "exp": lambda x: jnp.exp(-jnp.abs(x)),
    "tanh": jnp.tanh,
    "log": lambda x: jnp.log(jnp.abs(x) + 1.0),
    "erf": jax.scipy.special.erf,
}


def vector_unit() -> list[Program]:
    """Transcendental functions, once and four times in one kernel (f32, and a sine in bf16): what the
    vector unit costs beyond a kernel's HBM traffic (the cost model's rates for them)."""
    rows, cols = 16384, 8192
    out = []
    for name, f in VECTOR_FUNCTIONS.items():
        for times in (1, 4):
            label = f"{name} f32" if times == 1 else f"{name} x{times} f32"
            about = f"{name} on f32[{rows},{cols}]" + ("" if times == 1 else f", {times} times in a row")
            out.append(Program(label, "vector", jax.jit(_repeat(f, times)), (_sds((rows, cols), "float32"),),
                               about=about))  # fmt: skip
    out.append(Program("sin bf16", "vector", jax.jit(jnp.sin), (_sds((rows, cols), "bfloat16"),),
                       about=f"sin on bf16[{rows},{cols}]"))  # fmt: skip
    return out + vector_rates()


#: functions applied sixteen times in a row: long enough to outlast the kernel's HBM traffic
VECTOR_CHAINS = {
    "exp": lambda x: jnp.exp(-jnp.abs(x)),
    "tanh": jnp.tanh,
    "log": lambda x: jnp.log(jnp.abs(x) + 1.0),
    "logistic": jax.nn.sigmoid,
    "rsqrt": lambda x: jax.lax.rsqrt(jnp.abs(x) + 1.0),
    "divide": lambda x: (x + 1.5) / (x + 2.5),
}


def _polynomial(x):
    """Horner's rule, degree 32: 32 multiplies and 32 adds per element."""
    p = jnp.full_like(x, 0.5)
    for k in range(32):
        p = p * x + (1.0 / (k + 2))
    return p


def vector_rates() -> list[Program]:
    """The vector unit's other rates (recorded after the second held-out set): plain arithmetic (a
    degree-32 polynomial), exp, tanh, log, the logistic, rsqrt and a divide sixteen times in a row,
    and the three kernels of a rotary embedding on their own: every other lane of the last axis,
    two 64-lane halves joined, and a product with a [tokens, 64] table."""
    rows, cols = 16384, 8192
    f32 = _sds((rows, cols), "float32")
    out = [
        Program("polynomial f32", "vector", jax.jit(_polynomial), (f32,), about="degree 32, Horner"),
        Program("polynomial x4 f32", "vector", jax.jit(_repeat(_polynomial, 4)), (f32,),
                about="the degree-32 polynomial four times in a row: 256 ops a element"),
        Program("polynomial x4 bf16", "vector", jax.jit(_repeat(_polynomial, 4)),
                (_sds((rows, cols), "bfloat16"),), about="as above, bf16 in and out"),
    ]  # fmt: skip
    for name, f in VECTOR_CHAINS.items():
        out.append(Program(f"{name} x16 f32", "vector", jax.jit(_repeat(f, 16)), (f32,),
                           about=f"{name} on f32[{rows},{cols}], 16 times in a row"))  # fmt: skip
    quarter = _sds((32, 2048, 16, 64), "float32")
    out += [
        Program("every other lane f32", "layout", jax.jit(lambda x: x[..., ::2]),
                (_sds((32, 2048, 16, 128), "float32"),), about="x[..., ::2], 128 lanes to 64"),
        Program("join 64-lane halves f32", "layout", jax.jit(lambda a, b: jnp.concatenate([a, b], -1)),
                (quarter, quarter), about="two [..., 64] halves into [..., 128]"),
        Program("times a 64-lane table f32", "layout", jax.jit(lambda x, t: x * t[None, :, None, :]),
                (quarter, _sds((2048, 64), "float32")), about="[32, 2048, 16, 64] times [2048, 64]"),
    ]  # fmt: skip
    return out


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


def gpt_step(name: str, g: GPT, batch: int = BATCH, donated: bool = True, dtype: str = "float32") -> Program:
    """An Adam step of the GPT ``g`` on ``batch`` sequences, its state (parameters, m, v) of ``dtype``,
    donated (updated in place) or not."""
    state = jax.tree.map(lambda s: _sds(s, dtype), gpt_shapes(g), is_leaf=lambda x: isinstance(x, tuple))
    tokens = _sds((batch, g.seq + 1), "int32")
    step = jax.jit(
        lambda p, m, v, t, g=g: adam_step(p, m, v, t, g), donate_argnums=(0, 1, 2) if donated else ()
    )
    return Program(
        name,
        "training",
        step,
        (state, state, state, tokens),
        feeds_back=3,
        about=f"{gpt_parameter_count(g) / 1e9:.2f}B parameters, width {g.d}, {g.layers} layers, "
        f"{batch} sequences of {g.seq}, {dtype}, per-layer remat"
        + ("" if donated else ", state not donated"),
    )


def training_steps() -> list[Program]:
    """An f32 Adam step of each size in :data:`GPTS`, its state donated (updated in place), then the
    steps of :data:`NOT_DONATED`, whose state is not."""
    sizes = [(name, g, True) for name, g in GPTS.items()]
    sizes += [(name, g, False) for name, g in NOT_DONATED.items()]
    return [
        gpt_step(f"GPT {name} Adam step" + ("" if donated else ", not donated"), g, donated=donated)
        for name, g, donated in sizes
    ]


# ---------------------------------------------------------------------------------------------------
# matmuls at other precisions (fitted: their rates are read off them), and programs held out of the fit


#: the f32 precision settings recorded: JAX's levels, and the dot-algorithm presets they run as on a v5e
PRECISIONS = ("high", "highest", "BF16_BF16_F32", "BF16_BF16_F32_X3", "BF16_BF16_F32_X6")


def _precision(setting: str):
    if setting in ("default", "high", "highest"):
        return setting
    return getattr(jax.lax.DotAlgorithmPreset, setting)


def _dot_at(setting: str) -> Callable:
    precision = _precision(setting)
    return lambda a, b: jnp.dot(a, b, precision=precision, preferred_element_type=jnp.float32)


def precision_matmuls() -> list[Program]:
    """f32 square products at each of :data:`PRECISIONS`: the levels at 2048, 4096 and 8192, the presets
    at 4096 and 8192, timed back to back like every other program."""
    out = []
    for setting in PRECISIONS:
        sizes = (2048, 4096, 8192) if setting in ("high", "highest") else (4096, 8192)
        for n in sizes:
            out.append(
                Program(
                    f"matmul float32 {n} at {setting}",
                    "precision",
                    jax.jit(_dot_at(setting)),
                    (_sds((n, n), "float32"), _sds((n, n), "float32")),
                    about=f"f32[{n},{n}] @ f32[{n},{n}], precision={setting}",
                )
            )
    return out


def kernel_sharing() -> list[Program]:
    """What one kernel shares or pays for once per fetch (recorded with the fourth held-out set, before
    the rules read off them): a sine and a cosine of one array, a function applied to a matmul's
    operand inside its kernel (f32 and bf16, on the left and on the right), every other lane of a bf16
    array, a reciprocal sixteen times in a row, and an array written from almost nothing."""
    rows, cols = 16384, 8192
    f32 = _sds((rows, cols), "float32")
    left, right = ((4096, 16384), (16384, 4096))

    def matmul(label, fn, dtype):
        return Program(
            label,
            "vector",
            jax.jit(fn),
            (_sds(left, dtype), _sds(right, dtype)),
            about=f"{dtype}[4096,16384] @ [16384,4096], the function inside the matmul kernel",
        )

    return [
        Program("sine and cosine of one array f32", "vector", jax.jit(lambda x: (jnp.sin(x), jnp.cos(x))),
                (f32,), about="two outputs of one argument"),
        Program("every other lane bf16", "layout", jax.jit(lambda x: x[..., ::2]),
                (_sds((32, 2048, 16, 128), "bfloat16"),), about="x[..., ::2], 128 lanes to 64"),
        Program("reciprocal x16 f32", "vector", jax.jit(_repeat(lambda x: 1.0 / (jnp.abs(x) + 1.0), 16)),
                (f32,), about="1 / (|x| + 1), 16 times in a row"),
        Program("write a row broadcast f32", "memory",
                jax.jit(lambda r: jnp.broadcast_to(r, (rows, cols)) * 2), (_sds((cols,), "float32"),),
                about="537 MB written, 32 KB read"),
        matmul("sine into a matmul f32", lambda x, w: jnp.sin(x) @ w, "float32"),
        matmul("sine into a matmul bf16", lambda x, w: jnp.sin(x) @ w, "bfloat16"),
        matmul("polynomial into a matmul f32", lambda x, w: _polynomial(x) @ w, "float32"),
        matmul("sine into a matmul's right f32", lambda x, w: x @ jnp.sin(w), "float32"),
    ]  # fmt: skip


def program(name, family, fn, *shapes, about="", feeds_back=0, donate=()) -> Program:
    """A :class:`Program` of ``jax.jit(fn)`` (``donate``: the arguments it donates) on arguments of the
    given (shape, dtype) pairs."""
    sds = tuple(_sds(*s) for s in shapes)
    return Program(name, family, jax.jit(fn, donate_argnums=donate), sds, feeds_back, about)


def _one_hot_sums(labels, width: int = 32768):
    hits = jnp.arange(width)[None, :] == labels[:, None]
    return jnp.sum(jnp.where(hits, 0.5, 0.0) * jnp.arange(width, dtype=jnp.float32), -1)


def _scores(q, k):
    """Attention's scores q kᵀ per head: [batch, queries, heads, d] x [batch, keys, heads, d]."""
    return jnp.einsum("bqhd,bkhd->bhqk", q, k)


def _values(p, v):
    """Attention's second product p v per head: [batch, heads, queries, keys] x [batch, keys, heads, d]."""
    return jnp.einsum("bhqk,bkhd->bqhd", p, v)


def _one_hot_count(labels, width: int):
    """How many of each row's labels fall in [0, width): a sum of one-hot rows, never materialised."""
    return jnp.sum(jnp.where(labels[..., None] == jnp.arange(width), 1.0, 0.0), -1)


def _adam_after_matmul(p, m, v, h, d, lr=1e-3, b1=0.9, b2=0.95, eps=1e-8):
    g = h.T @ d
    m = b1 * m + (1 - b1) * g
    v = b2 * v + (1 - b2) * g * g
    return p - lr * m / (jnp.sqrt(v) + eps), m, v


def kernel_rates() -> list[Program]:
    """What kinds of kernel the per-kernel record (``benchmarks/tpu_kernels.py``) showed the model
    missing, each alone (recorded with the fifth held-out set, before the rules read off them): the
    scores of attention with heads of 256 and of 128, attention with heads of 256, matmul kernels that
    mostly write (an f32 outer product, a bf16 product written in f32), a one-hot sum that reads only
    its labels, and Adam's update inside the matmul that makes the gradient."""
    bf16, f32 = "bfloat16", "float32"

    prog = program
    wide = lambda a, b: jnp.dot(a, b, preferred_element_type=jnp.float32)  # noqa: E731
    return [
        prog("attention scores bf16, 8 heads of 256", "attention", _scores, ((8, 2048, 8, 256), bf16),
             ((8, 2048, 8, 256), bf16), about="q kᵀ alone: 512 MB written"),
        prog("attention scores bf16, 16 heads of 128", "attention", _scores, ((4, 2048, 16, 128), bf16),
             ((4, 2048, 16, 128), bf16), about="q kᵀ alone: 512 MB written"),
        prog("attention bfloat16 2048, 8 heads of 256", "attention", attention, ((8, 2048, 8, 256), bf16),
             ((8, 2048, 8, 256), bf16), ((8, 2048, 8, 256), bf16)),
        prog("outer product f32, 8192 x 128 x 8192", "matmul", jnp.matmul, ((8192, 128), f32),
             ((128, 8192), f32), about="268 MB written from 8 MB read"),
        prog("matmul bf16 written in f32, 8192 x 256 x 16384", "matmul", wide, ((8192, 256), bf16),
             ((256, 16384), bf16), about="537 MB of f32 written"),
        prog("one-hot sums over 32768, 8192 rows", "vector", _one_hot_sums, ((8192,), "int32"),
             about="reads 32 KB of labels"),
        prog("Adam update inside its gradient's matmul f32", "training", _adam_after_matmul,
             ((768, 50304), f32), ((768, 50304), f32), ((768, 50304), f32), ((8192, 768), f32),
             ((8192, 50304), f32), feeds_back=3, donate=(0, 1, 2),
             about="g = hᵀ d over 8192 rows, then Adam on p, m, v (donated)"),
    ]  # fmt: skip


def kernel_sweeps() -> list[Program]:
    """The three kinds of kernel that held-out round 5 and :func:`kernel_rates` show the model missing,
    each swept over one dimension, for the rules a next session reads off (recorded with the sixth
    held-out set, before any rule): matmul kernels that mostly write, over the contraction's length
    and the product's dtype; a weight's update inside its gradient's matmul, from none to Adam's; and
    one-hot sums over other widths and in the GPT step's three-dimensional form."""
    bf16, f32 = "bfloat16", "float32"
    prog = program
    wide = lambda a, b: jnp.dot(a, b, preferred_element_type=jnp.float32)  # noqa: E731
    # fmt: off
    outer = [
        prog(f"mostly writing bf16, 16384 x {k} x 16384", "matmul", jnp.matmul, ((16384, k), bf16),
             ((k, 16384), bf16), about=f"537 MB written, contraction {k}")
        for k in (128, 384, 512)
    ] + [
        prog(f"mostly writing f32 from bf16, 8192 x {k} x 16384", "matmul", wide, ((8192, k), bf16),
             ((k, 16384), bf16), about=f"537 MB of f32 written, contraction {k}")
        for k in (128, 512)
    ]
    state = [((1024, 16384), f32)]
    grads = ((8192, 1024), f32), ((8192, 16384), f32)
    update = [
        prog("gradient's matmul alone f32, 1024 x 16384", "training", lambda h, d: h.T @ d, *grads),
        prog("SGD inside its gradient's matmul f32, 1024 x 16384", "training",
             lambda p, h, d: p - 1e-3 * (h.T @ d), *state, *grads, feeds_back=1, donate=(0,)),
        prog("momentum inside its gradient's matmul f32, 1024 x 16384", "training",
             lambda p, m, h, d: _momentum(p, m, h.T @ d), *state * 2, *grads, feeds_back=2,
             donate=(0, 1)),
        prog("Adam inside its gradient's matmul f32, 1024 x 16384", "training",
             lambda p, m, v, h, d: _adam(p, m, v, h.T @ d), *state * 3, *grads, feeds_back=3,
             donate=(0, 1, 2)),
    ]
    hots = [
        prog("one-hot sums over 50304, 8192 rows", "vector", lambda t: _one_hot_count(t, 50304),
             ((8192,), "int32")),
        prog("one-hot sums over 65536, 8192 rows", "vector", lambda t: _one_hot_count(t, 65536),
             ((8192,), "int32")),
        prog("one-hot sums over 50304, 8 x 1024 rows", "vector", lambda t: _one_hot_count(t, 50304),
             ((8, 1024), "int32")),
    ]
    # fmt: on
    return outer + update + hots


def kernel_sweeps_second() -> list[Program]:
    """The kinds of kernel that held-out rounds 4 to 6 show the model still missing, swept for the rules a
    next session reads off (recorded with the seventh held-out set, before any rule): attention's two
    products over the heads' width (64 to 512) and the scores' length; an f32 MLP's matmuls in their
    three forms (forward, input gradient, weight gradient) with and without the update inside; weight
    gradients whose tiling re-reads their operands; an exact GELU in f32; one-hot sums into one
    dimension over widths that are and are not a power of two."""
    bf16, f32 = "bfloat16", "float32"
    prog = program
    # fmt: off
    heads = [
        prog(f"attention scores bf16, {h} heads of {d}, {t} long", "attention", _scores,
             ((b, t, h, d), bf16), ((b, t, h, d), bf16), about=f"q kᵀ alone, contraction {d}")
        for b, t, h, d in ((8, 2048, 8, 192), (8, 2048, 4, 512), (16, 1024, 8, 256), (4, 2048, 32, 64))
    ] + [
        prog(f"attention values bf16, {h} heads of {d}", "attention", _values, ((b, h, 2048, 2048), bf16),
             ((b, 2048, h, d), bf16), about=f"p v alone, {d} wide")
        for b, h, d in ((4, 8, 256), (4, 16, 128))
    ]
    x, w, h = ((8192, 6144), f32), ((6144, 6144), f32), ((8192, 6144), f32)
    mlp = [
        prog("matmul float32 8192 x 6144 x 6144", "matmul", jnp.matmul, x, w),
        prog("ReLU of a matmul f32, 8192 x 6144 x 6144", "matmul", lambda x, w: jax.nn.relu(x @ w), x, w),
        prog("input gradient through ReLU f32, 8192 x 6144 x 6144", "training",
             lambda d, w, h: jnp.where(h > 0, d @ w.T, 0.0), x, w, h),
        prog("gradient's matmul alone f32, 6144 x 6144, 8192 rows", "training", lambda h, d: h.T @ d, h, x),
        prog("SGD inside its gradient's matmul f32, 6144 x 6144, 8192 rows", "training",
             lambda p, h, d: p - 1e-3 * (h.T @ d), w, h, x, feeds_back=1, donate=(0,)),
    ]
    rereads = [
        prog(f"gradient's matmul alone f32, {m} x {n}, {r} rows", "training", lambda h, d: h.T @ d,
             ((r, m), f32), ((r, n), f32))
        for m, n, r in ((4096, 4096, 16384), (2048, 2048, 16384))
    ] + [
        prog(f"SGD inside its gradient's matmul f32, {m} x {n}, {r} rows", "training",
             lambda p, h, d: p - 1e-3 * (h.T @ d), ((m, n), f32), ((r, m), f32), ((r, n), f32),
             feeds_back=1, donate=(0,))
        for m, n, r in ((4096, 4096, 8192), (2048, 2048, 16384))
    ]
    gelu = [prog("exact GELU f32, 8192 x 8192", "vector", lambda x: jax.nn.gelu(x, approximate=False),
                 ((8192, 8192), f32))]
    hots = [
        prog(f"one-hot sums over {n}, 8192 rows", "vector", functools.partial(_one_hot_count, width=n),
             ((8192,), "int32"))
        for n in (16000, 32000, 49152, 50432)
    ]
    # fmt: on
    return heads + mlp + rereads + gelu + hots


def kernel_sweeps_third() -> list[Program]:
    """What held-out round 7 and :func:`kernel_sweeps_second` left unexplained, swept for the rules a
    next session reads off (recorded with the eighth held-out set, before any rule): attention's
    products with 256- and 384-wide heads over the ratio of their writes (or reads) to their MXU work;
    erfc and an exact GELU in f32; one-hot sums over the widths whose tilings the fitted ones do not
    share; SGD inside a gradient's matmul of other shapes and in bf16, beside its gradient alone."""
    bf16, f32 = "bfloat16", "float32"
    prog = program
    sgd = lambda p, h, d: p - 1e-3 * (h.T @ d)  # noqa: E731
    # fmt: off
    heads = [
        prog(f"attention scores bf16, {h} heads of {d}, batch {b}", "attention", _scores,
             ((b, t, h, d), bf16), ((b, t, h, d), bf16), about=f"q kᵀ alone, {t} long")
        for b, t, h, d in ((4, 2048, 8, 256), (8, 2048, 4, 384))
    ] + [
        prog(f"attention values bf16, 8 heads of 256, {t} keys", "attention", _values,
             ((b, 8, t, t), bf16), ((b, t, 8, 256), bf16), about=f"p v alone, batch {b}")
        for b, t in ((16, 1024), (2, 4096))
    ]
    erfs = [
        prog("erfc f32, 8192 x 8192", "vector", jax.scipy.special.erfc, ((8192, 8192), f32)),
        prog("exact GELU f32, 8192 x 16384", "vector", lambda x: jax.nn.gelu(x, approximate=False),
             ((8192, 16384), f32)),
    ]
    hots = [
        prog(f"one-hot sums over {n} into one dimension", "vector",
             functools.partial(_one_hot_count, width=n), ((8192,), "int32"), about="8192 rows")
        for n in (8000, 12000, 20000, 24000)
    ] + [
        prog("one-hot sums over 40000 into two dimensions", "vector",
             functools.partial(_one_hot_count, width=40000), ((2, 4096), "int32"), about="2 x 4096 rows"),
    ]
    updates = [
        prog("SGD inside its gradient's matmul f32, 2048 by 8192 from 8192 rows", "training", sgd,
             ((2048, 8192), f32), ((8192, 2048), f32), ((8192, 8192), f32), feeds_back=1, donate=(0,)),
        prog("SGD inside its gradient's matmul bf16, 4096 by 4096 from 8192 rows", "training", sgd,
             ((4096, 4096), bf16), ((8192, 4096), bf16), ((8192, 4096), bf16), feeds_back=1,
             donate=(0,)),
        prog("gradient's matmul alone bf16, 4096 by 4096 from 8192 rows", "training",
             lambda h, d: h.T @ d, ((8192, 4096), bf16), ((8192, 4096), bf16)),
    ]
    # fmt: on
    return heads + erfs + hots + updates


def kernel_sweeps_fourth() -> list[Program]:
    """Weights updated inside their f32 gradients' matmuls, the family whose kernels the model's
    count of fetches seemed to put past the HBM's peak (the recorder's fault, found with these:
    ``benchmarks/pending/README.md``), varied one thing at
    a time from "SGD inside its gradient's matmul f32, 4096 x 4096" (recorded with the ninth held-out
    set, before any rule): not donated, returning the gradient too, momentum instead of SGD, a plain
    product instead of a transposed one, twice the rows, another shape."""
    f32 = "float32"
    prog = program
    sgd = lambda p, h, d: p - 1e-3 * (h.T @ d)  # noqa: E731
    square, rows = ((4096, 4096), f32), ((16384, 4096), f32)
    # fmt: off
    return [
        prog("SGD inside its gradient's matmul f32 not donated, 4096 by 4096 from 16384 rows", "training",
             sgd, square, rows, rows),
        prog("SGD inside its gradient's matmul f32 returning it, 4096 by 4096 from 16384 rows", "training",
             lambda p, h, d: (p - 1e-3 * (g := h.T @ d), g), square, rows, rows, feeds_back=1,
             donate=(0,)),
        prog("SGD inside a plain matmul f32, 4096 by 4096 from 16384", "training",
             lambda p, a, b: p - 1e-3 * (a @ b), square, ((4096, 16384), f32), ((16384, 4096), f32),
             feeds_back=1, donate=(0,)),
        prog("SGD inside its gradient's matmul f32, 4096 by 4096 from 32768 rows", "training", sgd,
             square, ((32768, 4096), f32), ((32768, 4096), f32), feeds_back=1, donate=(0,)),
        prog("SGD inside its gradient's matmul f32, 8192 by 2048 from 8192 rows", "training", sgd,
             ((8192, 2048), f32), ((8192, 8192), f32), ((8192, 2048), f32), feeds_back=1, donate=(0,)),
        prog("momentum inside its gradient's matmul f32, 6144 by 6144 from 8192 rows", "training",
             lambda p, m, h, d: _momentum(p, m, h.T @ d), ((6144, 6144), f32), ((6144, 6144), f32),
             ((8192, 6144), f32), ((8192, 6144), f32), feeds_back=2, donate=(0, 1)),
        prog("gradient's matmul alone f32, 4096 by 4096 from 32768 rows", "training",
             lambda h, d: h.T @ d, ((32768, 4096), f32), ((32768, 4096), f32)),
    ]
    # fmt: on


def _shift_toward(x, c):
    """Each element moved c toward zero or, past c, away from it: a compare and a select over a
    subtract and an add."""
    return jnp.where(x > c, x - c, x + c)


def _picked_product(x, c):
    """A compare and a select over two multiplies."""
    return jnp.where(x > c, x * 0.75, x * 1.25)


def kernel_sweeps_fifth() -> list[Program]:
    """What makes an exact GELU in f32 cheaper on the chip than the model says (every one of them 8 to
    11% over, in the fitted record and in five held-out rounds): its erfc's compares and selects, and
    its two divides, each in a chain of its own on f32[16384,8192], and the GELU four times in a row
    (recorded with the eleventh held-out set, before any rule)."""
    f32 = ((16384, 8192), "float32")
    prog = program

    def chain(step, n):
        def run(x):
            for i in range(n):
                x = step(x, 0.01 * (i + 1))
            return x

        return run

    def divides(x):
        return sum(x / (x + float(i + 2)) for i in range(8))

    # fmt: off
    return [
        prog("compare and select over add and subtract x32 f32", "vector", chain(_shift_toward, 32), f32,
             about="where(x > c, x - c, x + c), 32 times: 64 arithmetic ops, 64 compares and selects"),
        prog("compare and select over two multiplies x32 f32", "vector", chain(_picked_product, 32), f32,
             about="where(x > c, 0.75 x, 1.25 x), 32 times"),
        prog("add and subtract x32 f32", "vector", chain(lambda x, c: (x - c) * 0.5 + c, 32), f32,
             about="(x - c) * 0.5 + c, 32 times: the arithmetic alone"),
        prog("eight independent divides f32", "vector", divides, f32,
             about="the sum of x / (x + k) for k = 2 to 9: 8 divides side by side"),
        prog("exact GELU x4 f32", "vector", _repeat(lambda x: jax.nn.gelu(x, approximate=False), 4), f32,
             about="four exact GELUs in a row"),
    ]
    # fmt: on


def kernel_sweeps_sixth() -> list[Program]:
    """Layer norms whose input the compiler copies into VMEM before its reductions (round 11's bf16 one,
    64 MiB, took 42% longer than the model said), and one-hot sums into one dimension whose grid splits
    the sum (recorded with the twelfth held-out set, before any rule read off them)."""
    prog = program
    # fmt: off
    norms = [prog(f"layer norm {dt} {rows} x 2048", "memory", _layernorm, ((rows, 2048), dt), ((2048,), dt))
             for dt, rows in (("bfloat16", 4096), ("bfloat16", 8192), ("bfloat16", 32768),
                              ("float32", 4096), ("float32", 8192))]
    sums = [prog(f"one-hot sums over {n} into one dimension, a sweep", "vector",
                 lambda t, n=n: jnp.sum(jnp.where(t[:, None] == jnp.arange(n), 1.0, 0.0), -1),
                 ((8192,), "int32"), about="8192 rows") for n in (26000, 38000, 48000)]
    # fmt: on
    return norms + sums


def _momentum(p, m, g, lr=1e-3, beta=0.9):
    m = beta * m + g
    return p - lr * m, m


def _adam(p, m, v, g, lr=1e-3, b1=0.9, b2=0.95, eps=1e-8):
    m = b1 * m + (1 - b1) * g
    v = b2 * v + (1 - b2) * g * g
    return p - lr * m / (jnp.sqrt(v) + eps), m, v


def arguments_for(program: Program, seed: int = 0) -> list:
    """Concrete arguments for any program, pytrees of parameters included."""
    leaves, tree = jax.tree.flatten(program.shapes)
    flat = Program(program.name, program.family, program.fn, tuple(leaves)).arguments(seed)
    return jax.tree.unflatten(tree, flat)


def all_programs() -> list[Program]:
    """Every program of the fitted record (``shardbook/data/tpu_v5e.json``), cheapest family first, and
    :func:`kernel_rates` and :func:`kernel_sweeps`, recorded and waiting in ``benchmarks/pending/``
    for the rules read off them."""
    return (
        matmuls() + memory_bound() + vector_unit() + attentions() + training_steps()
        + precision_matmuls() + kernel_sharing() + kernel_rates() + kernel_sweeps() + kernel_sweeps_second()
        + kernel_sweeps_third() + kernel_sweeps_fourth() + kernel_sweeps_fifth() + kernel_sweeps_sixth()
    )  # fmt: skip


def fed_back(programs: list[Program]) -> list[Program]:
    """The programs of ``programs`` whose result is one array that feeds back as their next call's first
    argument (a weight updated inside its gradient's matmul)."""
    return [
        p for p in programs if p.feeds_back and not isinstance(jax.eval_shape(p.fn, *p.shapes), (tuple, list))
    ]


def flops_of_matmul(program: Program) -> float:
    """2·M·K·N of a matmul program."""
    (m, k), (_, n) = program.shapes[0].shape, program.shapes[1].shape
    return 2.0 * m * k * n


def nbytes(tree: Any) -> int:
    """Bytes of the arrays (or shapes) in a pytree."""
    return sum(int(np.prod(x.shape)) * jnp.dtype(x.dtype).itemsize for x in jax.tree.leaves(tree))
