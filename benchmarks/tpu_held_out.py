"""The one-chip programs held out of the cost model's fit (``benchmarks/tpu_record.py --set held_out``,
``held_out_2`` to ``held_out_12``; rounds 13 on, written around attention's kernels, are in
:mod:`benchmarks.tpu_held_out_attention`): each round written, and recorded on the chip, before the rules it
tests, and merged into ``shardbook/data/tpu_v5e_held_out.json`` with its ``round``. JAX and NumPy only,
like ``benchmarks/tpu_programs.py``, whose :class:`Program` and pieces (a GPT step, attention) they use.
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp

from benchmarks.tpu_programs import (
    GPT,
    GPTS,
    Program,
    _adam,
    _dot_at,
    _layernorm,
    _momentum,
    _sds,
    attention,
    gpt_step,
    program,
)


def _mlp_forward(x, w1, w2):
    return jax.nn.gelu(x @ w1) @ w2


def _mlp_loss(params, x, y):
    h = x
    for w in params[:-1]:
        h = jax.nn.relu(h @ w)
    return jnp.mean((h @ params[-1] - y) ** 2)


def _mlp_sgd_step(params, x, y):
    loss, grads = jax.value_and_grad(_mlp_loss)(params, x, y)
    return [p - 1e-3 * g for p, g in zip(params, grads, strict=True)], loss


def _mlp_step(name: str, width: int, rows: int) -> Program:
    """The donated f32 SGD step of a ReLU MLP ``width -> width -> width -> width / 4`` on ``rows`` rows."""
    f32 = "float32"
    params = [_sds((width, width), f32), _sds((width, width), f32), _sds((width, width // 4), f32)]
    return Program(
        name,
        "mlp",
        jax.jit(_mlp_sgd_step, donate_argnums=(0,)),
        (params, _sds((rows, width), f32), _sds((rows, width // 4), f32)),
        feeds_back=1,
        about=f"{width} -> {width} -> {width} -> {width // 4}, {rows} rows, ReLU, MSE, SGD, donated",
    )


def _cross_entropy(logits, labels):
    logp = jax.nn.log_softmax(logits.astype(jnp.float32), -1)
    return -jnp.take_along_axis(logp, labels[:, None], -1).mean()


def _chain(x, y):
    return jnp.tanh(x) * y + jnp.exp(-x * x) - 0.5 * jnp.sin(y)


def _highest(fn: Callable) -> Callable:
    def run(*args):
        with jax.default_matmul_precision("highest"):
            return fn(*args)

    return run


def held_out() -> list[Program]:
    """Programs the model was not fitted on (no constant of :data:`shardbook.cost.V5E_MEASURED` is read
    off them): other shapes, dtypes and precisions, an MLP, a cross-entropy, an element-wise chain, GPT
    steps of other shapes and a bf16 one. ``python -m benchmarks.tpu_record --set held_out`` records
    them."""

    def prog(name, family, fn, *shapes, about="", feeds_back=0, donate=()):
        sds = tuple(_sds(*s) if isinstance(s[0], tuple) else s for s in shapes)
        return Program(name, family, jax.jit(fn, donate_argnums=donate), sds, feeds_back, about)

    f32, bf16 = "float32", "bfloat16"
    mlp = [_sds((4096, 4096), f32), _sds((4096, 4096), f32), _sds((4096, 1024), f32)]
    return [
        prog(
            "matmul float32 6144 at highest",
            "matmul",
            _dot_at("highest"),
            ((6144, 6144), f32),
            ((6144, 6144), f32),
            about="f32[6144,6144] @ f32[6144,6144], six bf16 passes",
        ),
        prog(
            "matmul float32 3072x8192x2048 at high",
            "matmul",
            _dot_at("high"),
            ((3072, 8192), f32),
            ((8192, 2048), f32),
            about="three bf16 passes, a rectangular product",
        ),
        prog(
            "matmul bfloat16 16384x4096x4096",
            "matmul",
            jnp.matmul,
            ((16384, 4096), bf16),
            ((4096, 4096), bf16),
            about="a tall product",
        ),
        prog(
            "matmul bfloat16 2048x16384x2048",
            "matmul",
            jnp.matmul,
            ((2048, 16384), bf16),
            ((16384, 2048), bf16),
            about="a long contraction",
        ),
        prog(
            "matmul float32 6144",
            "matmul",
            jnp.matmul,
            ((6144, 6144), f32),
            ((6144, 6144), f32),
            about="f32 at the default precision, a size not fitted",
        ),
        prog(
            "batched matmul bfloat16",
            "matmul",
            lambda a, b: jnp.einsum("bij,bjk->bik", a, b),
            ((32, 1024, 2048), bf16),
            ((32, 2048, 1024), bf16),
            about="32 products of 1024x2048x1024",
        ),
        prog(
            "MLP forward bfloat16",
            "mlp",
            _mlp_forward,
            ((8192, 2048), bf16),
            ((2048, 8192), bf16),
            ((8192, 2048), bf16),
            about="gelu(x W1) W2, 8192 rows, 2048 -> 8192 -> 2048",
        ),
        prog(
            "MLP forward float32 at highest",
            "mlp",
            _highest(_mlp_forward),
            ((4096, 2048), f32),
            ((2048, 8192), f32),
            ((8192, 2048), f32),
            about="as above in f32, precision highest",
        ),
        Program(
            "MLP SGD step float32",
            "mlp",
            jax.jit(_mlp_sgd_step, donate_argnums=(0,)),
            (mlp, _sds((2048, 4096), f32), _sds((2048, 1024), f32)),
            feeds_back=1,
            about="three ReLU layers 4096 -> 4096 -> 4096 -> 1024, 2048 rows, MSE, SGD, donated",
        ),
        prog(
            "cross-entropy float32",
            "memory",
            jax.value_and_grad(_cross_entropy),
            ((8192, 50304), f32),
            ((8192,), "int32"),
            about="loss and its gradient over 50,304 logits",
        ),
        prog(
            "element-wise chain f32",
            "memory",
            _chain,
            ((16384, 8192), f32),
            ((16384, 8192), f32),
            about="tanh, exp, sin, products: one fused kernel",
        ),
        prog(
            "softmax bf16",
            "memory",
            lambda x: jax.nn.softmax(x, -1),
            ((16384, 8192), bf16),
            about="over the last axis, bf16",
        ),
        prog(
            "attention bfloat16 512",
            "attention",
            attention,
            ((32, 512, 16, 128), bf16),
            ((32, 512, 16, 128), bf16),
            ((32, 512, 16, 128), bf16),
            about="batch 32, 512 tokens",
        ),
        gpt_step("GPT 0.16B Adam step, batch 16", GPTS["0.16B"], batch=16),
        gpt_step("GPT width 1024 seq 2048 Adam step", GPT(50304, 1024, 16, 4096, 8, 2048), batch=4),
        gpt_step("GPT width 512 seq 512 Adam step", GPT(50304, 512, 8, 2048, 6, 512), batch=32),
        gpt_step("GPT 0.16B Adam step, bfloat16", GPTS["0.16B"], dtype="bfloat16"),
    ]


def _rotary(x):
    """Rotary position embedding of x [batch, tokens, heads, head_dim]: the angles' sine and cosine
    computed in the program, as a model does."""
    t, d = x.shape[1], x.shape[-1]
    inverse = 1.0 / (10000.0 ** (jnp.arange(0, d, 2, dtype=jnp.float32) / d))
    angles = jnp.arange(t, dtype=jnp.float32)[:, None] * inverse[None, :]
    cos, sin = jnp.cos(angles)[None, :, None, :], jnp.sin(angles)[None, :, None, :]
    x1, x2 = x[..., ::2], x[..., 1::2]
    return jnp.concatenate([x1 * cos - x2 * sin, x1 * sin + x2 * cos], -1)


def held_out_second() -> list[Program]:
    """A second set held out of the fit, written and recorded after the model's tiling rule and its
    sine, cosine and erf rates (``--set held_out_2``, merged into the held-out record with ``round: 2``): f32
    matmuls whose tiling re-reads their operands, transcendental functions in other mixes and dtypes,
    a rotary embedding, a wide f32 MLP step and a GPT step of longer sequences."""

    def prog(name, family, fn, *shapes, about=""):
        return Program(name, family, jax.jit(fn), tuple(_sds(*s) for s in shapes), about=about)

    f32, bf16 = "float32", "bfloat16"
    big = (16384, 8192)
    products = [
        ("matmul float32 5120", (5120, 5120), (5120, 5120), f32),
        ("matmul float32 7168", (7168, 7168), (7168, 7168), f32),
        ("matmul float32 10240", (10240, 10240), (10240, 10240), f32),
        ("matmul float32 8192x2048x8192", (8192, 2048), (2048, 8192), f32),
        ("matmul float32 4096x16384x4096", (4096, 16384), (16384, 4096), f32),
        ("matmul bfloat16 12288", (12288, 12288), (12288, 12288), bf16),
    ]
    wide = [_sds((8192, 8192), f32), _sds((8192, 8192), f32), _sds((8192, 2048), f32)]
    return [
        *(prog(n, "matmul", jnp.matmul, (a, t), (b, t), about="default precision")
          for n, a, b, t in products),
        prog("matmul float32 8192x8192x2048 at high", "matmul", _dot_at("high"), ((8192, 8192), f32),
             ((8192, 2048), f32), about="three bf16 passes"),
        prog("sin times cos f32", "vector", lambda x, y: jnp.sin(x) * jnp.cos(y), (big, f32), (big, f32)),
        prog("exact GELU f32", "vector", lambda x: jax.nn.gelu(x, approximate=False), (big, f32),
             about="with erf"),
        prog("exact GELU bf16", "vector", lambda x: jax.nn.gelu(x, approximate=False), (big, bf16)),
        prog("log-sum-exp rows f32", "memory", lambda x: jax.nn.logsumexp(x, -1), (big, f32)),
        prog("tanh then log f32", "vector", lambda x: jnp.log(jnp.tanh(x) + 2.0), (big, f32)),
        prog("rotary embedding f32", "vector", _rotary, ((32, 2048, 16, 128), f32),
             about="sine and cosine of the angles, then the rotation"),
        Program("MLP SGD step float32, width 8192", "mlp", jax.jit(_mlp_sgd_step, donate_argnums=(0,)),
                (wide, _sds((4096, 8192), f32), _sds((4096, 2048), f32)), feeds_back=1,
                about="8192 -> 8192 -> 8192 -> 2048, 4096 rows, ReLU, MSE, SGD, donated"),
        gpt_step("GPT 0.16B Adam step, 2048 tokens", GPT(50304, 768, 12, 3072, 12, 2048), batch=8),
    ]  # fmt: skip


def _rotate_halves(x):
    """Rotary embedding in the rotate-half form (GPT-NeoX): the two halves of the last axis, not its
    even and odd lanes."""
    t, d = x.shape[1], x.shape[-1]
    inverse = 1.0 / (10000.0 ** (jnp.arange(0, d, 2, dtype=jnp.float32) / d))
    angles = jnp.arange(t, dtype=jnp.float32)[:, None] * inverse[None, :]
    angles = jnp.concatenate([angles, angles], -1)
    cos, sin = jnp.cos(angles)[None, :, None, :], jnp.sin(angles)[None, :, None, :]
    x1, x2 = x[..., : d // 2], x[..., d // 2 :]
    return (x * cos + jnp.concatenate([-x2, x1], -1) * sin).astype(x.dtype)


def _swiglu(x, w1, w3, w2):
    return (jax.nn.silu(x @ w1) * (x @ w3)) @ w2


def _rms_norm(x, w):
    x32 = x.astype(jnp.float32)
    return (x32 * jax.lax.rsqrt((x32 * x32).mean(-1, keepdims=True) + 1e-6) * w).astype(x.dtype)


def _sinusoids(positions, inverse):
    angles = positions[:, None] * inverse[None, :]
    return jnp.concatenate([jnp.sin(angles), jnp.cos(angles)], -1)


def held_out_third() -> list[Program]:
    """A third set held out of the fit, written before the vector unit's other rates
    (:func:`vector_rates`) were recorded and opened after the model's rules for them were written
    (``--set held_out_3``, merged into the held-out record with ``round: 3``): a model's pieces in the
    form they take in today's transformers."""

    def prog(name, family, fn, *shapes, about=""):
        return Program(name, family, jax.jit(fn), tuple(_sds(*s) for s in shapes), about=about)

    f32, bf16 = "float32", "bfloat16"
    big = (16384, 8192)
    heads = (32, 2048, 16, 128)
    return [
        prog("SwiGLU MLP forward bfloat16", "mlp", _swiglu, ((8192, 2048), bf16), ((2048, 5632), bf16),
             ((2048, 5632), bf16), ((5632, 2048), bf16), about="silu(x W1) * (x W3) W2"),
        prog("MLP forward float32, exact GELU", "mlp",
             lambda x, w1, w2: jax.nn.gelu(x @ w1, approximate=False) @ w2,
             ((4096, 4096), f32), ((4096, 16384), f32), ((16384, 4096), f32)),
        prog("rotary embedding bf16", "vector", _rotary, ((16, 4096, 8, 128), bf16),
             about="even and odd lanes, bf16 in"),
        prog("rotary embedding, rotate-half f32", "vector", _rotate_halves, (heads, f32)),
        prog("softplus f32", "vector", jax.nn.softplus, (big, f32)),
        prog("sigmoid gate f32", "vector", lambda x, y: x * jax.nn.sigmoid(y), (big, f32), (big, f32)),
        prog("RMSNorm bf16", "memory", _rms_norm, (big, bf16), ((8192,), f32)),
        prog("layernorm bf16", "memory", _layernorm, (big, bf16), ((8192,), bf16)),
        prog("sinusoidal table f32", "vector", _sinusoids, ((16384,), f32), ((4096,), f32),
             about="sin and cos of [16384, 4096] angles"),
        prog("cross-entropy bfloat16 logits", "memory", jax.value_and_grad(_cross_entropy),
             ((8192, 32000), bf16), ((8192,), "int32")),
        prog("matmul float32 6144x12288x3072", "matmul", jnp.matmul, ((6144, 12288), f32),
             ((12288, 3072), f32), about="default precision"),
        prog("matmul float32 12288x4096x4096 at high", "matmul", _dot_at("high"), ((12288, 4096), f32),
             ((4096, 4096), f32)),
        prog("attention bfloat16 2048, 32 heads of 64", "attention", attention,
             ((8, 2048, 32, 64), bf16), ((8, 2048, 32, 64), bf16), ((8, 2048, 32, 64), bf16)),
        gpt_step("GPT 0.16B Adam step, 4096 tokens", GPT(50304, 768, 12, 3072, 12, 4096), batch=2),
    ]  # fmt: skip


