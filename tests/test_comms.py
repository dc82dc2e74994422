"""Tests for shardbook.comms and shardbook.hlo: exact figures read from real compiled programs."""

import dataclasses
import functools
import html

import jax
import jax.numpy as jnp
import pytest
from jax.sharding import AxisType, NamedSharding
from jax.sharding import PartitionSpec as P

from benchmarks.programs import ring_matmul
from shardbook import comms, hlo

B, D, F = 1024, 2048, 8192
MiB = 2**20


def _mesh(shape):
    return jax.make_mesh(shape, ("X", "Y"), axis_types=(AxisType.Auto,) * 2)


def _put(x, mesh, spec):
    return jax.device_put(x, NamedSharding(mesh, spec))


@pytest.fixture(scope="module")
def mesh24():
    return _mesh((2, 4))


@pytest.fixture(scope="module")
def matmul_args(mesh24):
    a = _put(jnp.ones((B, D), jnp.bfloat16), mesh24, P("X", "Y"))
    w = _put(jnp.ones((D, F), jnp.bfloat16), mesh24, P(None, "Y"))
    return a, w


def _collective_matmul(mesh, use_loop):
    body = functools.partial(ring_matmul, unroll=not use_loop)
    return jax.jit(
        jax.shard_map(body, mesh=mesh, in_specs=(P("X", "Y"), P(None, "Y")), out_specs=P("X", "Y"))
    )


def test_analyze_auto_mode_all_reduce():
    # property: the partial sums of a contraction sharded over 'Y' are all-reduced in bf16 over 'Y'
    mesh = _mesh((4, 2))
    x = _put(jnp.ones((8, 2048), jnp.bfloat16), mesh, P("X", "Y"))
    w = _put(jnp.ones((2048, 8192), jnp.bfloat16), mesh, P("Y", None))
    f = jax.jit(
        lambda x, w: jnp.einsum("bd,df->bf", jnp.square(x), w),
        out_shardings=NamedSharding(mesh, P("X", None)),
    )
    report = comms.analyze(f, x, w)
    assert report.count() == 1
    assert report.count("all-reduce") == 1
    (c,) = report.collectives
    assert (c.dtype, c.result_shapes, c.group_size, c.axes) == ("bf16", ((2, 8192),), 2, ("Y",))
    assert c.upcast_by_backend  # the CPU program ran it in f32; the report corrected for it
    assert c.bytes == 2 * (2 - 1) * (2 * 8192 * 2) // 2
    assert c.source.startswith("test_comms.py:")
    assert any("f32" in n for n in report.notes)
    assert report.flops == 2 * 2 * 8192 * 1024
    assert "all-reduce" in repr(report) and "<table>" in report._repr_html_()
    # a notebook cell's temporary file ("795775335.py:9 (<module>)") is printed as "cell line 9 (<module>)",
    # as the figures say it; other files keep their name

    in_cell = dataclasses.replace(
        report, collectives=[dataclasses.replace(c, source="795775335.py:9 (<module>)")]
    )
    assert in_cell.rows()[0][-1] == "cell line 9 (<module>)"
    assert in_cell.collectives[0].describe().endswith("at cell line 9 (<module>)")
    assert "795775335.py" not in repr(in_cell) and "795775335.py" not in in_cell._repr_html_()
    assert report.rows()[0][-1].startswith("test_comms.py:")


def test_analyze_plain_jit_all_gather(mesh24, matmul_args):
    # property: A[B_X, D_Y] @ W[D, F_Y] gathers A over 'Y': (4-1)/4 of bf16[512,2048] = 1.5 MiB per device
    f = jax.jit(lambda a, w: a @ w, out_shardings=NamedSharding(mesh24, P("X", "Y")))
    report = comms.analyze(f, *matmul_args)
    assert report.count() == 1 and report.count("all-gather") == 1
    (c,) = report.collectives
    assert (c.dtype, c.operand_shapes, c.result_shapes) == ("bf16", ((512, 512),), ((512, 2048),))
    assert (c.axes, c.group_size, c.executions) == (("Y",), 4, 1)
    assert report.total_bytes == 1.5 * MiB
    assert report.flops == 2 * 512 * 2048 * 2048
    assert report.temp_bytes is not None and report.temp_bytes > 0
    assert report.seconds > 0  # the analysis's own time is recorded (its size depends on the machine's load)


