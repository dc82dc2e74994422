"""Tests for shardbook.viz: the text table and the picture agree with JAX's own layout."""

import re

import matplotlib

matplotlib.use("Agg")  # no display in tests; set before pyplot is imported

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from jax.sharding import AxisType, NamedSharding  # noqa: E402
from jax.sharding import PartitionSpec as P  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from shardbook import (  # noqa: E402
    accumulator_ring,
    analyze,
    animate_ring_steps,
    animation_html,
    describe_sharding,
    draw_accumulator_ring,
    draw_collective,
    draw_communication,
    draw_gradient_reduction,
    draw_precision_tradeoff,
    draw_residuals,
    draw_ring_steps,
    draw_routing,
    draw_sharding,
    draw_timeline,
    route_counts,
)
from shardbook.viz import ring as ring_module  # noqa: E402
from shardbook.viz._common import _PALETTE  # noqa: E402


@pytest.fixture(scope="module")
def mesh():
    return jax.make_mesh((4, 2), ("X", "Y"))


def _labels(fig: Figure) -> set[str]:
    """The device labels drawn in the blocks, with wrapped lines joined back."""
    texts = [t.get_text() for t in fig.axes[0].texts]
    return {t.replace("\n", ",") for t in texts if re.fullmatch(r"d\d+(,\s*d\d+)*", t.replace("\n", ","))}


def _bounds(index, shape) -> list[tuple[int, int]]:
    return [s.indices(n)[:2] for s, n in zip(index, shape, strict=True)]


def _expected_labels(sharding, shape) -> set[str]:
    by_index: dict[str, list[int]] = {}
    for device, index in sharding.devices_indices_map(shape).items():
        by_index.setdefault(repr(_bounds(index, shape)), []).append(device.id)
    return {",".join(f"d{i}" for i in sorted(ids)) for ids in by_index.values()}


def test_describe_sharding_matches_devices_indices_map(mesh):
    # Property: every device of devices_indices_map appears on the row of exactly the block it holds.
    sharding = NamedSharding(mesh, P("X", "Y"))
    text = describe_sharding(sharding, (8, 4))
    rows = dict(re.findall(r"^\s+(\[[^\]]*\])\s+(\S+)$", text, flags=re.M))
    for device, index in sharding.devices_indices_map((8, 4)).items():
        block = "[" + ", ".join(f"{a}:{b}" for a, b in _bounds(index, (8, 4))) + "]"
        assert rows[block] == f"d{device.id}", text
    assert "block (2, 2) per device" in text


def test_describe_sharding_order_follows_mesh_axes(mesh):
    # Property: P(('Y','X')) puts devices on the rows in a different order than P(('X','Y')).
    xy = describe_sharding(NamedSharding(mesh, P(("X", "Y"), None)), (8, 4))
    yx = describe_sharding(NamedSharding(mesh, P(("Y", "X"), None)), (8, 4))
    order = lambda text: re.findall(r"^\s+\[\d+:\d+, 0:4\]\s+d(\d)$", text, flags=re.M)
    assert order(xy) == list("01234567")
    assert order(yx) == list("02461357")


def test_describe_sharding_of_array_uses_its_type(mesh):
    # Property: an array brings its own shape, dtype and sharding.
    x = jax.device_put(jnp.zeros((16,), jnp.float32), NamedSharding(mesh, P(("X", "Y"))))
    text = describe_sharding(x)
    assert text.startswith("float32[16] · P(('X', 'Y'))")
    assert "[14:16]" in text


def test_describe_sharding_names_replicated_axes(mesh):
    # Property: P('X') on a (4, 2) mesh is replicated over 'Y', twice; P() over everything.
    assert "replicated over 'Y' (×2)" in describe_sharding(NamedSharding(mesh, P("X")), (8, 4))
    assert "fully replicated (×8)" in describe_sharding(NamedSharding(mesh, P()), (8, 4))
    assert "replicated" not in describe_sharding(NamedSharding(mesh, P("X", "Y")), (8, 4))


def test_draw_sharding_labels_match_devices_indices_map(mesh):
    # Property: the drawn labels are exactly the device groups of devices_indices_map.
    for spec, shape in [(P("X", "Y"), (8, 4)), (P(("Y", "X"), None), (8, 4)), (P(("X", "Y")), (16,))]:
        sharding = NamedSharding(mesh, spec)
        fig = draw_sharding(sharding, shape)
        assert isinstance(fig, Figure)
        assert _labels(fig) == _expected_labels(sharding, shape), spec


