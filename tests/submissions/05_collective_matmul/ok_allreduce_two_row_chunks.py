"""Allreduce two row chunks: matmul_allreduce differs from the reference solution.

Converted from ok_allreduce_two_row_chunks.ipynb by `python -m tests.submissions convert 05_collective_matmul`.
"""

EXPECTED = {'lost': [], 'feedback': []}


def matmul_allreduce(a: jax.Array, w: jax.Array, mesh: Mesh) -> jax.Array:
    """A[B_X, D_Y] · W[D_Y, F] → Out[B_X, F]: the partial sums are reduced chunk by chunk, overlapping the matmuls."""
    # two chunks of rows: the top half's psum runs while the bottom half is multiplied
    def per_device(a_block, w_block):
        rows = a_block.shape[0]
        if rows % 2:
            return jax.lax.psum(a_block @ w_block, "Y")
        top = jax.lax.psum(a_block[: rows // 2] @ w_block, "Y")
        bottom = jax.lax.psum(a_block[rows // 2:] @ w_block, "Y")
        return jnp.concatenate([top, bottom], axis=0)

    return jax.shard_map(per_device, mesh=mesh, in_specs=(P("X", "Y"), P("Y", None)),
                         out_specs=P("X", None))(a, w)
