"""Mesh size: fsdp_shardings divides by mesh.size (all devices) instead of mesh.shape['data'].
The same on a 1-D mesh; the self-check's 4 × 2 mesh and the hidden test, on a mesh with more axes, fail:
"expected NamedSharding(mesh, P('data', None)) ('data' has 4 devices), got ... P(None, 'data')".
"""

EXPECTED = {'lost': ['test_fsdp_shardings_visible', 'test_fsdp_shardings_hidden'],
 'feedback': ["expected NamedSharding(mesh, P('data', None)) ('data' has 4 devices), got "
              "NamedSharding(mesh, P(None, 'data'))",
              "read the size of 'data' from the mesh given"]}


def fsdp_shardings(params_shapes, mesh):
    """A pytree of NamedShardings: each leaf sharded over 'data' on its leading, else largest, dividing dim."""
    n = mesh.size  # the number of devices

    def leaf_sharding(leaf):
        shape = tuple(leaf.shape)
        dividing = [d for d, size in enumerate(shape) if size % n == 0]
        if not dividing:
            return NamedSharding(mesh, P())
        dim = 0 if shape[0] % n == 0 else max(dividing, key=lambda d: shape[d])
        spec = [None] * len(shape)
        spec[dim] = "data"
        return NamedSharding(mesh, P(*spec))

    return jax.tree.map(leaf_sharding, params_shapes)