def test_analyze_collective_matmul_unrolled(mesh24, matmul_args):
    # property: the ring version has 3 collective-permutes over 'Y' and no all-gather
    report = comms.analyze(_collective_matmul(mesh24, use_loop=False), *matmul_args)
    assert report.count("collective-permute") == 3
    assert report.count("all-gather") == 0 and report.count() == 3
    for c in report.collectives:
        assert (c.dtype, c.operand_shapes, c.axes, c.group_size) == ("bf16", ((512, 512),), ("Y",), 4)
        assert c.bytes == 512 * 512 * 2
    assert report.total_bytes == 1.5 * MiB
    assert report.flops == 2 * 512 * 2048 * 2048


def test_analyze_collective_matmul_fori_loop(mesh24, matmul_args):
    # property: a non-unrolled loop reports the same totals: trip count (3) multiplied
    report = comms.analyze(_collective_matmul(mesh24, use_loop=True), *matmul_args)
    assert report.count("collective-permute") == 1
    (c,) = report.collectives
    assert c.executions == 3 and not c.unknown_trip_count
    assert report.total_bytes == 1.5 * MiB
    assert report.flops == 2 * 512 * 2048 * 2048


def test_analyze_per_shard_mean_has_no_collectives(mesh24):
    # property: work that stays inside each shard needs no communication
    x = _put(jnp.ones((8, 1024), jnp.float32), mesh24, P("X", "Y"))
    f = jax.jit(
        jax.shard_map(
            lambda b: jnp.mean(b, axis=1, keepdims=True),
            mesh=mesh24,
            in_specs=P("X", "Y"),
            out_specs=P("X", "Y"),
        )
    )
    report = comms.analyze(f, x)
    assert report.count() == 0 and report.total_bytes == 0 and report.collectives == []
    assert "no collectives" in repr(report)


def test_analyze_unknown_trip_count_is_flagged(mesh24):
    # property: a psum inside a while loop whose trip count depends on data is flagged, counted once
    x = _put(jnp.ones((8, 128), jnp.float32), mesh24, P("X", "Y"))

    def body(b):
        def step(s):
            return s[0] + 1, jax.lax.psum(s[1], "Y") * 0.25

        return jax.lax.while_loop(lambda s: s[1].sum() > 1e-3, step, (0, b))[1]

    f = jax.jit(
        jax.shard_map(body, mesh=mesh24, in_specs=P("X", "Y"), out_specs=P("X", "Y"), check_vma=False)
    )
    report = comms.analyze(f, x)
    (c,) = [c for c in report.collectives if c.kind == "all-reduce"]
    assert c.unknown_trip_count and c.executions == 1
    assert any("no known trip count" in n for n in report.notes)
    assert "?1" in repr(report)


def test_analyze_reduce_scatter_from_all_reduce_and_slice():
    # property: CPU's all-reduce + dynamic-slice is reported as the reduce-scatter a TPU would run
    mesh = _mesh((4, 2))
    a = _put(jnp.ones((1024, 2048), jnp.bfloat16), mesh, P(None, "X"))
    w = _put(jnp.ones((2048, 8192), jnp.bfloat16), mesh, P("X", None))
    f = jax.jit(lambda a, w: a @ w, out_shardings=NamedSharding(mesh, P(None, "X")))
    report = comms.analyze(f, a, w)
    (c,) = report.collectives
    assert (c.kind, c.emitted_as, c.axes, c.group_size) == (
        "reduce-scatter",
        "all-reduce + dynamic-slice",
        ("X",),
        4,
    )
    assert c.result_shapes == ((1024, 2048),)
    assert c.bytes == 3 * 1024 * 8192 * 2 // 4


def test_analyze_psum_scatter_and_all_to_all(mesh24):
    # property: shard_map's psum_scatter and all_to_all show up with their group axes and bytes
    x = _put(jnp.ones((1024, 1024), jnp.bfloat16), mesh24, P("X", "Y"))

    def body(b):
        s = jax.lax.psum_scatter(b, "X", scatter_dimension=1, tiled=True)
        t = jax.lax.all_to_all(b, "Y", 0, 1, tiled=True)
        return (s.sum() + t.sum())[None, None]

    f = jax.jit(jax.shard_map(body, mesh=mesh24, in_specs=P("X", "Y"), out_specs=P("X", "Y")))
    report = comms.analyze(f, x)
    (rs,) = [c for c in report.collectives if c.kind == "reduce-scatter"]
    assert (rs.dtype, rs.axes, rs.group_size, rs.result_shapes) == ("bf16", ("X",), 2, ((512, 128),))
    assert rs.bytes == 512 * 256 * 2 // 2
    (a2a,) = [c for c in report.collectives if c.kind == "all-to-all"]
    assert (a2a.dtype, a2a.axes, a2a.group_size) == ("bf16", ("Y",), 4)
    assert a2a.bytes == 512 * 256 * 2 * 3 // 4