def test_draw_sharding_replicated_blocks_show_all_devices(mesh):
    # Property: a replicated block lists every device holding it, and the title says over which axis.
    fig = draw_sharding(NamedSharding(mesh, P("X")), (8, 4))
    assert _labels(fig) == {"d0,d1", "d2,d3", "d4,d5", "d6,d7"}
    assert "replicated over 'Y' (×2)" in fig.axes[0].get_title(loc="left")
    fig = draw_sharding(NamedSharding(mesh, P()), (8, 4))
    assert _labels(fig) == {"d0,d1,d2,d3,d4,d5,d6,d7"}


def test_draw_sharding_title_shows_spec_and_block_shape(mesh):
    # Property: the title carries the type, the spec and the per-device block shape.
    x = jax.device_put(jnp.zeros((8, 4), jnp.float32), NamedSharding(mesh, P("X", "Y")))
    title = draw_sharding(x).axes[0].get_title(loc="left")
    assert "float32[8,4] · P('X', 'Y')" in title
    assert "block (2, 2) per device" in title
    assert draw_sharding(x, title="my x").axes[0].get_title(loc="left").startswith("my x\n")


def test_draw_sharding_saves_png(mesh, tmp_path):
    # Property: path= writes a PNG file.
    path = tmp_path / "x.png"
    draw_sharding(NamedSharding(mesh, P("X", "Y")), (8, 4), path=path)
    assert path.exists()
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_draw_sharding_does_not_leave_figures_open(mesh):
    # Property: a figure it creates is closed in pyplot (Jupyter shows it once, via the return value);
    # a figure the caller passes in through ax stays open.
    before = len(plt.get_fignums())
    draw_sharding(NamedSharding(mesh, P("X")), (8, 4))
    assert len(plt.get_fignums()) == before
    fig, ax = plt.subplots()
    assert draw_sharding(NamedSharding(mesh, P("X")), (8, 4), ax=ax) is fig
    assert plt.fignum_exists(fig.number)
    plt.close(fig)


def test_draw_sharding_rejects_more_than_two_dimensions(mesh):
    # Property: a 3-D array is refused with a message naming the rank and the way out.
    with pytest.raises(ValueError, match=r"got a 3-D shape \(8, 2, 3\).*describe_sharding"):
        draw_sharding(NamedSharding(mesh, P("X")), (8, 2, 3))
    assert "[6:8, 0:2, 0:3]   d6,d7" in describe_sharding(NamedSharding(mesh, P("X")), (8, 2, 3))


def test_bad_input_messages_quote_the_value(mesh):
    # Property: errors say what was expected and what came back.
    with pytest.raises(TypeError, match="expected a jax.Array or NamedSharding, got list"):
        draw_sharding([1, 2, 3])
    with pytest.raises(TypeError, match="does not know the array's shape"):
        describe_sharding(NamedSharding(mesh, P("X")))
    with pytest.raises(TypeError, match=r"got '8, 4'"):
        describe_sharding(NamedSharding(mesh, P("X")), "8, 4")
    with pytest.raises(ValueError, match=r"cannot lay out shape \(6, 4\) with P\('X'\)"):
        describe_sharding(NamedSharding(mesh, P("X")), (6, 4))
    with pytest.raises(ValueError, match=r"P\('X', None\) has 2 entries but the shape \(8,\)"):
        describe_sharding(NamedSharding(mesh, P("X", None)), (8,))
    x = jnp.zeros((8, 4))
    with pytest.raises(ValueError, match=r"shape=\(4, 8\) does not match the array's shape \(8, 4\)"):
        describe_sharding(x, (4, 8))


# --- draw_collective, draw_communication, draw_ring_steps (chapters 1-5) ---


@pytest.fixture(scope="module")
def tags(mesh):
    """A 4 x 4 array split P('X'): the device at X = i holds row i, whose entries are (k + 1) * 10**i."""
    values = np.array([[(k + 1) * 10**i for k in range(4)] for i in range(4)], dtype=np.float32)
    return jax.device_put(values, NamedSharding(mesh, P("X")))


def _cells(fig: Figure, panel: str) -> dict[tuple[int, tuple[int, int]], tuple[str, list[str]]]:
    """(device id, (row, col)) -> (face colour as hex, the devices the value came from), per panel."""
    from matplotlib.colors import to_hex

    out = {}
    for ax in fig.axes:
        for patch in ax.patches:
            gid = patch.get_gid() or ""
            if gid.startswith(panel + ":"):
                _, device, rc, origin = gid.split(":")
                r, c = map(int, rc.split(","))
                out[(int(device[1:]), (r, c))] = (
                    to_hex(patch.get_facecolor()),
                    [o for o in origin.split(",") if o],
                )
    return out


def _texts(fig: Figure) -> list[str]:
    return [t.get_text() for ax in fig.axes for t in ax.texts] + [
        fig._suptitle.get_text() if fig._suptitle else ""
    ]


