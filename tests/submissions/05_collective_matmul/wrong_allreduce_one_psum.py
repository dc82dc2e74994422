"""One psum: matmul_allreduce psums the whole product once instead of each chunk as it is computed.
Right values and bytes, but nothing overlaps; the visible and hidden tests fail: "expected the communication
split into at least 2 collectives".
"""

EXPECTED = {'lost': ['test_matmul_allreduce_visible', 'test_matmul_allreduce_hidden'],
 'feedback': ['expected the communication split into at least 2 collectives',
              'psum each chunk of the output as soon as it is computed']}


def matmul_allreduce(a: jax.Array, w: jax.Array, mesh: Mesh) -> jax.Array:
    """A[B_X, D_Y] · W[D_Y, F] → Out[B_X, F]: the partial sums are reduced chunk by chunk, overlapping the matmuls."""
    # one psum of the whole product: right values and bytes, but the reduction waits for the last FLOP
    def per_device(a_block, w_block):
        return jax.lax.psum(a_block @ w_block, "Y")

    return jax.shard_map(per_device, mesh=mesh, in_specs=(P("X", "Y"), P("Y", None)),
                         out_specs=P("X", None))(a, w)