def held_out_fourth() -> list[Program]:
    """A fourth set held out of the fit, written and recorded before the rules of
    :func:`kernel_sharing` (``--set held_out_4``, merged into the held-out record with ``round: 4``):
    element-wise work inside matmul kernels, sines and cosines together, bf16 lane gathers, writes,
    and a model's pieces at other shapes and dtypes."""

    def prog(name, family, fn, *shapes, about=""):
        return Program(name, family, jax.jit(fn), tuple(_sds(*s) for s in shapes), about=about)

    f32, bf16 = "float32", "bfloat16"
    return [
        prog("MLP forward float32, tanh GELU, width 8192", "mlp", _mlp_forward, ((8192, 2048), f32),
             ((2048, 8192), f32), ((8192, 2048), f32)),
        prog("MLP forward bfloat16, exact GELU", "mlp",
             lambda x, w1, w2: jax.nn.gelu(x @ w1, approximate=False) @ w2,
             ((4096, 4096), bf16), ((4096, 16384), bf16), ((16384, 4096), bf16)),
        prog("SwiGLU MLP forward float32", "mlp", _swiglu, ((4096, 2048), f32), ((2048, 5632), f32),
             ((2048, 5632), f32), ((5632, 2048), f32)),
        prog("sinusoidal table f32, 32768 x 1024", "vector", _sinusoids, ((32768,), f32), ((1024,), f32)),
        prog("rotary embedding bf16, 16 heads", "vector", _rotary, ((32, 2048, 16, 128), bf16)),
        prog("even and odd lanes f32", "layout", lambda x: x[..., ::2] * x[..., 1::2],
             ((16, 4096, 8, 256), f32), about="the two halves of each pair, multiplied"),
        prog("cross-entropy float32 logits, 50304", "memory", jax.value_and_grad(_cross_entropy),
             ((4096, 50304), f32), ((4096,), "int32")),
        prog("softmax bf16 to f32", "memory", lambda x: jax.nn.softmax(x.astype(jnp.float32), -1),
             ((16384, 8192), bf16)),
        prog("layernorm f32, 4096 wide", "memory", _layernorm, ((32768, 4096), f32), ((4096,), f32)),
        prog("attention bfloat16 1024, 8 heads of 256", "attention", attention,
             ((16, 1024, 8, 256), bf16), ((16, 1024, 8, 256), bf16), ((16, 1024, 8, 256), bf16)),
        prog("matmul bfloat16 3000x5000x7000", "matmul", jnp.matmul, ((3000, 5000), bf16),
             ((5000, 7000), bf16), about="no side a multiple of 128"),
        prog("matmul float32 4096x8192x4096 at highest", "matmul", _dot_at("highest"),
             ((4096, 8192), f32), ((8192, 4096), f32)),
        Program("MLP SGD step bfloat16, width 4096", "mlp", jax.jit(_mlp_sgd_step, donate_argnums=(0,)),
                ([_sds((4096, 4096), bf16)] * 2 + [_sds((4096, 1024), bf16)], _sds((8192, 4096), bf16),
                 _sds((8192, 1024), bf16)), feeds_back=1,
                about="4096 -> 4096 -> 4096 -> 1024, 8192 rows, ReLU, MSE, SGD, donated"),
        gpt_step("GPT width 1024, 16 layers, bfloat16", GPT(50304, 1024, 16, 4096, 16, 1024),
                 batch=8, dtype="bfloat16"),
    ]  # fmt: skip


