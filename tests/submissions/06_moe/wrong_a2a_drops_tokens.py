"""Drops tokens: moe_all_to_all uses capacity factor 2 and returns zeros for tokens past capacity.
Capacity limits are common in real MoE, but this exercise wants every token; the visible and hidden tests
fail ("entries differ"): "those tokens were dropped".
"""

EXPECTED = {'lost': ['test_moe_all_to_all_visible', 'test_moe_all_to_all_hidden'],
 'feedback': ['entries differ', 'those tokens were dropped']}


def moe_all_to_all(w: jax.Array, a: jax.Array, b: jax.Array, mesh: Mesh) -> jax.Array:
    """W[E_X, D, F], A[S_X, D], B[S_X] -> Out[S_X, F]: each token travels to its expert's device and back."""
    n = mesh.shape["X"]

    def per_device(w_block, a_block, b_block):
        e_local, cap = w_block.shape[0], 2 * a_block.shape[0] // n  # capacity factor 2: overflow dropped
        dest = b_block // e_local
        order = jnp.argsort(dest)
        counts = jnp.bincount(dest, length=n)
        starts = jnp.cumsum(counts) - counts
        slot = jnp.zeros_like(dest).at[order].set(jnp.arange(a_block.shape[0]) - starts[dest[order]])
        kept = slot < cap  # tokens past the capacity are written nowhere and come back as zeros
        send = jnp.zeros((n, cap, a_block.shape[1]), a_block.dtype).at[dest, slot].set(a_block, mode="drop")
        send_ids = jnp.full((n, cap), e_local, jnp.int32).at[dest, slot].set(b_block % e_local, mode="drop")
        recv = jax.lax.all_to_all(send, "X", 0, 0, tiled=True)  # row j came from device j
        recv_ids = jax.lax.all_to_all(send_ids, "X", 0, 0, tiled=True).reshape(-1)
        order2 = jnp.argsort(recv_ids)  # padding (id e_local) sorts last and is skipped
        sizes = jnp.bincount(recv_ids, length=e_local + 1)[:e_local].astype(jnp.int32)
        res_sorted = jax.lax.ragged_dot(recv.reshape(n * cap, -1)[order2], w_block, sizes)
        res = jnp.zeros_like(res_sorted).at[order2].set(res_sorted).reshape(n, cap, -1)
        back = jax.lax.all_to_all(res, "X", 0, 0, tiled=True)  # results return to their senders
        return jnp.where(kept[:, None], back[dest, jnp.minimum(slot, cap - 1)], 0.0)

    return jax.shard_map(per_device, mesh=mesh, in_specs=(P("X", None, None), P("X", None), P("X")),
                         out_specs=P("X", None))(w, a, b)
