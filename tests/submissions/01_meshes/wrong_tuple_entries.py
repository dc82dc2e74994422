"""Tuple entries: per_device_shape splits a dimension only over the first axis of a tuple entry.
Easy when ('X', 'Y') is read as just 'X'; the visible and hidden tests both fail, with feedback
"a tuple entry like ('X', 'Y') splits a dimension over both axes".
"""

EXPECTED = {'lost': ['test_per_device_shape_visible', 'test_per_device_shape_hidden'],
 'feedback': ['splits one dimension over both axes',
              "a tuple entry like ('X', 'Y') splits a dimension over both axes"]}


def per_device_shape(global_shape: tuple[int, ...], mesh_axes: dict[str, int], spec: tuple) -> tuple[int, ...]:
    """The shape of the block each device holds when an array of `global_shape` is sharded by `spec`."""
    block = []
    for dim, size in enumerate(global_shape):
        entry = spec[dim] if dim < len(spec) else None
        names = () if entry is None else (entry[0],) if isinstance(entry, tuple) else (entry,)
        parts = 1
        for name in names:
            parts *= mesh_axes[name]
        if size % parts != 0:
            raise ValueError(f"dimension {dim} has size {size}, which does not split into {parts} equal blocks")
        block.append(size // parts)
    return tuple(block)