def held_out_fifth() -> list[Program]:
    """A fifth set held out of the fit, written and recorded before the rules of
    :func:`benchmarks.tpu_programs.kernel_rates` and the per-kernel record (``--set held_out_5``, merged
    into the held-out record with ``round: 5``): attention with other heads and dtypes, a one-hot's
    gradient in a cross-entropy, Adam's update after its matmul, a wide MLP step, element-wise work
    and norms of other shapes, matmuls that mostly write, and a GPT step of another shape."""

    prog = program
    f32, bf16 = "float32", "bfloat16"
    qkv = lambda shape, dtype: [(shape, dtype)] * 3  # noqa: E731
    mlp = [(shape, f32) for shape in ((6144, 6144), (6144, 6144), (6144, 1536))]
    return [
        prog("attention bfloat16 2048, 8 heads of 128", "attention", attention,
             *qkv((8, 2048, 8, 128), bf16)),
        prog("attention bfloat16 512, 4 heads of 256", "attention", attention, *qkv((32, 512, 4, 256), bf16)),
        prog("attention float32 1024, 16 heads of 64", "attention", attention, *qkv((8, 1024, 16, 64), f32)),
        prog("cross-entropy bfloat16 logits, 50304, 8192 rows", "memory", jax.value_and_grad(_cross_entropy),
             ((8192, 50304), bf16), ((8192,), "int32")),
        prog("Adam update after a matmul f32, 2048 x 8192", "training",
             lambda p, m, v, h, d: _adam_after(p, m, v, h.T @ d), ((2048, 8192), f32), ((2048, 8192), f32),
             ((2048, 8192), f32), ((8192, 2048), f32), ((8192, 8192), f32), feeds_back=3, donate=(0, 1, 2)),
        Program("MLP SGD step float32, width 6144", "mlp", jax.jit(_mlp_sgd_step, donate_argnums=(0,)),
                ([_sds(*s) for s in mlp], _sds((4096, 6144), f32), _sds((4096, 1536), f32)), feeds_back=1,
                about="6144 -> 6144 -> 6144 -> 1536, 4096 rows, ReLU, MSE, SGD, donated"),
        prog("exact GELU f32, 16384 x 16384", "vector", lambda x: jax.nn.gelu(x, approximate=False),
             ((16384, 16384), f32)),
        prog("layernorm bf16, 2048 wide", "memory", _layernorm, ((65536, 2048), bf16), ((2048,), bf16)),
        prog("logsumexp bf16, 8192 wide", "memory", lambda x: jax.nn.logsumexp(x, -1),
             ((32768, 8192), bf16)),
        prog("matmul float32 2048x16384x2048", "matmul", jnp.matmul, ((2048, 16384), f32),
             ((16384, 2048), f32)),
        prog("matmul bf16 written in f32, 8192 x 1024 x 8192", "matmul",
             lambda a, b: jnp.dot(a, b, preferred_element_type=jnp.float32), ((8192, 1024), bf16),
             ((1024, 8192), bf16)),
        prog("outer product bf16, 16384 x 256 x 16384", "matmul", jnp.matmul, ((16384, 256), bf16),
             ((256, 16384), bf16), about="537 MB written"),
        gpt_step("GPT width 640, 10 layers, 2048 tokens", GPT(50304, 640, 10, 2560, 10, 2048), batch=4),
    ]  # fmt: skip


