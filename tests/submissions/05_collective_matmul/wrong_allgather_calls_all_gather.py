"""All-gather calls all_gather: matmul_allgather gathers A's row band, then does one matmul.
Right values, but the communication blocks the compute; the visible and hidden tests fail: "expected only
collective-permute" ... "never gather A".
"""

EXPECTED = {'lost': ['test_matmul_allgather_visible', 'test_matmul_allgather_hidden'],
 'feedback': ['expected only collective-permute', 'never gather A']}


def matmul_allgather(a: jax.Array, w: jax.Array, mesh: Mesh) -> jax.Array:
    """A[B_X, D_Y] · W[D, F_Y] → Out[B_X, F_Y]: A's blocks travel round 'Y' while the block in hand is multiplied."""
    def per_device(a_block, w_block):
        # gather the whole row band of A first, then one matmul: right values, blocking communication
        a_rows = jax.lax.all_gather(a_block, "Y", axis=1, tiled=True)
        return a_rows @ w_block

    return jax.shard_map(per_device, mesh=mesh, in_specs=(P("X", "Y"), P(None, "Y")),
                         out_specs=P("X", "Y"))(a, w)
