"""Secretly gathers: moe_all_to_all all-gathers every token (as in 6.2); all_to_all is only for show.
Right values, but the visible and hidden tests inspect the collectives: "expected only all-to-all".
"""

EXPECTED = {'lost': ['test_moe_all_to_all_visible', 'test_moe_all_to_all_hidden'],
 'feedback': ['expected only all-to-all']}


def moe_all_to_all(w: jax.Array, a: jax.Array, b: jax.Array, mesh: Mesh) -> jax.Array:
    """W[E_X, D, F], A[S_X, D], B[S_X] -> Out[S_X, F]: each token travels to its expert's device and back."""
    def per_device(w_block, a_block, b_block):
        # gathers every token (what Exercise 6.2 does) and uses all_to_all only for show
        b_block = jax.lax.all_to_all(b_block.reshape(mesh.shape["X"], -1), "X", 0, 0, tiled=True)
        b_block = jax.lax.all_to_all(b_block, "X", 0, 0, tiled=True).reshape(-1)
        e_local = w_block.shape[0]
        a_all = jax.lax.all_gather(a_block, "X", tiled=True)
        b_all = jax.lax.all_gather(b_block, "X", tiled=True)
        local = b_all - jax.lax.axis_index("X") * e_local
        key = jnp.where((local >= 0) & (local < e_local), local, e_local)
        order = jnp.argsort(key)
        sizes = jnp.bincount(key, length=e_local + 1)[:e_local].astype(jnp.int32)
        part_sorted = jax.lax.ragged_dot(a_all[order], w_block, sizes)
        part = jnp.zeros_like(part_sorted).at[order].set(part_sorted)
        return jax.lax.psum_scatter(part, "X", scatter_dimension=0, tiled=True)

    return jax.shard_map(per_device, mesh=mesh, in_specs=(P("X", None, None), P("X", None), P("X")),
                         out_specs=P("X", None))(w, a, b)