def held_out_sixth() -> list[Program]:
    """A sixth set held out of the fit, written and recorded before any rule read off
    :func:`benchmarks.tpu_programs.kernel_sweeps` (``--set held_out_6``, its times kept sealed until
    those rules are committed): matmul kernels that mostly write, weights updated inside their
    gradients' matmuls, one-hot sums, and a model's pieces of other shapes."""

    prog = program
    f32, bf16 = "float32", "bfloat16"
    mlp = [(shape, f32) for shape in ((4096, 4096), (4096, 4096), (4096, 1024))]
    return [
        prog("outer product f32, 16384 x 256 x 8192", "matmul", jnp.matmul, ((16384, 256), f32),
             ((256, 8192), f32), about="537 MB written"),
        prog("outer product bf16, 12288 x 192 x 12288", "matmul", jnp.matmul, ((12288, 192), bf16),
             ((192, 12288), bf16), about="302 MB written"),
        prog("SGD inside its gradient's matmul f32, 4096 x 4096", "training",
             lambda p, h, d: p - 1e-3 * (h.T @ d), ((4096, 4096), f32), ((16384, 4096), f32),
             ((16384, 4096), f32), feeds_back=1, donate=(0,)),
        prog("Adam inside its gradient's matmul f32, 2048 x 16384", "training",
             lambda p, m, v, h, d: _adam(p, m, v, h.T @ d), *[((2048, 16384), f32)] * 3,
             ((4096, 2048), f32), ((4096, 16384), f32), feeds_back=3, donate=(0, 1, 2)),
        prog("one-hot sums over 32000, 16384 rows", "vector",
             lambda t: jnp.sum(jnp.where(t[:, None] == jnp.arange(32000), 1.0, 0.0), -1),
             ((16384,), "int32")),
        Program("MLP SGD step float32, width 4096", "mlp", jax.jit(_mlp_sgd_step, donate_argnums=(0,)),
                ([_sds(*s) for s in mlp], _sds((8192, 4096), f32), _sds((8192, 1024), f32)), feeds_back=1,
                about="4096 -> 4096 -> 4096 -> 1024, 8192 rows, ReLU, MSE, SGD, donated"),
        prog("attention bfloat16 4096, 8 heads of 256", "attention", attention,
             *[((2, 4096, 8, 256), bf16)] * 3),
        prog("cross-entropy float32 logits, 32000, 16384 rows", "memory",
             jax.value_and_grad(_cross_entropy), ((16384, 32000), f32), ((16384,), "int32")),
        prog("exact GELU bf16, 8192 x 16384", "vector", lambda x: jax.nn.gelu(x, approximate=False),
             ((8192, 16384), bf16)),
        prog("matmul bfloat16 6144", "matmul", jnp.matmul, ((6144, 6144), bf16), ((6144, 6144), bf16)),
        prog("layernorm f32, 1024 wide", "memory", _layernorm, ((131072, 1024), f32), ((1024,), f32)),
        gpt_step("GPT width 768, 6 layers, batch 8", GPT(50304, 768, 12, 3072, 6, 1024), batch=8),
    ]  # fmt: skip


