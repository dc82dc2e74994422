"""Leading dim only: fsdp_shardings shards only dimension 0 and replicates leaves where it does not divide.
The visible and hidden tests fail on a (12, 24) leaf that should be P(None, 'data'): "the leading dimension
does not divide, so shard the largest dimension that does".
"""

EXPECTED = {'lost': ['test_fsdp_shardings_visible', 'test_fsdp_shardings_hidden'],
 'feedback': ["leaf ['layers'][0]['w'] of shape (12, 24): expected NamedSharding(mesh, P(None, "
              "'data'))",
              'the leading dimension does not divide, so shard the largest dimension that does']}


def fsdp_shardings(params_shapes, mesh):
    """A pytree of NamedShardings: each leaf sharded over 'data' on its leading, else largest, dividing dim."""
    n = mesh.shape["data"]

    def leaf_sharding(leaf):
        if len(leaf.shape) > 0 and leaf.shape[0] % n == 0:
            return NamedSharding(mesh, P("data"))
        return NamedSharding(mesh, P())

    return jax.tree.map(leaf_sharding, params_shapes)
