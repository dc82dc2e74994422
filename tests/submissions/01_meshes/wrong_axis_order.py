"""Axis order: sharding_for_layout lists a dimension's mesh axes by increasing stride, minor axis first.
Sorting by stride looks natural, but a tuple entry names the major (largest-stride) axis first.
The visible and hidden tests both fail; feedback: "the first mesh axis is the major one".
"""

EXPECTED = {'lost': ['test_sharding_for_layout_visible', 'test_sharding_for_layout_hidden'],
 'feedback': ['the first mesh axis is the major one']}


def sharding_for_layout(mesh: Mesh, global_shape: tuple[int, ...], layout: dict[int, tuple[slice, ...]]) -> NamedSharding:
    """The NamedSharding on `mesh` that gives every device the block `layout` says it holds."""
    origin = (0,) * mesh.devices.ndim

    def block_number(position, dim):
        piece = layout[int(mesh.devices[position].id)][dim]
        return piece.start // (piece.stop - piece.start)

    spec = []
    for dim in range(len(global_shape)):
        strides = []
        for k, name in enumerate(mesh.axis_names):
            if mesh.devices.shape[k] == 1:
                continue
            one_step = tuple(1 if j == k else 0 for j in range(mesh.devices.ndim))
            stride = block_number(one_step, dim) - block_number(origin, dim)
            if stride:
                strides.append((stride, name))
        names = [name for _, name in sorted(strides)]
        spec.append(None if not names else names[0] if len(names) == 1 else tuple(names))
    return NamedSharding(mesh, P(*spec))