def _adam_after(p, m, v, g, lr=1e-3, b1=0.9, b2=0.95, eps=1e-8):
    m = b1 * m + (1 - b1) * g
    v = b2 * v + (1 - b2) * g * g
    return p - lr * m / (jnp.sqrt(v) + eps), m, v


def held_out_seventh() -> list[Program]:
    """A seventh set held out of the fit, written and recorded before any rule read off
    :func:`benchmarks.tpu_programs.kernel_sweeps_second` or the held-out rounds' kernel record
    (``--set held_out_7``, its times kept sealed until those rules are committed): attention with wide
    and narrow heads, f32 MLP steps, weights updated inside their gradients' matmuls, one-hot sums, an
    exact GELU, a cross-entropy and a GPT step of other shapes."""

    prog = program
    f32, bf16 = "float32", "bfloat16"
    qkv = lambda shape, dtype: [(shape, dtype)] * 3  # noqa: E731

    return [
        prog("attention bfloat16 1024, 16 heads of 256", "attention", attention,
             *qkv((4, 1024, 16, 256), bf16)),
        prog("attention bfloat16 2048, 4 heads of 512", "attention", attention,
             *qkv((4, 2048, 4, 512), bf16)),
        prog("attention bfloat16 4096, 32 heads of 64", "attention", attention,
             *qkv((1, 4096, 32, 64), bf16)),
        _mlp_step("MLP SGD step float32, width 5120, 8192 rows", 5120, 8192),
        _mlp_step("MLP SGD step float32, width 3072, 16384 rows", 3072, 16384),
        prog("SGD inside its gradient's matmul f32, 3072 x 6144, 12288 rows", "training",
             lambda p, h, d: p - 1e-3 * (h.T @ d), ((3072, 6144), f32), ((12288, 3072), f32),
             ((12288, 6144), f32), feeds_back=1, donate=(0,)),
        prog("momentum inside its gradient's matmul f32, 4096 x 4096, 16384 rows", "training",
             lambda p, m, h, d: _momentum(p, m, h.T @ d), ((4096, 4096), f32), ((4096, 4096), f32),
             ((16384, 4096), f32), ((16384, 4096), f32), feeds_back=2, donate=(0, 1)),
        prog("one-hot sums over 40000, 8192 rows", "vector",
             lambda t: jnp.sum(jnp.where(t[:, None] == jnp.arange(40000), 1.0, 0.0), -1), ((8192,), "int32")),
        prog("one-hot sums over 24000, 2 x 8192 rows", "vector",
             lambda t: jnp.sum(jnp.where(t[..., None] == jnp.arange(24000), 1.0, 0.0), -1),
             ((2, 8192), "int32")),
        prog("exact GELU f32, 4096 x 32768", "vector", lambda x: jax.nn.gelu(x, approximate=False),
             ((4096, 32768), f32)),
        prog("cross-entropy float32 logits, 50304, 4096 rows", "memory", jax.value_and_grad(_cross_entropy),
             ((4096, 50304), f32), ((4096,), "int32")),
        gpt_step("GPT width 1024, 8 layers, batch 4", GPT(50304, 1024, 16, 4096, 8, 1024), batch=4),
    ]  # fmt: skip


