"""Whole block: roll_global_shmap ppermutes every device's whole block to its neighbour and keeps the
|shift| rows it needs. The values and the layout are right, but each device sends S/nX rows whatever the
shift; the self-check (shift 3, blocks of 4 rows) and the hidden test fail on the bytes: "expected at most
48 B sent per device", "not the block".
"""

EXPECTED = {'lost': ['test_roll_global_shmap_visible', 'test_roll_global_shmap_hidden'],
 'feedback': ['expected at most 48 B sent per device', 'not the block',
              'permuting the whole block or gathering the rows moves more']}


def roll_global_shmap(x: jax.Array, shift: int, mesh: Mesh) -> jax.Array:
    """jnp.roll(x, shift, axis=0) of the whole array x, laid out P('X', 'Y')."""
    n, k = mesh.shape["X"], abs(shift)

    def roll_block(x_block):
        if shift > 0:
            before = jax.lax.ppermute(x_block, "X", [(i, (i + 1) % n) for i in range(n)])
            return jnp.concatenate([before[-k:], x_block[:-k]], axis=0)
        after = jax.lax.ppermute(x_block, "X", [(i, (i - 1) % n) for i in range(n)])
        return jnp.concatenate([x_block[k:], after[:k]], axis=0)

    return jax.shard_map(roll_block, mesh=mesh, in_specs=P("X", "Y"), out_specs=P("X", "Y"))(x)