def test_draw_collective_ppermute_moves_each_block_to_its_target(mesh, tags):
    # Property: after ppermute i -> i+1 along 'X', device at X = i holds the block (and colour) of X = i-1.
    shift = [(i, (i + 1) % 4) for i in range(4)]
    fig = draw_collective(tags, "ppermute", "X", perm=shift, where={"Y": 0})
    after, before = _cells(fig, "after"), _cells(fig, "before")
    column = [int(d.id) for d in mesh.devices[:, 0]]
    assert {d for d, _ in after} == set(column)  # where={'Y': 0}: only that column is drawn
    for i, device in enumerate(column):
        source = column[(i - 1) % 4]
        assert after[(device, (0, 0))] == (_PALETTE[source], [f"d{source}"])
        assert before[(device, (0, 0))][0] == _PALETTE[device]
    # the values drawn are the values JAX computed: device X=1 now shows row 0's entries 1..4
    assert {"1", "2", "3", "4", "1000"} <= set(_texts(fig))


def test_draw_collective_psum_cells_are_grey_sums_of_the_group(mesh, tags):
    # Property: every value after psum over 'X' combines the 4 devices of its 'X' group (grey).
    fig = draw_collective(tags, "psum", "X")
    after = _cells(fig, "after")
    assert len(after) == 8 * 4  # every device, a 1 x 4 block each
    for (device, _), (colour, origin) in after.items():
        group = [int(d.id) for d in mesh.devices[:, [int(d.id) for d in mesh.devices.flat].index(device) % 2]]
        assert colour == "#cfcfcf" and sorted(origin) == sorted(f"d{g}" for g in group)
    assert "1111" in _texts(fig)  # 1 + 10 + 100 + 1000, computed by JAX


def test_draw_collective_all_gather_and_scatter_shapes(mesh, tags):
    # Property: all_gather gives every device all 4 rows, coloured by their source; psum_scatter keeps a
    # 1 x 1 share, combined from the group; all_to_all hands device i chunk i of every block.
    column = [int(d.id) for d in mesh.devices[:, 0]]
    gathered = _cells(draw_collective(tags, "all_gather", "X", axis=0, tiled=True, where={"Y": 0}), "after")
    for device in column:
        assert [gathered[(device, (r, 0))][1] for r in range(4)] == [[f"d{c}"] for c in column]
    scattered = _cells(draw_collective(tags, "psum_scatter", "X", scatter_dimension=1, tiled=True), "after")
    assert {rc for _, rc in scattered} == {(0, 0)}
    swapped = _cells(
        draw_collective(tags, "all_to_all", "X", split_axis=1, concat_axis=0, tiled=True), "after"
    )
    assert [swapped[(column[1], (r, 0))][1] for r in range(4)] == [[f"d{c}"] for c in column]


@pytest.mark.parametrize(
    ("collective", "params"),
    [("all_gather", {"axis": 0, "tiled": True}),
     ("all_to_all", {"split_axis": 1, "concat_axis": 0, "tiled": True}),
     ("psum_scatter", {"scatter_dimension": 1, "tiled": True})],
)  # fmt: skip
def test_draw_collective_rows_line_up_and_titles_clear_the_heading(mesh, tags, collective, params):
    # regression: the colour legend overprinted the panel titles, and a device's "before" block sat
    # higher than its "after" block. On the rendered figure (display pixels): each device's two blocks
    # share a vertical centre, both panels draw cells at one scale, and no title overlaps the heading.
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    fig = draw_collective(tags, collective, "X", where={"Y": 0}, **params)
    canvas = FigureCanvasAgg(fig)  # the figure comes back closed in pyplot: give it a canvas to render
    canvas.draw()
    renderer = canvas.get_renderer()

    def extents(panel):
        out = {}
        for ax in fig.axes:
            for patch in ax.patches:
                if (patch.get_gid() or "").startswith(panel + ":"):
                    box = patch.get_window_extent(renderer)
                    device = int(patch.get_gid().split(":")[1][1:])
                    out.setdefault(device, []).append(box)
        return out

    before, after = extents("before"), extents("after")
    assert before.keys() == after.keys()
    for device in before:
        centre = [
            (min(b.y0 for b in boxes) + max(b.y1 for b in boxes)) / 2
            for boxes in (before[device], after[device])
        ]
        assert centre[0] == pytest.approx(centre[1], abs=1.0)
        assert before[device][0].height == pytest.approx(after[device][0].height, rel=0.01)
    heading = fig._suptitle.get_window_extent(renderer)
    for ax in fig.axes:
        assert not ax.title.get_window_extent(renderer).overlaps(heading)
    legend = [t for t in fig.texts if t is not fig._suptitle and "colour" in t.get_text()]
    assert legend and all(not t.get_window_extent(renderer).overlaps(heading) for t in legend)


