"""How the analyzer and the cost model read the TPU compiler's collective fusions: an asynchronous
collective in parts (a start, continuations, a done), a reduce-scatter fused whole into one kernel
(an all-reduce-scatter fusion), and two different collectives on one channel."""

import dataclasses

from shardbook import comms
from shardbook.cost import estimate

# An all-gather the TPU compiler runs as an asynchronous fusion in parts (FSDP's gathers in chapter 11):
# a start, a continuation and a done, each fusion holding the same all-gather on one channel; beside it
# another gather on a channel of its own.
_PARTS_TEXT = """HloModule parts, num_partitions=4

%start (p.1: bf16[1,512,2048]) -> bf16[1,2048,2048] {
  %p.1 = bf16[1,512,2048]{2,1,0} parameter(0)
  ROOT %ag.1 = bf16[1,2048,2048] all-gather(%p.1), channel_id=5, replica_groups={{0,1,2,3}}, dimensions={1}
}

%continuation (p.2: bf16[1,512,2048]) -> bf16[1,2048,2048] {
  %p.2 = bf16[1,512,2048]{2,1,0} parameter(0)
  ROOT %ag.2 = bf16[1,2048,2048] all-gather(%p.2), channel_id=5, replica_groups={{0,1,2,3}}, dimensions={1}
}

%done (p.3: bf16[1,512,2048]) -> bf16[1,2048,2048] {
  %p.3 = bf16[1,512,2048]{2,1,0} parameter(0)
  ROOT %ag.3 = bf16[1,2048,2048] all-gather(%p.3), channel_id=5, replica_groups={{0,1,2,3}}, dimensions={1}
}

%other (p.4: bf16[1,512,2048]) -> bf16[1,2048,2048] {
  %p.4 = bf16[1,512,2048]{2,1,0} parameter(0)
  ROOT %ag.4 = bf16[1,2048,2048] all-gather(%p.4), channel_id=6, replica_groups={{0,1,2,3}}, dimensions={1}
}

ENTRY %main (a: bf16[1,512,2048]) -> (bf16[1,2048,2048], bf16[1,2048,2048]) {
  %a = bf16[1,512,2048]{2,1,0} parameter(0)
  %s = bf16[1,2048,2048]{2,1,0} fusion(%a), kind=kCustom, calls=%start
  %c = bf16[1,2048,2048]{2,1,0} fusion(%a), kind=kCustom, calls=%continuation
  %d = bf16[1,2048,2048]{2,1,0} fusion(%a), kind=kCustom, calls=%done
  %o = bf16[1,2048,2048]{2,1,0} fusion(%a), kind=kCustom, calls=%other
  ROOT %t = (bf16[1,2048,2048]{2,1,0}, bf16[1,2048,2048]{2,1,0}) tuple(%d, %o)
}
"""


def test_an_asynchronous_collective_in_parts_counts_once():
    # property: the parts of one asynchronous collective fusion (one channel) are one collective, its
    # bytes counted once, how many parts it ran in kept; a gather on another channel is another one
    report = comms.analyze_text(_PARTS_TEXT)
    assert [(c.name, c.parts) for c in report.collectives] == [("ag.1", 3), ("ag.4", 1)]
    assert report.total_bytes == 2 * 3 * 512 * 2048 * 2  # each sends 3 of its 4 blocks of bf16[1,512,2048]


# The TPU compiler's form (tiled layouts): an all-gather in three fusions on one channel, a start, a
# compute fusion that carries it on beside a matmul, and a done
_L = "{1,0:T(8,128)}"
_GROUP = "replica_groups={{0,1,2,3,4,5,6,7}}, dimensions={0}, use_global_device_ids=true"
_TPU_PARTS_TEXT = f"""HloModule m, num_partitions=8
%g1 (p: f32[1024,1024]) -> f32[8192,1024] {{
  %p = f32[1024,1024]{_L} parameter(0)
  ROOT %ag = f32[8192,1024]{_L} all-gather(%p), channel_id=9, {_GROUP}
}}
%g2 (p: f32[1024,1024], a: f32[2048,2048], b: f32[2048,2048]) -> (f32[8192,1024], f32[2048,2048]) {{
  %p = f32[1024,1024]{_L} parameter(0)
  %ag.1 = f32[8192,1024]{_L} all-gather(%p), channel_id=9, {_GROUP}
  %a = f32[2048,2048]{_L} parameter(1)
  %b = f32[2048,2048]{_L} parameter(2)
  %d = f32[2048,2048]{_L} dot(%a, %b), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}
  ROOT %t = (f32[8192,1024]{_L}, f32[2048,2048]{_L}) tuple(%ag.1, %d)
}}
%g3 (p: f32[1024,1024]) -> f32[8192,1024] {{
  %p = f32[1024,1024]{_L} parameter(0)
  ROOT %ag.2 = f32[8192,1024]{_L} all-gather(%p), channel_id=9, {_GROUP}
}}
ENTRY %e (x: f32[1024,1024], a: f32[2048,2048], b: f32[2048,2048]) -> f32[8192,1024] {{
  %x = f32[1024,1024]{_L} parameter(0)
  %a = f32[2048,2048]{_L} parameter(1)
  %b = f32[2048,2048]{_L} parameter(2)
  %start = f32[1024,1024]{_L} fusion(%x), kind=kCustom, calls=%g1
  %mid = (f32[8192,1024]{_L}, f32[2048,2048]{_L}) fusion(%start, %a, %b), kind=kOutput, calls=%g2
  %m0 = f32[1024,1024]{_L} get-tuple-element(%mid), index=0
  ROOT %done = f32[8192,1024]{_L} fusion(%m0), kind=kCustom, calls=%g3
}}
"""