def held_out_eighth() -> list[Program]:
    """An eighth set held out of the fit, written and recorded before any rule read off
    :func:`benchmarks.tpu_programs.kernel_sweeps_third` (``--set held_out_8``, its times kept sealed
    until those rules are committed): attention with heads of 128 to 384, f32 MLP steps, weights
    updated inside their gradients' matmuls, one-hot sums, an exact GELU, a softmax and a GPT step of
    other shapes."""

    prog = program
    f32, bf16 = "float32", "bfloat16"
    qkv = lambda shape, dtype: [(shape, dtype)] * 3  # noqa: E731

    onehot = lambda t, width: jnp.sum(jnp.where(t[..., None] == jnp.arange(width), 1.0, 0.0), -1)  # noqa: E731
    return [
        prog("attention bfloat16 3072, 8 heads of 256", "attention", attention,
             *qkv((2, 3072, 8, 256), bf16)),
        prog("attention bfloat16 1024, 4 heads of 384", "attention", attention,
             *qkv((8, 1024, 4, 384), bf16)),
        prog("attention bfloat16 4096, 16 heads of 128", "attention", attention,
             *qkv((1, 4096, 16, 128), bf16)),
        _mlp_step("MLP SGD step float32, width 4096 from 16384 rows", 4096, 16384),
        _mlp_step("MLP SGD step float32, width 7168 from 4096 rows", 7168, 4096),
        prog("SGD inside its gradient's matmul f32, 6144 by 3072 from 16384 rows", "training",
             lambda p, h, d: p - 1e-3 * (h.T @ d), ((6144, 3072), f32), ((16384, 6144), f32),
             ((16384, 3072), f32), feeds_back=1, donate=(0,)),
        prog("Adam inside its gradient's matmul f32, 4096 by 4096 from 8192 rows", "training",
             lambda p, m, v, h, d: _adam(p, m, v, h.T @ d), *[((4096, 4096), f32)] * 3,
             ((8192, 4096), f32), ((8192, 4096), f32), feeds_back=3, donate=(0, 1, 2)),
        prog("one-hot sums over 30000 into one dimension", "vector",
             lambda t: onehot(t, 30000), ((8192,), "int32"), about="8192 rows"),
        prog("one-hot sums over 16384 into two dimensions", "vector",
             lambda t: onehot(t, 16384), ((4, 4096), "int32"), about="4 x 4096 rows"),
        prog("exact GELU f32, 12288 x 12288", "vector", lambda x: jax.nn.gelu(x, approximate=False),
             ((12288, 12288), f32)),
        prog("softmax f32 over 50304, 4096 rows", "memory", lambda x: jax.nn.softmax(x, -1),
             ((4096, 50304), f32)),
        gpt_step("GPT width 896, 10 layers, batch 6", GPT(50304, 896, 14, 3584, 10, 1024), batch=6),
    ]  # fmt: skip


def held_out_ninth() -> list[Program]:
    """A ninth set held out of the fit, written and recorded before any rule read off
    :func:`benchmarks.tpu_programs.kernel_sweeps_fourth` or the rest of
    :func:`~benchmarks.tpu_programs.kernel_sweeps_third` (``--set held_out_9``, its times kept sealed
    until those rules are committed): a fair test of the whole model, each family once or twice, at
    shapes no fitted or held-out program has."""

    prog = program
    f32, bf16 = "float32", "bfloat16"
    qkv = lambda shape, dtype: [(shape, dtype)] * 3  # noqa: E731

    return [
        prog("attention bfloat16 2048, 12 heads of 128, batch 2", "attention", attention,
             *qkv((2, 2048, 12, 128), bf16)),
        prog("attention bfloat16 1024, 8 heads of 256, batch 4", "attention", attention,
             *qkv((4, 1024, 8, 256), bf16)),
        prog("attention float32 1024, 8 heads of 64, batch 8", "attention", attention,
             *qkv((8, 1024, 8, 64), f32)),
        _mlp_step("MLP SGD step float32, width 5632 from 8192 rows", 5632, 8192),
        prog("SGD inside its gradient's matmul f32, 5120 by 5120 from 8192 rows", "training",
             lambda p, h, d: p - 1e-3 * (h.T @ d), ((5120, 5120), f32), ((8192, 5120), f32),
             ((8192, 5120), f32), feeds_back=1, donate=(0,)),
        prog("momentum inside its gradient's matmul f32, 3072 by 6144 from 16384 rows", "training",
             lambda p, m, h, d: _momentum(p, m, h.T @ d), ((3072, 6144), f32), ((3072, 6144), f32),
             ((16384, 3072), f32), ((16384, 6144), f32), feeds_back=2, donate=(0, 1)),
        prog("matmul bfloat16 6144 x 12288 x 3072", "matmul", jnp.matmul, ((6144, 12288), bf16),
             ((12288, 3072), bf16)),
        prog("one-hot sums over 36000 into one dimension", "vector",
             lambda t: jnp.sum(jnp.where(t[:, None] == jnp.arange(36000), 1.0, 0.0), -1),
             ((8192,), "int32"), about="8192 rows"),
        prog("exact GELU f32, 6144 x 16384", "vector", lambda x: jax.nn.gelu(x, approximate=False),
             ((6144, 16384), f32)),
        prog("cross-entropy bfloat16 logits, 32768, 8192 rows", "memory",
             jax.value_and_grad(_cross_entropy), ((8192, 32768), bf16), ((8192,), "int32")),
        prog("layer norm float32 8192 x 4096", "memory", _layernorm, ((8192, 4096), f32), ((4096,), f32)),
        gpt_step("GPT width 1152, 8 layers, batch 4", GPT(50304, 1152, 18, 4608, 8, 1024), batch=4),
    ]  # fmt: skip