def test_draw_collective_errors_quote_the_input(mesh, tags):
    # Property: a bad collective, axis or array is refused with a message naming it.
    with pytest.raises(ValueError, match="unknown collective 'psum_all'"):
        draw_collective(tags, "psum_all", "X")
    with pytest.raises(ValueError, match="axis 'Z' is not on the mesh"):
        draw_collective(tags, "psum", "Z")
    with pytest.raises(TypeError, match="NamedSharding"):
        draw_collective(np.ones(4), "psum", "X")
    before = len(plt.get_fignums())
    draw_collective(tags, "pmean", "X")
    assert len(plt.get_fignums()) == before  # closed: a notebook shows it once


def test_draw_communication_draws_the_groups_of_each_collective(mesh):
    # Property: an all-reduce over 'Y' on the (4, 2) mesh links the pairs (0,1), (2,3), ...; a ppermute
    # draws one arrow per (source, target) pair; the title carries kind, axes and bytes.
    from jax.sharding import AxisType

    auto = jax.make_mesh((4, 2), ("X", "Y"), axis_types=(AxisType.Auto,) * 2)
    a = jax.device_put(jnp.ones((64, 32)), NamedSharding(auto, P("X", "Y")))
    w = jax.device_put(jnp.ones((32, 16)), NamedSharding(auto, P("Y", None)))
    report = analyze(jax.jit(jnp.matmul, out_shardings=NamedSharding(auto, P("X", None))), a, w)
    fig = draw_communication(report, mesh=auto)
    groups = sorted(
        line.get_gid() for ax in fig.axes for line in ax.lines if (line.get_gid() or "").startswith("group")
    )
    (c,) = report.collectives
    assert groups == sorted(f"group:{k}:" + ",".join(map(str, g)) for k, g in enumerate(c.groups))
    assert {tuple(g) for g in c.groups} == {(0, 1), (2, 3), (4, 5), (6, 7)}
    title = fig.axes[0].get_title()
    assert "all-reduce over 'Y'" in title and "KiB sent" in title

    shift = [(i, (i + 1) % 4) for i in range(4)]
    permute = jax.shard_map(
        lambda b: jax.lax.ppermute(b, "X", shift), mesh=mesh, in_specs=P("X"), out_specs=P("X")
    )
    x = jax.device_put(jnp.ones((4, 4)), NamedSharding(mesh, P("X")))
    fig = draw_communication(analyze(permute, x))
    arrows = [p.get_gid() for ax in fig.axes for p in ax.patches if (p.get_gid() or "").startswith("pair")]
    assert len(arrows) == 8 and "pair:0:0->2" in arrows  # X = 0 -> X = 1 is device 0 -> device 2


def test_draw_communication_line_width_grows_with_bytes():
    # regression: every collective was drawn 5 pt wide, so a 4 MiB all-to-all looked like a 32 KiB
    # all-reduce. Width is absolute (comparable across figures) and grows with the bytes sent.
    from jax.sharding import AxisType

    auto = jax.make_mesh((4, 2), ("X", "Y"), axis_types=(AxisType.Auto,) * 2)

    def width(rows):
        a = jax.device_put(jnp.ones((rows, 32)), NamedSharding(auto, P("X", "Y")))
        w = jax.device_put(jnp.ones((32, 16)), NamedSharding(auto, P("Y", None)))
        report = analyze(jax.jit(jnp.matmul, out_shardings=NamedSharding(auto, P("X", None))), a, w)
        fig = draw_communication(report, mesh=auto)
        (c,) = report.collectives
        widths = {line.get_linewidth() for ax in fig.axes for line in ax.lines if line.get_gid()}
        assert len(widths) == 1
        return c.bytes, widths.pop()

    small, big = width(64), width(64 * 256)
    assert big[0] == 256 * small[0]
    assert big[1] > small[1] + 3  # a factor 256 in bytes is plainly thicker
    assert 1.0 <= small[1] and big[1] <= 9.0


def test_draw_communication_without_collectives_says_so(mesh):
    # Property: a program with no collectives gets one panel that says so.
    x = jax.device_put(jnp.ones((8, 4)), NamedSharding(mesh, P("X", "Y")))
    fig = draw_communication(analyze(jax.jit(jnp.sin), x))
    assert "no collectives" in fig.axes[0].get_title()
    with pytest.raises(TypeError, match="expected a shardbook.Report"):
        draw_communication("all-reduce")


