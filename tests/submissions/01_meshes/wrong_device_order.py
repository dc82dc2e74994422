"""Device order: devices_holding and shard_sums take a device's id to be its position in the mesh.
That holds for the default mesh, so the visible checks pass; the hidden tests use a mesh whose ids are not
its positions and fail, with feedback "its id need not be i * columns + j" / "id is not its position".
"""

EXPECTED = {'lost': ['test_devices_holding_hidden', 'test_shard_sums_hidden'],
 'feedback': ['its id need not be i * columns + j', 'id is not its position']}


def devices_holding(mesh: Mesh, spec: tuple, global_shape: tuple[int, ...], index: tuple[int, ...]) -> set[int]:
    """The ids of the devices whose block contains element `index`."""
    holders = set()
    for position in np.ndindex(mesh.devices.shape):
        coords = dict(zip(mesh.axis_names, position))
        inside = True
        for dim, (size, i) in enumerate(zip(global_shape, index)):
            entry = spec[dim] if dim < len(spec) else None
            names = () if entry is None else entry if isinstance(entry, tuple) else (entry,)
            block, parts = 0, 1
            for name in names:  # mixed-radix number, first axis most significant
                block = block * mesh.shape[name] + coords[name]
                parts *= mesh.shape[name]
            rows = size // parts
            if not block * rows <= i < (block + 1) * rows:
                inside = False
                break
        if inside:
            holders.add(int(np.ravel_multi_index(position, mesh.devices.shape)))
    return holders


def shard_sums(x: jax.Array) -> np.ndarray:
    """The sum of each device's block, arranged like the mesh."""
    mesh = x.sharding.mesh
    sums = np.zeros(mesh.devices.shape, dtype=np.float64)
    for shard in x.addressable_shards:
        position = np.unravel_index(shard.device.id, mesh.devices.shape)
        sums[position] = np.asarray(shard.data).sum()
    return sums
