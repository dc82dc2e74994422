"""A one-column chunk: matmul_allreduce psums the product of all but the last column of W, then the
last column's. Two collectives, and the big psum runs beside a matmul (the last column's), so the old
overlap test passed; in effect it is one psum of the whole product. A learner's cheat (review of
2026-12-07): the visible and hidden tests fail, since about 5% of the matmul time passes beside the
reductions, not the eighth they ask.
"""

EXPECTED = {'lost': ['test_matmul_allreduce_visible', 'test_matmul_allreduce_hidden'],
 'feedback': ['to pass while a collective runs', 'a chunk too small to hide the others']}


def matmul_allreduce(a: jax.Array, w: jax.Array, mesh: Mesh) -> jax.Array:
    """A[B_X, D_Y] · W[D_Y, F] → Out[B_X, F]: the partial sums are reduced chunk by chunk, overlapping the matmuls."""
    def body(a_blk, w_blk):
        rest = jax.lax.psum(a_blk @ w_blk[:, :-1], "Y")
        last = jax.lax.psum(a_blk @ w_blk[:, -1:], "Y")
        return jnp.concatenate([rest, last], axis=1)

    return jax.shard_map(body, mesh=mesh, in_specs=(P("X", "Y"), P("Y", None)), out_specs=P("X", None))(a, w)
