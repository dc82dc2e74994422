"""Restore replicated: restore_on gives Orbax a target on the right mesh, but with P() for every array.
Right values on the mesh given, every array replicated; the visible and hidden tests fail, and the hint
is about the spec each array was saved with (not about a restore without a target).
"""

EXPECTED = {
    "lost": ["test_restore_on_visible", "test_restore_on_hidden"],
    "feedback": [
        "got float32[8,4] replicated",
        "read it from the checkpoint's metadata (its sharding's partition_spec) for each array",
        "expected 'w' as float32[8,16] sharded P('X', 'Y') on the mesh given, got float32[8,16] replicated",
    ],
}


def restore_on(mesh: Mesh, path: str) -> dict:
    """The checkpoint at path, each array laid out on mesh with the spec it was saved with."""
    checkpointer = ocp.StandardCheckpointer()
    saved = checkpointer.metadata(path).item_metadata.tree
    replicated = NamedSharding(mesh, P())  # one spec for all: the saved ones are lost
    target = jax.tree.map(lambda m: jax.ShapeDtypeStruct(m.shape, m.dtype, sharding=replicated), saved)
    return checkpointer.restore(path, target)
