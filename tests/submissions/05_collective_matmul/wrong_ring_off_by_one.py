"""Ring off by one: matmul_allgather sends A's blocks right but picks W's rows as if they moved left.
A sign slip in the ring index; the visible and hidden tests fail on values ("entries differ"): "check which
one, and slice the matching rows of W".
"""

EXPECTED = {'lost': ['test_matmul_allgather_visible', 'test_matmul_allgather_hidden'],
 'feedback': ['entries differ', 'check which one, and slice the matching rows of W']}


def matmul_allgather(a: jax.Array, w: jax.Array, mesh: Mesh) -> jax.Array:
    """A[B_X, D_Y] · W[D, F_Y] → Out[B_X, F_Y]: A's blocks travel round 'Y' while the block in hand is multiplied."""
    n = mesh.shape["Y"]
    to_right = [(j, (j + 1) % n) for j in range(n)]

    def per_device(a_block, w_block):
        me = jax.lax.axis_index("Y")
        width = a_block.shape[1]
        out = None
        for step in range(n):
            # blocks move right, but the rows of W are chosen as if they had moved left
            rows = jax.lax.dynamic_slice_in_dim(w_block, (me + step) % n * width, width, axis=0)
            partial = a_block @ rows
            out = partial if out is None else out + partial
            if step < n - 1:
                a_block = jax.lax.ppermute(a_block, "Y", to_right)
        return out

    return jax.shard_map(per_device, mesh=mesh, in_specs=(P("X", "Y"), P(None, "Y")),
                         out_specs=P("X", "Y"))(a, w)
