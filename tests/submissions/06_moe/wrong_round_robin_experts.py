"""Round robin: moe_all_to_all and moe_topk send expert e to device e % n as its local expert e // n,
while the layout holds experts d·E/n … (d+1)·E/n − 1 on device d. The same when E = n; with more experts
than devices the self-checks and the hidden tests fail, naming the expert a row got and the device it
lives on.
"""

EXPECTED = {'lost': ['test_moe_all_to_all_visible', 'test_moe_all_to_all_hidden', 'test_moe_topk_visible',
          'test_moe_topk_hidden'],
 'feedback': ['lives on device', 'local expert']}


def moe_all_to_all(w: jax.Array, a: jax.Array, b: jax.Array, mesh: Mesh) -> jax.Array:
    """W[E_X, D, F], A[S_X, D], B[S_X] -> Out[S_X, F]: each token travels to its expert's device and back."""
    return _round_robin(w, a, b[:, None], mesh)


def _round_robin(w, a, b, mesh):
    n = mesh.shape["X"]

    def per_device(w_block, a_block, b_block):
        s_local, k = b_block.shape
        a_rows, b_rows = jnp.repeat(a_block, k, axis=0), b_block.reshape(-1)
        e_local, cap = w_block.shape[0], s_local * k
        dest = b_rows % n  # round robin: expert e on device e % n
        order = jnp.argsort(dest)
        counts = jnp.bincount(dest, length=n)
        starts = jnp.cumsum(counts) - counts
        slot = jnp.zeros_like(dest).at[order].set(jnp.arange(cap) - starts[dest[order]])
        send = jnp.zeros((n, cap, a_rows.shape[1]), a_rows.dtype).at[dest, slot].set(a_rows)
        send_ids = jnp.full((n, cap), e_local, jnp.int32).at[dest, slot].set(b_rows // n)
        recv = jax.lax.all_to_all(send, "X", 0, 0, tiled=True)
        recv_ids = jax.lax.all_to_all(send_ids, "X", 0, 0, tiled=True).reshape(-1)
        order2 = jnp.argsort(recv_ids)
        sizes = jnp.bincount(recv_ids, length=e_local + 1)[:e_local].astype(jnp.int32)
        res_sorted = jax.lax.ragged_dot(recv.reshape(n * cap, -1)[order2], w_block, sizes)
        res = jnp.zeros_like(res_sorted).at[order2].set(res_sorted).reshape(n, cap, -1)
        back = jax.lax.all_to_all(res, "X", 0, 0, tiled=True)
        return back[dest, slot].reshape(s_local, k, -1).mean(axis=1)

    return jax.shard_map(per_device, mesh=mesh, in_specs=(P("X", None, None), P("X", None), P("X", None)),
                         out_specs=P("X", None))(w, a, b)


def moe_topk(w: jax.Array, a: jax.Array, b: jax.Array, mesh: Mesh) -> jax.Array:
    """W[E_X, D, F], A[S_X, D], B[S_X, k] -> Out[S_X, F]: the mean of the token's k experts, via all_to_all."""
    return _round_robin(w, a, b, mesh)