def test_analyze_rejects_unknown_kind(mesh24, matmul_args):
    report = comms.analyze(lambda a, w: a @ w, *matmul_args)
    with pytest.raises(ValueError, match="all-gather"):
        report.count("allgather")


# ---- the parser -------------------------------------------------------------------------------------


def test_parse_replica_groups_explicit():
    assert hlo.parse_replica_groups("{{0,1},{2,3},{4,5},{6,7}}") == [[0, 1], [2, 3], [4, 5], [6, 7]]
    assert hlo.parse_replica_groups("{}") == []


def test_parse_replica_groups_iota():
    assert hlo.parse_replica_groups("[4,2]<=[8]") == [[0, 1], [2, 3], [4, 5], [6, 7]]
    assert hlo.parse_replica_groups("[1,8]<=[8]") == [list(range(8))]


def test_parse_replica_groups_iota_transposed():
    assert hlo.parse_replica_groups("[2,4]<=[4,2]T(1,0)") == [[0, 2, 4, 6], [1, 3, 5, 7]]
    assert hlo.parse_replica_groups("[4,2]<=[2,2,2]T(2,1,0)") == [[0, 4], [2, 6], [1, 5], [3, 7]]


def test_parse_replica_groups_mesh():
    assert hlo.parse_replica_groups("mesh['X'=2,'Y'=4] {'Y'}") == [[0, 1, 2, 3], [4, 5, 6, 7]]
    assert hlo.parse_replica_groups("mesh['X'=2,'Y'=4] {'X'}") == [[0, 4], [1, 5], [2, 6], [3, 7]]
    assert hlo.parse_replica_groups("mesh['X'=2,'Y'=4] {'X','Y'}") == [list(range(8))]
    # sub-axes: the major and the minor half of 'Y'
    assert hlo.parse_replica_groups("mesh['X'=2,'Y'=4] {'Y':(1)2}") == [[0, 2], [1, 3], [4, 6], [5, 7]]
    assert hlo.parse_replica_groups("mesh['X'=2,'Y'=4] {'Y':(2)2}") == [[0, 1], [2, 3], [4, 5], [6, 7]]


def test_parse_replica_groups_rejects_garbage():
    with pytest.raises(hlo.HloParseError, match="replica_groups"):
        hlo.parse_replica_groups("groups(0,1)")


_TEXT = """HloModule m, num_partitions=8

%add (x: f32[], y: f32[]) -> f32[] {
  %x = f32[] parameter(0)
  %y = f32[] parameter(1)
  ROOT %s = f32[] add(%x, %y)
}

ENTRY %main (p: f32[2,4]) -> f32[2,4] {
  %p = f32[2,4]{1,0} parameter(0)
  %ar = f32[2,4]{1,0} all-reduce(%p), channel_id=1, replica_groups=[2,4]<=[4,2]T(1,0), to_apply=%add
  %ag-start = (f32[2,4]{1,0}, f32[8,4]{1,0}) all-gather-start(%ar), replica_groups={{0,1,2,3},{4,5,6,7}}
  %ag-done = f32[8,4]{1,0} all-gather-done(%ag-start)
  ROOT %cp = f32[2,4]{1,0} collective-permute(%ar), source_target_pairs={{0,1},{1,0},{2,3},{3,2}}
}
"""