def test_the_cost_model_plays_a_collective_in_parts_on_the_links_from_its_start_to_its_done():
    # property: the gather a TPU program runs as fusions in parts is on the links once, from the end of
    # its start to its done; the compute fusion between them runs beside it, and the done waits for it
    report = comms.analyze_text(_TPU_PARTS_TEXT)
    assert report.platform == "tpu" and [(c.name, c.parts) for c in report.collectives] == [("ag", 3)]
    est = estimate(report, "v5e")
    (link,) = [e for e in est.events if e.stream == "communication"]
    start, mid, done = (
        next(e for e in est.events if e.label == f"fusion {n}") for n in ("start", "mid", "done")
    )
    assert link.kind == "all-gather" and link.start == start.end and done.start == link.end and done.blocked
    assert mid.start < link.end and mid.end < link.end  # the matmul beside the gather, not after it
    assert est.seconds == done.end
    # left off the links (the model before the rule), nothing is on them and the done follows the
    # matmul at once, not the gather
    off = estimate(dataclasses.replace(report, collectives=[]), "v5e").events
    off_mid, off_done = (next(e for e in off if e.label == f"fusion {n}") for n in ("mid", "done"))
    assert not [e for e in off if e.stream == "communication"]
    assert off_done.start == off_mid.end and not off_done.blocked


# Two different reduce-scatters the TPU compiler fused whole into one kernel each (a fusion calling
# %all-reduce-scatter: an all-reduce, then this device's block), both on channel 1, as chapter 11's tiny
# FSDP x TP step has them: one in a loop's body, one in the entry
_GROUP4 = "replica_groups={{0,2,4,6},{1,3,5,7}}, use_global_device_ids=true"


def _whole_reduce_scatter(name: str, rows: int, cols: int) -> str:
    r = rows // 4
    return f"""%{name} (x: f32[{rows},{cols}]) -> f32[{r},{cols}] {{
  %x = f32[{rows},{cols}]{_L} parameter(0)
  %ar = f32[{rows},{cols}]{_L} all-reduce(%x), channel_id=1, {_GROUP4}, to_apply=%add
  %table = u32[8]{{0:T(128)}} constant({{0, 0, 1, 1, 2, 2, 3, 3}})
  %pid = u32[] partition-id()
  %i = u32[1]{{0:T(128)}} dynamic-slice(%table, %pid), dynamic_slice_sizes={{1}}
  %ib = u32[]{{:T(128)}} bitcast(%i)
  %n = u32[] constant({r})
  %row = u32[]{{:T(128)}} multiply(%ib, %n)
  %zero = u32[] constant(0)
  ROOT %ds = f32[{r},{cols}]{_L} dynamic-slice(%ar, %row, %zero), dynamic_slice_sizes={{{r},{cols}}}
}}
"""


_WHOLE_TEXT = f"""HloModule m, num_partitions=8
%add (x: f32[], y: f32[]) -> f32[] {{
  %x = f32[] parameter(0)
  %y = f32[] parameter(1)
  ROOT %s = f32[] add(%x, %y)
}}
{_whole_reduce_scatter("all-reduce-scatter.1", 4096, 1024)}
{_whole_reduce_scatter("all-reduce-scatter.2", 2048, 1024)}
%body (s: (s32[], f32[4096,1024])) -> (s32[], f32[4096,1024]) {{
  %s = (s32[], f32[4096,1024]{_L}) parameter(0)
  %k = s32[] get-tuple-element(%s), index=0
  %g = f32[4096,1024]{_L} get-tuple-element(%s), index=1
  %rs = f32[1024,1024]{_L} fusion(%g), kind=kCustom, calls=%all-reduce-scatter.1
  %one = s32[] constant(1)
  %k1 = s32[] add(%k, %one)
  ROOT %t = (s32[], f32[4096,1024]{_L}) tuple(%k1, %g)
}}
%cond (s: (s32[], f32[4096,1024])) -> pred[] {{
  %s = (s32[], f32[4096,1024]{_L}) parameter(0)
  %k = s32[] get-tuple-element(%s), index=0
  %two = s32[] constant(2)
  ROOT %lt = pred[] compare(%k, %two), direction=LT
}}
ENTRY %e (g: f32[4096,1024], h: f32[2048,1024]) -> f32[512,1024] {{
  %g = f32[4096,1024]{_L} parameter(0)
  %h = f32[2048,1024]{_L} parameter(1)
  %zero = s32[] constant(0)
  %init = (s32[], f32[4096,1024]{_L}) tuple(%zero, %g)
  %loop = (s32[], f32[4096,1024]{_L}) while(%init), condition=%cond, body=%body
  ROOT %rs = f32[512,1024]{_L} fusion(%h), kind=kCustom, calls=%all-reduce-scatter.2
}}
"""


