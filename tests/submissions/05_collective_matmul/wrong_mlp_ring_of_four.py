"""Ring of four: transformer_mlp writes the ring's length as 4 (the self-check mesh's 'Y' size) instead
of reading it from the mesh. Right on the (2, 4) mesh only; on any other ring the self-check names the
mesh it used (a ring of 3 on a (2, 3) mesh) and the hidden tests name theirs (a (4, 2) mesh first).
"""

EXPECTED = {'lost': ['test_transformer_mlp_visible', 'test_transformer_mlp_hidden'],
 'feedback': ['on a (2, 3) mesh', "Mesh({'X': 4, 'Y': 2}"]}


def transformer_mlp(x: jax.Array, w_in: jax.Array, w_out: jax.Array, mesh: Mesh) -> jax.Array:
    """In[B_X, D_Y] · Win[D, F_Y] · Wout[F_Y, D] → Out[B_X, D_Y], with every transfer overlapped."""
    n = 4  # the ring's length, written down
    to_left = [(j, (j - 1) % n) for j in range(n)]
    to_right = [(j, (j + 1) % n) for j in range(n)]

    def per_device(x_block, w_in_block, w_out_block):
        me = jax.lax.axis_index("Y")
        width = x_block.shape[1]
        h = None
        for step in range(n):
            rows = jax.lax.dynamic_slice_in_dim(w_in_block, (me + step) % n * width, width, axis=0)
            h = x_block @ rows if h is None else h + x_block @ rows
            if step < n - 1:
                x_block = jax.lax.ppermute(x_block, "Y", to_left)
        width = w_out_block.shape[1] // n
        acc = None
        for step in range(n):
            cols = jax.lax.dynamic_slice_in_dim(w_out_block, (me - 1 - step) % n * width, width, axis=1)
            acc = h @ cols if acc is None else acc + h @ cols
            if step < n - 1:
                acc = jax.lax.ppermute(acc, "Y", to_right)
        return acc

    return jax.shard_map(
        per_device,
        mesh=mesh,
        in_specs=(P("X", "Y"), P(None, "Y"), P("Y", None)),
        out_specs=P("X", "Y"),
    )(x, w_in, w_out)