def held_out_tenth() -> list[Program]:
    """A tenth set held out of the fit, written and recorded before the rule that an operand a matmul's
    kernel computes (a ReLU's and a convert's of an f32 parameter) fetches what it is computed from as
    often as its window (``--set held_out_10``, its times kept sealed until that rule is committed):
    f32 MLP steps, whose kernels showed it, and a fair test of the rest at new shapes."""

    prog = program
    f32, bf16 = "float32", "bfloat16"
    qkv = lambda shape, dtype: [(shape, dtype)] * 3  # noqa: E731

    return [
        _mlp_step("MLP SGD step float32, width 4608 from 8192 rows", 4608, 8192),
        _mlp_step("MLP SGD step float32, width 6656 from 4096 rows", 6656, 4096),
        _mlp_step("MLP SGD step float32, width 2560 from 32768 rows", 2560, 32768),
        prog("MLP forward float32, ReLU, 8192 x 6144 x 6144", "mlp",
             lambda x, w1, w2: jax.nn.relu(x @ w1) @ w2, ((8192, 6144), f32), ((6144, 6144), f32),
             ((6144, 6144), f32)),
        prog("attention bfloat16 2048, 16 heads of 64, batch 4", "attention", attention,
             *qkv((4, 2048, 16, 64), bf16)),
        prog("one-hot sums over 28000 into one dimension", "vector",
             lambda t: jnp.sum(jnp.where(t[:, None] == jnp.arange(28000), 1.0, 0.0), -1),
             ((8192,), "int32"), about="8192 rows"),
        prog("exact GELU f32, 4096 x 24576", "vector", lambda x: jax.nn.gelu(x, approximate=False),
             ((4096, 24576), f32)),
        prog("cross-entropy float32 logits, 32000, 8192 rows", "memory",
             jax.value_and_grad(_cross_entropy), ((8192, 32000), f32), ((8192,), "int32")),
        prog("matmul float32 6144 x 6144 x 6144", "matmul", jnp.matmul, ((6144, 6144), f32),
             ((6144, 6144), f32)),
        prog("Adam inside its gradient's matmul f32, 3072 by 3072 from 16384 rows", "training",
             lambda p, m, v, h, d: _adam(p, m, v, h.T @ d), *[((3072, 3072), f32)] * 3,
             ((16384, 3072), f32), ((16384, 3072), f32), feeds_back=3, donate=(0, 1, 2)),
        prog("SGD inside its gradient's matmul bf16, 6144 by 6144 from 8192 rows", "training",
             lambda p, h, d: p - 1e-3 * (h.T @ d), ((6144, 6144), bf16), ((8192, 6144), bf16),
             ((8192, 6144), bf16), feeds_back=1, donate=(0,)),
        gpt_step("GPT width 1280, 6 layers, batch 6", GPT(50304, 1280, 20, 5120, 6, 1024), batch=6),
    ]  # fmt: skip


def held_out_eleventh() -> list[Program]:
    """An eleventh set held out of the fit, written and recorded before any rule read off
    :func:`benchmarks.tpu_programs.kernel_sweeps_fifth` (``--set held_out_11``, its times kept sealed
    until those rules are committed): exact GELUs and an erfc in f32 and bf16, alone and inside an MLP,
    a softplus, and a fair test of the rest at new shapes."""

    prog = program
    f32, bf16 = "float32", "bfloat16"
    qkv = lambda shape, dtype: [(shape, dtype)] * 3  # noqa: E731
    gelu = lambda x: jax.nn.gelu(x, approximate=False)  # noqa: E731

    return [
        prog("exact GELU f32, 10240 x 10240", "vector", gelu, ((10240, 10240), f32)),
        prog("exact GELU bf16, 12288 x 12288", "vector", gelu, ((12288, 12288), bf16)),
        prog("erfc f32, 16384 x 4096", "vector", jax.scipy.special.erfc, ((16384, 4096), f32)),
        prog("softplus f32, 16384 x 8192", "vector", jax.nn.softplus, ((16384, 8192), f32)),
        prog("MLP forward float32, exact GELU, 4096 x 8192 x 8192", "mlp",
             lambda x, w1, w2: gelu(x @ w1) @ w2, ((4096, 8192), f32), ((8192, 8192), f32),
             ((8192, 4096), f32)),
        prog("attention bfloat16 1024, 12 heads of 128, batch 8", "attention", attention,
             *qkv((8, 1024, 12, 128), bf16)),
        _mlp_step("MLP SGD step float32, width 3584 from 16384 rows", 3584, 16384),
        prog("cross-entropy bfloat16 logits, 50304, 4096 rows", "memory",
             jax.value_and_grad(_cross_entropy), ((4096, 50304), bf16), ((4096,), "int32")),
        prog("layer norm bfloat16 16384 x 2048", "memory", _layernorm, ((16384, 2048), bf16),
             ((2048,), bf16)),
        prog("matmul bfloat16 10240 x 4096 x 8192", "matmul", jnp.matmul, ((10240, 4096), bf16),
             ((4096, 8192), bf16)),
        prog("one-hot sums over 44000 into one dimension", "vector",
             lambda t: jnp.sum(jnp.where(t[:, None] == jnp.arange(44000), 1.0, 0.0), -1),
             ((8192,), "int32"), about="8192 rows"),
        gpt_step("GPT width 768, 12 layers, batch 10", GPT(50304, 768, 12, 3072, 12, 1024), batch=10),
    ]  # fmt: skip