def test_draw_ring_steps_follows_the_permutation():
    # Property: with the default left shift, device y holds block (y + s) mod n at step s; a right
    # shift gives (y - s) mod n. Both come from running ppermute, not from a formula in the drawing.
    ring_mesh = jax.make_mesh((2, 4), ("X", "Y"))
    ids = [int(d.id) for d in ring_mesh.devices[0]]

    def held(fig):
        return {p.get_gid() for ax in fig.axes for p in ax.patches if (p.get_gid() or "").startswith("step")}

    left = held(draw_ring_steps(ring_mesh, "Y"))
    assert left == {f"step{s}:d{ids[y]}:holds{(y + s) % 4}" for s in range(4) for y in range(4)}
    right = held(draw_ring_steps(ring_mesh, "Y", perm=[(y, (y + 1) % 4) for y in range(4)]))
    assert right == {f"step{s}:d{ids[y]}:holds{(y - s) % 4}" for s in range(4) for y in range(4)}
    animation = animate_ring_steps(ring_mesh, "Y")
    html = animation_html(animation).data
    wide, phone = html.split('<div class="sb-anim-phone">')
    assert wide.count("data:image/png;base64") == phone.count("data:image/png;base64") == 4  # a frame a step
    assert "max-width: 100%" in html  # frames shrink to a phone's width
    assert "@media (max-width: 699.98px)" in html  # a phone shows the frames drawn for its column
    assert "<img alt=" not in html  # no alt unless given
    described = animation_html(animation, alt='the ring, step by step: "A" moves, W stays').data
    alt = '<img alt="the ring, step by step: &quot;A&quot; moves, W stays" id="_anim_img'
    assert described.count(alt) == 2  # the wide frames and the phone's


def test_the_ring_animation_for_a_phone_has_body_size_text_in_the_column():
    # Property: the phone frames are drawn PHONE_COLUMN_PX wide (at 2 pixels per CSS px)
    # with every label at least the body text's size once shown in the column (the desktop frames,
    # shrunk into it, had labels of about 5 px).
    import base64

    from shardbook.viz import phone as phone_module

    html = animation_html(animate_ring_steps(jax.make_mesh((2, 4), ("X", "Y")), "Y")).data
    phone = html.split('<div class="sb-anim-phone">')[1]
    first = re.search(r"data:image/png;base64,([A-Za-z0-9+/]{32})", phone).group(1)
    width = int.from_bytes(base64.b64decode(first)[16:20], "big")  # the PNG header's IHDR width
    assert width == phone_module.PHONE_COLUMN_PX * 2
    fig = ring_module._ring_phone_figure(jax.make_mesh((2, 4), ("X", "Y")), "Y", None, None, None)
    assert min(t.get_fontsize() for t in fig.axes[0].texts) >= phone_module.PHONE_BODY_PX
    plt.close("all")


def test_draw_ring_steps_labels_name_the_devices_own_w_block():
    # regression: "adds A_1·W_1" next to "(from d1)" read as W of device 1, with literal underscores.
    # Device y adds A_k times rows k of its own column block y of W: the label says W_{k,y} in mathtext.
    ring_mesh = jax.make_mesh((2, 4), ("X", "Y"))
    fig = draw_ring_steps(ring_mesh, "Y")
    labels = [t.get_text() for t in fig.axes[0].texts if "from d" in t.get_text()]
    assert len(labels) == 16
    for s in range(4):
        for y in range(4):
            k = (y + s) % 4
            assert f"$A_{{{k}}}$ (from d" in labels[s * 4 + y]
            assert f"$A_{{{k}}} W_{{{k},{y}}}$" in labels[s * 4 + y]
    assert min(t.get_fontsize() for t in fig.axes[0].texts) >= 10


def _ring(n):
    return jax.make_mesh((n,), ("Y",), devices=jax.devices()[:n])


@pytest.mark.parametrize("n", [2, 3, 4, 5])
def test_accumulator_ring_one_way_passes_each_accumulator_left_to_its_owner(n):
    # Property: one way round, device y adds to block (y + 1 + s) mod n at step s (n - 1 steps), and
    # every block reaches its owner with the parts of the n - 1 other devices: observed via ppermute.
    ring = accumulator_ring(_ring(n))
    assert ring.streams == [(-1, n - 1)] and ring.steps == n - 1 and ring.complete
    assert ring.held == [[[(y + 1 + s) % n] for y in range(n)] for s in range(n - 1)]
    assert ring.arrived == [[(y, n - 1)] for y in range(n)]
    assert ring.describe(0, 0) == f"b{1 % n} ←"


@pytest.mark.parametrize("n", [3, 4, 5, 8])
def test_accumulator_ring_both_ways_splits_the_other_blocks_between_two_streams(n):
    # Property: both ways, the left stream takes ceil((n-1)/2) steps and the right floor((n-1)/2);
    # together they carry every other device's part once (an odd ring splits evenly).
    ring = accumulator_ring(_ring(n), both_ways=True)
    left, right = n // 2, n - 1 - n // 2
    assert ring.streams == [(-1, left), (1, right)] and ring.steps == left and ring.complete
    assert all(sum(parts for _, parts in ring.arrived[y]) == n - 1 for y in range(n))
    assert ring.held[0][0] == [-left % n, right % n]  # blocks `left` to the left, `right` to the right
    if n % 2:
        assert left == right
    else:
        assert ring.held[left - 1][0] == [n - 1, None]  # the last step carries only the left stream


