"""Largest dimension: fsdp_shardings always shards the largest dividing dimension, ignoring the leading-first rule.
Plausible: the largest dimension gives the most even blocks, and most of an MLP's leaves agree; but the
chapter's own example f32[16, 32] must be P('data', None). The visible and hidden tests fail: "leaf of shape
(16, 32): expected NamedSharding(mesh, P('data', None))" ... "the leading dimension, 16, divides by 8".
"""

EXPECTED = {'lost': ['test_fsdp_shardings_visible', 'test_fsdp_shardings_hidden'],
 'feedback': ["fsdp_shardings for a leaf of shape (16, 32): expected NamedSharding(mesh, P('data', None))",
              'the leading dimension, 16, divides by 8, so it is the one sharded',
              'the leading dimension divides, so it is the one sharded']}


def fsdp_shardings(params_shapes, mesh):
    """A pytree of NamedShardings: each leaf sharded over 'data' on its leading, else largest, dividing dim."""
    n = mesh.shape["data"]

    def leaf_sharding(leaf):
        shape = tuple(leaf.shape)
        dividing = [d for d, size in enumerate(shape) if size % n == 0]
        if not dividing:
            return NamedSharding(mesh, P())
        dim = max(dividing, key=lambda d: shape[d])  # the largest, leading or not
        spec = [None] * len(shape)
        spec[dim] = "data"
        return NamedSharding(mesh, P(*spec))

    return jax.tree.map(leaf_sharding, params_shapes)