def test_two_collectives_on_one_channel_are_two_collectives():
    # property: parts of one asynchronous collective share kind, channel and shape; two different
    # reduce-scatters the compiler put on the same channel are counted apart, each with its own bytes
    # (matched on the channel alone, the second was taken for a part of the first and never counted)
    report = comms.analyze_text(_WHOLE_TEXT, mesh={"data": 4, "model": 2})
    assert [(c.kind, c.result_shapes, c.executions, c.parts) for c in report.collectives] == [
        ("reduce-scatter", ((1024, 1024),), 2, 1),
        ("reduce-scatter", ((512, 1024),), 1, 1),
    ]
    assert report.total_bytes == (2 * 4096 + 2048) * 1024 * 4 * 3 // 4


# the TPU compiler's all-reduce-scatter fusion of two arrays at once: one all-reduce of both, then
# this device's block of each
_T = "{0,1:T(8,128)}"
_TUPLE_TEXT = f"""HloModule m, num_partitions=8
%add (x: f32[], y: f32[]) -> f32[] {{
  %x = f32[] parameter(0)
  %y = f32[] parameter(1)
  ROOT %s = f32[] add(%x, %y)
}}
%all-reduce-scatter (a: f32[256,64], b: f32[64,256]) -> (f32[64,64], f32[64,64]) {{
  %a = f32[256,64]{_L} parameter(0)
  %b = f32[64,256]{_T} parameter(1)
  %ar = (f32[256,64]{_L}, f32[64,256]{_T}) all-reduce(%a, %b), channel_id=3, {_GROUP4}, to_apply=%add
  %a.r = f32[256,64]{_L} get-tuple-element(%ar), index=0
  %b.r = f32[64,256]{_T} get-tuple-element(%ar), index=1
  %row = u32[] partition-id()
  %zero = u32[] constant(0)
  %a.k = f32[64,64]{_L} dynamic-slice(%a.r, %row, %zero), dynamic_slice_sizes={{64,64}}
  %b.k = f32[64,64]{_T} dynamic-slice(%b.r, %zero, %row), dynamic_slice_sizes={{64,64}}
  ROOT %t = (f32[64,64]{_L}, f32[64,64]{_T}) tuple(%a.k, %b.k)
}}
ENTRY %e (a: f32[256,64], b: f32[64,256]) -> (f32[64,64], f32[64,64]) {{
  %a = f32[256,64]{_L} parameter(0)
  %b = f32[64,256]{_T} parameter(1)
  ROOT %rs = (f32[64,64]{_L}, f32[64,64]{_T}) fusion(%a, %b), kind=kCustom, calls=%all-reduce-scatter
}}
"""


def test_one_all_reduce_of_several_arrays_each_sliced_is_one_reduce_scatter():
    # property: an all-reduce of a tuple whose every array is cut to this device's 1/n is a
    # reduce-scatter of them all, (n-1)/n of their bytes; one array used whole keeps it an all-reduce
    (c,) = comms.analyze_text(_TUPLE_TEXT, mesh={"data": 4, "model": 2}).collectives
    assert (c.kind, c.result_shapes) == ("reduce-scatter", ((64, 64), (64, 64)))
    assert c.bytes == 2 * 256 * 64 * 4 * 3 // 4
    whole = _TUPLE_TEXT.replace("tuple(%a.k, %b.k)", "tuple(%a.k, %b.r)")
    (c,) = comms.analyze_text(whole, mesh={"data": 4, "model": 2}).collectives
    assert c.kind == "all-reduce" and c.bytes == 2 * 2 * 256 * 64 * 4 * 3 // 4


def test_the_cost_model_puts_a_collective_fused_whole_into_a_kernel_on_the_links():
    # property: a reduce-scatter fused whole into one kernel (no start and done of its own) is on the
    # links from when its kernel starts, and the kernel ends when both have: each of the three runs
    # (two in the loop, one after it) puts its bytes on the links, and the step waits for the last
    report = comms.analyze_text(_WHOLE_TEXT, mesh={"data": 4, "model": 2})
    est = estimate(report, "v5e")
    links = [e for e in est.events if e.stream == "communication"]
    kernels = [e for e in est.events if e.label.startswith("fusion rs")]
    assert [e.kind for e in links] == ["reduce-scatter"] * 3 and len(kernels) == 3
    for link, kernel in zip(links, kernels, strict=True):
        assert link.start == kernel.start and kernel.end < link.end  # the links take longer than the slice
    assert kernels[1].start >= links[0].end  # the loop's next kernel waits for the links, not the slice
    assert est.seconds >= links[-1].end
    # left off the links (the model before the rule), nothing is on them and the step is shorter
    off = estimate(dataclasses.replace(report, collectives=[]), "v5e")
    assert not [e for e in off.events if e.stream == "communication"]
    assert off.events[-1].end < links[-1].end