def held_out_twelfth() -> list[Program]:
    """A twelfth set held out of the fit, written and recorded before any rule read off
    :func:`benchmarks.tpu_programs.kernel_sweeps_sixth` or round 11's kernels (``--set held_out_12``,
    its times kept sealed until those rules are committed): layer norms whose input may sit in VMEM,
    one-hot sums into one dimension, attention with heads of 64 and 256, an f32 MLP step, and a fair
    test of the rest at new shapes."""

    prog = program
    f32, bf16 = "float32", "bfloat16"
    qkv = lambda shape, dtype: [(shape, dtype)] * 3  # noqa: E731
    one_hot = lambda n: lambda t: jnp.sum(jnp.where(t[:, None] == jnp.arange(n), 1.0, 0.0), -1)  # noqa: E731

    return [
        prog("layer norm bfloat16 8192 x 4096", "memory", _layernorm, ((8192, 4096), bf16), ((4096,), bf16)),
        prog("layer norm bfloat16 24576 x 1024", "memory", _layernorm, ((24576, 1024), bf16),
             ((1024,), bf16)),
        prog("layer norm float32 6144 x 2048", "memory", _layernorm, ((6144, 2048), f32), ((2048,), f32)),
        prog("RMSNorm bf16 12288 x 4096", "memory", _rms_norm, ((12288, 4096), bf16), ((4096,), f32)),
        prog("one-hot sums over 34000 into one dimension", "vector", one_hot(34000), ((8192,), "int32"),
             about="8192 rows"),
        prog("one-hot sums over 52000 into one dimension", "vector", one_hot(52000), ((8192,), "int32"),
             about="8192 rows"),
        prog("attention bfloat16 2048, 8 heads of 256, batch 2", "attention", attention,
             *qkv((2, 2048, 8, 256), bf16)),
        prog("attention bfloat16 4096, 16 heads of 64, batch 2", "attention", attention,
             *qkv((2, 4096, 16, 64), bf16)),
        _mlp_step("MLP SGD step float32, width 5120 from 8192 rows", 5120, 8192),
        prog("softmax float32 16384 x 4096", "memory", lambda x: jax.nn.softmax(x, -1), ((16384, 4096), f32)),
        prog("matmul float32 12288 x 4096 x 4096", "matmul", jnp.matmul, ((12288, 4096), f32),
             ((4096, 4096), f32)),
        gpt_step("GPT width 896, 8 layers, batch 8, bfloat16", GPT(50304, 896, 14, 3584, 8, 1024), batch=8,
                 dtype="bfloat16"),
    ]  # fmt: skip


def held_out_eighteenth() -> list[Program]:
    """An eighteenth set held out of the fit, written with :func:`benchmarks.tpu_matmul_sweeps.
    kernel_sweeps_fourteenth` recorded and no rule read off it, then recorded and sealed
    (``--set held_out_18``): the test of a rule for f32 matmul kernels whose HBM and MXU times come
    close, at shapes no other program has (square and oblong products, contractions of 6144 to 16384,
    f32 MLP SGD steps), with controls (bf16, HIGH precision) and a matmul with an epilogue."""
    prog, f32, bf16 = program, "float32", "bfloat16"

    def matmul(m: int, k: int, n: int, dtype: str = f32, precision: str | None = None) -> Program:
        label = f"matmul {dtype} {m} x {k} x {n}" + (f" at {precision}" if precision else "")
        return prog(label, "matmul", lambda a, b: jnp.matmul(a, b, precision=precision),
                    ((m, k), dtype), ((k, n), dtype))  # fmt: skip

    return [
        matmul(5376, 8192, 5376),
        matmul(6400, 8192, 6400),
        matmul(4864, 12288, 4864),
        matmul(7680, 6144, 7680),
        matmul(6144, 12288, 4608),
        matmul(3584, 16384, 3584),
        _mlp_step("MLP SGD step float32, width 5888 from 8192 rows", 5888, 8192),
        _mlp_step("MLP SGD step float32, width 3840 from 16384 rows", 3840, 16384),
        _mlp_step("MLP SGD step float32, width 6400 from 4096 rows", 6400, 4096),
        matmul(7168, 8192, 7168, bf16),
        matmul(6656, 8192, 6656, f32, "high"),
        prog("ReLU of a matmul f32, 6656 x 8192 x 6656", "matmul", lambda a, b: jax.nn.relu(a @ b),
             ((6656, 8192), f32), ((8192, 6656), f32)),
    ]  # fmt: skip


def held_out_nineteenth() -> list[Program]:
    """A nineteenth set held out of the fit, written and recorded after the rule read off
    :func:`benchmarks.tpu_matmul_sweeps.kernel_sweeps_fourteenth` was committed
    (``Measured.balance_exponent``, ``--set held_out_19``): plain products whose HBM and MXU times
    the model reads as close, at shapes and in a dtype round 18 has none of: skinny ones in bf16 and
    f32 (an output 192 to 640 wide, contractions of 4096 to 16384), one with its left operand
    transposed, one with a GELU after it, and an f32 MLP SGD step of a new shape."""
    prog, f32, bf16 = program, "float32", "bfloat16"

    def matmul(m: int, k: int, n: int, dtype: str) -> Program:
        return prog(f"matmul {dtype} {m} x {k} x {n}", "matmul", jnp.matmul, ((m, k), dtype), ((k, n), dtype))

    return [
        matmul(16384, 8192, 256, bf16),
        matmul(8192, 16384, 256, bf16),
        matmul(32768, 4096, 320, bf16),
        matmul(16384, 8192, 192, bf16),
        matmul(8192, 16384, 384, bf16),
        matmul(16384, 8192, 512, f32),
        matmul(8192, 16384, 640, f32),
        matmul(32768, 4096, 448, f32),
        matmul(8192, 16384, 448, f32),
        prog("GELU of a matmul bf16, 16384 x 8192 x 256", "matmul", lambda a, b: jax.nn.gelu(a @ b),
             ((16384, 8192), bf16), ((8192, 256), bf16)),
        prog("transposed matmul f32, 16384 x 8192 x 512", "matmul", lambda a, b: a.T @ b,
             ((8192, 16384), f32), ((8192, 512), f32)),
        _mlp_step("MLP SGD step float32, width 4608 from 12288 rows", 4608, 12288),
    ]  # fmt: skip
