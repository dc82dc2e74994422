"""Names written down: restore_on builds its target for the arrays `w` and `b` (the self-check's first
checkpoint's names) instead of reading the names from the checkpoint's metadata. The self-check's second
checkpoint (other names) and the hidden tests fail, naming the arrays the checkpoint holds.
"""

EXPECTED = {'lost': ['test_restore_on_visible', 'test_restore_on_hidden'],
 'feedback': ['a checkpoint that holds']}


def restore_on(mesh: Mesh, path: str) -> dict:
    """The checkpoint at path, each array laid out on mesh with the spec it was saved with."""
    checkpointer = ocp.StandardCheckpointer()
    saved = checkpointer.metadata(path).item_metadata.tree
    target = {}
    for name in ("w", "b"):  # the names written down
        meta = saved[name]
        spec = P(*meta.sharding.partition_spec)
        target[name] = jax.ShapeDtypeStruct(meta.shape, meta.dtype, sharding=NamedSharding(mesh, spec))
    return checkpointer.restore(path, target)
