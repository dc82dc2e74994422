"""Reduce-scatter psum: matmul_reducescatter psums the whole output over 'Y', then slices its block.
Right values at n times the bytes; the visible and hidden tests fail: "expected only collective-permute"
... "never reduce the whole output".
"""

EXPECTED = {'lost': ['test_matmul_reducescatter_visible', 'test_matmul_reducescatter_hidden'],
 'feedback': ['expected only collective-permute', 'never reduce the whole output']}


def matmul_reducescatter(t: jax.Array, w2: jax.Array, mesh: Mesh) -> jax.Array:
    """T[B_X, F_Y] · W2[F_Y, D] → Out[B_X, D_Y]: an accumulator per output block travels round 'Y'."""
    n = mesh.shape["Y"]

    def per_device(t_block, w2_block):
        # sum the whole partial output over 'Y', then keep my block: right values, n times the bytes
        full = jax.lax.psum(t_block @ w2_block, "Y")
        width = full.shape[1] // n
        return jax.lax.dynamic_slice_in_dim(full, jax.lax.axis_index("Y") * width, width, axis=1)

    return jax.shard_map(per_device, mesh=mesh, in_specs=(P("X", "Y"), P("Y", None)),
                         out_specs=P("X", "Y"))(t, w2)