def test_accumulator_ring_refuses_an_axis_the_mesh_lacks():
    with pytest.raises(ValueError, match="axis 'Z' is not on the mesh"):
        accumulator_ring(_ring(3), "Z")


def test_draw_accumulator_ring_has_a_cell_per_stream_and_step_and_a_phone_design():
    # Property: the picture shows what accumulator_ring saw (a labelled cell per stream, device and
    # step, then the owner's total) and comes with its own phone drawing at body-size text.
    from shardbook.viz import phone

    fig = draw_accumulator_ring(_ring(4), both_ways=True)
    texts = [t.get_text() for t in fig.axes[0].texts]
    assert sum("+ to b" in t for t in texts) == 4 * 2 + 4 * 1
    assert sum("4 of 4 parts" in t for t in texts) == 4
    assert fig.axes[0].get_title().endswith("2 steps to the left, 1 to the right")
    info = phone.phone_image(fig)
    assert info["min_text_px"] >= phone.PHONE_BODY_PX and info["overlaps"] == []
    plt.close("all")


def test_route_counts_counts_each_token_row_once():
    # Property: entry [i, j] counts tokens on device i whose expert is on device j; top-k counts k rows.
    b = np.array([0, 3, 1, 2, 3, 3, 0, 0], np.int32)  # 4 experts on 2 devices: 0,1 -> d0; 2,3 -> d1
    assert route_counts(b, 2, 4).tolist() == [[2, 2], [2, 2]]
    assert route_counts(np.array([3, 3, 0, 1]), 2, 4).tolist() == [[0, 2], [2, 0]]
    topk = np.stack([b, (b + 2) % 4], axis=1)
    assert route_counts(topk, 2, 4).sum() == 16
    with pytest.raises(ValueError, match="split evenly"):
        route_counts(np.zeros(6, np.int32), 4, 4)
    with pytest.raises(ValueError, match=r"\[0, 4\)"):
        route_counts(np.array([0, 4]), 2, 4)


def _luminance(hex_colour):
    channels = [int(hex_colour[i : i + 2], 16) / 255 for i in (1, 3, 5)]
    lin = [c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in channels]
    return 0.2126 * lin[0] + 0.7152 * lin[1] + 0.0722 * lin[2]


def test_palette_stands_out_on_white_and_carries_black_text():
    # regression: device 1's "#ffffb3" (contrast 1.05 against white) made the crowd of tokens bound for
    # d1 look like background. WCAG contrast ratios: >= 1.6 against the white page, >= 7 for black text.
    for colour in _PALETTE:
        lum = _luminance(colour)
        assert 1.05 / (lum + 0.05) >= 1.6, f"{colour} is too pale to see on white"
        assert (lum + 0.05) / 0.05 >= 7, f"{colour} is too dark for black text"
    assert len(set(_PALETTE)) == len(_PALETTE) == 16


