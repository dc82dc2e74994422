"""What was measured on a real chip: the rates the cost model (:mod:`shardbook.cost`) estimates a TPU
program's kernels at, each read off one program of a chip's record (``shardbook/data/tpu_v5e.json``,
recorded by ``benchmarks/tpu_record.py``) and named beside it.

Source: [REC] shardbook/data/tpu_v5e.json: median times of one-chip programs measured on a TPU v5e
(its JAX 0.10.2, 2026-12-05 to 2026-12-07); tpu_v5e_programs.json.gz holds the programs the chip ran,
and :func:`shardbook.records.calibration` compares every one with its estimate.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Measured:
    """Rates measured on one real chip, per second, and the fixed cost of one call: what a TPU program's
    estimate uses in place of the published peaks."""

    bf16_matmul_flops: float  # a large bf16 matmul
    f32_matmul_flops: float  # f32 operands at JAX's default precision (one bf16 pass)
    hbm_bandwidth: float  # bytes/s that an element-wise op moves between HBM and the chip
    call_seconds: float  # the least one call takes (the smallest program's time), overlapped with the device
    source: str
    f32_high_matmul_flops: float | None = None  # f32 at precision HIGH (three bf16 passes)
    f32_highest_matmul_flops: float | None = None  # f32 at precision HIGHEST (six bf16 passes)
    # the vector unit: seconds per element of an element-wise op's result (:data:`VECTOR_OPS`), for the
    # ops named here at their own rate, for every other at ``vector_op_seconds``
    vector_seconds: tuple[tuple[str, float], ...] = ()
    vector_op_seconds: float = 0.0
    vector_bf16_op_seconds: float = 0.0  # the same in a kernel whose results are all bf16
    # the same (f32) for ops that can run side by side: ``vector_op_seconds`` is the rate along a chain
    # of dependent ops, and a kernel takes the longer of the two (:func:`shardbook.vector.vector_seconds`)
    vector_op_side_by_side_seconds: float = 0.0
    # bytes/s a kernel reads from HBM (measured on a kernel that only reads), and writes to it
    hbm_read_bandwidth: float | None = None
    hbm_write_bandwidth: float | None = None
    hbm_write_alone_bandwidth: float | None = None  # bytes/s a kernel that reads nothing writes
    # seconds per element of a slice that strides the last axis in memory (a gather across lanes): f32, bf16
    lane_stride_seconds: float = 0.0
    lane_stride_bf16_seconds: float = 0.0
    reciprocal_seconds: float = 0.0  # per element of 1 / x (a divide of the constant 1)
    sincos_second_seconds: float = 0.0  # per element of the second of a sine and a cosine of one value
    # the fraction of the shorter of a matmul kernel's MXU time and vector time that the longer does
    # not hide
    vector_matmul_exposed: float = 0.0
    # bytes/s a plain product's kernel writes when it reads less than a tenth of what it writes
    hbm_matmul_write_bandwidth: float | None = None
    # seconds a matmul kernel with several results in HBM spends, at each step of its grid, on each
    # result after the first
    result_step_seconds: float = 0.0
    # the fraction of its writes a batched product's kernel that keeps its other results in VMEM (and
    # mostly writes, its contraction in one step) spends after its products, not beside them; None:
    # such a kernel writes at the general rate
    vmem_results_writes_exposed: float | None = None
    # whether a batched product's output window sets its write rate: whole rows of its result (its
    # minor dimension) at the rate of a product that mostly writes, part of them at the general rate
    window_rows_set_write_rate: bool = False
    # a product laid out with its output's batch in the sublanes, that batch a head's width (256 to 512
    # rows: attention's second product p v in the [batch, tokens, heads, width] form), each step of its
    # grid holding fewer than ``stepped_tile_elements`` of its weights, leaves exposed this fraction of the
    # shorter of its MXU time and its reads' time: (256 rows, 384 or 512 rows); None: it does not
    stepped_reads_exposed: tuple[float, float] | None = None
    stepped_tile_elements: int = 1 << 20
    # seconds per 8 rows of a reduction's result per block of lanes, where it sums across the lanes
    lane_reduce_seconds: float = 0.0
    # the same, where the result has one dimension (its sums laid out along the lanes of a 1-D tile)
    lane_reduce_rank1_seconds: float = 0.0
    # rows of a 16-bit operand in one group of such a sum (8 where not measured)
    lane_reduce_16bit_rows: int = 8
    # a sum that does not cross the lanes and keeps at least this many vector registers of partial sums
    # at each step of its kernel's grid runs its ops side by side (0: never)
    sum_registers_side_by_side: int = 0
    # a plain product whose contraction takes several steps of its grid takes (a^p + h^p)^(1/p), a its
    # MXU side and h its HBM time, not the longer of the two: p, this exponent (0: the longer)
    balance_exponent: float = 0.0


# [REC] The v5e's measured rates, each read off one program of the record (median time per call).
V5E_MEASURED = Measured(
    # "matmul bfloat16 8192": 2·8192³ FLOP in 6.001 ms (93% of the 197 TFLOP/s peak)
    bf16_matmul_flops=1.832e14,
    # "matmul float32 4096" takes 0.737 ms, the bf16 4096 time to 0.1%: the same bf16 pass. "matmul
    # float32 8192" runs at 161 TFLOP/s: its 1024×1024 output tiles read the f32 operands eight times
    # over (4.43 GB read), which tiled_rereads reads off its tiling: -4.9%.
    f32_matmul_flops=1.832e14,
    # "add f32": x + y on f32[16384,8192], 1.61 GB read and written in 2.438 ms (81% of 819 GB/s)
    hbm_bandwidth=6.607e11,
    # "one small add": f32[8,128] + 1 takes 120.7 µs a call: the fixed cost of a call, whatever its cause
    call_seconds=1.207e-4,
    source="[REC] shardbook/data/tpu_v5e.json, one TPU v5e chip, 2026-12-05 and 2026-12-06",
    # "matmul float32 8192 at high": 2·8192³ FLOP in 17.65 ms back to back (2.9 times the default's time)
    f32_high_matmul_flops=6.229e13,
    # "matmul float32 8192 at highest": 2·8192³ FLOP in 35.77 ms back to back (6.0 times the bf16 pass)
    f32_highest_matmul_flops=3.074e13,
    # The vector unit, per element of an op's result (2**27 elements: f32[16384,8192], whose reading and
    # writing the model charges 1.71 ms; the chip's one-op kernels of it take 1.63 to 1.68 ms).
    # "polynomial x4 f32": 256 multiplies and adds a element in 6.596 ms: 0.192 ps an op, every op's
    # rate unless named ("polynomial f32", 64 of them, takes just the HBM time); in a kernel whose
    # results are bf16, "polynomial x4 bf16" (256 ops and 2 converts in 5.771 ms): 0.167 ps. Named,
    # after the chain's other ops at the plain rate: "sin x4 f32", "cos x4 f32" and "erf x4 f32" (four
    # in a row: 13.63, 13.64 and 3.42 ms); "divide x16 f32" (16 divides, 32 adds: 5.75 ms); "rsqrt x16
    # f32" (16 each of rsqrt, add, abs: 4.00 ms), whose rate sqrt is assumed to share. exp, tanh and log
    # sixteen in a row take just the HBM time (1.67 ms): they are charged the plain rate.
    vector_seconds=(
        ("sine", 2.539e-11),
        ("cosine", 2.541e-11),
        ("erf", 6.370e-12),
        ("divide", 2.292e-12),
        ("rsqrt", 1.479e-12),
        ("sqrt", 1.479e-12),
    ),
    vector_op_seconds=1.920e-13,
    vector_bf16_op_seconds=1.667e-13,
    # Read off benchmarks.tpu_programs.kernel_sweeps_fifth (recorded 2026-12-07 with the eleventh
    # held-out set, before this rule). "compare and select over add and subtract x32 f32": 32 steps of
    # where(x > c, x - c, x + c), 128 ops an element whose longest chain is 64, in 21.94 ps an element:
    # 0.171 ps an op. A Horner polynomial, one chain, gives the 0.192 above
    vector_op_side_by_side_seconds=1.714e-13,
    # "row sums f32": 537 MB read (64 KB written) in 0.729 ms, 90% of the 819 GB/s peak. The write rate
    # is inferred, not measured alone: "add f32" reads 1.07 GB (1.46 ms at the read rate) and writes
    # 537 MB in 2.438 ms, leaving 0.98 ms for the writes if the two do not overlap
    hbm_read_bandwidth=7.366e11,
    hbm_write_bandwidth=5.478e11,
    # "every other lane f32": x[..., ::2] of f32[32,2048,16,128] in 16.83 ms, of which its copy to
    # another layout is 1.22 ms of HBM traffic: 15.61 ms for 2**26 elements of the slice
    lane_stride_seconds=2.326e-10,
    # Read off the programs of benchmarks/tpu_programs.kernel_sharing (recorded 2026-12-06 with the
    # fourth held-out set, before these rules were written). "every other lane bf16": the same slice
    # of bf16 in 8.850 ms, of which its copy is 0.61 ms: about the f32 rate per byte, not per element.
    lane_stride_bf16_seconds=1.228e-10,
    # "write a row broadcast f32": 537 MB written from a row in VMEM in 0.750 ms. Only a kernel that
    # reads nothing, runs no matmul and is not a copy out of VMEM writes at it; the others write at the
    # inferred rate above (had every kernel that reads nothing written at this rate, the three fitted GPT
    # steps' estimates would fall by 0.3 to 3.2 points)
    hbm_write_alone_bandwidth=7.161e11,
    # "reciprocal x16 f32": 16 each of 1 / y, abs and add in 5.400 ms (a divide x / y: 2.29 ps)
    reciprocal_seconds=2.130e-12,
    # "sine and cosine of one array f32": both of f32[16384,8192] in 3.521 ms, 0.11 ms more than the
    # sine rate charges
    sincos_second_seconds=8.46e-13,
    # "sine into a matmul f32" (and bf16, a polynomial, a sine on the right operand): the operand's
    # function is computed at each of the tiling's fetches (3 for the f32 sine: 5.14 ms of sines) and
    # the matmul (3.00 ms) does not hide it: 7.94 ms. max(MXU, vector) + 0.77 × the shorter puts all
    # four within 6.7% (a least-squares fit gives 0.79)
    vector_matmul_exposed=0.77,
    # Read off benchmarks.tpu_programs.kernel_sweeps (recorded 2026-12-06 with the sixth held-out set,
    # before these rules were written). "mostly writing bf16, 16384 x 128 x 16384": 537 MB written
    # (4 MB read) in 0.807 ms, 6.70e11 B/s once its reads are charged; a plain product's kernel that
    # reads less than a tenth of what it writes writes at it
    hbm_matmul_write_bandwidth=6.70e11,
    # "Adam inside its gradient's matmul f32, 1024 x 16384": 1.850 ms where its product takes 1.500; its
    # kernel's grid has 384 steps and three results in HBM: 0.455 µs a step for each after the first
    result_step_seconds=4.55e-7,
    # Read off benchmarks.tpu_attention_sweeps.kernel_sweeps_seventh (recorded 2026-12-07 with the
    # thirteenth held-out set, sealed, before this rule): attention's scores with the softmax's running
    # max in VMEM write their 403 MB at the rate of a product that mostly writes (0.601 ms) while their
    # products are short (heads of 64 and 128: 0.657 and 0.682 ms, reads included); with heads of 192
    # (0.422 ms of MXU) the kernel took 0.693 ms: its MXU time and 0.45 of its writes
    vmem_results_writes_exposed=0.45,
    # Read off benchmarks.tpu_attention_sweeps.kernel_sweeps_eighth (recorded 2026-12-07, before this
    # rule; the fourteenth held-out set recorded and sealed before it) with the fitted record: the
    # scores alone write at the rate their window sets. With 16 heads of 256 and 384 in windows of 512
    # of 2,048 keys (2 and 3 steps of their contraction) they took 0.881 and 1.052 ms: their MXU time
    # and their writes at the general rate (0.865, 1.053; at a product's write rate 12% and 8% short).
    # In one step in windows of whole rows, 16 heads of 64 (kernel_sweeps_seventh) and the fitted 8
    # heads of 192 took 0.632 and 0.903 ms: the longer of their HBM time with their writes at a
    # product's rate (heads of 64: 0.618) and their MXU time plus 0.45 of those writes (heads of 192:
    # 0.923); at the general rate, beside their products, 19% and 16% over
    window_rows_set_write_rate=True,
    # Read off the kernels of attention's second product p v in the [batch, tokens, heads, width] form
    # (benchmarks.tpu_attention_sweeps.kernel_sweeps_seventh, _ninth and _tenth, the unexplained
    # programs and the fitted 8 heads of 256; 2026-12-07, before the sixteenth held-out set was written):
    # the compiler computes vᵀ pᵀ, p the weights, each tile of p meeting a head's width of rows. Where
    # each step of the grid holds less than 2^20 elements of p, the kernel took the longer of its MXU
    # and HBM times plus part of the shorter of its MXU time and its reads' time: with heads of 256,
    # 0.29 to 0.49 of it (median 0.35, eight kernels), of 384 or 512, 0.24 to 2.01 (median 0.78, ten).
    # The bound was read off the held-out rounds' kernels of that form: of the fifteen that read p from
    # HBM in steps of 2^20 or more of it, fourteen took at most 0.11 of that shorter time beyond the
    # model's time without this rule (the fifteenth 0.25); the sweeps' four kernels at exactly 2^20, p in
    # VMEM and their reads small, took -0.40 to 0.82 of it. Any product laid out so whose batch is 256 to
    # 512 rows gets the rule, not only attention's (round 1's GPT step of 512 tokens: its MLP and logits)
    stepped_reads_exposed=(0.35, 0.78),
    # "one-hot sums over 50304, 8 x 1024 rows": 0.991 ms where its elements' ops take 0.316; it sums 8,192
    # rows across the lanes in 197 blocks: 3.35 ns per 8 rows per block
    lane_reduce_seconds=3.35e-9,
    # Read off benchmarks.tpu_programs.kernel_sweeps_second (recorded 2026-12-06 with the seventh
    # held-out set, before this rule was written). "one-hot sums over 50432, 8192 rows": 1.316 ms where
    # its elements' ops take 0.317; the same sum as the one over 50,304 into [8, 1024] but written to a
    # one-dimensional result, in the same 197 blocks of lanes: 4.95 ns per 8 rows per block. The sums
    # over 32,000 and 50,304 into one dimension, and the held-out cross-entropies' picks of the label's
    # logit (their per-kernel record), take the same time per block. A vector register holds 16 rows of
    # a 16-bit operand: the held-out bf16 cross-entropy's sum across 50,304 lanes (8 x 393 blocks of
    # 1,024 rows) took 1.095 ms, less than its groups of 8 rows alone would take at either rate (1.35
    # or 1.99 ms); in groups of 16 they take 1.00 ms, under the kernel's 1.12 ms of HBM reads
    lane_reduce_rank1_seconds=4.95e-9,
    lane_reduce_16bit_rows=16,
    # Read off benchmarks.tpu_programs.kernel_sweeps_sixth (recorded 2026-12-07 with the twelfth
    # held-out set, before this rule). "one-hot sums over 26000 into one dimension, a sweep" keeps 4
    # registers of partial sums at each step of its grid (its window: 250 blocks of 8 summed, 4 of 128
    # rows kept) and took 141.6 µs: its iota, compare, select and add side by side take 146.0 (+3.1%),
    # as one chain 163.6 (+15.5%); the fitted sum over 20,000 keeps 2, and its program's time fits one
    # chain (-0.7%; side by side -4.8%, the call's fixed cost flooring it), its kernel's lies between
    # the two: four is where the record shows the ops side by side, not a measured edge
    sum_registers_side_by_side=4,
    # Read off benchmarks.tpu_matmul_sweeps.kernel_sweeps_fourteenth (recorded 2026-12-07, with the
    # eighteenth held-out set sealed before this rule): f32 matmuls whose HBM time (re-reads and writes
    # in) is 0.98 to 1.01 of their MXU time, 32 steps of 256 of their contraction, took 1.076 to 1.095
    # times the longer of the two (HBM 1.05 times MXU, 1.111); in 22 steps, HBM 1.08 times MXU, 1.028
    # to 1.032; in 64 steps, 0.93, 1.043; two bf16 products (4 steps) and an f32 one in one step, HBM a
    # quarter of MXU or less, 0.95 to 0.96. Over the sweep's eleven kernels in several steps, p = 9 is
    # the whole exponent with the least squared log error (rms 2.8%; the longer of the two alone,
    # 6.4%): 2^(1/9) = 1.08 at balance, 1% more where one is 1.3 times the other
    balance_exponent=9.0,
)