def test_analyze_text_async_pair_counts_once_and_maps_axes():
    # property: -start/-done is one all-gather; device ids map to mesh coordinates of a (4, 2) mesh
    report = comms.analyze_text(_TEXT, mesh={"X": 4, "Y": 2})
    kinds = [c.kind for c in report.collectives]
    assert kinds == ["all-reduce", "all-gather", "collective-permute"]
    ar, ag, cp = report.collectives
    assert (ar.axes, ar.group_size, ar.bytes) == (("X",), 4, 2 * 32 * 3 // 4)
    assert (ag.axes, ag.result_shapes, ag.bytes) == (("X", "Y"), ((8, 4),), 128 * 3 // 4)
    assert (cp.axes, cp.group_size, cp.bytes) == (("Y",), 2, 32)


# A scanned layer's weight gradient as XLA:CPU writes FSDP's reduce-scatter: an all-reduce of the whole
# f32[64,256], then one fusion that slices this device's f32[64,32] and stacks it into the [4,32,64]
# buffer of all layers (a dynamic-update-slice), so the fusion's own result is not the kept block.
_SCAN_TEXT = """HloModule m, num_partitions=8

%add (x: f32[], y: f32[]) -> f32[] {
  %x = f32[] parameter(0)
  %y = f32[] parameter(1)
  ROOT %s = f32[] add(%x, %y)
}

%stack (param_0: f32[4,32,64], param_1: f32[64,256], param_2: s32[], param_3: s32[]) -> f32[4,32,64] {
  %param_0 = f32[4,32,64]{2,1,0} parameter(0)
  %param_1 = f32[64,256]{1,0} parameter(1)
  %zero = s32[] constant(0)
  %param_2 = s32[] parameter(2)
  %ds = f32[64,32]{1,0} dynamic-slice(%param_1, %zero, %param_2), dynamic_slice_sizes={64,32}
  %t = f32[32,64]{1,0} transpose(%ds), dimensions={1,0}
  %b = f32[1,32,64]{2,1,0} bitcast(%t)
  %param_3 = s32[] parameter(3)
  ROOT %dus = f32[4,32,64]{2,1,0} dynamic-update-slice(%param_0, %b, %param_3, %zero, %zero)
}

ENTRY %main (buf: f32[4,32,64], g: f32[64,256], i: s32[], l: s32[]) -> f32[4,32,64] {
  %buf = f32[4,32,64]{2,1,0} parameter(0)
  %g = f32[64,256]{1,0} parameter(1)
  %i = s32[] parameter(2)
  %l = s32[] parameter(3)
  %ar = f32[64,256]{1,0} all-reduce(%g), channel_id=1, replica_groups=[1,8]<=[8], to_apply=%add
  ROOT %f = f32[4,32,64]{2,1,0} fusion(%buf, %ar, %i, %l), kind=kLoop, calls=%stack
}
"""


def test_analyze_text_reduce_scatter_whose_slice_is_fused_into_a_stack():
    # property: all-reduce + a slice fused with a dynamic-update-slice is still reported as the
    # reduce-scatter XLA:GPU would form, keeping the slice's block (not the fusion's stacked result)
    report = comms.analyze_text(_SCAN_TEXT, mesh={"data": 8})
    (c,) = report.collectives
    assert (c.kind, c.emitted_as) == ("reduce-scatter", "all-reduce + dynamic-slice")
    assert c.result_shapes == ((64, 32),)
    assert c.bytes == 64 * 256 * 4 * 7 // 8
    wrong = _SCAN_TEXT.replace("dynamic_slice_sizes={64,32}", "dynamic_slice_sizes={64,64}").replace(
        "f32[64,32]{1,0} dynamic-slice", "f32[64,64]{1,0} dynamic-slice"
    )
    # a slice that keeps 1/4 of the array on 8 devices is no reduce-scatter
    assert comms.analyze_text(wrong, mesh={"data": 8}).collectives[0].kind == "all-reduce"


def test_ring_bytes_formulas():
    assert comms.ring_bytes("all-gather", 4, 100, 400) == 300
    assert comms.ring_bytes("reduce-scatter", 4, 400, 100) == 300
    assert comms.ring_bytes("all-reduce", 4, 400, 400) == 600
    assert comms.ring_bytes("all-to-all", 4, 400, 400) == 300
    assert comms.ring_bytes("collective-permute", 4, 400, 400) == 400
    assert comms.ring_bytes("all-reduce", 1, 400, 400) == 0


def test_parse_module_source_locations():
    text = (
        'HloModule m\n\nFileNames\n1 "/a/b/model.py"\n\nFunctionNames\n1 "layer"\n\nFileLocations\n'
        "1 {file_name_id=1 function_name_id=1 line=42 end_line=42 column=1 end_column=2}\n\nStackFrames\n"
        "1 {file_location_id=1 parent_frame_id=1}\n\n"
        "ENTRY %main (p: f32[4]) -> f32[4] {\n"
        '  ROOT %p = f32[4]{0} parameter(0), metadata={op_name="x, y" stack_frame_id=1}\n}\n'
    )
    module = hlo.parse_module(text)
    assert str(module.source_of(module.entry.root)) == "model.py:42 (layer)"
    assert module.op_name(module.entry.root) == "x, y"


def test_analyze_corrects_upcast_ppermute_inside_loop(mesh24, matmul_args):
    # property: the CPU backend runs this bf16 ppermute in f32; the report gives bf16 and bf16 bytes
    def rolled(a_block, w_block):
        perm = [(j, (j - 1) % 4) for j in range(4)]

        def step(i, carry):
            acc, a = carry
            return acc + a @ w_block[:512], jax.lax.ppermute(a, "Y", perm)

        acc = jax.lax.pcast(jnp.zeros((512, 2048), a_block.dtype), ("X", "Y"), to="varying")
        return jax.lax.fori_loop(0, 4, step, (acc, a_block))[0]

    specs = dict(mesh=mesh24, in_specs=(P("X", "Y"), P(None, "Y")), out_specs=P("X", "Y"))
    report = comms.analyze(jax.jit(jax.shard_map(rolled, **specs)), *matmul_args)
    (c,) = report.collectives
    assert (c.kind, c.dtype, c.executions) == ("collective-permute", "bf16", 4)
    assert c.bytes == 4 * 512 * 512 * 2
    assert "f32[512,512]" in report.text and "collective-permute" in report.text  # what the CPU runs
    assert any("f32" in n for n in report.notes)


# ---- checks built on the analyzer (shardbook.checks) ---------------------------------------------------


def test_expect_no_collectives_messages(mesh24, matmul_args):
    # property: a program with an all-gather fails with expected, got (kind, shape, axis) and a hint
    from shardbook.checks import CheckFailed, expect_no_collectives

    x = _put(jnp.ones((8, 1024), jnp.float32), mesh24, P("X", "Y"))
    per_shard = jax.shard_map(lambda b: b * 2, mesh=mesh24, in_specs=P("X", "Y"), out_specs=P("X", "Y"))
    expect_no_collectives(per_shard, x)  # passes
    with pytest.raises(CheckFailed) as info:
        expect_no_collectives(lambda a, w: a @ w, *matmul_args)
    message = str(info.value)
    assert message.startswith("the compiled program: expected no collectives")
    assert "got 1 collective: all-gather bf16[512,2048] over 'Y' (groups of 4), 1.5 MiB per device" in message
    assert "Hint:" in message


def test_expect_collectives_allowed_and_bytes(mesh24, matmul_args):
    # property: only the allowed kinds pass; a byte budget is enforced with both figures in the message
    from shardbook.checks import CheckFailed, expect_collectives

    ring = _collective_matmul(mesh24, use_loop=True)
    report = expect_collectives(ring, *matmul_args, allowed=("collective-permute",), max_bytes=2 * MiB)
    assert report.total_bytes == 1.5 * MiB
    with pytest.raises(
        CheckFailed, match=r"expected only collective-permute, got all-gather bf16\[512,2048\]"
    ):
        expect_collectives(lambda a, w: a @ w, *matmul_args, allowed="collective-permute")
    with pytest.raises(CheckFailed, match=r"expected at most 1 MiB sent per device, got 1.5 MiB"):
        expect_collectives(ring, *matmul_args, max_bytes=MiB)
    with pytest.raises(ValueError, match="allgather"):
        expect_collectives(ring, *matmul_args, allowed=("allgather",))


def test_expect_no_intermediate_larger_than(mesh24):
    # property: a broadcast product [S, D, F] is caught; the contracted version passes
    from shardbook.checks import CheckFailed, expect_no_intermediate_larger_than

    x = _put(jnp.ones((64, 32), jnp.float32), mesh24, P("X", None))
    w = _put(jnp.ones((32, 48), jnp.float32), mesh24, P(None, "Y"))
    naive = lambda x, w: (x[:, :, None] * w[None, :, :]).sum(axis=1)
    expect_no_intermediate_larger_than(lambda x, w: x @ w, x, w, elements=32 * 32 * 12)
    with pytest.raises(CheckFailed) as info:
        expect_no_intermediate_larger_than(naive, x, w, elements=32 * 32 * 12)
    message = str(info.value)
    assert "expected no array with 12,288 or more elements on a device" in message
    assert "got f32[32,32,12] (12,288 elements)" in message


def test_parser_reads_operands_behind_index_comments():
    # XLA writes /*index=5*/ before the sixth operand of a long list; that operand must not be lost.
    text = """HloModule m

ENTRY %main (p0: f32[4], p1: f32[4], p2: f32[4], p3: f32[4], p4: f32[4], p5: f32[4]) -> f32[4] {
  %p0 = f32[4]{0} parameter(0)
  %p1 = f32[4]{0} parameter(1)
  %p2 = f32[4]{0} parameter(2)
  %p3 = f32[4]{0} parameter(3)
  %p4 = f32[4]{0} parameter(4)
  %p5 = f32[4]{0} parameter(5)
  ROOT %t = (f32[4]{0}, f32[4]{0}, f32[4]{0}, f32[4]{0}, f32[4]{0}, /*index=5*/f32[4]{0}) TUPLE
}
""".replace("TUPLE", "tuple(%p0, %p1, %p2, %p3, %p4, /*index=5*/%p5)")
    module = hlo.parse_module(text)
    root = module.entry.instructions[-1]
    assert root.operands == ["p0", "p1", "p2", "p3", "p4", "p5"]


# ---- corrections for the CPU backend that cannot be applied are said, not skipped ------------------------


def test_every_cpu_pass_the_analyzer_switches_off_is_known_to_this_xla():
    # property: switching off each pass of CPU_PASSES changes the probe program (none is renamed)
    from shardbook.comms import cpu

    assert cpu.passes_without_effect(tuple(cpu.CPU_PASSES)) == ()
    assert cpu.passes_without_effect(("no-such-pass",)) == ("no-such-pass",)


def test_pass_probe_runs_under_a_mesh_the_caller_set():
    # A learner's program is analysed inside `with jax.set_mesh(...)`; the probe, traced on a mesh of
    # its own, must not be judged against the caller's mesh (it raised "context mesh ... should match").
    from shardbook.comms import cpu

    cpu.passes_without_effect.cache_clear()
    with jax.set_mesh(jax.make_mesh((2, 4), ("X", "Y"))):
        assert cpu.passes_without_effect(("no-such-pass",)) == ("no-such-pass",)


def test_renamed_cpu_pass_is_noticed_in_the_report(monkeypatch, matmul_args):
    # property: a pass name this XLA does not know (as after a rename) gives a note, shown when printed
    from shardbook.comms import cpu

    renamed = {
        "float-normalization-bf16-renamed": "runs bf16 collectives in f32",
        "cpu-all-reduce-combiner": "",
    }
    monkeypatch.setattr(cpu, "CPU_PASSES", renamed)
    report = comms.analyze(lambda a, w: a @ w, *matmul_args)
    (note,) = [n for n in report.notes if "could not be applied" in n]
    assert "'float-normalization-bf16-renamed'" in note and "runs bf16 collectives in f32" in note
    assert "cpu-all-reduce-combiner" not in note  # the name XLA knows is not reported
    assert f"* {note}" in str(report)
    assert html.escape(note) in report._repr_html_()
    monkeypatch.undo()
    assert not any("could not be applied" in n for n in comms.analyze(lambda a, w: a @ w, *matmul_args).notes)


def test_refused_cpu_correction_is_noticed():
    # property: when XLA refuses the bf16-preserving compile, the text is None and a note says why
    from shardbook.comms import cpu

    class Refusing:
        def compile(self, compiler_options=None):
            raise jax.errors.JaxRuntimeError(
                "INVALID_ARGUMENT: No such compile option: 'xla_disable_hlo_passes'"
            )

    text, notes = cpu.compile_without_cpu_passes(Refusing())
    assert text is None
    assert len(notes) == 1 and "No such compile option" in notes[0] and "could not be applied" in notes[0]


def test_cpu_correction_is_skipped_for_a_program_without_collectives(monkeypatch, mesh24):
    # property: only a program with collectives pays for (and can be affected by) the corrected copy
    # and the pass probe; of those, only one a pass acted on (bf16, all-reduces combined) pays for the copy
    from shardbook.comms import compiling, cpu

    asked, copies = [], []
    monkeypatch.setattr(cpu, "passes_without_effect", lambda names: asked.append(names) or ())
    real_copy = compiling.compile_without_cpu_passes
    monkeypatch.setattr(
        compiling, "compile_without_cpu_passes", lambda lowered: copies.append(lowered) or real_copy(lowered)
    )
    x = _put(jnp.ones((8, 1024), jnp.float32), mesh24, P("X", "Y"))
    assert comms.analyze(lambda b: b * 2, x).count() == 0 and copies == [] and asked == []
    assert comms.analyze(lambda b: b.sum(), x).count("all-reduce") >= 1 and copies == [] and len(asked) == 1
    assert comms.analyze(lambda b: b.astype(jnp.bfloat16).sum(), x).count() >= 1 and len(copies) == 1
    combined = comms.analyze(lambda b: (b.sum(), (b * b).sum()), x)
    assert "all-reduce" in combined.text and len(copies) == 2 and len(asked) == 3


@pytest.mark.parametrize(
    "fn",
    [
        lambda b: b.sum(),  # one all-reduce of one array
        lambda b: (b @ b.T).sum(1),  # an all-gather, then a reduction
        lambda b: jnp.cumsum(b, axis=0),  # a scan over the sharded rows
        lambda b: (b.sum(), (b * b).sum()),  # independent all-reduces, combined
        lambda b: (b.sum(0), b.sum(1)),  # all-reduces over different axes
        lambda b: b.astype(jnp.bfloat16).sum(0),  # bf16
    ],
)
def test_a_program_whose_copy_is_skipped_is_its_copy(mesh24, fn):
    # property: where copy_can_differ says no, the copy without the CPU passes is the executed program
    # (its text without debug information), so the report read from either is the same
    from shardbook.comms import compiling, cpu

    x = _put(jnp.arange(8 * 64, dtype=jnp.float32).reshape(8, 64), mesh24, P("X", "Y"))
    lowered = compiling.lower(jax.jit(fn), (x,), {})
    text = lowered.compile().as_text()
    copy, _ = cpu.compile_without_cpu_passes(lowered)
    assert cpu.has_collectives(text) and copy is not None
    if not cpu.copy_can_differ(lowered, text):
        assert hlo.without_debug_info(copy) == hlo.without_debug_info(text)


def test_a_program_read_back_from_the_compilation_cache_reads_as_compiled(mesh24):
    # property: the tests compile through JAX's persistent compilation cache (tests/conftest.py); a
    # program read back from it is the program compiled, its debug information aside, and the analyzer
    # reads the same collectives, at the same source lines, from either
    hits = []
    x = jax.ShapeDtypeStruct((8, 96), jnp.float32, sharding=NamedSharding(mesh24, P("X", "Y")))

    def text() -> str:  # lowered anew each time: a lowering keeps the program it compiled
        return jax.jit(lambda b: (b @ b.T).sum(1)).lower(x).compile().as_text()

    def listen(event, **kwargs):
        hits.extend([event] if event == "/jax/compilation_cache/cache_hits" else [])

    jax.monitoring.register_event_listener(listen)
    try:
        compiled, read_back = text(), text()
    finally:
        jax.monitoring.unregister_event_listener(listen)
    assert hits, "the second compile was read from the cache"
    assert hlo.without_debug_info(read_back) == hlo.without_debug_info(compiled)
    assert comms.analyze_text(read_back).rows() == comms.analyze_text(compiled).rows()
    assert comms.analyze_text(compiled).rows()[0][-1].startswith("test_comms.py:")


def test_copies_compiled_only_to_be_read_are_the_same_without_llvm_optimisations(mesh24):
    # property: the analyzer's never-executed copies (bf16 kept, footprint's memory-scheduled one) skip
    # LLVM's optimisations (cpu.READ_ONLY); their text (debug information aside: a compile read from
    # JAX's persistent cache carries its own) and memory_analysis() are those of a copy compiled at the
    # default level, for a sharded, scanned step with bf16 and combined all-reduces
    from shardbook.comms import cpu, memory

    def loss(ws, x):
        h, _ = jax.lax.scan(jax.checkpoint(lambda h, w: (jnp.tanh(h @ w), None)), x, ws)
        return (h.astype(jnp.float32) ** 2).sum()

    ws = jax.ShapeDtypeStruct((4, 256, 256), jnp.bfloat16, sharding=NamedSharding(mesh24, P(None, "Y")))
    x = jax.ShapeDtypeStruct((64, 256), jnp.bfloat16, sharding=NamedSharding(mesh24, P("X")))
    lowered = jax.jit(jax.value_and_grad(loss, argnums=(0, 1))).lower(ws, x)
    fields = ("argument_size_in_bytes", "output_size_in_bytes", "alias_size_in_bytes", "temp_size_in_bytes")
    passes = {"xla_disable_hlo_passes": cpu.disabled_passes()}
    memory_only = {k: v for k, v in memory.CPU_MEMORY_OPTIONS.items() if k not in cpu.READ_ONLY}
    for options in (passes, memory_only):
        default, read_only = (
            lowered.compile(compiler_options=o) for o in (options, {**options, **cpu.READ_ONLY})
        )
        assert comms.analyze_text(default.as_text()).count("all-reduce") >= 1
        assert hlo.without_debug_info(read_only.as_text()) == hlo.without_debug_info(default.as_text())
        stats = [tuple(getattr(c.memory_analysis(), f) for f in fields) for c in (default, read_only)]
        assert stats[0] == stats[1]
    copy, _ = cpu.compile_without_cpu_passes(lowered)
    without_passes = lowered.compile(compiler_options=passes).as_text()
    assert copy is not None and hlo.without_debug_info(copy) == hlo.without_debug_info(without_passes)


def test_footprint_reads_what_a_program_keeps_alive_on_cpu():
    # Four layers, each gathered from its shards and used once: XLA:CPU's default scheduler starts every
    # all-gather first, so its memory_analysis holds all four gathered weights at once; footprint's copy,
    # scheduled for memory, holds about one (and its options name a pass the analyzer knows).
    mesh = jax.make_mesh((8,), ("X",))
    shards = [
        jax.ShapeDtypeStruct((256, 256), jnp.float32, sharding=NamedSharding(mesh, P("X"))) for _ in range(4)
    ]
    x = jax.ShapeDtypeStruct((8, 256), jnp.float32, sharding=NamedSharding(mesh, P("X")))

    def forward(ws, h):
        for w in ws:
            h = jnp.tanh(h @ jax.reshard(w, P()))
        return h

    with jax.set_mesh(mesh):
        step = jax.jit(forward)
        plain = step.lower(shards, x).compile().memory_analysis()
        memory = comms.footprint(step, shards, x)
    gathered = 256 * 256 * 4
    assert plain.temp_size_in_bytes >= 4 * gathered
    assert memory.temporaries < 2 * gathered
    assert memory.arguments == plain.argument_size_in_bytes == 4 * gathered // 8 + 256 * 4
    assert memory.peak == memory.arguments + memory.outputs - memory.aliased + memory.temporaries
    assert comms.memory.CPU_MEMORY_OPTIONS["xla_disable_hlo_passes"] in comms.cpu.CPU_PASSES
    assert "peak" in str(memory) and "temporaries" in str(memory)


def test_without_debug_info_drops_debug_information_alone(mesh24):
    # property: hlo.without_debug_info (how two compiles of one program are compared) keeps every
    # computation and instruction with its type, operands and attributes, and drops each metadata
    # attribute and the tables of source locations
    x = jax.ShapeDtypeStruct((8, 64), jnp.bfloat16, sharding=NamedSharding(mesh24, P("X", "Y")))
    text = jax.jit(lambda b: jnp.tanh(b @ b.T).sum(0)).lower(x).compile().as_text()
    stripped = hlo.without_debug_info(text)
    assert "metadata={" in text and "\nStackFrames\n" in text  # a program with debug information
    assert "metadata=" not in stripped and not any(t in stripped for t in ("FileNames", "StackFrames"))

    def program(t: str) -> dict:
        def attributes(i: hlo.Instruction) -> dict:
            return {k: v for k, v in hlo._attributes(i.attrs_text).items() if k != "metadata"}

        computations = hlo.parse_module(t).computations.items()
        return {
            n: [(i.name, i.type_text, i.opcode, i.operands, attributes(i)) for i in c.instructions]
            for n, c in computations
        }

    assert program(stripped) == program(text)


def test_instruction_attributes_respect_brackets_strings_and_escaped_quotes():
    line = (
        "%ar = f32[8]{0} all-reduce(f32[8]{0} %p), channel_id=1, replica_groups={{0,1},{2,3}}, "
        'to_apply=%add, metadata={op_name="jit(f)/a\\",b=2" source_file="x.py" source_line=3}, '
        'backend_config={"k":[1,2]}'
    )
    inst = hlo._parse_instruction(line)
    assert inst.operands == ["p"]
    assert inst.attr("replica_groups") == "{{0,1},{2,3}}"
    assert inst.attr("to_apply") == "%add"
    assert inst.attr("metadata") == '{op_name="jit(f)/a\\",b=2" source_file="x.py" source_line=3}'
    assert inst.attr("b") is None  # inside the quoted op_name, not an attribute
    assert inst.backend_config() == {"k": [1, 2]}
    assert inst.called() == [("to_apply", "add")]