def test_draw_routing_marks_capacity_drops_and_keeps_counts_readable():
    # Property: with capacity C each expert keeps its first C rows in token order; the rest are crossed
    # out on the left and counted in the title. Dark count cells print white numbers.
    rng = np.random.default_rng(1)
    b = np.where(rng.random(256) < 0.75, 1, rng.integers(0, 8, 256)).astype(np.int32)
    capacity = 2 * 256 // 8
    rank = np.array([np.sum(b[:i] == b[i]) for i in range(len(b))])
    expected = rank >= capacity
    fig = draw_routing(b, n_devices=8, n_experts=8, capacity=capacity)
    left, right = fig.axes
    crosses = left.collections[0].get_offsets()
    marked = {(int(r), int(c)) for c, r in np.asarray(crosses)}
    assert marked == {(i // 32, i % 32) for i in np.nonzero(expected)[0]}
    assert (
        f"capacity {capacity} rows per expert: {int(expected.sum())} rows dropped" in fig._suptitle.get_text()
    )
    counts = route_counts(b, 8, 8).ravel()
    colours = [t.get_color() for t in right.texts]
    assert colours[int(np.argmax(counts))] == "white"
    assert colours[int(np.argmin(counts))] == "black"
    no_cap = draw_routing(b, n_devices=8, n_experts=8)
    assert not no_cap.axes[0].collections and "capacity" not in no_cap._suptitle.get_text()


def test_draw_routing_colours_tokens_by_their_experts_device():
    # Property: the token image holds each token's expert device, in token order per device row; the
    # count table's texts are route_counts; the title says how many rows leave their device.
    rng = np.random.default_rng(0)
    b = rng.integers(0, 16, 64).astype(np.int32)
    fig = draw_routing(b, n_devices=4, n_experts=16)
    left, right = fig.axes
    image = np.asarray(left.images[0].get_array())
    assert image.tolist() == (b // 4).reshape(4, 16).tolist()
    counts = route_counts(b, 4, 16)
    assert [int(t.get_text()) for t in right.texts] == counts.ravel().tolist()
    leaving = int(counts.sum() - np.trace(counts))
    assert f"{leaving} rows leave" in fig._suptitle.get_text()
    # the colour of device d in the image is the colour its label carries
    cmap = left.images[0].get_cmap()
    assert [matplotlib.colors.to_hex(cmap(d)) for d in range(4)] == list(_PALETTE[:4])


def test_draw_gradient_reduction_draws_one_segment_per_execution(mesh):
    # Property: an all-reduce inside loops is drawn as `executions` segments whose widths add up to its
    # bytes; the label names the summed array and the mesh axis.
    line = jax.make_mesh((8,), ("X",), axis_types=(AxisType.Auto,))
    ws = jax.device_put(np.ones((3, 8, 8), np.float32), NamedSharding(line, P()))
    x = jax.device_put(np.ones((16, 8), np.float32), NamedSharding(line, P("X", None)))

    def loss(ws, x):
        return jnp.sum(jax.lax.scan(lambda h, w: (jnp.tanh(h @ w), None), x, ws)[0])

    report = analyze(jax.grad(loss), ws, x)
    (c,) = [c for c in report.collectives if c.kind == "all-reduce"]
    fig = draw_gradient_reduction({"grad": report})
    ax = fig.axes[0]
    widths = [p.get_width() for p in ax.patches]
    assert len(widths) == c.executions == 3
    assert sum(widths) == c.bytes
    texts = [t.get_text() for t in ax.texts]
    assert any(c.result_text in t and "summed over 'X'" in t for t in texts), texts
    assert f"3 runs × {c.bytes_per_execution:,} B = {c.bytes:,} B" in texts
    assert f"{c.bytes:,} B" in ax.get_title(loc="left")


def test_draw_gradient_reduction_says_when_nothing_is_reduced():
    # Property: a program without reductions gets a lane saying so, and a wrong input is named.
    from shardbook.comms import Report

    fig = draw_gradient_reduction({"none": Report([], 0, None, {"X": 8})})
    assert "no reduction in this program" in [t.get_text() for t in fig.axes[0].texts]
    with pytest.raises(TypeError, match="expected a shardbook Report"):
        draw_gradient_reduction({"bad": [1, 2]})


def test_draw_residuals_draws_each_trace_and_its_peak():
    # Property: each line holds the trace (last value repeated to close the staircase), the legend and
    # annotation give each peak, and the step labels become ticks.
    traces = {"all forward": [256, 512, 768, 512, 256, 0], "one in flight": [256, 0, 256, 0, 256, 0]}
    fig = draw_residuals(traces, steps={"all forward": ["F0", "F1", "F2", "B0", "B1", "B2"]})
    ax = fig.axes[0]
    assert [list(line.get_ydata()) for line in ax.lines] == [[*t, t[-1]] for t in traces.values()]
    texts = [t.get_text() for t in ax.texts]
    assert "peak 768 B" in texts and "peak 256 B" in texts
    # regression: the ticks used to be the first schedule's labels, wrong for the second schedule.
    # Now the ticks number the steps and each schedule with labels gets its own row, in its colour.
    assert [t.get_text() for t in ax.get_xticklabels()] == ["1", "2", "3", "4", "5", "6"]
    own = {
        "all forward": ["F0", "F1", "F2", "B0", "B1", "B2"],
        "one in flight": ["F0", "B0", "F1", "B1", "F2", "B2"],
    }
    two = draw_residuals(traces, steps=own).axes[0]
    for name, labels in own.items():
        line = two.lines[list(traces).index(name)]
        row = [
            t for t in two.texts if t.get_color() == line.get_color() and not t.get_text().startswith("peak")
        ]
        assert [t.get_text() for t in row] == labels
        assert [t.xy[0] for t in row] == [i + 0.5 for i in range(6)]
    in_kib = draw_residuals({"a": [2048, 0]}, unit="KiB").axes[0]
    assert list(in_kib.lines[0].get_ydata()) == [2.0, 0.0, 0.0]
    with pytest.raises(ValueError, match="unit"):
        draw_residuals(traces, unit="GB")


def test_draw_precision_tradeoff_orders_by_cost_and_marks_budget():
    # Property: one line per case through the algorithms in order of cost, on a log axis, with the
    # algorithm names under their costs and the budget and reference as horizontal lines.
    points = {"X6": (6, [1e-7, 2e-7]), "one": (1, [2e-3, 2e-3]), "X3": (3, [4e-6, 5e-6])}
    fig = draw_precision_tradeoff(points, series=["K=64", "K=256"], reference=1.5e-7, budget=1e-5)
    ax = fig.axes[0]
    assert ax.get_yscale() == "log"
    k64, k256, reference, budget = ax.lines
    assert list(k64.get_xdata()) == [1, 3, 6] and list(k64.get_ydata()) == [2e-3, 4e-6, 1e-7]
    assert list(k256.get_ydata()) == [2e-3, 5e-6, 2e-7]
    assert list(budget.get_ydata()) == [1e-5, 1e-5] and list(reference.get_ydata()) == [1.5e-7, 1.5e-7]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["1\none", "3\nX3", "6\nX6"]
    assert [t.get_text() for t in ax.get_legend().get_texts()] == [
        "K=64",
        "K=256",
        "f32 matmul",
        "budget 1e-05",
    ]
    with pytest.raises(ValueError, match="positive"):
        draw_precision_tradeoff({"zero": (1, 0.0)})


def test_draw_precision_tradeoff_measured_labels_each_point():
    # Property: with measured costs, each preset is a lone point labelled with its name at its
    # (time, error), nothing joins them, and both axes are logarithmic.
    points = {"F32": (22.1, 1.5e-7), "BF16": (2.3, 2.3e-3), "X3": (5.5, 4.5e-6)}
    ax = draw_precision_tradeoff(points, measured=True, xlabel="ms").axes[0]
    assert ax.get_xscale() == "log" and ax.get_yscale() == "log"
    (line,) = ax.lines
    assert line.get_linestyle() == "None"
    assert list(line.get_xdata()) == [2.3, 5.5, 22.1] and list(line.get_ydata()) == [2.3e-3, 4.5e-6, 1.5e-7]
    labels = {t.get_text(): t.xy for t in ax.texts}
    assert labels == {"BF16": (2.3, 2.3e-3), "X3": (5.5, 4.5e-6), "F32": (22.1, 1.5e-7)}


def test_new_pictures_are_closed_so_a_notebook_shows_each_once():
    # Property: a figure these functions create is closed in pyplot (no second copy at the cell's end).
    plt.close("all")
    draw_routing(np.arange(8) % 4, 2)
    draw_residuals({"a": [1, 0]})
    draw_precision_tradeoff({"a": (1, 1e-3)})
    assert plt.get_fignums() == []


def _smallest_shown_points(fig, column_inches=7.3):
    """The smallest font of any visible text, in points as shown in a 730 px (7.3 in) page column: a
    figure wider than the column is shrunk to fit, and its text with it."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.text import Text

    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    width = fig.get_tightbbox(canvas.get_renderer()).width  # inches, as saved with bbox_inches="tight"
    shrink = min(1.0, column_inches / width)
    sizes = [t.get_fontsize() for t in fig.findobj(Text) if t.get_visible() and t.get_text().strip()]
    return min(sizes) * shrink


def test_figures_are_legible_in_a_desktop_column(mesh, tags):
    # regression (reader review, item 6): 7-9 pt text in 9-10 in wide figures came out at ~5-7 pt on
    # the page. Every helper's text is >= 9.5 pt once the figure is shrunk to the 730 px column.
    from jax.sharding import AxisType

    from shardbook import cost

    auto = jax.make_mesh((4, 2), ("X", "Y"), axis_types=(AxisType.Auto,) * 2)
    a = jax.device_put(jnp.ones((64, 32)), NamedSharding(auto, P("X", "Y")))
    w = jax.device_put(jnp.ones((32, 16)), NamedSharding(auto, P("Y", None)))
    report = analyze(jax.jit(jnp.matmul, out_shardings=NamedSharding(auto, P("X", None))), a, w)
    rng = np.random.default_rng(0)
    figures = {
        "draw_collective": draw_collective(tags, "all_gather", "X", where={"Y": 0}, axis=0, tiled=True),
        "draw_communication": draw_communication(report, mesh=auto),
        "draw_ring_steps": draw_ring_steps(jax.make_mesh((2, 4), ("X", "Y")), "Y"),
        "draw_routing": draw_routing(rng.integers(0, 8, 512).astype(np.int32), 8, 8, capacity=128),
        "draw_residuals": draw_residuals(
            {"a": [256, 512, 0], "b": [256, 0, 256]}, steps={"a": ["F0", "F1", "B"]}
        ),
        "draw_timeline": draw_timeline(cost.estimate(report)).figure,
        "draw_gradient_reduction": draw_gradient_reduction({"matmul": report}),
    }
    for name, fig in figures.items():
        assert _smallest_shown_points(fig) >= 9.5, name
        plt.close(fig)
