"""Tests for shardbook.viz: the text table and the picture agree with JAX's own layout."""

import re

import matplotlib

matplotlib.use("Agg")  # no display in tests; set before pyplot is imported

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
from jax.sharding import NamedSharding  # noqa: E402
from jax.sharding import PartitionSpec as P  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from shardbook import describe_sharding, draw_sharding  # noqa: E402


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
